"""rlds_reverb.mixed_replay against a real Reverb server and real buffers.

Offline items are RLDS episodes pushed with `rlds_reverb.push`; online items
come from TF-Agents' `ReverbAddTrajectoryObserver`, as in training. Every
observation's first value says where an item came from: positive (1, 2, ...)
offline, negative (-1, -2, ...) online, so each row of a sampled batch can be
traced to the step it was written from and compared with it.
"""

import dataclasses
import math
import threading
import time
from typing import List

import numpy as np
import pytest
import reverb
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.replay_buffers import reverb_utils
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import trajectory

import rlds_reverb
from rlds_reverb import tables
from tests import mixture_faults
from tests import reverb_tables
from tests import rlds_data

OFFLINE_LENGTHS = (5, 6, 7)  # 15 two-step items.
OFFLINE_ITEMS = sum(length - 1 for length in OFFLINE_LENGTHS)
ONLINE_STEPS = 11  # One episode: 10 two-step items through the observer ...
ONLINE_MAX_SIZE = 6  # ... of which the FIFO online table keeps the last 6.
OBSERVATION_SIZE = 3
NUM_STEPS = 2
BATCHES = 6


def offline_episodes():
  """RLDS episodes whose observations are [1, ...], [2, ...], ... in order."""
  episodes, first = [], 1
  for seed, length in enumerate(OFFLINE_LENGTHS):
    episode = rlds_data.flat_episode(length, seed,
                                     observation_size=OBSERVATION_SIZE)
    episode['observation'][:, 0] = np.arange(first, first + length)
    episodes.append(episode)
    first += length
  return episodes


def online_steps():
  """The online episode's steps: observations [-1, ...], [-2, ...], ..."""
  rng = np.random.default_rng(100)
  observation = rng.standard_normal(
      (ONLINE_STEPS, OBSERVATION_SIZE)).astype(np.float32)
  observation[:, 0] = -np.arange(1, ONLINE_STEPS + 1)
  return {'observation': observation,
          'action': rng.integers(0, 5, ONLINE_STEPS).astype(np.int64),
          'reward': rng.standard_normal(ONLINE_STEPS).astype(np.float32)}


def online_trajectories(steps):
  """One episode as the unbatched trajectories a driver gives an observer."""
  first, mid, last = 0, 1, 2
  types = [first] + [mid] * (ONLINE_STEPS - 2) + [last]
  for t in range(ONLINE_STEPS):
    yield trajectory.Trajectory(
        step_type=np.int32(types[t]),
        observation=steps['observation'][t], action=steps['action'][t],
        policy_info=(), next_step_type=np.int32(types[(t + 1) % ONLINE_STEPS]),
        reward=steps['reward'][t],
        discount=np.float32(0.0 if t == ONLINE_STEPS - 1 else 1.0))


def expected_items(episodes, online):
  """First observation value -> (observation, action, reward) of its item."""
  items = {}
  for e in episodes + [online]:
    for t in range(len(e['reward']) - 1):
      window = slice(t, t + NUM_STEPS)
      items[float(e['observation'][t, 0])] = tuple(
          np.asarray(e[name][window])
          for name in ('observation', 'action', 'reward'))
  return items


def unsigned_table(name, signature=None, **options):
  return tables.table(
      dataclasses.replace(tables.uniform(name, 100), **options), signature)


class Replay:
  """The server, its tables and what was written to them."""

  def __init__(self):
    episodes = offline_episodes()
    rlds = rlds_data.as_rlds(episodes)
    self.spec = rlds_reverb.create_trajectory_data_spec(rlds)
    signature = self.signature = tensor_spec.add_outer_dim(self.spec)
    wide = tensor_spec.add_outer_dim(self.spec._replace(
        observation=tf.TensorSpec([OBSERVATION_SIZE + 1], tf.float32)))
    self.server = reverb_tables.start_server(
        rlds_reverb.mixed_replay_tables(signature, ONLINE_MAX_SIZE) + [
            unsigned_table('unsigned'),
            unsigned_table('wide', signature=wide),
            unsigned_table('empty', signature=signature),
            unsigned_table('consumed', signature=signature,
                           max_times_sampled=1)])
    self.address = reverb_tables.address(self.server)
    self.client = reverb.Client(self.address)
    pushed = rlds_reverb.push(rlds, self.client, 'offline',
                              sequence_length=NUM_STEPS)
    assert pushed.items == OFFLINE_ITEMS
    online = online_steps()
    observer = reverb_utils.ReverbAddTrajectoryObserver(
        self.client, 'online', sequence_length=NUM_STEPS)
    for step in online_trajectories(online):
      observer(step)
    observer.close()  # Flushes and waits for every item.
    assert self.size('online') == ONLINE_MAX_SIZE
    self.expected = expected_items(episodes, online)

  def buffer(self, table: str):
    return reverb_replay_buffer.ReverbReplayBuffer(
        self.spec, table, sequence_length=NUM_STEPS, local_server=self.server)

  def size(self, table: str) -> int:
    return reverb_tables.table_size(self.client, table)


