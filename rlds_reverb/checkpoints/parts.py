"""One checkpoint per server, built by many workers: each worker writes a
*part* per server, and one merge per server makes its checkpoint of them.

    worker: (position, converted rows) --position % S--> server k's Plan
      (`rlds_reverb.build_parts.ServerParts`)
      -> PartWriter (a sink, as `CheckpointWriter` is):
           chunk records, framed as the checkpoint holds them -> NAME.chunks
           items per table (numpy, kept)    + runs: which positions they are
      close: NAME.chunks fsynced; then NAME.npz written as NAME.npz.tmp,
             fsynced, renamed: a part is whole or absent
    merge(parts of server k, root, settings) -> root/<time>/
      chunks: each part's records copied as they are (`add_chunk_records`)
      items:  the parts' runs in position order, re-timed in one ascending
              sequence (items.tfrecord is read in insertion order), the
              oldest left out past a table's max_size; DONE last

A *run* is a stretch of consecutive positions (of all servers) one worker
planned in order; its items are those of that server's episodes in it. Two
parts never share a position, so their runs do not overlap, and sorting
runs by their first position orders items as one push of the server's
episodes would (episode I goes to server I % S, as `rlds_reverb.beam`'s
`WriteToReverb` and `push_shards` send them). Keys are each part's own
(`writer.Keys`, random starts): the merge's `CheckpointWriter` refuses a
chunk key written twice, should two parts ever draw the same.

Chunk layout (which rows share a chunk) follows each worker's plan: it
equals a single push's but where a worker's share starts, so server memory
per item is a push's within a chunk or so per worker. Plain numpy and `os`:
no TensorFlow, no Reverb.
"""

import dataclasses
import os
import shutil
import time
from typing import Dict, Iterator, List, Optional, Sequence, Tuple

import numpy as np

from rlds_reverb._util import files
from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import messages
from rlds_reverb.checkpoints import table_settings
from rlds_reverb.checkpoints import writer as writer_lib
from rlds_reverb.errors import CheckpointWriteError

PARTS = directories.PARTS  # Under the build's directory, while it runs.
SUFFIX = '.npz'  # A part: present only once whole.
CHUNKS_SUFFIX = '.chunks'
_COPY_BYTES = 16 << 20  # Chunk records copied at once.
_ITEM_FIELDS = ('keys', 'priorities', 'times', 'slice_counts', 'chunk_keys',
                'offsets', 'lengths', 'indexes', 'squeeze')


def server_root(directory: str, server: int, servers: int) -> str:
  """Where server `server` of `servers` loads from: `directory` itself for
  one server, else directory/server-K-of-S."""
  if servers == 1:
    return os.fspath(directory)
  return os.path.join(directory, f'server-{server}-of-{servers}')


def parts_directory(directory: str, server: int, servers: int) -> str:
  return os.path.join(directory, PARTS, f'server-{server}-of-{servers}')


def find(directory: str, server: int, servers: int) -> List[str]:
  """The whole parts of `server` under `directory` (those a worker finished
  and renamed), sorted; half-written ones are not parts."""
  parts = parts_directory(directory, server, servers)
  if not os.path.isdir(parts):
    return []
  return sorted(os.path.join(parts, name) for name in os.listdir(parts)
                if name.endswith(SUFFIX))


def remove(paths: Sequence[str]) -> None:
  """Removes the parts at `paths` (each an .npz and its chunks)."""
  for path in paths:
    for name in (path, path[:-len(SUFFIX)] + CHUNKS_SUFFIX):
      if os.path.exists(name):
        os.remove(name)


def remove_parts(directory: str) -> None:
  """Removes every part (whole or not) under `directory`."""
  shutil.rmtree(os.path.join(directory, PARTS), ignore_errors=True)


def remove_unfinished(directory: str, servers: int, made: bool) -> None:
  """After a build that failed or was interrupted: its parts, then the
  servers' roots it made and `directory` if it `made` it, each only if
  empty."""
  remove_parts(directory)
  remove_empty_roots(directory, servers, made)


def remove_empty_roots(directory: str, servers: int, made: bool) -> None:
  """After a build that left nothing: the servers' roots it made, and
  `directory` if it `made` it, each only if empty (never another's files)."""
  roots = [server_root(directory, k, servers) for k in range(servers)]
  roots = [root for root in roots if root != directory]
  for root in roots + ([directory] if made else []):
    try:
      os.rmdir(root)
    except OSError:
      pass  # Missing, or not empty.


