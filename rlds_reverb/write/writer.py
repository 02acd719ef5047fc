"""The Reverb writer fed per-episode numpy blocks, flushed in bounded batches.

Reverb's `append` and `create_item` never block and never report a lost
server; only `flush(timeout_ms=...)` does. So `SequenceWriter`:
  * flushes every F items, leaving pending only the items whose chunks are
    still open: never 50 unconfirmed items (Reverb's "alarmingly high"
    warning), memory bounded whatever the dataset's size, no chunk cut short;
  * confirms everything (flush to zero pending) at the latest every
    `CONFIRM_EVERY_ROWS` rows, at an episode end, and at `close`, so the
    episodes confirmed so far are known (`confirmed_episodes`);
  * counts, exactly, the items of the episode in progress (`Progress.
    partial_items`): Ctrl-C waits while a row's items are made and counted
    (`interrupts`), so a confirmation after it says which items of that
    episode are in the tables, and a resumed push continues after them
    (`write_episode(..., from_item=k)`);
  * turns a flush timeout into `ReverbTimeoutError` naming tables, address
    and what was confirmed, and closes the Reverb writer: left open, its
    destructor would wait without end (at interpreter exit too) for items a
    dead server or a blocking rate limiter never confirms;
  * checks each episode's rows against the table's columns before appending
    them (`columns`), and gives rows whose unknown dimensions differ from the
    first rows' a new Reverb writer, which would otherwise reject them.

Items of every kind go through it, into
Reverb's C++ trajectory writer with a constant chunk length per column
(`chunks`), one stream of rows across episodes, so that chunks fill up
whatever the episodes' lengths:

    rows    e0: 0 1 2 3 4 | e1: 0 1 2 | e2: 0 1 2 3 ...   (appended in order)
    chunks  [0 1 2 3] [4 0 1 2] [0 1 2 3] ...            (a column of length 4)
    items   [0 1] [1 2] [2 3] [3 4] | [0 1] [1 2] | ...  (never across episodes)

An item is sent once every chunk it references is full; confirming (every
`CONFIRM_EVERY_ROWS` rows, at an episode's end) finalizes the open chunks.
Whole-episode items (`items.EpisodeItems`) are one item per episode, made
at its last row, referencing all its rows.
"""

import collections
import dataclasses
import functools
import time
from typing import Any, Callable, List, Optional, Sequence

import numpy as np
import reverb
import tree

from rlds_reverb import push_options
from rlds_reverb._util import wording
from rlds_reverb.convert import encoded
from rlds_reverb.errors import ReverbTimeoutError
from rlds_reverb.errors import RldsReverbError
from rlds_reverb.specs import encoded as encoded_spec
from rlds_reverb.write import cadence
from rlds_reverb.write import chunks
from rlds_reverb.write import columns as columns_lib
from rlds_reverb.write import interrupts
from rlds_reverb.write import items as items_lib
from rlds_reverb.write import reverb_cpp
from rlds_reverb.write import rows as rows_lib
from rlds_reverb.write import server as server_lib

CONFIRM_EVERY_ROWS = cadence.CONFIRM_EVERY_ROWS
# The longest a wait for the server goes without looking at signals.
WAIT_SLICE_MS = 250


@dataclasses.dataclass
class Progress:
  """Counts of a push; `confirmed_*` are what the server has acknowledged.

  `episodes` counts whole episodes; `items` also counts `partial_items`, the
  items made so far of the episode in progress (at position `position`).
  A confirmation copies them: `confirmed_partial_items` of the
  `confirmed_items` belong to that episode, not to a whole one (only a
  confirmation forced mid-episode, after Ctrl-C, has any).
  """
  episodes: int = 0
  trajectories: int = 0
  items: int = 0
  confirmed_episodes: int = 0
  confirmed_items: int = 0
  partial_items: int = 0
  confirmed_partial_items: int = 0
  # The position (in the data) of the episode begun last.
  position: Optional[int] = None

  def confirmed_text(self) -> str:
    """'815 whole episodes (124,881 items) and 314 items of episode 815'."""
    return contents_text(self.confirmed_episodes, self.confirmed_items,
                         self.confirmed_partial_items, self.position)


def contents_text(episodes: int, items: int, partial_items: int = 0,
                  position: Optional[int] = None) -> str:
  """What a push put in the tables: whole episodes, and items of the next.

  `items` counts every item, `partial_items` those of the episode at
  `position`, which is not whole.
  """
  text = (f'{wording.count(episodes, "whole episode")} '
          f'({wording.count(items - partial_items, "item")})')
  if partial_items:
    of = 'the next episode' if position is None else f'episode {position}'
    text += f' and {wording.count(partial_items, "item")} of {of}'
  return text


