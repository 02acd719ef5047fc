"""Mixed replay: every batch part offline (RLDS) data, part online data.

Offline-to-online RL keeps the logged data in play after the agent starts
collecting: RLPD (Ball et al., 2023) samples each batch half from the offline
data and half from the online data; TorchRL's `OfflineToOnlineReplayBuffer`
anneals the offline share toward 0. TF-Agents samples one table at a time.

    offline table (RLDS data, nothing evicts it)     online table (FIFO)
            | as_dataset(B).unbatch()                     | as_dataset(B).unbatch()
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
"""

import functools
import math
import numbers
from typing import Callable, List, Tuple, Union

import reverb
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer

from rlds_reverb import _reading as reading
from rlds_reverb import decoded
from rlds_reverb import tables
from rlds_reverb._util import wording
from rlds_reverb.errors import MixedReplayError
from rlds_reverb.specs import encoded as encoded_spec
from rlds_reverb.specs import paths
from rlds_reverb.write import server as server_lib

ReplayLike = Union[reverb_replay_buffer.ReverbReplayBuffer, Tuple[str, str]]
Schedule = Callable[[int], float]

DEFAULT_TIMEOUT_S = 30.0
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
    timeout: seconds to wait for the server when given `(address, table)`,
      and for an item of such a table if it removes sampled items (the
      dataset then fails, naming the table: `reading.ReplayBuffer`).

  Raises:
    MixedReplayError: a fraction outside [0, 1] (also from a schedule, at
      its first step here and as `tf.errors.InvalidArgumentError` with the
      same text while iterating), a batch size below 1, a replay that is
      neither a buffer nor `(address, table)`, an unsigned table, tables
      whose data specs differ, an offline table that removes sampled items.
    AddressError, ServerUnavailableError, TableNotFoundError: for
      `(address, table)`.
  """
  schedule = as_schedule(offline_fraction)
  if not isinstance(sample_batch_size, int) or sample_batch_size < 1:
    raise MixedReplayError(
        f'sample_batch_size must be a positive int, got {sample_batch_size!r}.')
  offline_count(schedule, start_step, sample_batch_size)  # Fails early.
  offline, online = as_buffers(offline, online, num_steps, timeout)
  check_keeps_items(offline, 'offline')
  items = [buffer.as_dataset(sample_batch_size=sample_batch_size,
                             num_steps=num_steps,
                             num_parallel_calls=num_parallel_calls).unbatch()
           for buffer in (offline, online)]
  choices = batch_choices(schedule, start_step, sample_batch_size)
  return tf.data.Dataset.choose_from_datasets(items, choices).batch(
      sample_batch_size, drop_remainder=True)


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


def batch_choices(schedule: Schedule, start_step: int,
                  batch_size: int) -> tf.data.Dataset:
  """0 (offline) or 1 (online) per row: each batch's n zeros, then ones."""
  counts = functools.partial(offline_counts, schedule, start_step, batch_size)
  return tf.data.Dataset.from_generator(
      counts, output_signature=tf.TensorSpec((), tf.int64)).map(
          functools.partial(row_choices, batch_size=batch_size)).unbatch()


def offline_counts(schedule: Schedule, start_step: int, batch_size: int):
  """n for batch 0, 1, 2, ...: the schedule at start_step, start_step + 1, ..."""
  step = start_step
  while True:
    yield offline_count(schedule, step, batch_size)
    step += 1


def row_choices(count: tf.Tensor, batch_size: int) -> tf.Tensor:
  """int64[batch_size]: 0 for the first `count` rows, 1 after."""
  return tf.cast(tf.range(batch_size, dtype=tf.int64) >= count, tf.int64)