class PartWriter:
  """One worker's part for one server: a sink for `plan.write` (chunks are
  written to disk as they come; items kept), plus `run` bookkeeping."""

  def __init__(self, stem: str, tables: Sequence[str]):
    os.makedirs(os.path.dirname(stem), exist_ok=True)
    self.path = stem + SUFFIX
    self._chunks_path = stem + CHUNKS_SUFFIX
    self._tables = list(tables)
    self._chunks = open(self._chunks_path, 'xb')  # pylint: disable=consider-using-with
    self._chunk_keys: List[np.ndarray] = []
    self._items: Dict[str, List[messages.Items]] = {t: [] for t in tables}
    self._runs: List[List[int]] = []  # [first, last, items]
    self.episodes = 0
    self.steps = 0

  def add_chunks(self, chunks: messages.Chunks) -> None:
    for buffer, _ in writer_lib.chunk_records(chunks):
      self._chunks.write(buffer)
    self._chunk_keys.append(np.asarray(chunks.keys, np.uint64))

  def add_items(self, table: str, items: messages.Items) -> None:
    self._items[table].append(items)

  def episode(self, position: int, items: int, steps: int,
              new_run: bool) -> None:
    """Episode `position` (with `items` items per table, planned after the
    ones before); `new_run`: the positions before it were not all planned
    here, in order."""
    if new_run or not self._runs:
      self._runs.append([position, position, 0])
    run = self._runs[-1]
    run[1], run[2] = position, run[2] + items
    self.episodes += 1
    self.steps += steps

  def close(self) -> str:
    """Makes the part whole: chunks durable, then the items file renamed
    into place last. Returns its path."""
    self._chunks.flush()
    os.fsync(self._chunks.fileno())
    size = self._chunks.tell()
    self._chunks.close()
    arrays = {
        'tables': np.array(self._tables),
        'chunk_file': np.array(os.path.basename(self._chunks_path)),
        'chunk_bytes': np.array(size, np.int64),
        'chunk_keys': _concatenated(self._chunk_keys, np.uint64),
        'runs': np.array([r for r in self._runs if r[2]],
                         np.int64).reshape(-1, 3),
        'counts': np.array([self.episodes, self.steps], np.int64),
    }
    for index, table in enumerate(self._tables):
      items = concat_items(self._items[table])
      if items is None:
        continue
      arrays[f'items{index}.num_columns'] = np.array(items.num_columns)
      for field in _ITEM_FIELDS:
        arrays[f'items{index}.{field}'] = np.asarray(getattr(items, field))
    temporary = self.path + '.tmp'
    with open(temporary, 'xb') as f:
      np.savez(f, **arrays)
      f.flush()
      os.fsync(f.fileno())
    os.replace(temporary, self.path)
    files.sync_directory(os.path.dirname(self.path))
    return self.path

  def abort(self) -> None:
    """Removes what this part wrote."""
    self._chunks.close()
    for path in (self._chunks_path, self.path + '.tmp'):
      if os.path.exists(path):
        os.remove(path)


@dataclasses.dataclass(frozen=True)
class Part:
  """A whole part, read back: its chunks' keys and file, its items."""
  path: str
  tables: Tuple[str, ...]
  chunk_file: str
  chunk_bytes: int
  chunk_keys: np.ndarray
  runs: np.ndarray  # [first position, last position, items] per run.
  episodes: int
  steps: int
  items: Dict[str, messages.Items]

  @classmethod
  def read(cls, path: str) -> 'Part':
    """Raises CheckpointWriteError: not a whole part."""
    try:
      with np.load(path) as arrays:
        data = {key: arrays[key] for key in arrays.files}
    except (OSError, ValueError) as e:
      raise CheckpointWriteError(
          f'Cannot read the part {path}: {getattr(e, "strerror", None) or e}'
          f'; only whole parts are merged.') from e
    tables = tuple(str(t) for t in data['tables'])
    items = {}
    for index, table in enumerate(tables):
      if f'items{index}.keys' in data:
        items[table] = messages.Items(
            num_columns=int(data[f'items{index}.num_columns']),
            **{field: data[f'items{index}.{field}'] for field in _ITEM_FIELDS})
    chunk_file = os.path.join(os.path.dirname(path), str(data['chunk_file']))
    part = cls(path, tables, chunk_file, int(data['chunk_bytes']),
               data['chunk_keys'], data['runs'], int(data['counts'][0]),
               int(data['counts'][1]), items)
    size = os.path.getsize(chunk_file) if os.path.exists(chunk_file) else -1
    if size != part.chunk_bytes:
      raise CheckpointWriteError(
          f'The part {path} has {part.chunk_bytes:,} bytes of chunks; '
          f'{chunk_file} holds {max(size, 0):,}: the part is damaged.')
    return part

  def chunk_buffers(self) -> Iterator[bytes]:
    with open(self.chunk_file, 'rb') as f:
      while True:
        data = f.read(_COPY_BYTES)
        if not data:
          return
        yield data


@dataclasses.dataclass(frozen=True)
class Merged:
  """One server's checkpoint, merged from its parts."""
  path: str
  parts: int
  episodes: int
  steps: int
  items: int  # Per table, made.
  evicted: Tuple[Tuple[str, int], ...] = ()  # (table, oldest left out)


