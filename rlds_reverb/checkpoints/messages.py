"""A checkpoint's chunks and items, built as records many at once.

What a writer gives, and what each becomes (`reverb/cc/schema.proto`):

    Chunks   rows of one or more arrays, cut into runs of steps
      -> ChunkData  chunk_key, sequence_range {episode_id, start, end},
                    delta_encoded, data.tensors (one TensorProto per array:
                    `tensors.encode_rows`, snappy per chunk as Reverb's
                    writer compresses it), data_tensors_len,
                    data_uncompressed_size: the fields Reverb's chunker fills

    Items    one table's items in insertion order: per item a key, priority,
             time, and per column its chunk slices
      -> PrioritizedItem  key, table, priority, times_sampled, inserted_at,
                          flat_trajectory.columns[j] {chunk_slices
                          [{chunk_key, offset, length, index}], squeeze}

What dm-reverb 0.14.0 does with them (`tfrecord_checkpointer.cc`,
`chunk_store.cc`, `table.cc`): the loader parses every chunk and keeps it by
`chunk_key` (a key seen twice keeps the first chunk's data), without
decoding its tensors; an item then takes the chunks its slices name (a
missing one fails the load) and is inserted with its key, priority,
times_sampled and inserted_at as they are, in file order (a full table or a
key seen twice fails the load). `episode_id` counts the table's episodes;
`end - start + 1` is the chunk's row count; `data_tensors_len` its tensor
count; `data_uncompressed_size` is only reported. Tensors are decoded by the
client that samples them (snappy, then deltas): a slice past its chunk's rows
fails there, not at load.

Every field is an array over the batch (`serialize.Messages`), never an
object per item (a Python protobuf object per item cost ~21 us here; in
bulk an item's record costs ~1.5 us). What Reverb's loader would refuse or
mis-read is refused here first, naming the item or chunk
(`CheckpointWriteError`): a negative or NaN priority (the sampler's insert
fails and the server does not start), a squeezed column not one row long,
a slice of no rows.
"""

import dataclasses
from typing import Optional, Tuple

import numpy as np

from rlds_reverb.checkpoints import serialize
from rlds_reverb.checkpoints import tensors as tensors_lib
from rlds_reverb.errors import CheckpointWriteError

NANOS = 1_000_000_000
_MAX_INT32 = 2**31 - 1


@dataclasses.dataclass(frozen=True)
class Chunks:
  """Chunks cut from rows: chunk c holds rows [row_starts[c], row_starts[c] +
  lengths[c]) of every array of `tensors` (tensor i of the chunk is cut from
  tensors[i]), which are steps [steps[c], steps[c] + lengths[c]) of Reverb
  episode episodes[c]. A chunk's rows lie together in each array."""
  keys: np.ndarray  # uint64, unique.
  episodes: np.ndarray  # uint64 Reverb episode ids.
  steps: np.ndarray  # int: each chunk's first step in its episode.
  row_starts: np.ndarray  # int: each chunk's first row in `tensors`.
  lengths: np.ndarray  # int >= 1: rows (steps) in each chunk.
  tensors: Tuple[np.ndarray, ...]  # [rows, ...] each; strings as object.
  delta_encoded: bool = False

  def __len__(self) -> int:
    return len(self.keys)


@dataclasses.dataclass(frozen=True)
class Items:
  """One table's items, in the order the server is to insert them.

  Item i has `num_columns` columns; column j of item i (entry i *
  num_columns + j) is the next slice_counts[i * num_columns + j] chunk
  slices, in order: `chunk_keys`, `offsets`, `lengths`, `indexes` (which
  tensor of the chunk) are per slice.
  """
  keys: np.ndarray  # uint64, unique in the table.
  priorities: np.ndarray  # float64 >= 0.
  times: np.ndarray  # int64 inserted_at, ns since the epoch, non-decreasing.
  num_columns: int
  slice_counts: np.ndarray  # int >= 1, per (item, column).
  chunk_keys: np.ndarray  # uint64, per slice.
  offsets: np.ndarray  # int >= 0: the slice's first row in its chunk.
  lengths: np.ndarray  # int >= 1: its rows.
  indexes: np.ndarray  # int >= 0: which tensor of the chunk.
  squeeze: np.ndarray  # bool, per column or per (item, column).
  times_sampled: Optional[np.ndarray] = None  # int32, default 0.

  def __len__(self) -> int:
    return len(self.keys)


