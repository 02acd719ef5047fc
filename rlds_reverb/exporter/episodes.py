"""Rows of trajectories rebuilt from chunks, cut into episodes, in order.

    pieces: per (chunk, tensor) an item references: column, Reverb episode,
            steps [start, end], time of the first item        (`join`)
    per Reverb episode (random id; one writer can put many RLDS episodes in
    one, and TF-Agents' observer puts each in its own):
      runs     steps present in every column; the gaps between them are
               missing rows                                   (`ReverbEpisode`)
      windows  each column's rows of a window (WINDOW_BYTES of steps, at
               most WINDOW_STEPS), decoded chunk by chunk
      cut      FIRST ... LAST is an episode; LAST -> LAST alone is one of one
               step; a LAST after an episode's end is padding; anything else
               is a fragment missing its start or its end     (`_Cutter`)
    episodes of all Reverb episodes merged by time            (`in_order`)

Memory: the open Reverb episodes (those whose items were written at the
same time), each with one window, its decoded chunks and the episode being
cut; an episode is held whole until written. Never the whole checkpoint.

Order: an episode's time is that of the first item referencing the chunk
of its first step type, made non-decreasing within its Reverb episode.
Episodes written at the same time by several writers interleave to within
a chunk.
"""

import dataclasses
import functools
import heapq
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rlds_reverb._util import wording
from rlds_reverb.convert import step_types
from rlds_reverb.errors import CheckpointReadError
from rlds_reverb.exporter import items as items_lib
from rlds_reverb.exporter import report as report_lib
from rlds_reverb.exporter import store as store_lib
from rlds_reverb.specs import dtypes
from rlds_reverb.specs import paths

WINDOW_STEPS = 4096  # Most steps decoded at once per column,
WINDOW_BYTES = 8 << 20  # and about this many bytes of rows of all columns.
_STRING_BYTES = 64  # What a string is counted for, in a window.


@dataclasses.dataclass(frozen=True)
class Pieces:
  """Per (chunk, tensor), sorted by Reverb episode, column, first step."""
  episodes: np.ndarray  # uint64
  columns: np.ndarray  # int32
  starts: np.ndarray  # int64
  ends: np.ndarray  # int64 (inclusive)
  positions: np.ndarray  # Index in the chunk store.
  tensors: np.ndarray  # int32 tensor within the chunk.
  times: np.ndarray  # int64

  def __len__(self) -> int:
    return len(self.episodes)

  def part(self, begin: int, end: int) -> 'Pieces':
    return Pieces(*(getattr(self, f.name)[begin:end]
                    for f in dataclasses.fields(self)))


def join(chunk_columns: items_lib.ChunkColumns,
         store: store_lib.ChunkStore) -> Pieces:
  """The items' (chunk, tensor) columns with where each chunk's rows are."""
  positions = store.positions(chunk_columns.keys)
  index = store.index
  episodes, starts = index.episodes[positions], index.starts[positions]
  order = np.lexsort((starts, chunk_columns.columns, episodes))
  return Pieces(episodes[order], chunk_columns.columns[order], starts[order],
                index.ends[positions][order], positions[order],
                chunk_columns.tensors[order], chunk_columns.times[order])


