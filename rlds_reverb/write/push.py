"""Writing RLDS data into Reverb tables, confirmed at the end: the write layer.

    rlds_data -> trajectory_blocks (one numpy block per episode, prefetched)
              -> SequenceWriter (Reverb's C++ trajectory writer)
              -> flushed in bounded batches, confirmed before returning

Before anything is written: the server answers within the timeout, every
table exists, and every signed table's signature equals the data's. The data
itself is read once, as it is written: the checks that read it ahead
(malformed, flagged and empty episodes, capacity, resume files) are the
checked push's (`rlds_reverb.checked_push`), which calls `write_trajectories`
(`write_transitions` for n-step transitions) with one `PushOptions` and
adds what it checked to what they return (`Written`).
"""

import dataclasses
import time
from typing import Any, Callable, Optional, Sequence, Tuple

from absl import logging
import tensorflow as tf
from tf_agents.replay_buffers import reverb_utils

from rlds_reverb import convert
from rlds_reverb import push_options
from rlds_reverb import specs
from rlds_reverb._util import pipelines
from rlds_reverb.convert import encoded
from rlds_reverb.convert import nstep
from rlds_reverb.errors import ReverbTimeoutError
from rlds_reverb.specs import fields
from rlds_reverb.write import capacity
from rlds_reverb.write import items as items_lib
from rlds_reverb.write import server as server_lib
from rlds_reverb.write import writer as writer_lib

DEFAULT_TIMEOUT_S = push_options.DEFAULT_TIMEOUT_S
# How long a push interrupted by Ctrl-C waits to confirm what it wrote.
INTERRUPTED_CONFIRM_S = 5.0

# TF-Agents' texts for an episode longer than `max_sequence_length`.
_EPISODE_TOO_LONG = (
    'The number of trajectories within the same episode '
    'exceeds `max_sequence_length`. Consider increasing the '
    '`max_sequence_length` or set `bypass_partial_episodes` to true '
    'to bypass the episodes with length more than '
    '`max_sequence_length`.')
_EPISODE_BYPASSED = (
    'The number of trajectories within the same episode exceeds '
    '`max_sequence_length`. This episode is bypassed and will NOT '
    'be written into the replay buffer. Consider increasing the '
    '`max_sequence_length`.')


@dataclasses.dataclass(frozen=True)
class Start:
  """Where a write begins in a push's data: for a push that continues one.

  `positions[i]` is the position in the whole data of the i-th episode
  written (None: i), for messages. The first episode's first `from_item`
  items per table are in the tables already (an interrupted push confirmed
  them): only its others are made, from the rows they reference.
  """
  positions: Optional[Sequence[int]] = None
  from_item: int = 0

  def position(self, index: int) -> int:
    return index if self.positions is None else self.positions[index]

  def from_item_of(self, index: int) -> int:
    return self.from_item if index == 0 else 0


@dataclasses.dataclass(frozen=True)
class Written:
  """What the write layer wrote; every item counted was confirmed."""
  episodes: int
  trajectories: int
  items: int
  seconds: float
  # Episodes longer than whole-episode items take, bypassed (TF-Agents'
  # `bypass_partial_episodes`), and their trajectories.
  bypassed_episodes: int = 0
  bypassed_trajectories: int = 0
  # Fields read otherwise than the data stores them (`StepFormat.notes`).
  notes: Tuple[str, ...] = ()


def write_trajectories(
    rlds_data: tf.data.Dataset,
    target: server_lib.Target,
    options: push_options.PushOptions,
    *,
    item_plan: Optional[items_lib.ItemPlan] = None,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
    encoding: Optional[encoded.Encoding] = None,
    on_confirmed: Optional[Callable[[writer_lib.Progress], None]] = None,
    start: Start = Start(),
) -> Written:
  """Writes `rlds_data` as trajectory items into `target`, reading it once.

  The items are those `ReverbAddTrajectoryObserver(sequence_length,
  stride_length, priority, pad/tile per end_of_episode)` would write (from
  `options`), without a TF-Agents observer; or those of `item_plan` (a
  TF-Agents observer's, `push_rlds_to_reverb`). `rlds_reverb.push`
  (`checked_push`) checks the data first, then calls this with `target`'s
  tables already asked and checked (`check_tables`; else they are checked
  here), `encoding`: the fields `rlds_data` holds encoded
  (`convert.encoded.prepare` made it), None for raw images, and `start`:
  where `rlds_data` begins in a push that continues (`Start`).

  Returns:
    `Written`, once the server has confirmed every item.

  Raises:
    ServerUnavailableError, TableNotFoundError, SignatureMismatchError: before
      writing anything.
    ReverbTimeoutError: the server stopped confirming (dead, or a blocking rate
      limiter); the message says how much was confirmed and that the items
      written after may or may not be in the tables, and a note names the
      tables' rate limiters that can block.
    tf.errors.InvalidArgumentError: malformed episodes, as in conversion.
  """
  if item_plan is None:
    item_plan = items_lib.SequenceItems.of(options)
  step_format = _named(specs.step_format(rlds_data, options.strict), encoding)
  spec = specs.trajectory_spec(step_format.spec, policy_info_fn)
  # Checks chunk_length before the server is asked.
  writer = writer_lib.SequenceWriter(target, spec, item_plan, options,
                                     on_confirmed)
  if target.infos is None:
    target = check_tables(target, specs.table_signature(spec),
                          options.timeout)
  blocks = convert.trajectory_blocks(rlds_data, policy_info_fn,
                                     options.strict)
  episode_items = (item_plan if isinstance(item_plan, items_lib.EpisodeItems)
                   else None)
  written = _write_blocks(blocks, _trajectory_of, writer, target,
                          episode_items=episode_items, start=start)
  return dataclasses.replace(written, notes=tuple(step_format.notes()))


