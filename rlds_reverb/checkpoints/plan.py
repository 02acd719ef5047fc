"""The chunks and items a push writes, planned without a server: what a
`SequenceWriter` would leave in the tables, as `Chunks` and `Items` for a
`CheckpointWriter`.

    episodes (numpy blocks, as push's writer gets them)
      -> rows (pad rows too), item ends   `items` plans, `writer.padded_rows`
      -> segments: the rows between two confirmations (`cadence.confirms`,
         a new Reverb writer when row shapes change): one Reverb episode each
      -> chunks per column: every chunk_lengths[c] rows from a segment's
         start, cut where a flush would force it (`cadence.flush_points`,
         `kept_items`, Reverb's `Flush`), the last cut at the segment's end;
         only chunks some item references
      -> items: per row that ends one, one per table, its rows' chunk slices

Everything is numpy over a block of segments (about `BLOCK_ROWS` rows):
no Python per item or chunk. Reverb's `Flush(keep)` finalizes the open
chunk of every column that an item sent now references, the items sent
being all but the last `keep` made: the items referencing open chunks are
the newest, so a flush cuts only when more of them are pending than it
keeps (a stride longer than an item, across an episode's end).
"""

import dataclasses
import time
from typing import Any, Dict, List, Optional, Sequence

import numpy as np
import tree

from rlds_reverb import push_options
from rlds_reverb.checkpoints import messages
from rlds_reverb.checkpoints import writer as writer_lib
from rlds_reverb.specs import encoded as encoded_spec
from rlds_reverb.write import cadence
from rlds_reverb.write import chunks as chunks_lib
from rlds_reverb.write import columns as columns_lib
from rlds_reverb.write import items as items_lib
from rlds_reverb.write import rows as rows_lib
from rlds_reverb.write import writer as sequence_writer

# Rows planned at once (whole segments): numpy's calls amortized.
BLOCK_ROWS = 1 << 16


@dataclasses.dataclass(frozen=True)
class Planned:
  """A block of segments: per column its chunks; per table its items."""
  chunks: List[messages.Chunks]
  items: Dict[str, messages.Items]


@dataclasses.dataclass
class _Episode:
  columns: List[np.ndarray]  # Rows, pad rows too.
  ends: np.ndarray  # Rows ending an item, from the episode's first.
  length: int  # Rows per item.