class SequenceWriter:
  """Items of any plan, with chunks of our lengths; flushed and accounted.

  Into `target`'s tables, with the priority, chunk lengths and timeout of
  `options`; `item_plan` says which items (trajectories, n-step transitions,
  whole episodes), not `options`' sequence settings.

  For each row r of an episode that ends an item (`items.SequenceItems`,
  `TransitionItems`, `EpisodeItems`), one item per table of the last
  `item_length` rows (the last row alone, without a time axis, for squeezed
  plans). Rows stream across episodes into Reverb's C++ trajectory writer
  (`reverb_cpp`), made at the first rows, whose column i is chunked
  `chunk_lengths[i]` (`chunks`, chosen from those rows).
  """

  def __init__(self, target: server_lib.Target, spec_structure: Any,
               item_plan: items_lib.ItemPlan,
               options: push_options.PushOptions,
               on_confirmed: Optional[Callable[[Progress], None]] = None):
    self._columns = columns_lib.columns_of(spec_structure)
    # Per column: the image it stores encoded (`specs.encoded`), or None.
    self._images = [encoded_spec.image_of(spec)
                    for spec in tree.flatten(spec_structure)]
    self._tables = target.tables
    self._address = target.address
    self._timeout_s = options.timeout
    self._on_confirmed = on_confirmed
    self._client = target.client
    self._plan = item_plan
    self._priority = options.priority
    self._stride = item_plan.stride_length
    self._longest = chunks.max_chunk_length(len(self._tables), self._stride)
    chunks.check_option(options.chunk_length, self._columns, self._longest)
    self._chunk_length = options.chunk_length
    self._squeeze = [bool(item_plan.squeeze)] * len(self._columns)
    self._writer = None  # Made at the first rows.
    self._row_shapes = None  # Fixed by the Reverb writer's first rows.
    self.chunk_lengths: Optional[List[int]] = None  # Chosen with it.
    self._flush_every = None  # Items between flushes, for those lengths.
    self._rows_in_chunks = 0  # Rows appended since the chunks last started.
    self._failure = None  # The ReverbTimeoutError that ended this writer.
    self._unflushed_items = 0
    self._unconfirmed_rows = 0
    self._held = interrupts.HeldInterrupt()
    # The position of the first episode begun since the last confirmation.
    self._unconfirmed_from = None
    self.progress = Progress()
    if getattr(item_plan, 'end_of_episode', None) not in (
        None, items_lib.EndOfEpisode.DROP):
      columns_lib.check_rows(
          self._columns,
          rows_lib.pad_columns(columns_lib.empty_block(spec_structure), 1),
          'the pad row that ends padded episodes')

  def holding_interrupts(self) -> interrupts.HeldInterrupt:
    """A context in which Ctrl-C waits for the writer's next check: around a
    loop of `write_episode` calls, SIGINT's handler is installed once."""
    return self._held

  def write_episode(self, block, episode: Any = None, *,
                    from_item: int = 0) -> None:
    """Appends one episode's rows (a numpy nest, each leaf [T, ...]).

    `episode` (its position in the data) names it in errors and counts.
    `from_item` > 0 continues an episode whose first `from_item` items (per
    table) an earlier push confirmed: only the rows the others reference are
    appended, and only the others are made.
    """
    with self._held:
      columns = rows_lib.flat_columns(block)
      num_steps = len(columns[0])
      self._check_frames(columns, episode)
      plan = self._plan.plan(num_steps)
      columns = padded_rows(block, columns, plan.num_pad_rows, self._images)
      self._prepare(columns, episode)
      self.progress.position = None if episode is None else int(episode)
      if self._unconfirmed_from is None:
        self._unconfirmed_from = self.progress.position
      length = self._plan.item_length(num_steps)
      columns, item_ends = _rows_from(columns, plan.item_ends[from_item:],
                                      length)
      if len(item_ends):  # pylint: disable=g-explicit-length-test
        self._append_rows(columns, item_ends, length)
      self._episode_done(num_steps, len(columns[0]))

  def _check_frames(self, columns, episode) -> None:
    """Encoded frames whose headers do not fit the table: refused before
    any row of the episode is appended."""
    for column, image, rows in zip(self._columns, self._images, columns):
      if image is not None and rows.dtype == object:
        encoded.check_frames(column.path, image, rows, _place(episode))

  def confirm(self, timeout_s: Optional[float] = None) -> Progress:
    """Blocks until the server confirmed every item written so far.

    Ends Reverb's episode: the open chunks are finalized. `timeout_s`
    (default: the writer's) bounds the wait, e.g. after Ctrl-C. Confirmed
    mid-episode (after Ctrl-C), the writer takes no more rows of it.
    """
    with self._held:
      if self._writer is not None or self._failure is not None:
        self._wait(self._end_episode, timeout_s)
      self._unflushed_items = 0
      self._unconfirmed_rows = 0
      self._unconfirmed_from = None
      progress = self.progress
      progress.confirmed_episodes = progress.episodes
      progress.confirmed_items = progress.items
      progress.confirmed_partial_items = progress.partial_items
      if self._on_confirmed is not None:
        self._on_confirmed(dataclasses.replace(progress))
      return progress

  def close(self) -> Progress:
    """Confirms everything, then closes the Reverb writer (also on failure)."""
    try:
      return self.confirm()
    finally:
      self.stop()

  def stop(self) -> None:
    """Closes the Reverb writer now; what it holds unconfirmed is dropped.

    For every way a write ends: a Reverb writer that is not closed waits in
    its destructor, without end, for items it could not deliver.
    """
    writer, self._writer = self._writer, None
    if writer is None:
      return
    writer.close()
    progress = self.progress
    if self._failure is None and (
        progress.items, progress.episodes) != (progress.confirmed_items,
                                               progress.confirmed_episodes):
      # `confirm` must not claim them from now on.
      self._failure = RldsReverbError(
          f'The writer for {self._where()} was closed before the server '
          f'confirmed what it wrote. {self._confirmed_text()}')

  def _prepare(self, columns: Sequence[np.ndarray], episode: Any) -> None:
    """Checks rows before they are appended; a writer that takes them.

    A new shape in a dimension the spec leaves unknown would be rejected by
    the Reverb writer that saw other shapes: what it holds is confirmed, and
    a new one takes the rows.
    """
    if self._failure is not None:
      raise self._failure
    columns_lib.check_rows(self._columns, columns, _place(episode))
    row_shapes = columns_lib.shapes(columns)
    if self._writer is not None and row_shapes != self._row_shapes:
      self.close()
    if self._writer is None:
      self._writer = self._new_writer(columns)
    self._row_shapes = row_shapes

  def _new_writer(self, columns: Sequence[np.ndarray]):
    self.chunk_lengths = chunks.lengths(self._columns, columns,
                                        self._chunk_length, self._longest)
    self._flush_every = chunks.flush_every(
        max(self.chunk_lengths), len(self._tables), self._stride)
    self._rows_in_chunks = 0
    return reverb_cpp.ChunkedWriter(self._client, self.chunk_lengths,
                                    self._plan.max_item_length)

  def _append_rows(self, columns: Sequence[np.ndarray],
                   item_ends: np.ndarray, length: int) -> None:
    """Appends the rows; makes each item of `length` rows at its last row."""
    num_rows = len(columns[0])
    items_per_row = np.zeros(num_rows, np.int64)
    items_per_row[item_ends] = len(self._tables)
    made = np.cumsum(items_per_row)  # Items made by the end of each row.
    flush_after = self._flush_points(made).tolist()
    ends_item = (items_per_row > 0).tolist()
    append, create = self._writer.append, self._writer.create_item
    squeeze, priority = self._squeeze, self._priority
    window = collections.deque(maxlen=length)  # The last rows' references.
    rows = enumerate(zip(zip(*columns), ends_item, flush_after), start=1)
    held = self._held
    created = 0
    try:
      for rows_done, (row, ends, flush) in rows:
        window.append(append(row))
        if ends:
          item = list(zip(*window))
          for table in self._tables:
            create(table, priority, item, squeeze)
            created += 1
        if flush:  # Counted first: a timeout says how many are unconfirmed.
          self._count_items(created)
          created = 0
          self._flush_closed_chunks(rows_done)
        if held.pending and rows_done < num_rows:  # The last: episode done.
          self._count_items(created)
          created = 0
          held.check()
    finally:  # Counted as made: what `confirm` then says is confirmed.
      self._count_items(created)
    self._rows_in_chunks += num_rows

  def _count_items(self, made: int) -> None:
    self.progress.items += made
    self.progress.partial_items += made

  def _flush_points(self, made: np.ndarray) -> np.ndarray:
    """Rows after which to flush, given the items made by each row's end."""
    flush_after, self._unflushed_items = cadence.flush_points(
        self._unflushed_items, made, self._flush_every)
    return flush_after

  def _flush_closed_chunks(self, rows_this_episode: int) -> None:
    """Flushes the items whose chunks are all full; keeps the others pending.

    Flushing an item that references an open chunk would cut that chunk
    short. Open chunks hold the last `open_rows` rows; the items ending there
    are at most tables * ceil(open_rows / stride).
    """
    keep = int(cadence.kept_items(self._rows_in_chunks + rows_this_episode,
                                  self.chunk_lengths, len(self._tables),
                                  self._stride))
    self._wait(functools.partial(self._writer.flush, keep))

  def _episode_done(self, num_trajectories: int, num_rows: int) -> None:
    self.progress.episodes += 1
    self.progress.trajectories += num_trajectories
    self.progress.partial_items = 0
    self._unconfirmed_rows += num_rows
    if cadence.confirms(self._unconfirmed_rows):
      self.confirm()

  def _end_episode(self, timeout_ms: int) -> None:
    """Finalizes the open chunks, waits for every item."""
    self._writer.end_episode(timeout_ms=timeout_ms)
    self._rows_in_chunks = 0

  def _wait(self, blocking_call, timeout_s: Optional[float] = None) -> None:
    """`blocking_call(timeout_ms=...)`; a timeout closes and ends this writer.

    It waits in slices of `WAIT_SLICE_MS`: Python runs signal handlers only
    between them, so Ctrl-C stops a push that waits for a blocked server at
    once, not after the whole timeout.
    """
    if self._failure is not None:
      raise self._failure
    timeout_s = self._timeout_s if timeout_s is None else timeout_s
    deadline = time.monotonic() + timeout_s
    while True:
      left_ms = max(1, int((deadline - time.monotonic()) * 1000))
      try:
        blocking_call(timeout_ms=min(left_ms, WAIT_SLICE_MS))
        return
      except reverb.errors.DeadlineExceededError as e:
        if left_ms > WAIT_SLICE_MS:
          self._held.check_while_waiting()
          continue
        self.stop()
        self._failure = ReverbTimeoutError(self._timeout_text(timeout_s))
        raise self._failure from e

  def _timeout_text(self, timeout_s: float) -> str:
    return (f'Reverb server at {self._address} did not confirm items for '
            f'{self._where(with_address=False)} within {timeout_s:g} s: the '
            f'server is down or unreachable, or a rate limiter there blocks '
            f'inserts. {self._confirmed_text()}')

  def _where(self, with_address: bool = True) -> str:
    names = ', '.join(repr(t) for t in self._tables)
    where = f'{wording.noun(len(self._tables), "table")} {names}'
    return f'{where} at {self._address}' if with_address else where

  def _confirmed_text(self) -> str:
    """What was confirmed, and what may or may not be in the tables."""
    progress = self.progress
    text = f'Confirmed before: {progress.confirmed_text()}.'
    unconfirmed = progress.items - progress.confirmed_items
    if unconfirmed:
      text += (
          f' The {wording.count(unconfirmed, "item")} written after those'
          f'{self._unconfirmed_episodes_text()} '
          f'{wording.noun(unconfirmed, "was", "were")} not confirmed and may '
          f'or may not be in the '
          f'{wording.noun(len(self._tables), "table")}: the writer was '
          f'closed, and the server may still insert those it had received.')
    return text

  def _unconfirmed_episodes_text(self) -> str:
    """' (of episode 815)', ' (of episodes 815 to 820)', or ''."""
    first, last = self._unconfirmed_from, self.progress.position
    if first is None or last is None:
      return ''
    if first == last:
      return f' (of episode {first})'
    return f' (of episodes {first} to {last})'


