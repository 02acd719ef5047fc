"""A new Reverb checkpoint, written without a server: the inverse of what a
server's `DefaultCheckpointer` loads at start.

    CheckpointWriter(root, tables)
      add_chunks(Chunks)          -> root/<time>/chunks.tfrecord  (as they come)
      add_items(table, Items)     -> root/<time>/items.tfrecord   (as they come)
      close(counts)               -> root/<time>/tables.tfrecord, then fsync of
                                     the files and directories, then DONE

The root is new or empty (`check_root`): the checkpoint is a build, a seed
that servers load through `DefaultCheckpointer(own_root,
fallback_checkpoint_path=path)`, never a root they write to (Reverb's
checkpointer deletes what else a root holds). `BUILD_MARK` goes in first,
`DONE` last, so until `close` writes it nothing here is loadable, and a
build that fails, is killed or runs out of disk leaves a directory that says
it is an unfinished build. A failure this writer sees (bad input, a full
disk, Ctrl-C) removes the directory, and the root if it made it, and closes
the writer. The directory is named as Reverb names its own
(`checkpoint_name`: the local time, RFC 3339, nanoseconds).

What the loader would refuse, crash on or silently get wrong is checked
before `DONE`: an item of a table not given, more items than the table's
`max_size` (the load fails), items out of time order, a chunk key written
twice (the loader keeps the first chunk's data for both), an item slice of
a chunk never written (the load fails). Keys are the writer's to choose:
`Keys` gives distinct ones that look like Reverb's random 64-bit ids.
"""

import contextlib
import dataclasses
import datetime
import json
import os
import shutil
import time
from typing import (Any, Dict, Iterable, Iterator, List, Mapping, Optional,
                    Sequence, Tuple)

import numpy as np

from rlds_reverb._util import files
from rlds_reverb._util import wording
from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import item_records
from rlds_reverb.checkpoints import messages as messages_lib
from rlds_reverb.checkpoints import record_writer
from rlds_reverb.checkpoints import table_settings
from rlds_reverb.errors import CheckpointWriteError

# Records serialized at once: an item's record cost ~1.5 us in batches of
# 4k-8k, 1.8 at 16k, 3.4 at 64k (numpy's temporaries leave the cache); a
# chunk's ~6.1 us in batches of 1k, ~4.5 at 8k-16k, up to BATCH_BYTES of rows.
BATCH_ITEMS = 8_192
BATCH_CHUNKS = 8_192
BATCH_BYTES = 16 << 20


def checkpoint_name(now_ns: Optional[int] = None) -> str:
  """A checkpoint directory's name as Reverb gives it (absl's FormatTime:
  local time, fractional seconds without trailing zeros, the UTC offset):
  '2026-11-26T14:56:43.538371194+00:00'."""
  now_ns = time.time_ns() if now_ns is None else now_ns
  seconds, nanos = divmod(now_ns, 1_000_000_000)
  moment = datetime.datetime.fromtimestamp(seconds).astimezone()
  fraction = f'.{nanos:09d}'.rstrip('0') if nanos else ''
  offset = moment.strftime('%z')
  return (f'{moment:%Y-%m-%dT%H:%M:%S}{fraction}'
          f'{offset[:3]}:{offset[3:]}')


def check_root(root: str) -> directories.Checkpoints:
  """Raises unless a new checkpoint can go into `root`: a directory that is
  new (and can be made) or empty but for a build's own parts. Returns what
  it holds. Called again by `CheckpointWriter`; a build calls it first,
  before reading its data.

  Why empty: a server loads only the newest checkpoint of a directory, so a
  second build there would hide the first; and a build's directory is what
  users hand to servers, whose checkpointer deletes everything else in a
  root it writes to.

  Raises:
    CheckpointWriteError: naming the root and what is in the way.
  """
  root = os.fspath(root)
  error = directories.writable_error(root, create=False)
  if error:
    raise CheckpointWriteError(f'Cannot write a checkpoint: {error}.')
  found = directories.find(root)
  problem = not_empty_text(found)
  if problem:
    raise CheckpointWriteError(
        f'Cannot write a checkpoint: {problem}; a build writes into a new '
        f'or empty directory.')
  return found


def not_empty_text(found: directories.Checkpoints) -> Optional[str]:
  """What in `found` keeps a build out of it (its parts do not), or None."""
  root = found.root
  if found.is_checkpoint:
    return f'{root} is itself a checkpoint'
  if found.complete:
    return (f'{root} already holds a checkpoint ({found.complete[-1]}), '
            f'which a server loads instead of any other there')
  if found.unfinished:
    size = wording.size(directories.tree_size(
        found.path(found.unfinished[-1])))
    return (f'{root} holds an unfinished build ({found.unfinished[-1]}, '
            f'{size} without a {directories.DONE} file, left by a build that '
            f'was killed; remove it to use {root})')
  held = found.incomplete + found.servers + found.others
  if held:
    return f'{root} is not empty: it holds {wording.listed(held)}'
  return None


