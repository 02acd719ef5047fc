"""Reverb writers fed per-episode numpy blocks, flushed in bounded batches.

Reverb's `append` and `create_item` never block and never report a lost
server; only `flush(timeout_ms=...)` does. So every writer here:
  * flushes every F items (about half of `MAX_PENDING_ITEMS`), leaving at
    most F pending: never 50 unconfirmed items (Reverb's "alarmingly high"
    warning), memory bounded whatever the dataset's size;
  * confirms everything (flush to zero pending) at the latest every
    `CONFIRM_EVERY_ROWS` rows, at an episode end, and at `close`, so the
    episodes confirmed so far are known (`confirmed_episodes`);
  * turns a flush timeout into `ReverbTimeoutError` naming tables, address
    and what was confirmed;
  * checks each episode's rows against the table's columns before appending
    them (`columns`), and gives rows whose unknown dimensions differ from the
    first rows' a new Reverb writer, which would otherwise reject them.
"""

import dataclasses
import functools
from typing import Any, Callable, Optional, Sequence, Union

import numpy as np
import reverb
from reverb import structured_writer as structured
import tree

from rlds_reverb.errors import ReverbTimeoutError
from rlds_reverb.write import columns as columns_lib
from rlds_reverb.write import items as items_lib
from rlds_reverb.write import rows as rows_lib

# Reverb warns from 50 unconfirmed items on; a flush leaves at most this many.
MAX_PENDING_ITEMS = 49
CONFIRM_EVERY_ROWS = 4096

# Writers given up after a timeout. Reverb's structured writer has no close,
# and its destructor waits, without end, for the items it could not deliver;
# kept here, it is not destroyed (also not at exit) and nothing hangs. Each
# holds at most MAX_PENDING_ITEMS items, which still reach the table if the
# server recovers or the rate limiter lets them in; a writer that has
# delivered them all is released at the next writer's start.
_ABANDONED = []


@dataclasses.dataclass
class Progress:
  """Counts of a push; `confirmed_*` are what the server has acknowledged."""
  episodes: int = 0
  trajectories: int = 0
  items: int = 0
  confirmed_episodes: int = 0
  confirmed_items: int = 0


def release_delivered_writers() -> int:
  """Drops abandoned writers that have delivered every item; how many remain.

  A writer with nothing left to deliver is destroyed without waiting.
  """
  _ABANDONED[:] = [w for w in _ABANDONED if not _delivered_all(w)]
  return len(_ABANDONED)


def _delivered_all(writer) -> bool:
  """Whether the server has confirmed every item `writer` created; 1 ms.

  A writer that fails otherwise is kept: its destructor may wait as well.
  """
  try:
    writer.flush(0, timeout_ms=1)
  except (reverb.errors.ReverbError, RuntimeError):
    return False
  return True