def item_part(items: Items, start: int, end: int,
              bounds: Optional[np.ndarray] = None) -> Items:
  """Items [start, end); bounds: where each (item, column)'s slices start
  (`np.cumsum` of slice_counts after a 0; computed when not given)."""
  if start == 0 and end >= len(items):
    return items
  if bounds is None:
    bounds = np.concatenate([[0], np.cumsum(items.slice_counts)])
  columns = items.num_columns
  counts = np.asarray(items.slice_counts)
  first, last = bounds[start * columns], bounds[min(end, len(items)) * columns]
  squeeze = np.asarray(items.squeeze)
  if squeeze.size != columns:
    squeeze = squeeze[start * columns:end * columns]
  return dataclasses.replace(
      items, keys=items.keys[start:end], priorities=items.priorities[start:end],
      times=items.times[start:end],
      slice_counts=counts[start * columns:end * columns],
      chunk_keys=items.chunk_keys[first:last],
      offsets=items.offsets[first:last],
      lengths=items.lengths[first:last], indexes=items.indexes[first:last],
      squeeze=squeeze,
      times_sampled=(None if items.times_sampled is None else
                     items.times_sampled[start:end]))


def chunk_messages(chunks: Chunks) -> serialize.Messages:
  """The ChunkData records of `chunks`.

  Raises:
    CheckpointWriteError: arrays of other lengths, a dtype Reverb cannot
      hold, rows outside the arrays, steps past int32.
  """
  count = len(chunks)
  _check_chunks(chunks)
  starts = np.asarray(chunks.row_starts, np.int64)
  lengths = np.asarray(chunks.lengths, np.int64)
  steps = np.asarray(chunks.steps, np.int64)
  contents, dtypes, dims, ranks = [], [], [], []
  uncompressed = np.zeros(count, np.int64)
  for values in chunks.tensors:
    content, data_bytes = _encoded(values, starts, lengths,
                                   chunks.delta_encoded)
    contents.append(content)
    uncompressed += data_bytes
    dtypes.append(tensors_lib.dtype_number(values))
    # Per chunk: [rows, *row shape].
    dims.append(np.column_stack(
        [lengths] + [np.full(count, size, np.int64) for size in
                     values.shape[1:]]))
    ranks.append(values.ndim)
  width = len(chunks.tensors)
  # Chunk-major: chunk c's tensors are entries c * width ... + width - 1.
  dim_sizes = np.concatenate([d.reshape(count, -1) for d in dims], axis=1)
  shapes = serialize.Messages(count * width).repeated(
      2, serialize.Messages(int(dim_sizes.size)).varint(1, dim_sizes.ravel()),
      np.tile(np.asarray(ranks, np.int64), count))
  tensor_messages = (
      serialize.Messages(count * width)
      .varint(1, np.tile(np.asarray(dtypes, np.int64), count))
      .message(2, shapes)
      .ragged_bytes(4, [content[c] for c in range(count)
                        for content in contents]))
  ranges = (serialize.Messages(count)
            .varint(1, chunks.episodes)
            .varint(2, steps)
            .varint(3, steps + lengths - 1))
  return (serialize.Messages(count)
          .varint(1, chunks.keys)
          .message(2, ranges)
          .varint(4, bool(chunks.delta_encoded))
          .message(5, serialize.Messages(count).repeated(
              1, tensor_messages, np.full(count, width, np.int64)))
          .varint(6, width)
          .varint(7, uncompressed))


def _encoded(values: np.ndarray, starts: np.ndarray, lengths: np.ndarray,
             delta_encoded: bool):
  """(tensor_content per chunk, data_uncompressed_size per chunk) of one
  tensor of every chunk."""
  if tensors_lib.dtype_number(values) != tensors_lib.STRING:
    return (tensors_lib.encode_rows(values, starts.tolist(), lengths.tolist(),
                                    delta_encoded),
            lengths * (values[:1].nbytes if len(values) else 0))
  return tensors_lib.string_rows(values, starts, lengths)