# Dropping a mixture's iterator waits until the segments in flight got their
# watchdog verdicts (~0.3 s: rlds_reverb/mixture/watchdog.py). The tests drop
# theirs in a thread of its own, so that the wait overlaps the next test; the
# module waits for every drop to end before it stops the server.
HANG_GUARD_S = 120  # Not a speed check: the drops ended at all.
_DROPS: List[threading.Thread] = []


def drop_later(held: list) -> None:
  """Drops the iterators `held` holds (their only references) in a thread."""
  thread = threading.Thread(target=held.clear, daemon=True,
                            name='dropping a mixture iterator')
  thread.start()
  _DROPS.append(thread)


def wait_for_drops() -> None:
  for thread in _DROPS:
    thread.join(HANG_GUARD_S)
  assert not any(thread.is_alive() for thread in _DROPS), (
      'dropping an iterator did not return')


@pytest.fixture(scope='module')
def replay():
  replay = Replay()
  yield replay
  wait_for_drops()
  replay.server.stop()


def batches(dataset, count=BATCHES):
  """The first `count` elements, as numpy; the iterator dropped in the
  background (`drop_later`)."""
  held = [iter(dataset)]
  got = [tf.nest.map_structure(np.asarray, next(held[0]))
         for _ in range(count)]
  drop_later(held)
  return got


def sources(experience):
  """'offline' / 'online' per row, from the sign of the first observation."""
  first = experience.observation[:, 0, 0]
  return ['offline' if value > 0 else 'online' for value in first]


def check_rows_were_written(replay, experience):
  """Every row equals the item written from its first step, field by field."""
  for row in range(experience.observation.shape[0]):
    key = float(experience.observation[row, 0, 0])
    assert key in replay.expected, f'row {row} was never written: {key}'
    observation, action, reward = replay.expected[key]
    np.testing.assert_array_equal(experience.observation[row], observation)
    np.testing.assert_array_equal(experience.action[row], action)
    np.testing.assert_array_equal(experience.reward[row], reward)


# (offline_fraction, batch size, offline rows per batch): round half up.
FRACTIONS = {
    'half': (0.5, 8, 4),
    'quarter': (0.25, 8, 2),
    'three_tenths': (0.3, 10, 3),
    'third_rounds_up': (1 / 3, 8, 3),
    'half_of_odd_rounds_up': (0.5, 5, 3),
    'small_rounds_to_none': (0.1, 4, 0),
    'online_only': (0.0, 8, 0),
    'offline_only': (1.0, 8, 8),
    'int_one': (1, 4, 4),
}


@pytest.mark.parametrize('fraction,batch_size,offline_rows',
                         FRACTIONS.values(), ids=FRACTIONS.keys())
def test_every_batch_holds_exactly_round_f_b_offline_rows_first(
    replay, fraction, batch_size, offline_rows):
  dataset = rlds_reverb.mixed_replay(
      replay.buffer('offline'), replay.buffer('online'), fraction, batch_size)
  got = batches(dataset)
  assert len(got) == BATCHES
  expected = (['offline'] * offline_rows
              + ['online'] * (batch_size - offline_rows))
  for experience, info in got:
    assert sources(experience) == expected
    assert experience.observation.shape == (
        batch_size, NUM_STEPS, OBSERVATION_SIZE)
    assert info.key.shape == (batch_size, NUM_STEPS)
    check_rows_were_written(replay, experience)


