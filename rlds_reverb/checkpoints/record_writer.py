"""A checkpoint file's records, written as Reverb's loader reads them: the
inverse of `records`.

Reverb reads each file with TensorFlow's `RecordReader`, zlib options:

    file   = zlib( record record ... )
    record = TFRecord framing (`rlds_reverb._util.wire`: length, masked CRC32C of
             the length, data, masked CRC32C of the data)

TensorFlow checks both CRCs: a wrong one is a DataLoss error, Reverb then
retries the file as uncompressed, which fails too, and the server does not
start. A batch of records is framed in one buffer (`serialize` leaves room
around each message, `wire.frame_in_place` writes the framing).

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

import numpy as np

from rlds_reverb._util import wire
from rlds_reverb.checkpoints import serialize

STORED = 0  # zlib level: no compression, the stream format only.


def framed(messages: serialize.Messages) -> Tuple[np.ndarray, int]:
  """(buffer, records): every message of `messages` as a TFRecord record,
  one after another."""
  buffer, starts, ends = serialize.serialize(
      messages, wire.RECORD_HEADER, wire.RECORD_FOOTER)
  wire.frame_in_place(buffer, starts, ends)
  return buffer, len(starts)


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