class Keys:
  """Distinct 64-bit keys for chunks and items, random-looking as Reverb's:
  2^63 + a bijection of 63-bit numbers (multiply by odd numbers, xor-shift)
  applied to a counter that starts at random. So no two are equal before
  2^63 of them; W writers of N keys each that share a checkpoint overlap
  with odds of ~W^2 N in 2^63; and every key is a 10-byte varint, the same
  length in every record (`serialize` writes keys of one length a byte
  place at a time for all)."""

  BITS = 63

  def __init__(self, seed: Optional[int] = None):
    self._next = int(np.random.default_rng(seed).integers(0, 2**self.BITS))

  def take(self, count: int) -> np.ndarray:
    mask = np.uint64(2**self.BITS - 1)
    z = (np.arange(count, dtype=np.uint64) + np.uint64(self._next)) & mask
    self._next = (self._next + count) % 2**self.BITS
    for multiplier, shift in ((0xBF58476D1CE4E5B9, 30),
                              (0x94D049BB133111EB, 27)):
      z ^= z >> np.uint64(shift)
      z = (z * np.uint64(multiplier)) & mask
    return z | np.uint64(2**self.BITS)


@dataclasses.dataclass
class _TableState:
  settings: table_settings.TableSettings
  items: int = 0
  last_time: int = -2**63