class _Writer:
  """Shared checks, flushing and accounting.

  Subclasses give `_new_writer()` (a Reverb writer), append rows and make
  items.
  """

  def __init__(self, tables: Sequence[str], spec_structure: Any, address: str,
               timeout_s: float,
               on_confirmed: Optional[Callable[[Progress], None]] = None):
    release_delivered_writers()
    self._columns = columns_lib.columns_of(spec_structure)
    self._row_shapes = None  # Fixed by the Reverb writer's first rows.
    self._writer = self._new_writer()
    self._tables = list(tables)
    self._address = address
    self._timeout_ms = max(1, int(timeout_s * 1000))
    self._timeout_s = timeout_s
    self._on_confirmed = on_confirmed
    # Between flushes at most F + len(tables) - 1 items are added to the at
    # most F left pending: 2F + len(tables) - 1 <= MAX_PENDING_ITEMS.
    self._flush_every = max(1, (MAX_PENDING_ITEMS - len(self._tables) + 1) // 2)
    self._failure = None  # The ReverbTimeoutError that ended this writer.
    self._unflushed_items = 0
    self._unconfirmed_rows = 0
    self.progress = Progress()

  def _new_writer(self):
    raise NotImplementedError

  def _check_rows(self, columns: Sequence[np.ndarray], episode: Any) -> None:
    """Checks rows before they are appended; a new writer for new shapes.

    A new shape in a dimension the spec leaves unknown would be rejected by
    the Reverb writer that saw other shapes: what it holds is confirmed, and
    a new one takes the rows.
    """
    columns_lib.check_rows(self._columns, columns, _place(episode))
    row_shapes = columns_lib.shapes(columns)
    if self._row_shapes is not None and row_shapes != self._row_shapes:
      self.confirm()
      self._release()
      self._writer = self._new_writer()
    self._row_shapes = row_shapes

  def _flush_points(self, items_per_row: np.ndarray) -> np.ndarray:
    """Rows after which to flush, given how many items each row creates."""
    if not len(items_per_row):  # pylint: disable=g-explicit-length-test
      return np.zeros(0, bool)
    totals = self._unflushed_items + np.cumsum(items_per_row)
    crossings = totals // self._flush_every
    self._unflushed_items = int(totals[-1] - crossings[-1] * self._flush_every)
    self.progress.items += int(items_per_row.sum())
    return np.diff(crossings, prepend=0) > 0

  def _flush_pending(self) -> None:
    self._flush(self._flush_every)

  def _episode_done(self, num_trajectories: int, num_rows: int) -> None:
    self.progress.episodes += 1
    self.progress.trajectories += num_trajectories
    self._unconfirmed_rows += num_rows
    if self._unconfirmed_rows >= CONFIRM_EVERY_ROWS:
      self.confirm()

  def confirm(self) -> Progress:
    """Blocks until the server confirmed every item written so far."""
    self._flush(0)
    self._unflushed_items = 0
    self._unconfirmed_rows = 0
    self.progress.confirmed_episodes = self.progress.episodes
    self.progress.confirmed_items = self.progress.items
    if self._on_confirmed is not None:
      self._on_confirmed(dataclasses.replace(self.progress))
    return self.progress

  def _flush(self, block_until_num_items: int) -> None:
    self._wait(functools.partial(self._writer.flush, block_until_num_items))

  def _wait(self, blocking_call) -> None:
    """`blocking_call(timeout_ms=...)`; a timeout ends this writer."""
    if self._failure is not None:
      raise self._failure
    try:
      blocking_call(timeout_ms=self._timeout_ms)
    except reverb.errors.DeadlineExceededError as e:
      tables = ', '.join(repr(t) for t in self._tables)
      self._failure = ReverbTimeoutError(
          f'Reverb server at {self._address} did not confirm items for table '
          f'{tables} within {self._timeout_s:g} s: the server is down or '
          f"unreachable, or the table's rate limiter blocks inserts. "
          f'Confirmed before: {self.progress.confirmed_episodes} episodes, '
          f'{self.progress.confirmed_items} items.')
      _ABANDONED.append(self._writer)
      self._writer = None
      raise self._failure from e

  def close(self) -> Progress:
    """Confirms everything, then releases the writer."""
    progress = self.confirm()
    self._release()
    return progress

  def _release(self) -> None:
    """The structured writer has no close; dropping it is enough."""
    self._writer = None


class SequenceWriter(_Writer):
  """Fixed-length items through Reverb's structured writer.

  An episode's rows (its trajectories, then the plan's pad rows) are appended,
  then the episode is ended, which resets Reverb's step index and waits for
  its items. One config per table makes the item of the last L rows (the last
  row alone, without a time axis, for squeezed plans) at every row r with
  r >= L - 1 and (r - (L - 1)) % S == 0: exactly the plan's item ends
  (`items.SequenceItems`). Conditions on the step index cost Reverb far less
  than one on a data column (measured: about 12,000 against 8,000 rows/s).
  """

  def __init__(self, client: reverb.Client, tables: Sequence[str],
               spec_structure: Any,
               item_plan: Union[items_lib.SequenceItems,
                                items_lib.TransitionItems],
               priority: float, address: str, timeout_s: float, **kwargs):
    step = list(range(len(tree.flatten(spec_structure))))
    length = item_plan.sequence_length
    if item_plan.squeeze:
      select = lambda column: column[-1]
    else:
      select = lambda column: column[-length:]
    pattern = structured.pattern_from_transform(
        step, lambda ref: tree.unflatten_as(
            spec_structure, [select(column) for column in ref]))
    conditions = [structured.Condition.step_index() >= length - 1]
    stride = getattr(item_plan, 'stride_length', 1)
    if stride > 1:
      conditions.append(
          structured.Condition.step_index() % stride == (length - 1) % stride)
    self._client = client
    self._configs = [structured.create_config(
        pattern, table, conditions,
        structured.constant_priority_fn(float(priority))) for table in tables]
    self._plan = item_plan
    super().__init__(tables, spec_structure, address, timeout_s, **kwargs)
    if getattr(item_plan, 'end_of_episode', None) not in (
        None, items_lib.EndOfEpisode.DROP):
      columns_lib.check_rows(
          self._columns,
          rows_lib.pad_columns(columns_lib.empty_block(spec_structure), 1),
          'the pad row that ends padded episodes')

  def _new_writer(self):
    return self._client.structured_writer(self._configs)

  def write_episode(self, block, episode: Any = None) -> None:
    """Appends one episode's rows (a numpy nest, each leaf [T, ...]).

    `episode` (its position in the data) names it in errors.
    """
    columns = rows_lib.flat_columns(block)
    num_steps = len(columns[0])
    plan = self._plan.plan(num_steps)
    if plan.num_pad_rows:
      pad = rows_lib.pad_columns(block, plan.num_pad_rows)
      columns = [np.concatenate([c, p]) for c, p in zip(columns, pad)]
    self._check_rows(columns, episode)
    items_per_row = np.zeros(num_steps + plan.num_pad_rows, np.int64)
    items_per_row[plan.item_ends] = len(self._tables)
    flush_after = self._flush_points(items_per_row).tolist()
    append = _flat_append(self._writer)
    for row, flush in zip(zip(*columns), flush_after):
      append(row)
      if flush:
        self._flush_pending()
    self._wait(self._writer.end_episode)
    self._unflushed_items = 0  # end_episode waited for every item.
    self._episode_done(num_steps, len(items_per_row))


def _place(episode: Any) -> str:
  return 'an episode' if episode is None else f'episode {int(episode)}'


def _flat_append(writer: structured.StructuredWriter):
  """The C++ writer's `Append` of flat rows, else the Python wrapper's.

  `StructuredWriter.append` flattens each row with `tree.flatten` and keeps
  its structure for error messages; our rows are flat already and their
  columns come from the checked spec. dm-reverb 0.14 keeps the pybind writer
  in `_writer`; any other version takes the public path.
  """
  raw = getattr(writer, '_writer', None)
  return getattr(raw, 'Append', None) or writer.append


class EpisodeWriter(_Writer):
  """Whole-episode items through Reverb's trajectory writer."""

  def __init__(self, client: reverb.Client, tables: Sequence[str],
               spec_structure: Any, item_plan: items_lib.EpisodeItems,
               priority: float, address: str, timeout_s: float, **kwargs):
    self._client = client
    self._keep_alive = item_plan.max_sequence_length + 1
    self._structure = spec_structure
    self._priority = float(priority)
    super().__init__(tables, spec_structure, address, timeout_s, **kwargs)

  def _new_writer(self):
    return self._client.trajectory_writer(
        num_keep_alive_refs=self._keep_alive, validate_items=False)

  def write_episode(self, block, episode: Any = None) -> None:
    columns = rows_lib.flat_columns(block)
    num_steps = len(columns[0])
    self._check_rows(columns, episode)
    for row in zip(*columns):
      self._writer.append(list(row))
    history = [column[-num_steps:] for column in self._writer.history]
    item = tree.unflatten_as(self._structure, history)
    for table in self._tables:
      self._writer.create_item(table, self._priority, item)
    if self._flush_points(np.array([len(self._tables)]))[0]:
      self._flush_pending()
    self._episode_done(num_steps, num_steps)

  def _release(self) -> None:
    self._writer.close()
    self._writer = None

