"""Mixed replay: every batch part offline (RLDS) data, part online data.

Offline-to-online RL keeps the logged data in play after the agent starts
collecting: RLPD (Ball et al., 2023) samples each batch half from the offline
data and half from the online data; TorchRL's `OfflineToOnlineReplayBuffer`
anneals the offline share toward 0. TF-Agents samples one table at a time.

    offline table (RLDS data, nothing evicts it)     online table (FIFO)
            | as_dataset(B), one ahead, unbatched          | the same
            v                                             v
        items ------------+                  +---------- items
                          v                  v
       batch k:  choose_from_datasets([offline, online], choices)
                 choices = n_k zeros, then B - n_k ones;
                 n_k = round(f(start_step + k) * B), half up
                          |
                          v  .batch(B)
       (Trajectory [B, num_steps, ...], SampleInfo [B, num_steps]):
       rows 0..n_k-1 offline, rows n_k..B-1 online, in every batch

Each batch holds exactly n_k offline items, not n_k on average: batch k takes
its B items in order from a choice list built for it. The schedule `f` is
called in Python once per batch with the batch's step, so any function works
(a lambda, a Keras `LearningRateSchedule`); with one batch per train step and
`start_step` the agent's train step, `f` sees the train step. Prefetching
does not shift it: the step is the batch's index, not the time it is drawn.

Tables of encoded images (`push(images='encoded')`) are read decoded
(`EncodedReplayBuffer`): an encoded offline table mixes with the raw online
table TF-Agents' observer writes, their decoded specs compared.

Reverb's uniform sampler is not seeded: which items a batch holds differs
between runs; how many come from each table does not.

This is the two-source case of `rlds_reverb.replay_mixture` (`mixture/`):
the same checks and pipeline, with weights [f, 1 - f] rounded per batch,
halves up (the mixture carries remainders from batch to batch instead), and
only the offline table bound to keep its items.
"""

import functools
import math
import numbers
from typing import Callable, List, Union

import reverb
import tensorflow as tf

from rlds_reverb import tables
from rlds_reverb.errors import MixedReplayError
from rlds_reverb.mixture import replay as mixture
from rlds_reverb.mixture import sources as sources_lib

ReplayLike = sources_lib.ReplayLike
Schedule = Callable[[int], float]

DEFAULT_TIMEOUT_S = mixture.DEFAULT_TIMEOUT_S
# Big enough never to evict RLDS data; Reverb allocates per item, not up front.
OFFLINE_MAX_SIZE = tables.UNBOUNDED_SIZE


