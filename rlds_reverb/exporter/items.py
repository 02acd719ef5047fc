"""A table's items, read once as a stream, reduced to what export needs.

A chunk does not say which column it holds; the items that reference it do
(column c of an item lists the chunk slices of its c-th leaf). One pass over
`items.tfrecord` keeps, per (chunk, tensor) a table's items reference:

    column   which leaf of the trajectory it holds (the same in every item,
             else the items are not trajectories of one spec)
    time     the earliest `inserted_at` of the items that reference it: the
             order in which the data was written (Reverb's episode ids are
             random)

Items are read in batches, each field of every item of a batch at once
(`checkpoints.parse`). Memory: a batch, and 24 bytes per distinct (chunk,
tensor) in numpy arrays; nothing per item. The items are read again, the
same way, only to count those a loss left out (`slices`).
"""

import dataclasses
from typing import Iterator, List

import numpy as np

from rlds_reverb._util import wire
from rlds_reverb._util import wording
from rlds_reverb.checkpoints import parse
from rlds_reverb.checkpoints import records
from rlds_reverb.errors import CheckpointReadError
from rlds_reverb.errors import ExportError

# Field numbers (schema.FIELDS): PrioritizedItem, FlatTrajectory, Column,
# ChunkSlice.
_KEY, _TABLE, _DEPRECATED_RANGE, _INSERTED_AT, _FLAT_TRAJECTORY = 1, 2, 4, 7, 8
_COLUMNS = 1
_CHUNK_SLICES, _SQUEEZE = 1, 2
_CHUNK_KEY, _OFFSET, _LENGTH, _INDEX = 1, 2, 3, 4
# One (chunk, tensor) an item references, as `ChunkColumns`' arrays.
_ENTRY = np.dtype([('keys', np.uint64), ('tensors', np.int32),
                   ('columns', np.int32), ('times', np.int64)])


@dataclasses.dataclass(frozen=True)
class ChunkColumns:
  """Per (chunk, tensor) the table's items reference: sorted by key, index."""
  keys: np.ndarray  # uint64 chunk keys.
  tensors: np.ndarray  # int32 tensor index within the chunk.
  columns: np.ndarray  # int32 item column (leaf of the trajectory).
  times: np.ndarray  # int64 ns since the epoch: the first item's inserted_at.
  items: int  # The table's items in the checkpoint.


def index(path: str, table: str, num_columns: int) -> ChunkColumns:
  """The (chunk, tensor) -> column map of the items of `table` in `path`.

  Items are read a decompressed block at a time, their fields by numpy
  (`parse`): no Python work per item but its record's framing.

  Raises:
    ExportError: an item of another number of columns, a squeezed column
      (no time axis), or a chunk that two items use as different columns.
    CheckpointReadError: the file is cut short or damaged, or written by a
      Reverb older than 2021.
  """
  builder = _Builder(table, path)
  for data, starts, ends in records.read_record_batches(path):
    buffer = np.frombuffer(data + wire.PADDING, np.uint8)
    builder.add_batch(slices_of(buffer, starts, ends, table, num_columns,
                                path))
  return builder.result()


@dataclasses.dataclass(frozen=True)
class Slices:
  """The chunk slices of a batch's items of the table, one row each."""
  keys: np.ndarray  # uint64
  tensors: np.ndarray  # int32
  columns: np.ndarray  # int32
  times: np.ndarray  # int64
  owners: np.ndarray  # int64: which of the batch's items of the table.
  offsets: np.ndarray  # int64: first row in the chunk.
  lengths: np.ndarray  # int64: rows.
  items: int


def slices_of_batch(batch: List[bytes], table: str, num_columns: int,
                    path: str) -> Slices:
  """Every chunk slice of the items of `table` among `batch` (records)."""
  return slices_of(*wire.buffer_of(batch), table, num_columns, path)


def slices_of(buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray,
              table: str, num_columns: int, path: str) -> Slices:
  """Every chunk slice of the items of `table` among the records
  buffer[starts[i]:ends[i]] (`buffer` padded: `wire.PADDING`)."""
  count = len(starts)
  item_fields = parse.fields(buffer, starts, ends, path)
  keys = item_fields.first_value(count, _KEY)
  mine = _of_table(buffer, item_fields, count, table)
  old = item_fields.of(_DEPRECATED_RANGE)
  if mine[old.messages].any():
    raise CheckpointReadError(
        f'{path}: item {keys[old.messages[mine[old.messages]][0]]} is in the '
        f'format of Reverb checkpoints before 2021, which this reader does '
        f'not read; load it into a server of dm-reverb 0.14 and checkpoint '
        f'it again.')
  times = _times(buffer, item_fields, count, path)
  trajectories = item_fields.of(_FLAT_TRAJECTORY)
  trajectories = _kept(trajectories, mine[trajectories.messages])
  columns = _nested(buffer, trajectories, path).of(_COLUMNS)
  column_index = _ranks(columns)
  items = trajectories.messages  # Per trajectory: its item.
  counts = np.bincount(columns.messages, minlength=len(items))
  if (counts != num_columns).any():
    at = int(np.argmax(counts != num_columns))
    raise ExportError(
        f"Item {keys[items[at]]} of table '{table}' has "
        f'{wording.count(int(counts[at]), "column")}; its signature has '
        f'{wording.count(num_columns, "field")}: the items are not '
        f'trajectories of the signature.')
  column_fields = _nested(buffer, columns, path)
  squeezed = column_fields.of(_SQUEEZE)
  squeezed = _kept(squeezed, squeezed.values != 0)
  if len(squeezed):
    column = int(squeezed.messages[0])
    raise ExportError(
        f"Item {keys[items[columns.messages[column]]]} of table '{table}' "
        f'squeezes column {column_index[column]} (no time axis): its items '
        f'are single steps, not sequences of trajectories.')
  slices = column_fields.of(_CHUNK_SLICES)
  slice_fields = _nested(buffer, slices, path)
  owner = columns.messages[slices.messages]  # Per slice: its trajectory.
  count = len(slices)
  return Slices(
      keys=slice_fields.first_value(count, _CHUNK_KEY),
      tensors=slice_fields.first_value(count, _INDEX).astype(np.int32),
      columns=column_index[slices.messages].astype(np.int32),
      times=times[items[owner]], owners=owner,
      offsets=slice_fields.first_value(count, _OFFSET).astype(np.int64),
      lengths=slice_fields.first_value(count, _LENGTH).astype(np.int64),
      items=len(items))