def merge(parts: Sequence[str], root: str,
          settings: Sequence[table_settings.TableSettings], *,
          now_ns: Optional[int] = None) -> Merged:
  """One checkpoint under `root` of the items of `parts` (paths of whole
  parts of one server), in position order; a table's oldest items past its
  max_size left out and counted as deleted.

  Raises:
    CheckpointWriteError: a part that is missing or damaged, two parts
      holding the same episodes, parts of other tables, and what
      `CheckpointWriter` refuses. Nothing is left under `root` then.
  """
  read = [Part.read(path) for path in parts]
  names = [s.name for s in settings]
  for part in read:
    if sorted(part.tables) != sorted(names):
      raise CheckpointWriteError(
          f'The part {part.path} holds tables {list(part.tables)}; the '
          f'checkpoint {names}.')
  runs = _ordered_runs(read)
  total = int(sum(run[2] for run in runs))
  evicted = {s.name: max(0, total - s.max_size) for s in settings}
  with writer_lib.CheckpointWriter(root, settings) as writer:
    for part in read:
      writer.add_chunk_records(part.chunk_buffers(), part.chunk_keys)
    start = time.time_ns() if now_ns is None else now_ns
    for index, table in enumerate(names):
      made = evicted[table]  # Item i of all is inserted at start + i * T + t.
      for items in _items_in_order(read, runs, table, evicted[table]):
        order = made + np.arange(len(items), dtype=np.int64)
        made += len(items)
        writer.add_items(table, dataclasses.replace(
            items, times=start + order * len(names) + index))
    counts = {name: table_settings.TableCounts(inserted=total,
                                               deleted=evicted[name])
              for name in names}
    path = writer.close(counts)
  return Merged(path, len(read), sum(p.episodes for p in read),
                sum(p.steps for p in read), total,
                tuple((name, n) for name, n in evicted.items() if n))


def _ordered_runs(read: Sequence[Part]) -> List[Tuple[int, int, int, int, int]]:
  """(first, last, items, part index, first item in the part) of every run,
  by first position; raises if two overlap (one episode in two parts)."""
  runs = []
  for index, part in enumerate(read):
    firsts = np.cumsum(part.runs[:, 2]) - part.runs[:, 2]
    runs += [(int(first), int(last), int(items), index, int(at))
             for (first, last, items), at in zip(part.runs.tolist(), firsts)]
    held = {len(items) for items in part.items.values()} or {0}
    if held != {int(part.runs[:, 2].sum())}:
      raise CheckpointWriteError(
          f'The part {part.path} lists {int(part.runs[:, 2].sum()):,} items '
          f'per table and holds {sorted(held)}: it is damaged.')
  runs.sort()
  for before, after in zip(runs, runs[1:]):
    if after[0] <= before[1]:
      raise CheckpointWriteError(
          f'Episodes {after[0]} to {min(before[1], after[1])} are in two '
          f'parts ({read[before[3]].path}, {read[after[3]].path}): a part '
          f'merged twice, or written by two workers.')
  return runs


def _items_in_order(read: Sequence[Part], runs, table: str, leave_out: int
                    ) -> Iterator[messages.Items]:
  """`table`'s items run after run, in batches, the first `leave_out`
  left out."""
  batch: List[messages.Items] = []
  size = 0
  bounds = {}
  for _, _, count, index, at in runs:
    items = read[index].items[table]
    if index not in bounds:
      bounds[index] = np.concatenate([[0], np.cumsum(items.slice_counts)])
    skip = min(leave_out, count)
    leave_out -= skip
    if skip == count:
      continue
    batch.append(messages.item_part(items, at + skip, at + count,
                                    bounds[index]))
    size += count - skip
    if size >= writer_lib.BATCH_ITEMS:
      yield concat_items(batch)
      batch, size = [], 0
  if batch:
    yield concat_items(batch)


def concat_items(parts: Sequence[messages.Items]) -> Optional[messages.Items]:
  """One table's items, one `Items` after another (None for none)."""
  parts = [p for p in parts if len(p)]
  if not parts:
    return None
  if len(parts) == 1:
    return parts[0]
  columns = parts[0].num_columns
  squeezes = [np.asarray(p.squeeze, bool) for p in parts]
  if all(s.size == columns and np.array_equal(s, squeezes[0])
         for s in squeezes):
    squeeze = squeezes[0]
  else:
    squeeze = np.concatenate([np.broadcast_to(
        s.reshape(-1, columns), (len(p), columns)).ravel()
                              for s, p in zip(squeezes, parts)])
  joined = {field: np.concatenate([np.asarray(getattr(p, field))
                                   for p in parts])
            for field in _ITEM_FIELDS if field != 'squeeze'}
  return messages.Items(num_columns=columns, squeeze=squeeze, **joined)


def _concatenated(arrays: List[np.ndarray], dtype) -> np.ndarray:
  return np.concatenate(arrays) if arrays else np.empty(0, dtype)