def test_element_structure_is_the_buffers_as_dataset(replay):
  """What `agent.train(experience)` gets from `as_dataset`, same specs."""
  offline = replay.buffer('offline')
  mixed = rlds_reverb.mixed_replay(offline, replay.buffer('online'), 0.5, 4)
  plain = offline.as_dataset(sample_batch_size=4, num_steps=NUM_STEPS)
  assert mixed.element_spec == plain.element_spec
  experience, _ = batches(mixed, 1)[0]
  assert isinstance(experience, trajectory.Trajectory)


def test_schedule_gives_each_batch_its_steps_fraction(replay):
  """f(step) = 1 - step / 4 with B = 8: 8, 6, 4, 2, 0 offline rows."""
  dataset = rlds_reverb.mixed_replay(
      replay.buffer('offline'), replay.buffer('online'),
      lambda step: max(0.0, 1.0 - step / 4), 8).prefetch(3)
  counts = [sources(experience).count('offline')
            for experience, _ in batches(dataset, 6)]
  assert counts == [8, 6, 4, 2, 0, 0]


def test_schedule_starts_at_start_step(replay):
  dataset = rlds_reverb.mixed_replay(
      replay.buffer('offline'), replay.buffer('online'),
      lambda step: max(0.0, 1.0 - step / 4), 8, start_step=2)
  counts = [sources(experience).count('offline')
            for experience, _ in batches(dataset, 3)]
  assert counts == [4, 2, 0]


def test_keras_schedule_is_a_schedule(replay):
  """A Keras decay, called with the step: 0.5 annealed to 0 over 4 steps."""
  decay = tf.keras.optimizers.schedules.PolynomialDecay(0.5, 4, 0.0)
  dataset = rlds_reverb.mixed_replay(
      replay.buffer('offline'), replay.buffer('online'), decay, 8)
  counts = [sources(experience).count('offline')
            for experience, _ in batches(dataset, 5)]
  assert counts == [4, 3, 2, 1, 0]


def test_both_tables_read_back_whole_and_the_offline_table_keeps_its_data(
    replay):
  """Many batches: every offline item, only the online items FIFO kept."""
  dataset = rlds_reverb.mixed_replay(
      replay.buffer('offline'), replay.buffer('online'), 0.5, 16)
  seen = {'offline': set(), 'online': set()}
  for experience, _ in batches(dataset, 40):
    check_rows_were_written(replay, experience)
    for source, key in zip(sources(experience),
                           experience.observation[:, 0, 0]):
      seen[source].add(float(key))
  offline_keys = {key for key in replay.expected if key > 0}
  assert seen['offline'] == offline_keys
  # The observer wrote items starting at -1 .. -10; the table keeps the
  # newest ONLINE_MAX_SIZE, the oldest were evicted.
  newest = set(-float(step) for step in range(
      ONLINE_STEPS - ONLINE_MAX_SIZE, ONLINE_STEPS))
  assert seen['online'] == newest
  assert replay.size('offline') == OFFLINE_ITEMS
  assert replay.size('online') == ONLINE_MAX_SIZE


@pytest.mark.parametrize('form', ['both_addresses', 'offline_address',
                                  'online_address'])
def test_address_and_table_works_like_a_buffer(replay, form):
  offline = ((replay.address, 'offline') if form != 'online_address'
             else replay.buffer('offline'))
  online = ((replay.address, 'online') if form != 'offline_address'
            else replay.buffer('online'))
  dataset = rlds_reverb.mixed_replay(offline, online, 0.75, 4)
  plain = replay.buffer('offline').as_dataset(sample_batch_size=4,
                                              num_steps=NUM_STEPS)
  assert (tf.nest.flatten(dataset.element_spec)
          == tf.nest.flatten(plain.element_spec))
  for experience, _ in batches(dataset, 3):
    assert sources(experience) == ['offline'] * 3 + ['online']
    check_rows_were_written(replay, experience)


def test_mixed_replay_tables_are_uniform_fifo_and_keep_sampled_items():
  tables = rlds_reverb.mixed_replay_tables(None, 10, offline='o', online='n')
  server = reverb_tables.start_server(tables)
  try:
    infos = reverb.Client(reverb_tables.address(server)).server_info()
  finally:
    server.stop()
  assert sorted(infos) == ['n', 'o']
  for name, max_size in (('o', 2**31 - 1), ('n', 10)):
    assert infos[name].sampler_options.uniform
    assert infos[name].remover_options.fifo
    assert infos[name].max_times_sampled == 0
    assert infos[name].max_size == max_size


