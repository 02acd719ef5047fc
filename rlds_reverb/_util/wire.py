"""Protobuf's wire format and TFRecord's framing, in one place: the bytes that
every reader and writer of records here shares.

    field   tag | value, the tag a varint: number << 3 | wire type
              VARINT            a varint
              LENGTH_DELIMITED  length (a varint) | bytes
              FIXED64, FIXED32  8 or 4 little-endian bytes
    varint  7 bits a byte, low bits first, the high bit set on every byte but
            the last; a negative int64 as its two's complement (10 bytes)
    record  length (8 bytes, little-endian) | masked CRC32C of the length (4)
            | data | masked CRC32C of the data (4)
            masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8  (mod 2^32)

    who                        protobuf                 records
    checkpoints.parse          read_varints, buffer_of
    checkpoints.serialize      tag, put_varints
    checkpoints.tensors        varint_at,
                               packed_varints
    checkpoints.records                                 whole_records
    checkpoints.record_writer                           frame_in_place
    tfds_out.example           length_delimited,
                               packed_varints
    tfds_out.records                                    frame, checked_lengths,
                                                        length_at
    sources (read errors)                               length_at

Varints are read and written by numpy, many at once: a checkpoint holds
about one item per step and a TFDS episode a column of values per field, and
protobuf's Python API costs microseconds per message or value (it capped a
checkpoint's export at ~40k steps/s; a column of 2 million ints took 0.2 s).
Records are framed one at a time (`frame`: a shard's episode) or a batch at
once in a buffer that leaves room around each (`frame_in_place`: a
checkpoint's items). Plain numpy and google-crc32c: no TensorFlow.
"""

import os
import struct
from typing import BinaryIO, Iterator, List, Optional, Tuple

import google_crc32c
import numpy as np

# Protobuf's wire types.
VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
MAX_VARINT_BYTES = 10
# Appended to a buffer read by `read_varints`: it reads 10 bytes at a varint.
PADDING = bytes(MAX_VARINT_BYTES)
# A varint of value v has k bytes when 128^(k-1) <= v < 128^k.
_VARINT_LIMITS = np.array([1 << (7 * k) for k in range(1, 10)], np.uint64)
_SEVEN = np.uint64(7)

# A record's framing.
RECORD_HEADER = 12  # The data's length, its masked CRC.
RECORD_FOOTER = 4  # The data's masked CRC.
RECORD_OVERHEAD = RECORD_HEADER + RECORD_FOOTER
_LENGTH = struct.Struct('<Q')
_CRC = struct.Struct('<I')
_MASK_DELTA = 0xA282EAD8
_POLYNOMIAL = 0x82F63B78  # CRC32C, reflected.


# Protobuf: tags and single fields.

def tag(number: int, wire_type: int) -> int:
  """A field's tag, for numbers 1 to 15 (one byte: all the schemas here)."""
  if not 0 < number < 16:
    raise ValueError(f'field {number}: only numbers 1 to 15 (one-byte tags)')
  return number << 3 | wire_type


def varint(value: int) -> bytes:
  """One varint (a header, a length)."""
  out = bytearray()
  while True:
    low, value = value & 0x7F, value >> 7
    out.append(low | 0x80 if value else low)
    if not value:
      return bytes(out)


def varint_at(data: bytes, position: int) -> Tuple[int, int]:
  """(the varint at data[position], the position after it), one at a time:
  for a few in a row (a string tensor's lengths).

  Raises:
    IndexError: `data` ends inside it.
  """
  value, shift = 0, 0
  while True:
    byte = data[position]
    position += 1
    value |= (byte & 0x7F) << shift
    shift += 7
    if byte < 0x80:
      return value, position


def length_delimited(number: int, payload: bytes) -> bytes:
  """A bytes, string or message field (number 1 to 15): tag | length |
  payload."""
  return bytes((number << 3 | LENGTH_DELIMITED,)) + varint(len(payload)) + (
      payload)


# Varints of many values at once.

def varint_lengths(values: np.ndarray, smallest=None, largest=None
                   ) -> np.ndarray:
  """The bytes of each uint64 value written as a varint (1 to 10);
  `smallest` and `largest` of the values, if known, save two passes."""
  if not len(values):
    return np.ones(0, np.int64)
  if smallest is None:
    smallest, largest = values.min(), values.max()
  low, high = np.searchsorted(_VARINT_LIMITS, [smallest, largest],
                              side='right')
  if low == high:  # One length for all (keys, small offsets): no pass.
    return np.full(len(values), int(low) + 1, np.int64)
  return np.searchsorted(_VARINT_LIMITS[low:high], values,
                         side='right') + (int(low) + 1)


