"""A table's items, read once as a stream, reduced to what export needs.

A chunk does not say which column it holds; the items that reference it do
(column c of an item lists the chunk slices of its c-th leaf). One pass over
`items.tfrecord` keeps, per (chunk, tensor) a table's items reference:

    column   which leaf of the trajectory it holds (the same in every item,
             else the items are not trajectories of one spec)
    time     the earliest `inserted_at` of the items that reference it: the
             order in which the data was written (Reverb's episode ids are
             random)

Memory: 24 bytes per distinct (chunk, tensor), in numpy arrays (a batch of
`_BATCH` rows, reduced, then merged); nothing per item. The items themselves are read again only
to count those a loss left out (`rows_of_items`).
"""

import dataclasses
from typing import Iterator, List, Tuple

from google.protobuf import message as message_lib
import numpy as np

from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import schema
from rlds_reverb.errors import CheckpointError
from rlds_reverb.errors import ExportError

_BATCH = 1 << 13
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

  Raises:
    ExportError: an item of another number of columns, a squeezed column
      (no time axis), or a chunk that two items use as different columns.
    CheckpointError: the file is cut short or damaged, or written by a
      Reverb older than 2021.
  """
  builder = _Builder(table, path)
  last_keys = [None] * num_columns
  last_time = -1
  for item in _items(path, table):
    time = item.inserted_at.seconds * 1_000_000_000 + item.inserted_at.nanos
    columns = item.flat_trajectory.columns
    if len(columns) != num_columns:
      raise ExportError(
          f"Item {item.key} of table '{table}' has {len(columns)} columns; "
          f'its signature has {num_columns} fields: the items are not '
          f'trajectories of the signature.')
    ordered = time >= last_time
    for column_index, column in enumerate(columns):
      if column.squeeze:
        raise ExportError(
            f"Item {item.key} of table '{table}' squeezes column "
            f'{column_index} (no time axis): its items are single steps, not '
            f'sequences of trajectories.')
      for chunk_slice in column.chunk_slices:
        key = (chunk_slice.chunk_key, chunk_slice.index)
        if ordered and key == last_keys[column_index]:
          continue  # Seen, at an earlier time: most items repeat their chunks.
        last_keys[column_index] = key
        builder.add(key, column_index, time)
    last_time = max(last_time, time)
    builder.count += 1
  return builder.result()


def _items(path: str, table: str) -> Iterator:
  """The items of `table`, parsed, in file order (that of `inserted_at`)."""
  parse = schema.classes()['PrioritizedItem'].FromString
  for record in records.read_records(path):
    try:
      item = parse(record)
    except message_lib.DecodeError as e:
      raise CheckpointError(
          f'{path} holds a record that is not an item ({e}): the file is '
          f'damaged.') from e
    if item.deprecated_sequence_range:
      raise CheckpointError(
          f'{path}: item {item.key} is in the format of Reverb checkpoints '
          f'before 2021, which this reader does not read; load it into a '
          f'server of dm-reverb 0.14 and checkpoint it again.')
    if item.table == table:
      yield item


def rows_of_items(path: str, table: str, column: int
                  ) -> Iterator[List[Tuple[int, int, int]]]:
  """Per item of `table`: the (chunk key, offset, length) slices of
  `column`, which give the rows the item covers."""
  for item in _items(path, table):
    yield [(s.chunk_key, s.offset, s.length)
           for s in item.flat_trajectory.columns[column].chunk_slices]


class _Builder:
  """Collects (chunk, tensor, column, time) and keeps one row per
  (chunk, tensor), checking that its column never changes.

  Rows go into a numpy batch of _BATCH; full batches are kept reduced, and
  merged with the rest once they hold as many rows as the merged arrays
  (each row is sorted O(log n) times; no Python object per row).
  """

  def __init__(self, table: str, path: str):
    self._table = table
    self._path = path
    self._batch = np.empty(_BATCH, _ENTRY)
    self._filled = 0
    self._reduced: List[np.ndarray] = []  # Full batches, reduced.
    self._reduced_rows = 0
    self._merged = np.empty(0, _ENTRY)
    self.count = 0

  def add(self, key: Tuple[int, int], column: int, time: int) -> None:
    self._batch[self._filled] = (key[0], key[1], column, time)
    self._filled += 1
    if self._filled == _BATCH:
      self._reduce_batch()

  def result(self) -> ChunkColumns:
    self._reduce_batch()
    self._merge()
    merged = self._merged
    return ChunkColumns(*(np.ascontiguousarray(merged[name])
                          for name in _ENTRY.names), items=self.count)

  def _reduce_batch(self) -> None:
    if not self._filled:
      return
    reduced = self._unique(self._batch[:self._filled])
    self._filled = 0
    self._reduced.append(reduced)
    self._reduced_rows += len(reduced)
    if self._reduced_rows >= len(self._merged):
      self._merge()

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
