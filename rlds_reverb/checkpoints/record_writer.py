"""A checkpoint file's records, written as Reverb's loader reads them: the
inverse of `records`.

Reverb reads each file with TensorFlow's `RecordReader`, zlib options:

    file   = zlib( record record ... )
    record = length (8 bytes, little-endian) | masked CRC32C of the length (4)
             | data | masked CRC32C of the data (4)
    masked(crc) = ((crc >> 15) | (crc << 17)) + 0xa282ead8   (mod 2^32)

TensorFlow checks both CRCs: a wrong one is a DataLoss error, Reverb then
retries the file as uncompressed, which fails too, and the server does not
start. A batch of records is framed in one buffer (`serialize` leaves room
around each message): the lengths and their CRCs by numpy for the whole
batch, the data's CRCs by google-crc32c (hardware CRC32C, ~0.2 us a record;
numpy's table-driven CRC ran at ~95 MB/s here, ~1 us per item record).

zlib level: `STORED` (level 0) is the default, files the size of their
records, as fast as the disk takes them. Level 1 halves a checkpoint of
2-step halfcheetah-shaped items (285 to 132 bytes an item: item records
shrink well, snappy-compressed floats hardly), for 2.3x the writer's CPU
time (Python's zlib runs at ~18 MB/s on such floats, ~170 MB/s on items).
Durability: `close` flushes and fsyncs; the checkpoint's `DONE`, written
after, is what makes a server load it (`writer`).
"""

import os
from typing import Sequence, Tuple
import zlib

import google_crc32c
import numpy as np

from rlds_reverb.checkpoints import serialize

STORED = 0  # zlib level: no compression, the stream format only.
_HEADER = 12  # Length, its masked CRC.
_FOOTER = 4  # The data's masked CRC.
_MASK_DELTA = np.uint32(0xA282EAD8)
_POLYNOMIAL = 0x82F63B78  # CRC32C, reflected.


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


def mask(crc: np.ndarray) -> np.ndarray:
  """TFRecord's masked CRC (a CRC of data holding CRCs is weak)."""
  crc = crc.astype(np.uint32)
  return ((crc >> np.uint32(15)) | (crc << np.uint32(17))) + _MASK_DELTA


def framed(messages: serialize.Messages) -> Tuple[np.ndarray, int]:
  """(buffer, records): every message of `messages` as a TFRecord record,
  one after another."""
  buffer, starts, ends = serialize.serialize(messages, _HEADER, _FOOTER)
  count = len(starts)
  if not count:
    return buffer, 0
  lengths = (ends - starts).astype(np.uint64)
  heads = starts - _HEADER
  _put_le(buffer, heads, lengths.astype('<u8').view(np.uint8).reshape(-1, 8))
  _put_le(buffer, heads + 8, _le32(mask(crc32c_of_uint64(lengths))))
  data = buffer.tobytes()
  # No Python frame per record: slices, copies and CRCs made by map in C.
  crcs = np.fromiter(map(google_crc32c.value, map(
      data.__getitem__, map(slice, starts.tolist(), ends.tolist()))),
                     np.uint32, count)
  _put_le(buffer, ends, _le32(mask(crcs)))
  return buffer, count


def _le32(values: np.ndarray) -> np.ndarray:
  return values.astype('<u4').view(np.uint8).reshape(-1, 4)


def _put_le(buffer: np.ndarray, positions: np.ndarray, rows: np.ndarray
            ) -> None:
  """rows[i] (bytes) at buffer[positions[i]:], a byte place at a time."""
  for place in range(rows.shape[1]):
    buffer[positions + place] = rows[:, place]


class RecordWriter:
  """One zlib-compressed TFRecord file, written a batch of records at a time.

  Creates `path` (it must not exist). Usage: `write` batches, then `close`
  (or `abort` on failure: the file is closed, left for the caller to remove).
  """

  def __init__(self, path: str, level: int = STORED):
    self.path = path
    self.records = 0
    self.bytes = 0  # Written to the file (compressed).
    self._file = open(path, 'xb')  # pylint: disable=consider-using-with
    self._compressor = zlib.compressobj(level)

  def write(self, messages: serialize.Messages) -> None:
    """Appends each message of `messages` as a record."""
    self.write_framed(*framed(messages))

  def write_framed(self, buffer: np.ndarray, count: int) -> None:
    """Appends `count` records already framed in `buffer` (as `framed`)."""
    self._put(self._compressor.compress(buffer))
    self.records += count

  def write_records(self, records: Sequence[bytes]) -> None:
    """Appends each of `records` (serialized messages) as a record."""
    self.write(serialize.Messages(len(records)).serialized(records))

  def close(self) -> None:
    """Ends the zlib stream, flushes and fsyncs the file, closes it."""
    self._put(self._compressor.flush())
    self._file.flush()
    os.fsync(self._file.fileno())
    self._file.close()

  def abort(self) -> None:
    """Closes the file, dropping what it could not write (it is removed)."""
    try:
      self._file.close()
    except OSError:  # Flushing its buffer failed: a full disk, say.
      pass

  def _put(self, data: bytes) -> None:
    self._file.write(data)
    self.bytes += len(data)
