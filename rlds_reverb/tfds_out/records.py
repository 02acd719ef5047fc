"""Shard files: records appended durably, and read back to cut a torn tail.

A record is framed as TFRecord frames it (`rlds_reverb._util.wire`: its length,
the length's CRC, the data, the data's CRC), the bytes TensorFlow's writer
writes, the whole frame written, then flushed. A process killed while appending
leaves a prefix of its last record; a machine that loses power may leave
anything after the last fsync. TensorFlow's reader checks both CRCs, so
`scan` reads as it does to find where the readable records end, and `cut`
drops what follows. `records_end` walks the length fields alone (no data
read): a cheap test that a closed shard still holds the records registered
for it.
"""

import dataclasses
import enum
import os
from typing import Optional

from rlds_reverb._util import files
from rlds_reverb._util import wire


class Durability(enum.Enum):
  """Where an episode is when `EpisodeWriter.write` returns."""
  FSYNC = 'fsync'  # On disk: survives a crash of the machine (~0.3-0.6 ms).
  FLUSH = 'flush'  # With the OS: survives the process being killed.


class ShardWriter:
  """Appends records to a new shard file; each one flushed (and synced)."""

  def __init__(self, path: str, durability: Durability):
    self.path = path
    self._durability = durability
    self._file = open(path, 'wb')  # pylint: disable=consider-using-with
    if durability is Durability.FSYNC:
      files.sync_directory(os.path.dirname(path) or '.')

  def append(self, record: bytes) -> None:
    self._file.write(wire.frame(record))
    self._file.flush()
    if self._durability is Durability.FSYNC:
      os.fsync(self._file.fileno())

  def close(self) -> None:
    """Closes the file, synced whatever the durability: it is registered next."""
    self._file.flush()
    os.fsync(self._file.fileno())
    self._file.close()


@dataclasses.dataclass(frozen=True)
class Scan:
  """What a shard file holds: its readable records, and what follows them."""
  records: int
  data_bytes: int  # The records' data, as TFDS counts a split's bytes.
  end: int  # Where the readable records end.
  size: int  # The file's size; more than `end` if a record is torn.


def scan(path: str) -> Scan:
  """Reads `path` until its end or its first unreadable record."""
  records = data_bytes = 0
  with open(path, 'rb') as f:
    for length in wire.checked_lengths(f):
      records += 1
      data_bytes += length
  end = data_bytes + wire.RECORD_OVERHEAD * records
  return Scan(records, data_bytes, end, os.path.getsize(path))


def records_end(path: str, count: int) -> Optional[int]:
  """Where the first `count` records of `path` end, by their length fields;
  None if the file ends before them (it was cut short).

  Reads 8 bytes a record (no data, no CRC): cheap enough to run on every
  registered shard, and blind to corrupt data (`scan` and `validate` see it).
  """
  end = 0
  size = os.path.getsize(path)
  with open(path, 'rb', buffering=0) as f:
    for _ in range(count):
      length = wire.length_at(f.fileno(), end)
      if length is None:
        return None
      end += length + wire.RECORD_OVERHEAD
      if end > size:
        return None
  return end


def cut(path: str, size: int) -> None:
  """Truncates `path` to `size` bytes, durably."""
  with open(path, 'r+b') as f:
    f.truncate(size)
    f.flush()
    os.fsync(f.fileno())