class Plan:
  """Chunks and items of `item_plan`'s items of the episodes given, in
  `tables`, chunked as a push chunks them. Usage:

      plan = Plan(spec, items.SequenceItems(2), ['replay'])
      for block in blocks:
        for planned in plan.add(block):
          ...  # write planned.chunks, planned.items
      for planned in plan.close(): ...
  """

  def __init__(self, spec_structure: Any, item_plan, tables: Sequence[str],
               priority: float = 1.0,
               chunk_length: push_options.ChunkLength = None,
               keys: Optional[writer_lib.Keys] = None,
               start_ns: Optional[int] = None):
    self._columns = columns_lib.columns_of(spec_structure)
    self._images = [encoded_spec.image_of(spec)
                    for spec in tree.flatten(spec_structure)]
    self._spec = spec_structure
    self._tables = items_lib.table_names(tables)
    self._plan = item_plan
    self._priority = push_options.check_priority(priority)
    self._stride = item_plan.stride_length
    self._longest = chunks_lib.max_chunk_length(len(self._tables),
                                                self._stride)
    chunks_lib.check_option(chunk_length, self._columns, self._longest)
    self._chunk_length = chunk_length
    self._keys = keys or writer_lib.Keys()
    self._time = time.time_ns() if start_ns is None else start_ns
    self.chunk_lengths: Optional[List[int]] = None
    self._row_shapes = None
    self._segments: List[List[_Episode]] = [[]]  # The block's; last open.
    self._block_rows = 0
    self._unconfirmed_rows = 0
    self.episodes = 0
    self.items = 0  # Per table.

  def add(self, block, episode: Any = None) -> List[Planned]:
    """Plans one episode (a numpy nest of the spec's structure, or its
    leaves flattened, each [T, ...]); returns the blocks it completes
    (none, mostly). Flat leaves spare tf.data packing nests per episode.

    Raises:
      ColumnMismatchError: rows a push's writer would reject, naming the
        field and `episode` (its position in the data).
    """
    columns = rows_lib.flat_columns(block)
    where = 'an episode' if episode is None else f'episode {int(episode)}'
    columns_lib.check_rows(self._columns, columns, where)
    num_steps = len(columns[0])
    episode_plan = self._plan.plan(num_steps)
    if episode_plan.num_pad_rows:
      columns = sequence_writer.padded_rows(
          tree.unflatten_as(self._spec, columns), columns,
          episode_plan.num_pad_rows, self._images)
    done = []
    shapes = columns_lib.shapes(columns)
    if self._row_shapes is not None and shapes != self._row_shapes:
      done += self._end_segment(new_writer=True)
    if self.chunk_lengths is None or shapes != self._row_shapes:
      self.chunk_lengths = chunks_lib.lengths(
          self._columns, columns, self._chunk_length, self._longest)
    self._row_shapes = shapes
    if len(episode_plan.item_ends):
      self._segments[-1].append(_Episode(
          columns, episode_plan.item_ends, self._plan.item_length(num_steps)))
      self._block_rows += len(columns[0])
    self.episodes += 1
    self._unconfirmed_rows += len(columns[0])
    if cadence.confirms(self._unconfirmed_rows):
      done += self._end_segment(new_writer=False)
    return done

  def close(self) -> List[Planned]:
    """The last block: what a push's final confirmation ends."""
    return self._end_segment(new_writer=True)

  def _end_segment(self, new_writer: bool) -> List[Planned]:
    self._unconfirmed_rows = 0
    if self._segments[-1]:
      self._segments.append([])
    if not (new_writer or self._block_rows >= BLOCK_ROWS):
      return []
    segments = [s for s in self._segments if s]
    self._segments, self._block_rows = [[]], 0
    if not segments:
      return []
    return [self._planned(segments)]

  def _planned(self, segments: List[List[_Episode]]) -> Planned:
    episodes = [e for segment in segments for e in segment]
    rows = [np.concatenate([e.columns[c] for e in episodes])
            for c in range(len(self._columns))]
    sizes = np.array([len(e.columns[0]) for e in episodes], np.int64)
    firsts = np.cumsum(sizes) - sizes
    segment_rows = np.array([sum(len(e.columns[0]) for e in s)
                             for s in segments], np.int64)
    segment_starts = np.cumsum(segment_rows) - segment_rows
    ends = np.concatenate([e.ends + f for e, f in zip(episodes, firsts)])
    starts = ends - np.repeat(
        np.array([e.length for e in episodes], np.int64) - 1,
        [len(e.ends) for e in episodes])
    cuts = self._forced_cuts(ends, segment_starts, segment_rows)
    layouts = _made_once(
        [(length, tuple(cuts[c])) for c, length in enumerate(
            self.chunk_lengths)],
        lambda key: _chunk_layout(key[0], segment_starts, segment_rows,
                                  key[1], starts, ends))
    keys = [self._keys.take(len(layout.starts)) for layout in layouts]
    episode_ids = self._keys.take(len(segments))
    chunks = []
    for values, layout, column_keys in zip(rows, layouts, keys):
      chunks.append(messages.Chunks(
          keys=column_keys, episodes=episode_ids[layout.segments],
          steps=layout.starts - segment_starts[layout.segments],
          row_starts=layout.starts, lengths=layout.lengths,
          tensors=(values,)))
    items = self._items(starts, ends, layouts, keys)
    return Planned(chunks, items)

  def _forced_cuts(self, ends, segment_starts, segment_rows
                   ) -> List[List[int]]:
    """Per column, the rows after which a flush cuts its open chunk short
    (mostly none)."""
    num_tables = len(self._tables)
    flush_every = chunks_lib.flush_every(max(self.chunk_lengths), num_tables,
                                         self._stride)
    lengths = np.array(self.chunk_lengths, np.int64)
    cuts = [[] for _ in lengths]
    made = np.zeros(int(segment_starts[-1] + segment_rows[-1]), np.int64)
    made[ends] = num_tables
    # Each segment's flushes, counted from its start (a confirmation).
    flushes = np.concatenate([
        start + np.flatnonzero(cadence.flush_points(
            0, np.cumsum(made[start:start + size]), flush_every)[0])
        for start, size in zip(segment_starts.tolist(),
                               segment_rows.tolist())])
    if not flushes.size:
      return cuts
    segment_of = np.searchsorted(segment_starts, flushes, side='right') - 1
    # Where each column's chunks started, as of each flush.
    phases = segment_starts[segment_of][:, None] + np.zeros(
        len(lengths), np.int64)
    done = (flushes + 1)[:, None]
    open_rows = (done - phases) % lengths
    keep = cadence.kept_items(done[:, 0] - phases[:, 0], lengths, num_tables,
                              self._stride)
    # Reverb's Flush(keep) finalizes the open chunks that pending items
    # other than the newest `keep` reference; pending items reference an
    # open chunk if they end at or after the oldest open chunk's first row.
    # A cut restarts that column's chunks after it: later flushes see it.
    while True:
      oldest_open = (done[:, 0] - open_rows.max(axis=1))
      pending = num_tables * (np.searchsorted(ends, flushes, side='right') -
                              np.searchsorted(ends, oldest_open))
      over = np.flatnonzero(pending > keep)
      if not over.size:
        return cuts
      at = int(over[0])
      forced = int(pending[at] - keep[at])  # The oldest pending items.
      first = int(np.searchsorted(ends, oldest_open[at]))
      newest_forced = ends[first + (forced - 1) // num_tables]
      open_starts = done[at] - open_rows[at]
      for column in np.flatnonzero(open_starts <= newest_forced):
        if open_rows[at, column]:
          cuts[column].append(int(flushes[at]))
          later = slice(at + 1, None)
          same = segment_of[later] == segment_of[at]
          phases[later][same, column] = flushes[at] + 1
      open_rows[at + 1:] = (done[at + 1:] - phases[at + 1:]) % lengths
      open_rows[:at + 1] = 0
      keep[:at + 1] = 0

  def _items(self, starts, ends, layouts: List['_ChunkLayout'],
             keys: List[np.ndarray]) -> Dict[str, messages.Items]:
    """Per table, the items ending at `ends` (rows `starts` to `ends`), of
    columns chunked as `layouts` say, chunk i of column c keyed keys[c][i].

    Columns of one layout (mostly all of them) take the same slices: those
    are found once per layout (`_slices`), then placed per column.
    """
    count, width = len(ends), len(layouts)
    slices = _made_once(layouts, lambda layout: _slices(layout, starts, ends))
    counts = np.column_stack([s.counts for s in slices])  # [items, columns]
    flat_counts = counts.ravel()
    slice_at = np.cumsum(flat_counts) - flat_counts  # Per (item, column).
    total = int(slice_at[-1] + flat_counts[-1]) if count else 0
    chunk_keys = np.empty(total, np.uint64)
    offsets = np.empty(total, np.int64)
    lengths = np.empty(total, np.int64)
    for column, (taken, column_keys) in enumerate(zip(slices, keys)):
      place = taken.within + slice_at[taken.item * width + column]
      chunk_keys[place] = column_keys[taken.chunk]
      offsets[place] = taken.offsets
      lengths[place] = taken.lengths
    num_tables = len(self._tables)
    item_keys = self._keys.take(count * num_tables).reshape(count, num_tables)
    times = self._time + np.arange(count * num_tables,
                                   dtype=np.int64).reshape(count, num_tables)
    self._time += count * num_tables
    self.items += count
    squeeze = np.full(width, bool(self._plan.squeeze))
    return {table: messages.Items(
        keys=item_keys[:, t], priorities=np.full(count, self._priority),
        times=times[:, t], num_columns=width, slice_counts=flat_counts,
        chunk_keys=chunk_keys, offsets=offsets, lengths=lengths,
        indexes=np.zeros(total, np.int64), squeeze=squeeze)
            for t, table in enumerate(self._tables)}


@dataclasses.dataclass(frozen=True, eq=False)  # Hashed by identity.
class _ChunkLayout:
  """The chunks of a column that items reference: first rows, lengths, and
  segments (Reverb episodes). Columns of one chunk length and the same
  forced cuts share one."""
  starts: np.ndarray
  lengths: np.ndarray
  segments: np.ndarray


def _made_once(keys: Sequence[Any], make) -> List[Any]:
  """[make(key) for key in keys], made once per distinct key: columns
  mostly share their chunk length, so their chunks and their slices."""
  made = {}
  for key in keys:
    if key not in made:
      made[key] = make(key)
  return [made[key] for key in keys]


def _chunk_layout(length, segment_starts, segment_rows, cuts, starts,
                  ends) -> _ChunkLayout:
  """The chunks (`length` rows, cut after `cuts`) that items reference."""
  total = segment_starts[-1] + segment_rows[-1]
  # Runs of chunks: from each segment's start and after each cut.
  run_starts = np.unique(np.concatenate(
      [segment_starts, np.array(cuts, np.int64) + 1]))
  run_starts = run_starts[run_starts < total]
  run_ends = np.append(run_starts[1:], total)
  counts = -(-(run_ends - run_starts) // length)
  run = np.repeat(np.arange(len(counts)), counts)
  within = np.arange(len(run)) - np.repeat(np.cumsum(counts) - counts,
                                           counts)
  chunk_starts = run_starts[run] + within * length
  chunk_ends = np.minimum(chunk_starts + length, run_ends[run])
  # Referenced: the item ending first at or after a chunk's first row
  # starts at or before its last row.
  first_item = np.searchsorted(ends, chunk_starts)
  used = first_item < len(ends)
  used[used] = starts[first_item[used]] < chunk_ends[used]
  chunk_starts, chunk_ends = chunk_starts[used], chunk_ends[used]
  segment = np.searchsorted(segment_starts, chunk_starts, side='right') - 1
  return _ChunkLayout(chunk_starts, chunk_ends - chunk_starts, segment)


@dataclasses.dataclass(frozen=True)
class _Slices:
  """The chunk slices of items in one chunk layout: per item its count; per
  slice (item by item) its item, place among the item's, chunk, first row
  in the chunk and rows."""
  counts: np.ndarray
  item: np.ndarray
  within: np.ndarray
  chunk: np.ndarray
  offsets: np.ndarray
  lengths: np.ndarray


def _slices(layout: _ChunkLayout, starts, ends) -> _Slices:
  """The slices of items of rows `starts` to `ends`: one each, mostly (a
  2-step item straddles chunks once per chunk length)."""
  first = np.searchsorted(layout.starts, starts, side='right') - 1
  last = np.searchsorted(layout.starts, ends, side='right') - 1
  counts = last - first + 1
  if not len(counts) or counts.max() == 1:
    item = np.arange(len(counts))
    within = np.zeros(len(counts), np.int64)
    chunk = first
  else:
    item = np.repeat(np.arange(len(counts)), counts)
    within = np.arange(len(item)) - np.repeat(np.cumsum(counts) - counts,
                                              counts)
    chunk = first[item] + within
  chunk_starts = layout.starts[chunk]
  begin = np.maximum(starts[item], chunk_starts)
  end = np.minimum(ends[item] + 1, chunk_starts + layout.lengths[chunk])
  return _Slices(counts, item, within, chunk, begin - chunk_starts,
                 end - begin)


def write(checkpoint: writer_lib.CheckpointWriter, planned: Planned) -> None:
  """Writes a planned block: its chunks, then each table's items."""
  for column in planned.chunks:
    checkpoint.add_chunks(column)
  for table, items in planned.items.items():
    checkpoint.add_items(table, items)