def _of_table(buffer: np.ndarray, item_fields: parse.Fields, count: int,
              table: str) -> np.ndarray:
  """Per record: whether its item is of `table`."""
  name = np.frombuffer(table.encode(), np.uint8)
  tables = item_fields.of(_TABLE)
  same = tables.values == len(name)
  if len(name) and same.any():
    stored = buffer[tables.payloads[same][:, None] + np.arange(len(name))]
    same[same] = (stored == name).all(axis=1)
  mine = np.zeros(count, bool)
  mine[tables.messages[same]] = True
  return mine


def _times(buffer: np.ndarray, item_fields: parse.Fields, count: int,
           path: str) -> np.ndarray:
  """Per record: its item's `inserted_at`, in ns since the epoch."""
  stamps = item_fields.of(_INSERTED_AT)
  stamp_fields = _nested(buffer, stamps, path)
  seconds = stamp_fields.first_value(len(stamps), 1).view(np.int64)
  nanos = stamp_fields.first_value(len(stamps), 2).view(np.int64)
  times = np.zeros(count, np.int64)
  times[stamps.messages] = seconds * 1_000_000_000 + nanos
  return times


def _nested(buffer: np.ndarray, parents: parse.Fields, path: str
            ) -> parse.Fields:
  """The fields of the messages that are the payloads of `parents`."""
  return parse.fields(buffer, parents.payloads,
                     parents.payloads + parents.values.astype(np.int64), path)


def _kept(found: parse.Fields, keep: np.ndarray) -> parse.Fields:
  return parse.Fields(*(getattr(found, f.name)[keep]
                       for f in dataclasses.fields(found)))


def _ranks(found: parse.Fields) -> np.ndarray:
  """Per field: its place among the fields of its number in its message
  (the column's index among an item's columns)."""
  order = np.lexsort((found.rounds, found.messages))
  messages = found.messages[order]
  first = np.ones(len(order), bool)
  first[1:] = messages[1:] != messages[:-1]
  starts = np.flatnonzero(first)
  ranks = np.empty(len(order), np.int64)
  ranks[order] = np.arange(len(order)) - np.repeat(
      starts, np.diff(np.append(starts, len(order))))
  return ranks


def slices(path: str, table: str, num_columns: int) -> Iterator[Slices]:
  """The chunk slices of the items of `table`, a decompressed block at a
  time (the second pass, to count the items a loss left out)."""
  for data, starts, ends in records.read_record_batches(path):
    buffer = np.frombuffer(data + wire.PADDING, np.uint8)
    yield slices_of(buffer, starts, ends, table, num_columns, path)


class _Builder:
  """Collects (chunk, tensor, column, time) and keeps one row per
  (chunk, tensor), checking that its column never changes.

  Each batch is kept reduced, and merged with the rest once the batches
  hold as many rows as the merged arrays (each row is sorted O(log n)
  times; no Python object per row).
  """

  def __init__(self, table: str, path: str):
    self._table = table
    self._path = path
    self._reduced: List[np.ndarray] = []  # Full batches, reduced.
    self._reduced_rows = 0
    self._merged = np.empty(0, _ENTRY)
    self.count = 0

  def add_batch(self, slices: Slices) -> None:
    """The slices of a batch of items, reduced to one row per chunk."""
    rows = np.empty(len(slices.keys), _ENTRY)
    rows['keys'], rows['tensors'] = slices.keys, slices.tensors
    rows['columns'], rows['times'] = slices.columns, slices.times
    self.count += slices.items
    if len(rows):
      self._reduced.append(self._unique(rows))
      self._reduced_rows += len(self._reduced[-1])
      if self._reduced_rows >= len(self._merged):
        self._merge()

  def result(self) -> ChunkColumns:
    self._merge()
    merged = self._merged
    return ChunkColumns(*(np.ascontiguousarray(merged[name])
                          for name in _ENTRY.names), items=self.count)

  def _merge(self) -> None:
    if not self._reduced:
      return
    self._merged = self._unique(np.concatenate([self._merged] +
                                               self._reduced))
    self._reduced, self._reduced_rows = [], 0

  def _unique(self, rows: np.ndarray) -> np.ndarray:
    """One row per (key, tensor): the earliest time; columns must agree."""
    rows = rows[np.lexsort((rows['times'], rows['tensors'], rows['keys']))]
    keys, tensors, columns = rows['keys'], rows['tensors'], rows['columns']
    first = np.ones(len(rows), bool)
    first[1:] = (keys[1:] != keys[:-1]) | (tensors[1:] != tensors[:-1])
    group_column = columns[first][np.cumsum(first) - 1]
    wrong = np.flatnonzero(columns != group_column)
    if wrong.size:
      at = wrong[0]
      raise ExportError(
          f"Table '{self._table}': chunk {keys[at]} is column "
          f'{group_column[at]} in one item and column {columns[at]} in '
          f'another: the items are not trajectories of one spec.')
    return rows[first]