def put_varints(out: np.ndarray, positions: np.ndarray, values: np.ndarray,
                lengths: np.ndarray) -> None:
  """Writes values[i] (uint64) as a varint of lengths[i] bytes at
  out[positions[i]]; `positions` is used up (moved on in place).

  A byte place at a time, for all values still going, in place: most
  varints (tags, small offsets) end after one round, and values of one
  length (keys) go on together (~50 ns a 10-byte key here; cutting all
  bytes in one 2-D operation took 2.4x as long).
  """
  if not len(values):
    return
  longest, shortest = int(lengths.max()), int(lengths.min())
  if longest == 1:
    out[positions] = values.astype(np.uint8)
    return
  values = values.copy()
  if longest == shortest:
    for place in range(longest):
      low = values.astype(np.uint8)
      if place < longest - 1:
        low |= 0x80
      out[positions] = low
      values >>= _SEVEN
      positions += 1
    return
  for place in range(longest):
    low = values.astype(np.uint8) & 0x7F
    low |= (lengths > place + 1).view(np.uint8) << 7
    out[positions] = low
    ended = lengths == place + 1
    if ended.any():
      keep = ~ended
      values, positions, lengths = values[keep], positions[keep], lengths[keep]
    values >>= _SEVEN
    positions += 1


def packed_varints(values: np.ndarray) -> bytes:
  """The varint of each value (integers or bools, any shape, taken as
  int64), concatenated: a packed repeated field's payload."""
  values = np.asarray(values)
  if values.dtype == np.uint8:  # Raw frames: skip the int64 copy.
    return _uint8_varints(values.ravel())
  unsigned = values.astype(np.int64).ravel().view(np.uint64)
  if not unsigned.size or unsigned.max() < 0x80:  # One byte each.
    return unsigned.astype(np.uint8).tobytes()
  if unsigned.max() < 0x4000:  # One or two bytes.
    return _short_varints(unsigned)
  lengths = varint_lengths(unsigned)
  out = np.empty(int(lengths.sum()), np.uint8)
  put_varints(out, np.cumsum(lengths) - lengths, unsigned, lengths)
  return out.tobytes()


def _short_varints(unsigned: np.ndarray) -> bytes:
  """Varints of values below 2**14: each value's two bytes side by side,
  the second kept only where the value needs it (4-8x faster than a byte
  place at a time on 84x84x3 frames)."""
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


def buffer_of(records: List[bytes]) -> Tuple[np.ndarray, np.ndarray,
                                             np.ndarray]:
  """(buffer, starts, ends) of `records` joined, padded for `read_varints`."""
  lengths = np.fromiter((len(r) for r in records), np.int64, len(records))
  ends = np.cumsum(lengths)
  starts = ends - lengths
  buffer = np.frombuffer(b''.join(records) + PADDING, np.uint8)
  return buffer, starts, ends


def read_varints(buffer: np.ndarray, positions: np.ndarray
                 ) -> Tuple[np.ndarray, np.ndarray]:
  """(values as uint64, their lengths in bytes) of the varints at
  `positions` of a padded buffer; a length of 0 marks one longer than 10
  bytes.

  Most varints (tags, lengths, offsets) are one byte: the next bytes are
  read only for the varints that go on.
  """
  values = buffer[positions].astype(np.uint64)
  lengths = np.ones(len(positions), np.int64)
  going = np.flatnonzero(values >= 0x80)
  values[going] &= np.uint64(0x7F)
  for place in range(1, MAX_VARINT_BYTES):
    if not going.size:
      break
    byte = buffer[positions[going] + place]
    values[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * place)
    lengths[going] += 1
    going = going[byte >= 0x80]
  lengths[going] = 0
  return values, lengths


# TFRecord framing.

def mask(crc):
  """TFRecord's masked CRC (a CRC of data holding CRCs is weak), of an int
  or of a uint32 array."""
  return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def _masked_crc(data) -> bytes:
  return _CRC.pack(mask(google_crc32c.value(data)))


def frame(data: bytes) -> bytes:
  """One record of `data`."""
  length = _LENGTH.pack(len(data))
  return b''.join((length, _masked_crc(length), data, _masked_crc(data)))