# --- Errors: each raise, with its message. ----------------------------------

BAD_FRACTIONS = {
    'above_one': (1.5, 'offline_fraction must be in [0, 1], got 1.5.'),
    'negative': (-0.1, 'offline_fraction must be in [0, 1], got -0.1.'),
    'nan': (math.nan, 'offline_fraction must be in [0, 1], got nan.'),
    'string': ('0.5', "offline_fraction must be a number in [0, 1] or a "
               "schedule f(step) -> fraction, got str '0.5'."),
    'bool': (True, 'offline_fraction must be a number in [0, 1] or a '
             'schedule f(step) -> fraction, got bool True.'),
    'schedule_out_of_range': (
        lambda step: 2.0, 'offline_fraction must be in [0, 1], got 2.0 from '
        'the schedule at step 0.'),
    'schedule_not_a_number': (
        lambda step: 'x', "offline_fraction schedule returned 'x' at step 0; "
        'expected a number in [0, 1].'),
}


@pytest.mark.parametrize('fraction,message', BAD_FRACTIONS.values(),
                         ids=BAD_FRACTIONS.keys())
def test_bad_offline_fraction(replay, fraction, message):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.mixed_replay(replay.buffer('offline'),
                             replay.buffer('online'), fraction, 4)
  assert str(error.value) == message


def test_schedule_out_of_range_later_fails_that_batch(replay):
  dataset = rlds_reverb.mixed_replay(
      replay.buffer('offline'), replay.buffer('online'),
      lambda step: 0.5 * step, 4)
  iterator = iter(dataset)
  for _ in range(3):  # Steps 0, 1, 2: fractions 0, 0.5, 1.
    next(iterator)
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    next(iterator)
  assert mixture_faults.one_line(error.value) == (
      'offline_fraction must be in [0, 1], got 1.5 from the schedule at step '
      '3.')


@pytest.mark.parametrize('size', [0, -1, 2.0])
def test_bad_batch_size(replay, size):
  with pytest.raises(rlds_reverb.MixedReplayError,
                     match=f'sample_batch_size must be a positive int, got '
                           f'{size!r}.'):
    rlds_reverb.mixed_replay(replay.buffer('offline'),
                             replay.buffer('online'), 0.5, size)


def test_replay_that_is_neither_buffer_nor_address_and_table(replay):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.mixed_replay(replay.buffer('offline'), replay.address, 0.5, 4)
  assert str(error.value) == (
      f'online must be a ReverbReplayBuffer or (address, table), got str '
      f'{replay.address!r}.')


def test_unknown_table(replay):
  with pytest.raises(rlds_reverb.TableNotFoundError) as error:
    rlds_reverb.mixed_replay((replay.address, 'offlin'),
                             replay.buffer('online'), 0.5, 4)
  assert str(error.value) == (
      f"Reverb server at {replay.address} has no table 'offlin'; its tables "
      "are ['consumed', 'empty', 'offline', 'online', 'unsigned', 'wide'].")


def test_no_server_answers(silent_address):
  """Any timeout shows it, waited out in full: a short one (the address
  probe waits it out, then Reverb's server_info, in whole seconds, 1)."""
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match=f'No Reverb server answered at {silent_address} '
                           'within 0.5 s'):
    rlds_reverb.mixed_replay((silent_address, 'offline'),
                             (silent_address, 'online'), 0.5, 4, timeout=0.5)


def test_an_http1_server_is_not_reverb(http1_address, replay):
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match=f'^The server at {http1_address} did not answer as '
                           'a Reverb server: '):
    rlds_reverb.mixed_replay((http1_address, 'offline'),
                             replay.buffer('online'), 0.5, 4, timeout=3600)


def test_stopped_server_is_refused_at_once(make_server):
  server = make_server([reverb_tables.fifo_table('t')])
  address = reverb_tables.address(server)
  server.stop()
  start = time.monotonic()
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match=f'No Reverb server at {address}: the connection '
                           'was refused'):
    rlds_reverb.mixed_replay((address, 'offline'), (address, 'online'), 0.5,
                             4, timeout=3600)
  assert time.monotonic() - start < 60  # Not the hour of its timeout.


def test_malformed_address(replay):
  with pytest.raises(rlds_reverb.AddressError,
                     match="server address 'localhost' is not HOST:PORT: no "
                           'port'):
    rlds_reverb.mixed_replay(('localhost', 'offline'),
                             replay.buffer('online'), 0.5, 4)