def write_transitions(
    rlds_data: tf.data.Dataset,
    target: server_lib.Target,
    options: push_options.PushOptions,
    *,
    n: int,
    discount: float,
    encoding: Optional[encoded.Encoding] = None,
    on_confirmed: Optional[Callable[[writer_lib.Progress], None]] = None,
) -> Written:
  """Writes one item per n-step transition (`convert.nstep`) into `target`,
  with the priority, chunk lengths and timeout of `options` (its item
  settings do not apply); `encoding` as for `write_trajectories`.
  `trajectories` in the result counts transitions. Raises as
  `write_trajectories`.
  """
  step_format = _named(specs.step_format(rlds_data, options.strict), encoding)
  spec = nstep.transition_spec(step_format.spec)
  # Checks chunk_length before the server is asked.
  writer = writer_lib.SequenceWriter(
      target, spec, items_lib.TransitionItems(), options, on_confirmed)
  if target.infos is None:
    target = check_tables(target, spec, options.timeout)
  blocks = nstep.nstep_transition_blocks(rlds_data, n, discount,
                                         options.strict)
  written = _write_blocks(blocks, _transitions_of, writer, target)
  return dataclasses.replace(written, notes=tuple(step_format.notes()))


def push_rlds_to_reverb(
    rlds_data: tf.data.Dataset,
    reverb_observer: Any,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
    *,
    strict: bool = False,
) -> int:
  """Pushes `rlds_data` through `reverb_observer`'s tables; TF-Agents' drop-in.

  For a `ReverbAddTrajectoryObserver` or `ReverbAddEpisodeObserver`, writes
  exactly the items that observer would, through Reverb's C++ writers and
  without calling it; returns once the server confirmed them all (TF-Agents'
  module returns with items still pending). Any other observer is called once
  per trajectory. `strict` as for `convert_rlds_to_trajectories`.

  Returns:
    The number of trajectories pushed.

  Raises:
    ValueError: with TF-Agents' texts, for missing `steps`, an invalid step
      spec, or a table signature that does not match (then with a note per
      differing field).
    tf.errors.InvalidArgumentError: malformed episodes, with their position.
  """
  item_plan = _observer_item_plan(reverb_observer)
  if item_plan is None:
    return _call_per_trajectory(rlds_data, reverb_observer, policy_info_fn,
                                strict)
  client = reverb_observer.py_client  # Its tables as the observer has them.
  target = server_lib.Target(client, client.server_address,
                             list(reverb_observer._table_names))  # pylint: disable=protected-access
  options = push_options.PushOptions(priority=reverb_observer._priority,  # pylint: disable=protected-access
                                     strict=strict)
  written = write_trajectories(rlds_data, target, options, item_plan=item_plan,
                               policy_info_fn=policy_info_fn)
  logging.info('Wrote %d trajectories to Reverb.', written.trajectories)
  return written.trajectories + written.bypassed_trajectories


def _observer_item_plan(observer: Any):
  """The items a TF-Agents observer writes; None for any other observer.

  Reads the observer's settings (tf-agents 0.19.0's attributes). Subclasses,
  such as `ReverbTrajectorySequenceObserver`, write differently: None.
  """
  # pylint: disable=protected-access
  if type(observer) is reverb_utils.ReverbAddTrajectoryObserver:  # pylint: disable=unidiomatic-typecheck
    return items_lib.SequenceItems(
        observer._sequence_length, observer._stride_length,
        items_lib.EndOfEpisode.from_observer_flags(
            observer._pad_end_of_episodes, observer._tile_end_of_episodes))
  if type(observer) is reverb_utils.ReverbAddEpisodeObserver:  # pylint: disable=unidiomatic-typecheck
    return items_lib.EpisodeItems(
        observer._max_sequence_length, observer._bypass_partial_episodes)
  return None
  # pylint: enable=protected-access