class CheckpointWriter:
  """Writes one new checkpoint under `root` for `tables`; `close` completes
  it. Usage:

      settings = tables.settings(tables.uniform('replay'), signature)
      with CheckpointWriter(root, [settings]) as writer:
        writer.add_chunks(chunks)
        writer.add_items('replay', items)
      # closed on success (DONE written), removed on an exception.

  (`rlds_reverb.tables.settings` makes a table's settings from its options
  without Reverb; `TableSettings.of(table)` reads a `reverb.Table`'s.)
  """

  def __init__(self, root: str,
               tables: Sequence[table_settings.TableSettings], *,
               level: int = record_writer.STORED):
    """Creates root/<checkpoint_name()>/ and its chunk and item files.

    Args:
      root: a new or empty directory (created if missing, and removed again
        if the checkpoint is); a server loads the checkpoint through
        `DefaultCheckpointer(own_root, fallback_checkpoint_path=path)`.
      tables: the settings of every table the checkpoint holds (the server
        must have a table of each name; these settings replace its own).
      level: zlib level of the files (0, the default, stores them).

    Raises:
      CheckpointWriteError: the root is not new or empty, or not a writable
        directory; two tables share a name; settings a server would crash
        or fail on.
    """
    root = os.fspath(root)
    names = [t.name for t in tables]
    if len(set(names)) != len(names) or not names:
      raise CheckpointWriteError(
          f'Checkpoint tables {names}: at least one, each name once.')
    for settings in tables:
      table_settings.check(settings)
    self._tables = {t.name: _TableState(t) for t in tables}
    self.root = root
    check_root(root)
    self._made_root = not os.path.exists(root)
    self.path = os.path.join(root, checkpoint_name())
    self._chunk_keys = _KeySet(unique=False)
    self._referenced = _KeySet(unique=True)
    self._files: Dict[str, record_writer.RecordWriter] = {}
    self._closed = False
    with self._removed_on_failure(f'Cannot write a checkpoint in {root}'):
      os.makedirs(self.path)
      _write_mark(self.path, tables)
      for name in (directories.CHUNKS, directories.ITEMS):
        self._files[name] = record_writer.RecordWriter(
            os.path.join(self.path, name), level)
      self._level = level

  def __enter__(self) -> 'CheckpointWriter':
    return self

  def __exit__(self, exc_type, exc, traceback) -> None:
    if self._closed:
      return
    if exc_type is None:
      self.close()
    else:
      self.abort()

  def add_chunks(self, chunks: messages_lib.Chunks) -> None:
    """Writes `chunks` (their keys new to this checkpoint).

    Raises:
      CheckpointWriteError: chunks Reverb cannot hold, or a write that
        failed (the checkpoint is then removed).
    """
    self._check_open()
    with self._removed_on_failure():
      for buffer, count in chunk_records(chunks):
        self._files[directories.CHUNKS].write_framed(buffer, count)
      self._chunk_keys.add(np.asarray(chunks.keys, np.uint64))

  def add_chunk_records(self, buffers: Iterable[Any], keys: np.ndarray
                        ) -> None:
    """Writes chunk records made elsewhere (`chunk_records`, as a worker
    writes them in `checkpoints.parts`): `buffers` hold, one after another,
    the framed ChunkData records of the chunks `keys` (cut anywhere). The
    checks are `add_chunks`': a key written twice, or referenced by an item
    and never written, fails `close`.
    """
    self._check_open()
    with self._removed_on_failure():
      file = self._files[directories.CHUNKS]
      for buffer in buffers:
        file.write_framed(buffer, 0)
      file.records += len(keys)
      self._chunk_keys.add(np.asarray(keys, np.uint64))

  def add_items(self, table: str, items: messages_lib.Items) -> None:
    """Writes `items` of `table`, after the items given before.

    Raises:
      CheckpointWriteError: items a server would refuse (see the module's
        docstring), or a write that failed (the checkpoint is then removed).
    """
    self._check_open()
    with self._removed_on_failure():
      self._add_items(table, items)

  @contextlib.contextmanager
  def _removed_on_failure(self, opening: Optional[str] = None):
    """Any failure (a Ctrl-C too) removes the checkpoint; OSErrors become
    ours: `opening: reason` while it is made, else the write that failed."""
    try:
      yield
    except OSError as e:
      self.abort()
      if opening is not None:
        raise CheckpointWriteError(f'{opening}: {e.strerror or e}') from e
      raise CheckpointWriteError(
          f'Writing the checkpoint {self.path} failed ({e.strerror or e}); '
          f'it is removed.') from e
    except BaseException:
      self.abort()
      raise

  def _add_items(self, table: str, items: messages_lib.Items) -> None:
    state = self._tables.get(table)
    if state is None:
      raise CheckpointWriteError(
          f'Items of table {table!r}, which is not among the checkpoint\'s '
          f'tables {sorted(self._tables)}.')
    if not len(items):
      return
    max_size = state.settings.max_size
    if state.items + len(items) > max_size:
      raise CheckpointWriteError(
          f"Table '{table}' holds at most {wording.count(max_size, 'item')}; "
          f'{wording.count(state.items + len(items), "item")} given. A '
          f'server would fail to load the checkpoint: write the newest '
          f'{max_size:,}, and count the others as deleted.')
    times = np.asarray(items.times, np.int64)
    back = np.flatnonzero(np.diff(times) < 0) + 1
    if times[0] < state.last_time:
      back = np.zeros(1, np.int64)
    if back.size:
      at = int(back[0])
      before = state.last_time if at == 0 else int(times[at - 1])
      raise CheckpointWriteError(
          f"Table '{table}': item {items.keys[at]} is inserted at "
          f'{times[at]} ns, before the item ahead of it ({before} ns): items '
          f'go in insertion order, oldest first.')
    bounds = np.concatenate([[0], np.cumsum(items.slice_counts)])
    for start in range(0, len(items), BATCH_ITEMS):
      part = messages_lib.item_part(items, start, start + BATCH_ITEMS, bounds)
      self._files[directories.ITEMS].write_framed(
          *item_records.framed(table, part))
    self._referenced.add(messages_lib.referenced_chunks(items))
    state.items += len(items)
    state.last_time = int(items.times[-1])

  def close(self, counts: Optional[Mapping[str, table_settings.TableCounts]]
            = None) -> str:
    """Writes the tables, makes every file durable, then `DONE`; returns the
    checkpoint's directory.

    Args:
      counts: per table name, its counters; by default a table has inserted
        the items written and nothing else happened to it.

    Raises:
      CheckpointWriteError: a chunk key written twice, an item slice of a
        chunk not written, counts that contradict the items, settings the
        loader refuses. The directory is removed.
    """
    self._check_open()
    unknown = sorted(set(counts or ()) - set(self._tables))
    with self._removed_on_failure():
      if unknown:
        raise CheckpointWriteError(
            f'Counts of tables {unknown}, which are not among the '
            f"checkpoint's tables {sorted(self._tables)}.")
      self._check_references()
      records = [self._table_record(state, (counts or {}).get(name))
                 for name, state in self._tables.items()]
      tables = record_writer.RecordWriter(
          os.path.join(self.path, directories.TABLES), self._level)
      self._files[directories.TABLES] = tables
      tables.write_records(records)
      for file in self._files.values():
        file.close()
      files.sync_directory(self.path)
      with open(os.path.join(self.path, directories.DONE), 'xb') as done:
        os.fsync(done.fileno())
      files.sync_directory(self.path)
      files.sync_directory(self.root)
    self._closed = True
    return self.path

  def abort(self) -> None:
    """Closes the files and removes the checkpoint's directory."""
    self._closed = True
    for file in self._files.values():
      file.abort()
    shutil.rmtree(self.path, ignore_errors=True)
    if self._made_root:
      with contextlib.suppress(OSError):  # Not empty: another's files.
        os.rmdir(self.root)

  @property
  def sizes(self) -> Dict[str, int]:
    """Bytes written so far, per file."""
    return {name: file.bytes for name, file in self._files.items()}

  def _check_open(self) -> None:
    if self._closed:
      raise CheckpointWriteError(f'The checkpoint {self.path} is closed.')

  def _check_references(self) -> None:
    written = self._chunk_keys.keys()
    twice = np.unique(written[1:][written[1:] == written[:-1]])
    if twice.size:
      raise CheckpointWriteError(
          f'Chunk {twice[0]}{_more(twice.size)} is written twice in '
          f'{self.path}: a server would give both the data of the first.')
    missing = np.setdiff1d(self._referenced.keys(), written,
                           assume_unique=True)
    if missing.size:
      raise CheckpointWriteError(
          f'Items reference chunk {missing[0]}{_more(missing.size)}, which '
          f'is not written: a server would fail to load the checkpoint.')

  def _table_record(self, state: _TableState,
                    counts: Optional[table_settings.TableCounts]) -> bytes:
    if counts is None:
      counts = table_settings.TableCounts(inserted=state.items)
    held = counts.inserted - counts.deleted
    if held != state.items:
      raise CheckpointWriteError(
          f"Table '{state.settings.name}': its counts say "
          f'{counts.inserted:,} inserted and {counts.deleted:,} deleted, so '
          f'{held:,} held; {state.items:,} items are written.')
    return table_settings.table_record(state.settings, counts)