def padded_rows(block, columns: Sequence[np.ndarray], num_pad_rows: int,
                images) -> List[np.ndarray]:
  """An episode's rows (`columns`, flat, of `block`) and `num_pad_rows` pad
  rows after them (`rows.pad_columns`); `images`: per column, the image it
  stores encoded, or None. The checkpoint plan pads as a push does."""
  if not num_pad_rows:
    return list(columns)
  pad = _with_blank_frames(rows_lib.pad_columns(block, num_pad_rows),
                           columns, images)
  return [np.concatenate([c, p]) for c, p in zip(columns, pad)]


def _with_blank_frames(pad, columns, images):
  """Pad rows of encoded columns hold the encoded frame of zeros (of the
  episode's frame size where the spec leaves it unknown)."""
  pad = list(pad)
  for i, image in enumerate(images):
    if image is None or not len(columns[i]):  # pylint: disable=g-explicit-length-test
      continue
    shape = tuple(image.frame.shape.as_list())
    if None in shape:
      height, width, _ = encoded.frame_shape(bytes(columns[i].ravel()[0]))
      shape = (height, width, image.channels)
    pad[i] = np.full(pad[i].shape,
                     encoded.blank_frame(image.format, shape), object)
  return pad


def _rows_from(columns: Sequence[np.ndarray], item_ends: np.ndarray,
               length: int):
  """The rows from the first that the items ending at `item_ends` reference,
  and those ends counted from there; all rows if the ends start the plan."""
  if not len(item_ends):  # pylint: disable=g-explicit-length-test
    return columns, item_ends
  first = max(int(item_ends[0]) - length + 1, 0)
  return [column[first:] for column in columns], item_ends - first


def _place(episode: Any) -> str:
  return 'an episode' if episode is None else f'episode {int(episode)}'