def _check_chunks(chunks: Chunks) -> None:
  count = len(chunks)
  for name in ('episodes', 'steps', 'row_starts', 'lengths'):
    if len(getattr(chunks, name)) != count:
      raise CheckpointWriteError(
          f'Chunks: {len(getattr(chunks, name))} {name} for {count} keys.')
  if not chunks.tensors:
    raise CheckpointWriteError('Chunks: no tensors (a chunk holds at least '
                               'one).')
  lengths = np.asarray(chunks.lengths, np.int64)
  starts = np.asarray(chunks.row_starts, np.int64)
  steps = np.asarray(chunks.steps, np.int64)
  if count and (lengths.min() < 1 or starts.min() < 0 or steps.min() < 0):
    at = int(np.argmax((lengths < 1) | (starts < 0) | (steps < 0)))
    raise CheckpointWriteError(
        f'Chunk {chunks.keys[at]}: {lengths[at]} rows from row {starts[at]}, '
        f'step {steps[at]}; a chunk holds at least one row, from row and step '
        f'0 on.')
  if count and (steps + lengths - 1).max() > _MAX_INT32:
    at = int(np.argmax(steps + lengths - 1))
    raise CheckpointWriteError(
        f'Chunk {chunks.keys[at]} ends at step {steps[at] + lengths[at] - 1} '
        f'of its episode; Reverb counts steps in int32.')
  for index, values in enumerate(chunks.tensors):
    if not isinstance(values, np.ndarray) or values.ndim < 1:
      raise CheckpointWriteError(
          f'Chunks: tensor {index} is not an array of rows.')
    if tensors_lib.dtype_number(values) == 0:
      raise CheckpointWriteError(
          f'Chunks: tensor {index} is {values.dtype}, which a Reverb chunk '
          f'cannot hold (TensorFlow dtypes: '
          f'{", ".join(sorted(d.name for d in tensors_lib.NUMBERS))}, '
          f'strings).')
    if count and (starts + lengths).max() > len(values):
      at = int(np.argmax(starts + lengths))
      raise CheckpointWriteError(
          f'Chunk {chunks.keys[at]}: rows {starts[at]} to '
          f'{starts[at] + lengths[at] - 1} of tensor {index}, which has '
          f'{len(values)}.')


def item_messages(table: str, items: Items) -> serialize.Messages:
  """The PrioritizedItem records of `items`, of table `table`.

  Raises:
    CheckpointWriteError: arrays of other lengths, a negative or NaN
      priority, times going back, a slice of no rows, a squeezed column
      that is not one row.
  """
  count = len(items)
  entries = count * items.num_columns
  check_items(table, items, entries)
  squeeze = np.broadcast_to(
      np.asarray(items.squeeze, bool).reshape(-1, items.num_columns),
      (count, items.num_columns)).ravel() if entries else np.zeros(0, bool)
  slices = (serialize.Messages(len(items.chunk_keys))
            .varint(1, items.chunk_keys)
            .varint(2, items.offsets)
            .varint(3, items.lengths)
            .varint(4, items.indexes))
  columns = (serialize.Messages(entries)
             .repeated(1, slices, items.slice_counts)
             .varint(2, squeeze))
  trajectories = serialize.Messages(count).repeated(
      1, columns, np.full(count, items.num_columns, np.int64))
  seconds, nanos = np.divmod(np.asarray(items.times, np.int64), NANOS)
  stamps = serialize.Messages(count).varint(1, seconds).varint(2, nanos)
  times_sampled = (0 if items.times_sampled is None else
                   np.asarray(items.times_sampled, np.int32))
  return (serialize.Messages(count)
          .varint(1, items.keys)
          .constant_bytes(2, table.encode())
          .double(5, items.priorities)
          .varint(6, times_sampled)
          .message(7, stamps)
          .message(8, trajectories))