def test_unsigned_table(replay):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.mixed_replay(replay.buffer('offline'),
                             (replay.address, 'unsigned'), 0.5, 4)
  assert str(error.value) == (
      f"Table 'unsigned' at {replay.address} has no signature, so its data "
      'spec is unknown; pass a ReverbReplayBuffer for it instead.')


def test_table_whose_signature_differs(replay):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.mixed_replay(replay.buffer('offline'),
                             (replay.address, 'wide'), 0.5, 4)
  assert str(error.value) == (
      "The online table 'wide' signature differs from the offline data "
      'spec: observation: float32[4] vs float32[3].')


def test_buffers_whose_specs_differ(replay):
  online = reverb_replay_buffer.ReverbReplayBuffer(
      replay.spec._replace(reward=tf.TensorSpec([], tf.float64)), 'online',
      sequence_length=NUM_STEPS, local_server=replay.server)
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.mixed_replay(replay.buffer('offline'), online, 0.5, 4)
  assert str(error.value) == (
      'The online data spec differs from the offline data spec: '
      'reward: float64[] vs float32[].')


def test_buffers_whose_structures_differ(replay):
  online = reverb_replay_buffer.ReverbReplayBuffer(
      replay.spec._replace(policy_info={'logits': tf.TensorSpec([2])}),
      'online', sequence_length=NUM_STEPS, local_server=replay.server)
  with pytest.raises(rlds_reverb.MixedReplayError,
                     match='^The online data spec has another structure '
                           'than the offline data spec: '):
    rlds_reverb.mixed_replay(replay.buffer('offline'), online, 0.5, 4)


def test_offline_table_that_removes_sampled_items(replay):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.mixed_replay(replay.buffer('consumed'),
                             replay.buffer('online'), 0.5, 4)
  assert str(error.value) == (
      "The offline table 'consumed' removes an item after 1 sample, so "
      'mixed replay would drain the RLDS data; use max_times_sampled=0 '
      '(mixed_replay_tables does).')


# --- A table that stays empty: `replay_mixture`'s watchdog
# (tests/test_replay_mixture.py has its cases, and the mixed replay's killed
# online server: test_a_killed_online_server_fails_the_mixed_replay_naming_it,
# sharing the server process its killed-server cases kill). -----------------

def test_an_online_table_still_empty_after_the_timeout_fails(replay,
                                                             make_server):
  """A timeout of 0.5 s, the watchdog's check interval: it fails at the
  check after the one that first saw the table empty and due.

  The empty table on a server of its own: the failed mixture leaves a Reverb
  sample waiting on it, and the next `server_info` on that server then waited
  2.5-5.5 s (test_an_empty_online_table_is_no_fault_while_batches_are_offline,
  run after this one on the module's server: 5-8 s instead of 2-3 s)."""
  server = make_server([unsigned_table('empty', signature=replay.signature)])
  address = reverb_tables.address(server)
  iterator = iter(rlds_reverb.mixed_replay(
      replay.buffer('offline'), (address, 'empty'), 0.5, 4, timeout=0.5))
  assert mixture_faults.one_line(mixture_faults.error_of_next(iterator)) == (
      f'The online table empty at {address} stayed empty for 0.5 s '
      f'while batches need its rows, and Reverb waits for an item without '
      f'end: insert items before sampling it, or give it no rows.')
  # Items end the Reverb samples the failed mixture left waiting: the
  # iterator is let go and the server stops at once (5.5 s, waiting).
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), 'empty', sequence_length=NUM_STEPS)
  for step in online_trajectories(online_steps()):
    observer(step)
  observer.close()
  del iterator


def test_an_empty_online_table_is_no_fault_while_batches_are_offline(replay):
  """offline_fraction 1 for 3 timeouts: no online row is due. (A timeout of
  0.5 s, the watchdog's check interval: a verdict that counted the table
  would fail at the second check.)"""
  held = [iter(rlds_reverb.mixed_replay(
      replay.buffer('offline'), (replay.address, 'empty'), 1.0, 4,
      timeout=0.5))]
  until = time.monotonic() + 1.5
  while time.monotonic() < until:
    assert sources(next(held[0])[0]) == ['offline'] * 4
  drop_later(held)
