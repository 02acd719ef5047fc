"""A `tf.train.Example` serialized from whole numpy columns at once.

    Example   field 1: Features
    Features  field 1, repeated: map entry {1: key (str), 2: Feature}
    Feature   one of 1: BytesList, 2: FloatList, 3: Int64List
    *List     field 1, repeated; numbers packed: one length-delimited run

Each field is its tag (number << 3 | 2: length-delimited), the length as a
varint, then the bytes. Packed numbers are, per value:

    float  4 bytes, little-endian float32
    int64  a varint: 7 bits a byte, low bits first, the high bit set on every
           byte but the last; a negative number as its 64-bit two's
           complement (10 bytes)

numpy builds a whole column's payload at once, where protobuf's Python API
converts value by value and copies each list again into its parents (a
column of 2 million ints took 0.2 s that way). Entries added in the
features' order give the bytes TFDS writes (tests compare them).
"""

from typing import Iterable, List, Tuple

import numpy as np
from tensorflow_datasets.proto import tf_example_pb2
from tensorflow_datasets.proto import tf_feature_pb2

_MAX_VARINT_BYTES = 10
_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3


def example(features: Iterable[Tuple[str, bytes]]) -> bytes:
  """The Example of (key, `*_feature` bytes) entries, in this order.

  The map goes through protobuf, built as TFDS builds it (from a dict): it
  serializes entries in an order of its own, which depends on how the map
  was filled. Features are parsed from their bytes and copied in C.
  """
  return tf_example_pb2.Example(features=tf_feature_pb2.Features(feature={
      key: tf_feature_pb2.Feature.FromString(feature)
      for key, feature in features})).SerializeToString()


def bytes_feature(values: List[bytes]) -> bytes:
  return _field(_BYTES_LIST, b''.join(_field(1, value) for value in values))


def float_feature(values: np.ndarray) -> bytes:
  """`values` (any shape) as float32, rounded as protobuf rounds doubles."""
  payload = np.ascontiguousarray(values, dtype='<f4').tobytes()
  return _field(_FLOAT_LIST, _field(1, payload) if payload else b'')


def int64_feature(values: np.ndarray) -> bytes:
  """`values` (integers or bools, any shape) as int64s."""
  payload = varints(values)
  return _field(_INT64_LIST, _field(1, payload) if payload else b'')


def varints(values: np.ndarray) -> bytes:
  """The varint of each value (taken as int64), concatenated."""
  values = np.asarray(values)
  if values.dtype == np.uint8:  # Raw frames: skip the int64 copy.
    return _uint8_varints(values.ravel())
  unsigned = values.astype(np.int64).ravel().view(np.uint64)
  if not unsigned.size or unsigned.max() < 0x80:  # One byte each.
    return unsigned.astype(np.uint8).tobytes()
  if unsigned.max() < 0x4000:  # One or two bytes: raw uint8 frames.
    return _short_varints(unsigned)
  sizes = np.ones(unsigned.shape, np.int64)
  for size in range(1, _MAX_VARINT_BYTES):
    sizes += unsigned >= np.uint64(1 << (7 * size))
  starts = np.cumsum(sizes) - sizes
  encoded = np.empty(int(sizes.sum()), np.uint8)
  for byte in range(int(sizes.max())):
    has = sizes > byte
    low_bits = (unsigned[has] >> np.uint64(7 * byte)) & np.uint64(0x7F)
    more = (sizes[has] > byte + 1).astype(np.uint64) << np.uint64(7)
    encoded[starts[has] + byte] = low_bits | more
  return encoded.tobytes()


def _short_varints(unsigned: np.ndarray) -> bytes:
  """Varints of values below 2**14: each value's two bytes side by side,
  the second kept only where the value needs it (4-8x faster than the
  general loop on 84x84x3 frames)."""
  two = unsigned >= 0x80
  pairs = np.empty((unsigned.size, 2), np.uint8)
  pairs[:, 0] = (unsigned & np.uint64(0x7F)) | (two.astype(np.uint64) << 7)
  pairs[:, 1] = unsigned >> np.uint64(7)
  keep = np.empty((unsigned.size, 2), bool)
  keep[:, 0] = True
  keep[:, 1] = two
  return pairs[keep].tobytes()


def _uint8_varints(values: np.ndarray) -> bytes:
  """A byte below 128 is its own varint; one above is itself (its low 7
  bits with the continuation bit set), then 1."""
  pairs = np.ones((values.size, 2), np.uint8)
  pairs[:, 0] = values
  keep = np.ones((values.size, 2), bool)
  keep[:, 1] = values >= 0x80
  return pairs[keep].tobytes()


def _field(number: int, payload: bytes) -> bytes:
  """A length-delimited field."""
  return bytes([number << 3 | 2]) + _varint(len(payload)) + payload


def _varint(value: int) -> bytes:
  encoded = bytearray()
  while value >= 0x80:
    encoded.append(value & 0x7F | 0x80)
    value >>= 7
  encoded.append(value)
  return bytes(encoded)