def check_items(table: str, items: Items, entries: int) -> None:
  count = len(items)
  where = f"Table '{table}'"
  for name, expected in (('priorities', count), ('times', count),
                         ('slice_counts', entries)):
    if len(getattr(items, name)) != expected:
      raise CheckpointWriteError(
          f'{where}: {len(getattr(items, name))} {name} for {count} items of '
          f'{items.num_columns} columns.')
  if items.times_sampled is not None and len(items.times_sampled) != count:
    raise CheckpointWriteError(
        f'{where}: {len(items.times_sampled)} times_sampled for {count} '
        f'items.')
  slices = int(np.sum(items.slice_counts))
  for name in ('chunk_keys', 'offsets', 'lengths', 'indexes'):
    if len(getattr(items, name)) != slices:
      raise CheckpointWriteError(
          f'{where}: {len(getattr(items, name))} {name} for {slices} chunk '
          f'slices (the sum of slice_counts).')
  if not count:
    return
  priorities = np.asarray(items.priorities, np.float64)
  bad = ~(priorities >= 0)
  if bad.any():
    at = int(np.argmax(bad))
    raise CheckpointWriteError(
        f'{where}: item {items.keys[at]} has priority {priorities[at]}; '
        f'Reverb refuses negative and NaN priorities (the server would not '
        f'start).')
  times = np.asarray(items.times, np.int64)
  back = np.flatnonzero(np.diff(times) < 0)
  if back.size:
    at = int(back[0]) + 1
    raise CheckpointWriteError(
        f'{where}: item {items.keys[at]} is inserted at {times[at]} ns, '
        f'before the item ahead of it ({times[at - 1]} ns): items go in '
        f'insertion order, oldest first.')
  if items.num_columns < 1 or np.min(items.slice_counts) < 1:
    raise CheckpointWriteError(
        f'{where}: every item column needs at least one chunk slice.')
  offsets = np.asarray(items.offsets, np.int64)
  lengths = np.asarray(items.lengths, np.int64)
  indexes = np.asarray(items.indexes, np.int64)
  bad = (offsets < 0) | (lengths < 1) | (indexes < 0) | (
      offsets + lengths > _MAX_INT32)
  if bad.any():
    at = int(np.argmax(bad))
    raise CheckpointWriteError(
        f'{where}: a chunk slice of chunk {items.chunk_keys[at]} takes '
        f'{lengths[at]} rows from row {offsets[at]} of tensor {indexes[at]}; '
        f'a slice takes at least one row, from row 0 on, and ends before row '
        f'2^31.')
  squeezed = np.broadcast_to(
      np.asarray(items.squeeze, bool).reshape(-1, items.num_columns),
      (count, items.num_columns)).ravel()
  if squeezed.any():
    column_rows = np.add.reduceat(lengths, np.cumsum(items.slice_counts) -
                                  items.slice_counts)
    bad = squeezed & (column_rows != 1)
    if bad.any():
      at = int(np.argmax(bad))
      raise CheckpointWriteError(
          f'{where}: item {items.keys[at // items.num_columns]} squeezes '
          f'column {at % items.num_columns}, which holds {column_rows[at]} '
          f'rows; only a column of one row can be squeezed.')


def referenced_chunks(items: Items) -> np.ndarray:
  """The distinct chunk keys `items` reference, sorted.

  Consecutive items mostly reference the same chunk in a column: the keys
  are grouped by column (a stable sort of small integers, linear), repeats
  in a row dropped, and only the rest sorted.
  """
  count, columns = len(items), items.num_columns
  if not count:
    return np.empty(0, np.uint64)
  small = np.int16 if columns < 2**15 else np.int32  # int16: a radix sort.
  column = np.repeat(np.tile(np.arange(columns, dtype=small), count),
                     items.slice_counts)
  keys = np.asarray(items.chunk_keys, np.uint64)[
      np.argsort(column, kind='stable')]
  changes = np.ones(len(keys), bool)
  changes[1:] = keys[1:] != keys[:-1]
  return np.unique(keys[changes])