def _call_per_trajectory(rlds_data, observer, policy_info_fn, strict) -> int:
  """Any other observer: checked like TF-Agents does, then called per step."""
  step_spec = specs.steps_spec(rlds_data, strict)
  if hasattr(observer, 'get_table_signature'):
    specs.check_table_signature(
        observer.get_table_signature(),
        specs.trajectory_spec(step_spec, policy_info_fn))
  count = 0
  for entry in convert.convert_rlds_to_trajectories(rlds_data, policy_info_fn,
                                                    strict=strict):
    observer(entry)
    count += 1
  return count


def _named(step_format, encoding):
  """The step format whose spec says which fields are stored encoded."""
  return step_format if encoding is None else encoding.named(step_format)


def check_tables(target: server_lib.Target, item_spec: Any,
                 timeout: float = DEFAULT_TIMEOUT_S) -> server_lib.Target:
  """What a push checks before writing: the server answers, the tables are
  there, and each signed table's signature is `item_spec`.

  Returns:
    `target` with its tables' `TableInfo`s (for capacity checks,
    `capacity.warnings_for`).

  Raises:
    ServerUnavailableError, TableNotFoundError, SignatureMismatchError.
  """
  target = target.asked(timeout)
  for table, info in target.infos.items():
    specs.check_item_signature(info.signature, item_spec, table)
  return target


def _trajectory_of(block):
  return block.trajectory


def _transitions_of(block):
  return block.transitions


def append_trajectories(rlds_data: tf.data.Dataset,
                        writer: writer_lib.SequenceWriter,
                        positions: Sequence[int]) -> None:
  """Converts `rlds_data` and appends each episode's rows to `writer`.

  Nothing is confirmed here: the caller confirms (`writer.confirm()`) when it
  must know, at a Beam bundle's end. `positions[i]` is the position of the
  i-th episode of `rlds_data` in the whole dataset, for error messages.
  """
  blocks = convert.trajectory_blocks(rlds_data)
  with writer.holding_interrupts():
    for block in pipelines.numpy_of(blocks):
      writer.write_episode(block.trajectory, positions[block.episode_index])


def _write_blocks(blocks, rows_of_block, writer, target: server_lib.Target,
                  *, episode_items: Optional[items_lib.EpisodeItems] = None,
                  start: Start = Start()) -> Written:
  """Writes every block; on a failure, confirms what was written, says so."""
  started = time.perf_counter()
  skipped = skipped_trajectories = 0
  try:
    with writer.holding_interrupts():  # Ctrl-C lands where counts are exact.
      for block in pipelines.numpy_of(blocks):
        rows = rows_of_block(block)
        if episode_items is not None and not episode_items.fits(
            len(rows.step_type)):
          if not episode_items.bypass_partial_episodes:
            raise ValueError(_EPISODE_TOO_LONG)
          logging.error(_EPISODE_BYPASSED)
          skipped += 1
          skipped_trajectories += len(rows.step_type)
          continue
        index = int(block.episode_index)
        writer.write_episode(rows, start.position(index),
                             from_item=start.from_item_of(index))
      progress = writer.close()
  except ReverbTimeoutError as e:
    blocking = capacity.blocking_limiters(target.infos)
    if blocking:
      e.add_note(f'Rate limiters there that block inserts until something '
                 f'samples: {", ".join(blocking)}.')
    raise
  except (tf.errors.OpError, ValueError, KeyboardInterrupt) as e:
    _note_written(e, writer, target)
    raise
  finally:
    writer.stop()  # Ctrl-C too: an open Reverb writer can hang at exit.
  return Written(progress.episodes, progress.trajectories, progress.items,
                 time.perf_counter() - started, skipped, skipped_trajectories)


def _note_written(error: Exception, writer, target: server_lib.Target
                  ) -> None:
  """Confirms what was written before `error` and says so on it.

  Exactly: '815 whole episodes (124,881 items) and 314 items of episode
  815', when the interruption came inside an episode.
  """
  from rlds_reverb._util import wording  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  tables = target.tables
  where = (f'{wording.noun(len(tables), "table")} {", ".join(tables)} at '
           f'{target.address}')
  interrupted = isinstance(error, KeyboardInterrupt)
  before = 'the interruption' if interrupted else 'this error'
  try:  # Ctrl-C asks to stop: a blocked server is not waited for long.
    progress = writer.confirm(INTERRUPTED_CONFIRM_S if interrupted else None)
    error.add_note(f'Written and confirmed before {before}: '
                   f'{progress.confirmed_text()}, in {where}.')
  except Exception as flush_error:  # pylint: disable=broad-except
    progress = writer.progress
    written = writer_lib.contents_text(progress.episodes, progress.items,
                                       progress.partial_items,
                                       progress.position)
    error.add_note(f'Written before {before}: {written}, to {where}; '
                   f'confirming failed: {flush_error}')
