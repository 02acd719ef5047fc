"""A `tf.train.Example` serialized from whole numpy columns at once.

    Example   field 1: Features
    Features  field 1, repeated: map entry {1: key (str), 2: Feature}
    Feature   one of 1: BytesList, 2: FloatList, 3: Int64List
    *List     field 1, repeated; numbers packed: one length-delimited run
              float: 4 bytes, little-endian float32; int64: a varint

numpy builds a whole column's payload at once (`rlds_reverb._util.wire`: the
fields and varints), where protobuf's Python API converts value by value
and copies each list again into its parents (a column of 2 million ints
took 0.2 s that way). Entries added in the features' order give the bytes
TFDS writes (tests compare them).
"""

from typing import Iterable, List, Tuple

import numpy as np
from tensorflow_datasets.proto import tf_example_pb2
from tensorflow_datasets.proto import tf_feature_pb2

from rlds_reverb._util import wire

_BYTES_LIST, _FLOAT_LIST, _INT64_LIST = 1, 2, 3
_VALUES = 1  # Of each list.


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
  return wire.length_delimited(_BYTES_LIST, b''.join(
      wire.length_delimited(_VALUES, value) for value in values))


def float_feature(values: np.ndarray) -> bytes:
  """`values` (any shape) as float32, rounded as protobuf rounds doubles."""
  payload = np.ascontiguousarray(values, dtype='<f4').tobytes()
  return wire.length_delimited(_FLOAT_LIST, _packed(payload))


def int64_feature(values: np.ndarray) -> bytes:
  """`values` (integers or bools, any shape) as int64s."""
  return wire.length_delimited(_INT64_LIST,
                               _packed(wire.packed_varints(values)))


def _packed(payload: bytes) -> bytes:
  """A packed repeated field of the list; none when it is empty."""
  return wire.length_delimited(_VALUES, payload) if payload else b''
