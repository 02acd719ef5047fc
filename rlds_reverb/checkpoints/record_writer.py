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
records, as fast as the disk takes them. Its stream is written here
(`_StoredStream`: stored deflate blocks, a 5-byte header and up to 64 KB of
the records as they are, then the Adler-32), with no copy of the records:
`zlib.compressobj(0)` copies every byte through its window, 2.5-3x the CPU
time on batches past the cache (16 MB chunk batches of encoded frames:
0.27 against 0.65-0.8 CPU s per 320 MB here). Level 1 halves a checkpoint of
2-step halfcheetah-shaped items (285 to 132 bytes an item: item records
shrink well, snappy-compressed floats hardly), for 2.3x the writer's CPU
time (Python's zlib runs at ~18 MB/s on such floats, ~170 MB/s on items).
Durability: `close` flushes and fsyncs; the checkpoint's `DONE`, written
after, is what makes a server load it (`writer`).
"""

import os
from typing import Iterator, Sequence, Tuple, Union
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
    self._stream = _StoredStream() if level == STORED else _Deflated(level)

  def write(self, messages: serialize.Messages) -> None:
    """Appends each message of `messages` as a record."""
    self.write_framed(*framed(messages))

  def write_framed(self, buffer: np.ndarray, count: int) -> None:
    """Appends `count` records already framed in `buffer` (as `framed`)."""
    for part in self._stream.parts(buffer):
      self._put(part)
    self.records += count

  def write_records(self, records: Sequence[bytes]) -> None:
    """Appends each of `records` (serialized messages) as a record."""
    self.write(serialize.Messages(len(records)).serialized(records))

  def close(self) -> None:
    """Ends the zlib stream, flushes and fsyncs the file, closes it."""
    self._put(self._stream.flush())
    self._file.flush()
    os.fsync(self._file.fileno())
    self._file.close()

  def abort(self) -> None:
    """Closes the file, dropping what it could not write (it is removed)."""
    try:
      self._file.close()
    except OSError:  # Flushing its buffer failed: a full disk, say.
      pass

  def _put(self, data: Union[bytes, memoryview]) -> None:
    self._file.write(data)
    self.bytes += len(data)


class _Deflated:
  """A zlib stream compressed at `level` (1-9) by zlib."""

  def __init__(self, level: int):
    self._compressor = zlib.compressobj(level)

  def parts(self, data) -> Iterator[bytes]:
    yield self._compressor.compress(data)

  def flush(self) -> bytes:
    return self._compressor.flush()


class _StoredStream:
  """A zlib stream (RFC 1950) of stored deflate blocks (RFC 1951, BTYPE 00):
  what `zlib.compressobj(0)` makes, block sizes aside, without copying the
  data. `parts(data)` gives what to write, in order (block headers, and
  views of `data`); `flush()` the last block and the data's Adler-32."""

  BLOCK = 0xFFFF  # A stored block's largest length.

  def __init__(self):
    self._adler = 1
    self._started = False

  def parts(self, data) -> Iterator[Union[bytes, memoryview]]:
    view = memoryview(data).cast('B')
    if not self._started:
      self._started = True
      yield _ZLIB_HEADER
    self._adler = zlib.adler32(view, self._adler)
    for start in range(0, len(view), self.BLOCK):
      part = view[start:start + self.BLOCK]
      yield _stored_header(len(part), final=False)
      yield part

  def flush(self) -> bytes:
    head = b'' if self._started else _ZLIB_HEADER
    self._started = True
    return (head + _stored_header(0, final=True) +
            self._adler.to_bytes(4, 'big'))


_ZLIB_HEADER = b'\x78\x01'  # Deflate, 32 KB window, no dictionary, level 0.


def _stored_header(length: int, final: bool) -> bytes:
  """A stored block's header: BFINAL and BTYPE 00 (the rest of its byte
  padding), then LEN and its complement NLEN, little-endian."""
  return (bytes([int(final)]) + length.to_bytes(2, 'little') +
          (length ^ 0xFFFF).to_bytes(2, 'little'))