def _slice_by_8_tables() -> np.ndarray:
  """tables[k][b]: the CRC of byte b followed by k zero bytes."""
  tables = np.zeros((8, 256), np.uint32)
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ (_POLYNOMIAL if crc & 1 else 0)
    tables[0, byte] = crc
  for k in range(1, 8):
    previous = tables[k - 1]
    tables[k] = (previous >> 8) ^ tables[0][previous & 0xFF]
  return tables


_TABLES = _slice_by_8_tables()


def crc32c_of_uint64(values: np.ndarray) -> np.ndarray:
  """The CRC32C of each value's 8 little-endian bytes (the records' lengths),
  all at once: slicing-by-8, one round."""
  word = values.astype('<u8') ^ np.uint64(0xFFFFFFFF)
  crc = np.zeros(len(values), np.uint32)
  for place in range(8):
    byte = ((word >> np.uint64(8 * place)) & np.uint64(0xFF)).astype(np.intp)
    crc ^= _TABLES[7 - place][byte]
  return crc ^ np.uint32(0xFFFFFFFF)


def frame_in_place(buffer: np.ndarray, starts: np.ndarray,
                   ends: np.ndarray) -> None:
  """Frames the data buffer[starts[i]:ends[i]] of each record, in place: its
  RECORD_HEADER bytes before it and RECORD_FOOTER after are written.

  The lengths and their CRCs by numpy for the whole batch, the data's CRCs
  by google-crc32c (hardware CRC32C, ~0.2 us a record; numpy's table-driven
  CRC ran at ~95 MB/s here, ~1 us per item record).
  """
  count = len(starts)
  if not count:
    return
  lengths = (ends - starts).astype(np.uint64)
  heads = starts - RECORD_HEADER
  _put_le(buffer, heads, lengths.astype('<u8').view(np.uint8).reshape(-1, 8))
  _put_le(buffer, heads + 8, _le32(mask(crc32c_of_uint64(lengths))))
  data = buffer.tobytes()
  # No Python frame per record: slices, copies and CRCs made by map in C.
  crcs = np.fromiter(map(google_crc32c.value, map(
      data.__getitem__, map(slice, starts.tolist(), ends.tolist()))),
                     np.uint32, count)
  _put_le(buffer, ends, _le32(mask(crcs)))


def _le32(values: np.ndarray) -> np.ndarray:
  return values.astype('<u4').view(np.uint8).reshape(-1, 4)


def _put_le(buffer: np.ndarray, positions: np.ndarray, rows: np.ndarray
            ) -> None:
  """rows[i] (bytes) at buffer[positions[i]:], a byte place at a time."""
  for place in range(rows.shape[1]):
    buffer[positions + place] = rows[:, place]


def whole_records(data) -> Tuple[List[int], List[int]]:
  """(starts, ends) of the data of the whole records at the start of `data`
  (bytes of records, the last maybe cut short). CRCs are not checked."""
  starts, ends = [], []
  position, size = 0, len(data)
  unpack = _LENGTH.unpack_from
  while position + RECORD_HEADER <= size:
    (length,) = unpack(data, position)
    start = position + RECORD_HEADER
    end = start + length
    if end + RECORD_FOOTER > size:
      break
    starts.append(start)
    ends.append(end)
    position = end + RECORD_FOOTER
  return starts, ends


def length_at(descriptor: int, offset: int) -> Optional[int]:
  """The data length in the record header at byte `offset` of the open file
  `descriptor`, unchecked; None if the file ends before its 8 bytes."""
  header = os.pread(descriptor, _LENGTH.size, offset)
  if len(header) < _LENGTH.size:
    return None
  return _LENGTH.unpack(header)[0]


def checked_lengths(file: BinaryIO) -> Iterator[int]:
  """The data length of each record of `file` (binary, read from where it
  is) that TensorFlow's reader reads: until the file ends, a record is cut
  short, or a CRC (of a length or of data) does not match."""
  while True:
    header = file.read(RECORD_HEADER)
    if (len(header) < RECORD_HEADER or
        _masked_crc(header[:8]) != header[8:]):
      return
    (length,) = _LENGTH.unpack_from(header)
    data, footer = file.read(length), file.read(RECORD_FOOTER)
    if len(footer) < RECORD_FOOTER or _masked_crc(data) != footer:
      return
    yield length
