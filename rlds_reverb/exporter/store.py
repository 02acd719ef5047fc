"""The chunks a table needs, set aside on disk as the chunk file streams by.

Reverb writes `chunks.tfrecord` in the order of a hash set: a chunk's place
in the file says nothing of its episode or step, and one zlib stream cannot
be read from the middle. So the file is read once, front to back, and each
chunk an item references is copied, still compressed, into an unnamed
temporary file (gone when closed, or when the process dies):

    chunks.tfrecord --stream--> wanted? --yes--> spill file (snappy as stored)
                                        --no---> dropped (other tables)
    index: per chunk its key, Reverb episode, first and last step, where it
           lies in the spill file

Rebuilding episodes then reads each chunk back by its offset, when its turn
comes: memory holds the index (38 bytes a chunk) and the chunks in use,
whatever the checkpoint's size. The page cache, not the process, keeps the
recent ones.
"""

import dataclasses
import os
import tempfile
from typing import List

from google.protobuf import message as message_lib
import numpy as np

from rlds_reverb._util import wording
from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import schema
from rlds_reverb.checkpoints import tensors as tensors_lib
from rlds_reverb.errors import CheckpointReadError

BATCH_CHUNKS = 1024  # Chunk records looked up at once at most,
BATCH_BYTES = 8 << 20  # and about this many bytes of them.
# One index row per chunk, as `ChunkIndex`'s fields.
_ROW = np.dtype([('keys', np.uint64), ('episodes', np.uint64),
                 ('starts', np.int64), ('ends', np.int64),
                 ('delta_encoded', bool), ('offsets', np.int64),
                 ('sizes', np.int64)])


@dataclasses.dataclass(frozen=True)
class ChunkIndex:
  """Per stored chunk, sorted by key."""
  keys: np.ndarray  # uint64
  episodes: np.ndarray  # uint64 Reverb episode id.
  starts: np.ndarray  # int64 first step in the episode.
  ends: np.ndarray  # int64 last step (inclusive).
  delta_encoded: np.ndarray  # bool
  offsets: np.ndarray  # int64 in the spill file.
  sizes: np.ndarray  # int64 bytes in the spill file.


class ChunkStore:
  """The wanted chunks of a checkpoint's chunk file, and reading them back.

  Usage: `with ChunkStore(path, wanted_keys, directory) as store: ...`.
  """

  def __init__(self, path: str, wanted: np.ndarray, directory: str):
    """Reads `path` once; keeps the chunks whose keys are in `wanted`.

    Args:
      path: a checkpoint's chunks.tfrecord.
      wanted: sorted unique uint64 chunk keys.
      directory: where the temporary file goes (the export's, so that the
        disk it fills is the one the user chose).

    Raises:
      CheckpointReadError: the file is cut short or damaged, a chunk is sparse,
        or a wanted chunk is not in it.
    """
    self.path = path
    self._file = tempfile.TemporaryFile(dir=directory)
    try:
      self.index = self._copy_wanted(np.asarray(wanted, np.uint64))
    except BaseException:
      self._file.close()
      raise

  def __enter__(self) -> 'ChunkStore':
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()

  def close(self) -> None:
    self._file.close()

  def positions(self, keys: np.ndarray) -> np.ndarray:
    """The index positions of `keys` (all stored)."""
    return np.searchsorted(self.index.keys, keys)

  def tensor(self, position: int, tensor: int) -> np.ndarray:
    """Tensor `tensor` of the chunk at index `position`, decoded."""
    data = os.pread(self._file.fileno(), int(self.index.sizes[position]),
                    int(self.index.offsets[position]))
    where = f'chunk {self.index.keys[position]} of {self.path}'
    try:
      stored = schema.parse('ChunkTensors', data).tensors
    except message_lib.DecodeError as e:
      raise CheckpointReadError(f'{where}: its tensors cannot be parsed ({e}).'
                            ) from e
    if tensor >= len(stored):
      raise CheckpointReadError(
          f'{where} holds {wording.count(len(stored), "tensor")}; an item '
          f'references tensor {tensor}.')
    return tensors_lib.decode(stored[tensor],
                              bool(self.index.delta_encoded[position]), where)

  def _copy_wanted(self, wanted: np.ndarray) -> ChunkIndex:
    rows: List[np.ndarray] = []  # Structured arrays of _ROW, per batch.
    offset = 0
    batch, batch_bytes = [], 0
    for record in records.read_records(self.path):
      batch.append(record)
      batch_bytes += len(record)
      if len(batch) == BATCH_CHUNKS or batch_bytes >= BATCH_BYTES:
        offset = self._copy_batch(batch, wanted, offset, rows)
        batch, batch_bytes = [], 0
    self._copy_batch(batch, wanted, offset, rows)
    self._file.flush()
    return self._index(rows, wanted)

  def _copy_batch(self, batch, wanted, offset: int, rows) -> int:
    """Copies the wanted chunks of `batch`; their index rows go to `rows`."""
    chunks = [self._parse(record) for record in batch]
    if not chunks:
      return offset
    keys = np.array([chunk.chunk_key for chunk in chunks], np.uint64)
    found = np.searchsorted(wanted, keys)
    found[found == len(wanted)] = 0
    hits = np.flatnonzero(wanted[found] == keys) if len(wanted) else []
    copied = []
    for i in hits:
      chunk = chunks[i]
      span = chunk.sequence_range
      if span.sparse:
        raise CheckpointReadError(
            f'{self.path}: chunk {chunk.chunk_key} is sparse (steps missing '
            f'inside it), which Reverb writes only for items of partial '
            f'steps: its rows cannot be placed.')
      self._file.write(chunk.data)
      copied.append((chunk.chunk_key, span.episode_id, span.start, span.end,
                     chunk.delta_encoded, offset, len(chunk.data)))
      offset += len(chunk.data)
    rows.append(np.array(copied, _ROW))
    return offset

  def _parse(self, record: bytes):
    try:
      return schema.parse('ChunkData', record)
    except message_lib.DecodeError as e:
      raise CheckpointReadError(
          f'{self.path} holds a record that is not a chunk ({e}): the file is '
          f'damaged.') from e

  def _index(self, rows: List[np.ndarray], wanted: np.ndarray) -> ChunkIndex:
    """The rows joined and sorted in place; the index's fields are views of
    them (one copy of the index in memory, not three)."""
    table = np.concatenate(rows or [np.empty(0, _ROW)])
    rows.clear()
    table.sort(order='keys')
    index = ChunkIndex(**{name: table[name] for name in _ROW.names})
    missing = np.setdiff1d(wanted, index.keys)
    if missing.size:
      raise CheckpointReadError(
          f'{self.path} lacks chunk {missing[0]} (and '
          f'{wording.number(int(missing.size) - 1)} more), which items '
          f'reference: the checkpoint is incomplete.')
    return index