def mixed_replay(offline: ReplayLike, online: ReplayLike,
                 offline_fraction: Union[float, Schedule],
                 sample_batch_size: int, num_steps: int = 2, *,
                 start_step: int = 0, num_parallel_calls=None,
                 timeout: float = DEFAULT_TIMEOUT_S) -> tf.data.Dataset:
  """Batches of `sample_batch_size` items, round(f * B) of them offline.

  Like `ReverbReplayBuffer.as_dataset(sample_batch_size, num_steps)`: the
  elements are `(Trajectory [B, num_steps, ...], SampleInfo [B, num_steps])`,
  ready for `agent.train`. Rows `0..n-1` of each batch come from `offline`,
  the rest from `online`.

  Args:
    offline: the table holding the RLDS data: a `ReverbReplayBuffer`, or
      `(address, table)` (the data spec then comes from the table signature,
      or from `online` if that is a buffer). Sampling must not remove its
      items (`max_times_sampled` 0), or the RLDS data would drain away.
    online: the table the agent's observer writes to, likewise.
    offline_fraction: a float in [0, 1], or a schedule `f(step) -> float` in
      [0, 1], called once per batch with `start_step + batch index`.
    sample_batch_size: B, the rows per batch.
    num_steps: steps per item; the tables' items must have this length (as
      `push(sequence_length=num_steps)` and TF-Agents' observers write them).
    start_step: the step the first batch is drawn for (e.g. the agent's
      train step when the mixed phase starts).
    num_parallel_calls: passed to each buffer's `as_dataset`.
    timeout: seconds a server may leave unanswered, and a table that
      batches take rows from may stay empty, before the dataset fails
      naming the server and the table (a watchdog asks the servers every
      0.5 s: `replay_mixture`'s `timeout`); also how long to wait for an
      item of a table given as `(address, table)` that removes sampled
      items (`reading.ReplayBuffer`).

  Raises:
    MixedReplayError: a fraction outside [0, 1] (also from a schedule, at
      its first step here and as `tf.errors.InvalidArgumentError` with the
      same text while iterating), a batch size below 1, a replay that is
      neither a buffer nor `(address, table)`, an unsigned table, tables
      whose data specs differ, an offline table that removes sampled items.
    AddressError, ServerUnavailableError, TableNotFoundError: for
      `(address, table)`.

  While iterating: `tf.errors.InvalidArgumentError` with one line of ours,
  as `replay_mixture`'s.
  """
  schedule = as_schedule(offline_fraction)
  if not isinstance(sample_batch_size, int) or sample_batch_size < 1:
    raise MixedReplayError(
        f'sample_batch_size must be a positive int, got {sample_batch_size!r}.')
  offline_count(schedule, start_step, sample_batch_size)  # Fails early.
  checked = sources_lib.as_sources([offline, online], ['offline', 'online'],
                                   num_steps, timeout)
  sources_lib.check_keeps_items(
      checked[0], 'mixed replay would drain the RLDS data; use '
      'max_times_sampled=0 (mixed_replay_tables does).')
  counts = functools.partial(batch_counts, schedule, start_step,
                             sample_batch_size)
  return mixture.mixture_dataset(checked, counts, sample_batch_size,
                                 num_steps, num_parallel_calls, timeout)


def mixed_replay_tables(signature, online_max_size: int, *,
                        offline: str = 'offline', online: str = 'online',
                        offline_max_size: int = OFFLINE_MAX_SIZE
                        ) -> List[reverb.Table]:
  """[offline table, online table] for `reverb.Server`: both sample uniformly.

  The offline table keeps what is pushed into it: sampling removes nothing and
  its `max_size` is large. The online table is FIFO: at `online_max_size`
  each new item evicts the oldest. (`tables.offline_online`'s options, built.)

  Raises:
    TableOptionsError: a size or name Reverb cannot take.
  """
  return [tables.table(options, signature)
          for options in tables.offline_online(
              online_max_size, offline=offline, online=online,
              offline_max_size=offline_max_size)]


def as_schedule(offline_fraction) -> Schedule:
  """A constant becomes a constant schedule; it is checked here."""
  if callable(offline_fraction):
    return offline_fraction
  if (isinstance(offline_fraction, bool)
      or not isinstance(offline_fraction, numbers.Real)):
    raise MixedReplayError(
        f'offline_fraction must be a number in [0, 1] or a schedule '
        f'f(step) -> fraction, got {type(offline_fraction).__name__} '
        f'{offline_fraction!r}.')
  fraction = float(offline_fraction)
  check_fraction(fraction, where='')
  return lambda step: fraction


def check_fraction(fraction: float, where: str) -> None:
  if not 0.0 <= fraction <= 1.0:  # NaN fails too.
    raise MixedReplayError(
        f'offline_fraction must be in [0, 1], got {fraction!r}{where}.')


def offline_count(schedule: Schedule, step: int, batch_size: int) -> int:
  """round(f(step) * B), halves rounded up: the offline rows of one batch."""
  value = schedule(step)
  try:
    fraction = float(value)
  except (TypeError, ValueError) as e:
    raise MixedReplayError(
        f'offline_fraction schedule returned {value!r} at step {step}; '
        f'expected a number in [0, 1].') from e
  check_fraction(fraction, where=f' from the schedule at step {step}')
  return math.floor(fraction * batch_size + 0.5)


def batch_counts(schedule: Schedule, start_step: int, batch_size: int):
  """([n, B - n], which table is due rows) for batch 0, 1, 2, ...: the
  schedule at start_step, start_step + 1, ..."""
  step = start_step
  while True:
    offline = offline_count(schedule, step, batch_size)
    counts = [offline, batch_size - offline]
    yield counts, [count > 0 for count in counts]
    step += 1