@dataclasses.dataclass(frozen=True)
class Columns:
  """What the rows are: the row spec of each column, and where the step
  types are."""
  specs: Sequence[tf.TensorSpec]
  step_type: int
  next_step_type: int

  @functools.cached_property
  def row_kinds(self) -> List[Tuple[np.dtype, Tuple[Optional[int], ...]]]:
    """Per column: the numpy dtype and shape (None: any size) of a row."""
    return [(dtypes.numpy_dtype(spec.dtype), tuple(spec.shape.as_list()))
            for spec in self.specs]

  def window_steps(self) -> int:
    """Steps decoded at once: WINDOW_BYTES of rows, 1 to WINDOW_STEPS."""
    step_bytes = sum(_row_bytes(spec) for spec in self.specs)
    return int(min(WINDOW_STEPS, max(1, WINDOW_BYTES // max(step_bytes, 1))))


def _fits(shape: Tuple[int, ...], expected: Tuple[Optional[int], ...]) -> bool:
  return len(shape) == len(expected) and all(
      e is None or e == d for d, e in zip(shape, expected))


def _row_bytes(spec: tf.TensorSpec) -> int:
  """The bytes of one row of a column (strings counted as _STRING_BYTES)."""
  size = _STRING_BYTES if spec.dtype == tf.string else spec.dtype.size
  return int(np.prod([d or 1 for d in spec.shape.as_list()], dtype=np.int64)
             ) * size


class ReverbEpisode:
  """The rows of one Reverb episode id, column by column."""

  def __init__(self, episode_id: int, pieces: Pieces,
               store: store_lib.ChunkStore, columns: Columns):
    self.id = episode_id
    self._store = store
    self._columns = columns
    count = len(columns.specs)
    bounds = np.searchsorted(pieces.columns, np.arange(count + 1))
    self._pieces = [pieces.part(bounds[c], bounds[c + 1])
                    for c in range(count)]
    self._decoded = [(-1, None)] * count  # Per column: (piece, array).
    for column, part in enumerate(self._pieces):
      self._check_no_overlap(column, part)

  def runs(self) -> np.ndarray:
    """[[first, last], ...]: the steps present in every column, in order."""
    events = []
    for part in self._pieces:
      if not len(part):
        return np.empty((0, 2), np.int64)
      events.append(_merged(part.starts, part.ends))
    return _intersection(events)

  def rows(self, first: int, last: int) -> List[np.ndarray]:
    """Each column's rows first..last (all present)."""
    return [self._column_rows(column, first, last)
            for column in range(len(self._pieces))]

  def time_of(self, step: int) -> int:
    """When the first item referencing the step type at `step` was written."""
    part = self._pieces[self._columns.step_type]
    return int(part.times[np.searchsorted(part.ends, step)])

  def where(self, first: int, last: int) -> str:
    return f'steps {first}-{last} of Reverb episode {self.id}'

  def _column_rows(self, column: int, first: int, last: int) -> np.ndarray:
    part = self._pieces[column]
    piece = int(np.searchsorted(part.ends, first))
    start = int(part.starts[piece])
    if last <= part.ends[piece]:  # One chunk holds them all: no copy.
      return self._chunk(column, piece)[first - start:last - start + 1]
    pieces = []
    while piece < len(part) and part.starts[piece] <= last:
      start = int(part.starts[piece])
      values = self._chunk(column, piece)
      pieces.append(values[max(first - start, 0):last - start + 1])
      piece += 1
    return np.concatenate(pieces)

  def _chunk(self, column: int, piece: int) -> np.ndarray:
    """The decoded chunk of `piece`, kept while the next rows need it."""
    cached, values = self._decoded[column]
    if cached != piece:
      part = self._pieces[column]
      values = self._store.tensor(int(part.positions[piece]),
                                  int(part.tensors[piece]))
      self._check_chunk(column, piece, values)
      self._decoded[column] = (piece, values)
    return values

  def _check_chunk(self, column: int, piece: int, values: np.ndarray) -> None:
    part = self._pieces[column]
    steps = int(part.ends[piece] - part.starts[piece] + 1)
    dtype, shape = self._columns.row_kinds[column]
    if (values.dtype != dtype or len(values) != steps or
        not _fits(values.shape[1:], shape)):
      key = self._store.index.keys[part.positions[piece]]
      raise CheckpointReadError(
          f'{self._store.path}: chunk {key} holds '
          f'{paths.spec_text(values)}; column {column} of the signature is '
          f'{paths.dtype_shape_text(dtype, shape)} and its range says '
          f'{wording.count(steps, "step")}.')

  def _check_no_overlap(self, column: int, part: Pieces) -> None:
    overlap = np.flatnonzero(part.starts[1:] <= part.ends[:-1])
    if overlap.size:
      raise CheckpointReadError(
          f'{self._store.path}: two chunks of column {column} of Reverb '
          f'episode {self.id} hold step {part.starts[overlap[0] + 1]}.')


def _merged(starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
  """Sorted disjoint [start, end] ranges joined where they touch."""
  new = np.ones(len(starts), bool)
  new[1:] = starts[1:] > ends[:-1] + 1
  groups = np.flatnonzero(new)
  last = np.append(groups[1:], len(starts)) - 1
  return np.stack([starts[groups], ends[last]], axis=1)


def _intersection(ranges: List[np.ndarray]) -> np.ndarray:
  """The steps that every list of disjoint [start, end] ranges covers."""
  positions = np.concatenate([r[:, 0] for r in ranges] +
                             [r[:, 1] + 1 for r in ranges])
  deltas = np.concatenate([np.ones(sum(len(r) for r in ranges), np.int64),
                           -np.ones(sum(len(r) for r in ranges), np.int64)])
  order = np.lexsort((deltas, positions))  # Ends before starts at one step.
  positions, depth = positions[order], np.cumsum(deltas[order])
  full = np.flatnonzero(depth == len(ranges))
  return np.stack([positions[full], positions[full + 1] - 1], axis=1)


class _Cutter:
  """Cuts the rows of one run (consecutive steps) into episodes.

  Rows of a run, by step type (with the next step type):
    FIRST, or LAST -> LAST      starts an episode
    LAST                        ends it; after an end, a LAST is padding
    anything outside an episode a fragment missing its start
    a run ending inside one, or a FIRST inside one: missing its end
  """

  def __init__(self, episode: ReverbEpisode, columns: Columns,
               losses: report_lib.Losses):
    self._episode = episode
    self._columns = columns
    self._losses = losses
    self._window_steps = columns.window_steps()

  def episodes(self, first: int, last: int
               ) -> Iterator[Tuple[int, List[np.ndarray]]]:
    """(first step, column arrays) of each whole episode of the run."""
    self._open: Optional[int] = None  # First step of the open episode.
    self._held: List[List[np.ndarray]] = []  # Its rows of earlier windows.
    self._after_end = False  # The previous row ended an episode (or pad).
    self._orphans = False  # Inside a fragment missing its start.
    size = self._window_steps
    for window in range(first, last + 1, size):
      yield from self._window(window, min(window + size - 1, last))
    if self._open is not None:
      self._losses.missing_end(last - self._open + 1,
                               self._episode.where(self._open, last))

  def _window(self, first: int, last: int):
    rows = self._episode.rows(first, last)
    kinds = rows[self._columns.step_type]
    next_kinds = rows[self._columns.next_step_type]
    ends = kinds == step_types.LAST
    starts = (kinds == step_types.FIRST) | (ends & (
        next_kinds == step_types.LAST))
    position = 0
    for row in np.flatnonzero(starts | ends).tolist():
      self._outside(first + position, first + row - 1)
      if starts[row]:
        self._start(first + row)
      if ends[row]:
        ended = self._end(first + row, rows, first,
                          int(next_kinds[row]) == step_types.FIRST)
        if ended is not None:
          yield ended
      position = row + 1
    self._outside(first + position, last)
    if self._open is not None:
      begin = max(self._open - first, 0)
      self._held.append([column[begin:] for column in rows])

  def _outside(self, first: int, last: int) -> None:
    """Mid steps first..last, with no start or end among them."""
    if last < first or self._open is not None:
      return
    self._orphan_rows(first, last)

  def _orphan_rows(self, first: int, last: int) -> None:
    if self._orphans:
      self._losses.more_missing_start(last - first + 1)
    else:
      self._losses.missing_start(last - first + 1,
                                 self._episode.where(first, last))
      self._orphans = True
    self._after_end = False

  def _start(self, step: int) -> None:
    if self._open is not None:  # A new episode before this one's end.
      self._losses.missing_end(step - self._open,
                               self._episode.where(self._open, step - 1))
    self._open, self._held, self._orphans = step, [], False

  def _end(self, step: int, rows, window_first: int, to_first: bool):
    """The episode ending at `step` (first step, columns), or None."""
    if self._open is None:
      if self._after_end and to_first:
        self._losses.report.padding_rows += 1
      else:
        self._orphan_rows(step, step)
        self._orphans = False
        self._after_end = True
      return None
    begin = max(self._open - window_first, 0)
    end = step - window_first + 1
    parts = self._held + [[column[begin:end] for column in rows]]
    columns = [part[0] if len(parts) == 1 else np.concatenate(part)
               for part in zip(*parts)]
    first = self._open
    self._open, self._held, self._after_end = None, [], True
    return first, columns


def _episode_groups(pieces: Pieces) -> Tuple[np.ndarray, np.ndarray,
                                             np.ndarray]:
  """(begin, end, first time) of each Reverb episode's pieces, by time."""
  if not len(pieces):
    empty = np.empty(0, np.int64)
    return empty, empty, empty
  new = np.ones(len(pieces), bool)
  new[1:] = pieces.episodes[1:] != pieces.episodes[:-1]
  begins = np.flatnonzero(new)
  ends = np.append(begins[1:], len(pieces))
  times = np.minimum.reduceat(pieces.times, begins)
  order = np.lexsort((pieces.episodes[begins], times))
  return begins[order], ends[order], times[order]


def _episodes_of(episode: ReverbEpisode, columns: Columns,
                 losses: report_lib.Losses):
  """(time, first step, columns) of each episode of a Reverb episode."""
  runs = episode.runs()
  cutter = _Cutter(episode, columns, losses)
  if len(runs) and runs[0, 0] > 0:
    losses.before(int(runs[0, 0]), episode.where(0, int(runs[0, 0]) - 1))
  previous_end, last_time = None, -1
  for first, last in runs.tolist():
    if previous_end is not None:
      losses.gap(first - previous_end - 1,
                 episode.where(previous_end + 1, first - 1))
    previous_end = last
    for step, values in cutter.episodes(first, last):
      last_time = max(last_time, episode.time_of(step))
      yield last_time, step, (episode.id, step, values)


def in_order(pieces: Pieces, store: store_lib.ChunkStore, columns: Columns,
             losses: report_lib.Losses
             ) -> Iterator[Tuple[int, int, List[np.ndarray]]]:
  """(Reverb episode id, first step, column arrays) of every whole episode,
  in the order written.

  A Reverb episode is opened only when no episode already open can come
  before its first item's time: few are open at once (those written at the
  same time), however many the checkpoint holds.
  """
  begins, ends, times = _episode_groups(pieces)
  heap: list = []
  following = 0  # The next Reverb episode to open, by first time.
  serial = 0  # Breaks ties in the heap; keeps each stream's order.
  while following < len(begins) or heap:
    while following < len(begins) and (not heap or
                                       times[following] <= heap[0][0]):
      part = pieces.part(begins[following], ends[following])
      stream = _episodes_of(
          ReverbEpisode(int(part.episodes[0]), part, store, columns),
          columns, losses)
      serial = _push_next(heap, stream, following, serial)
      following += 1
    if heap:
      _, _, _, _, values, stream, rank = heapq.heappop(heap)
      yield values
      serial = _push_next(heap, stream, rank, serial)


def _push_next(heap, stream, rank: int, serial: int) -> int:
  """Puts `stream`'s next episode on the heap (if any); the next serial."""
  for time, step, values in stream:
    heapq.heappush(heap, (time, rank, step, serial, values, stream, rank))
    return serial + 1
  return serial