def _write_mark(path: str, tables: Sequence[table_settings.TableSettings]
                ) -> None:
  """`BUILD_MARK`, first: the checkpoint is a build's, whole or not."""
  mark = {'writer': 'rlds_reverb', 'tables': [t.name for t in tables]}
  with open(os.path.join(path, directories.BUILD_MARK), 'x') as f:
    json.dump(mark, f)


class _KeySet:
  """uint64 keys, gathered in batches and merged now and then (sorted; with
  their repeats unless `unique`), so that memory stays ~8 bytes a key."""

  def __init__(self, unique: bool):
    self._unique = unique
    self._merged = np.empty(0, np.uint64)
    self._pending: List[np.ndarray] = []
    self._pending_size = 0

  def add(self, keys: np.ndarray) -> None:
    self._pending.append(np.sort(keys))
    self._pending_size += len(keys)
    if self._pending_size >= max(len(self._merged), 1 << 20):
      self._merge()

  def keys(self) -> np.ndarray:
    self._merge()
    return self._merged

  def _merge(self) -> None:
    if self._pending:
      keys = np.concatenate([self._merged] + self._pending)
      self._merged = np.unique(keys) if self._unique else np.sort(keys)
      self._pending, self._pending_size = [], 0


def _more(count: int) -> str:
  """' (and 3 more)' after the first of `count`; '' for one."""
  return f' (and {count - 1:,} more)' if count > 1 else ''


def chunk_records(chunks: messages_lib.Chunks
                  ) -> Iterator[Tuple[np.ndarray, int]]:
  """(buffer, records): the framed ChunkData records of `chunks`, a batch
  at a time (what `add_chunks` writes)."""
  batch = _chunks_per_batch(chunks)
  for start in range(0, len(chunks), batch):
    yield record_writer.framed(messages_lib.chunk_messages(
        _chunk_part(chunks, start, start + batch)))


def _chunks_per_batch(chunks: messages_lib.Chunks) -> int:
  """BATCH_CHUNKS, or fewer if their rows would pass BATCH_BYTES."""
  if not len(chunks):
    return 1
  row_bytes = sum(values[:1].nbytes if values.dtype != object else 64
                  for values in chunks.tensors)
  chunk_bytes = max(1, int(np.mean(chunks.lengths)) * row_bytes)
  return max(1, min(BATCH_CHUNKS, BATCH_BYTES // chunk_bytes))


def _chunk_part(chunks: messages_lib.Chunks, start: int, end: int
                ) -> messages_lib.Chunks:
  if start == 0 and end >= len(chunks):
    return chunks
  return dataclasses.replace(
      chunks, keys=chunks.keys[start:end], episodes=chunks.episodes[start:end],
      steps=chunks.steps[start:end], row_starts=chunks.row_starts[start:end],
      lengths=chunks.lengths[start:end])