def as_buffers(offline: ReplayLike, online: ReplayLike, num_steps: int,
               timeout: float):
  """Both as `ReverbReplayBuffer`s with one data spec, checked to agree."""
  replays = {'offline': offline, 'online': online}
  for name, replay in replays.items():
    if not (is_buffer(replay) or is_address_and_table(replay)):
      raise MixedReplayError(
          f'{name} must be a ReverbReplayBuffer or (address, table), got '
          f'{type(replay).__name__} {replay!r}.')
  infos = {name: table_info(replay, timeout)
           for name, replay in replays.items() if not is_buffer(replay)}
  given = [replay for replay in replays.values() if is_buffer(replay)]
  data_spec = (given[0].data_spec if given
               else encoded_spec.decoded_spec(
                   unbatched(infos['offline'].signature)))
  if len(given) == 2:
    check_same_spec(offline.data_spec, online.data_spec, 'online data spec')
  for name, info in infos.items():
    check_same_spec(data_spec,
                    encoded_spec.decoded_spec(unbatched(info.signature)),
                    f'{name} table {info.name!r} signature')
  return [replay if is_buffer(replay)
          else buffer_for(replay, infos[name], num_steps, timeout)
          for name, replay in replays.items()]


def is_buffer(replay) -> bool:
  return isinstance(replay, reverb_replay_buffer.ReverbReplayBuffer)


def is_address_and_table(replay) -> bool:
  return (isinstance(replay, tuple) and len(replay) == 2
          and all(isinstance(part, str) for part in replay))


def table_info(replay: Tuple[str, str], timeout: float):
  """The table's `TableInfo`; it must exist and carry a signature."""
  address, table = replay
  client, _ = server_lib.connect(address)
  info = server_lib.table_infos(client, address, [table], timeout)[table]
  if info.signature is None:
    raise MixedReplayError(
        f'Table {table!r} at {address} has no signature, so its data spec is '
        f'unknown; pass a ReverbReplayBuffer for it instead.')
  return info


def unbatched(signature):
  """A table signature's item spec without its leading time dimension."""
  return tf.nest.map_structure(
      lambda spec: tf.TensorSpec(spec.shape[1:], spec.dtype, spec.name),
      signature)


def buffer_for(replay: Tuple[str, str], info, num_steps: int,
               timeout: float):
  """A buffer of the table; one that decodes if it holds encoded images.
  Both read a table that removes sampled items without stranding them and
  wait `timeout` seconds for its items (`reading.ReplayBuffer`)."""
  address, table = replay
  stored_spec = unbatched(info.signature)
  if encoded_spec.is_encoded(stored_spec):
    return decoded.EncodedReplayBuffer(
        stored_spec, table, sequence_length=num_steps, server_address=address,
        timeout=timeout)
  return reading.ReplayBuffer(
      stored_spec, table, sequence_length=num_steps, server_address=address,
      timeout=timeout, info=info)


def check_same_spec(expected, actual,
                    what: str = 'online data spec') -> None:
  """Same structure, and the same dtype and shape at every field."""
  try:
    tf.nest.assert_same_structure(expected, actual, check_types=False)
  except (TypeError, ValueError) as e:
    raise MixedReplayError(
        f'The {what} has another structure than the offline data spec: '
        f'{paths.nest_text(actual)} vs {paths.nest_text(expected)}.') from e
  actual = tf.nest.pack_sequence_as(expected, tf.nest.flatten(actual))
  differing = [
      f'{path}: {paths.spec_text(a)} vs {paths.spec_text(e)}'
      for path, e, a in paths.spec_differences(
          expected, actual, paths.same_dtype_and_shape)]
  if differing:
    raise MixedReplayError(
        f'The {what} differs from the offline data spec: '
        + '; '.join(differing) + '.')


def check_keeps_items(buffer, name: str) -> None:
  """Sampling must not remove items, or the RLDS data drains away."""
  info = buffer.get_table_info()
  if info.max_times_sampled > 0:
    raise MixedReplayError(
        f'The {name} table {info.name!r} removes an item after '
        f'{wording.count(info.max_times_sampled, "sample")}, so mixed replay '
        f'would drain the RLDS data; use max_times_sampled=0 (mixed_replay_tables does).')
