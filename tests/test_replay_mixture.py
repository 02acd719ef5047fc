"""rlds_reverb.replay_mixture against real Reverb servers and real buffers.

Each source's items are RLDS episodes pushed with `rlds_reverb.push`, tagged:
an item's first observation is [source, serial, ...], so every row of a
sampled batch says which table it was sampled from (and which item).
"""

import dataclasses
import json
import os
import math
import pathlib
import signal
import subprocess
import sys
import time
import warnings
from typing import Optional

import numpy as np
import pytest
import reverb
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import trajectory

import rlds_reverb
from rlds_reverb import tables
from rlds_reverb.mixture import choices
from rlds_reverb.mixture import dropping
from rlds_reverb.mixture import rounding
from rlds_reverb.mixture import sources as sources_lib
from rlds_reverb.mixture import watchdog
from rlds_reverb.mixture import weights as weights_lib
from tests import mixture_faults
from tests import reverb_tables
from tests import rlds_data
from tests import servers_files

NUM_STEPS = 2
OBSERVATION_SIZE = 3
SIZES = (10, 20, 30)  # Items on the three servers: 1:2:3.
# Batches tf.data may build ahead of `next` in a `lazy` mixture, at most.
LOOK_AHEAD = 4


def episode(source: int, items: int, first_serial: int = 0):
  """One episode of `items` + 1 steps; step t's observation [source, serial,
  ...], so the item starting at t is tagged (source, first_serial + t)."""
  steps = rlds_data.flat_episode(items + 1, seed=source * 1000 + first_serial,
                                 observation_size=OBSERVATION_SIZE)
  steps['observation'][:, 0] = source
  steps['observation'][:, 1] = np.arange(first_serial,
                                         first_serial + items + 1)
  return steps


SPEC = rlds_reverb.create_trajectory_data_spec(
    rlds_data.as_rlds([episode(0, 1)]))
SIGNATURE = tensor_spec.add_outer_dim(SPEC)


def push(client, table: str, source: int, items: int, first_serial: int = 0):
  pushed = rlds_reverb.push(rlds_data.as_rlds([episode(source, items,
                                                       first_serial)]),
                            client, table, sequence_length=NUM_STEPS)
  assert pushed.items == items


def uniform(name: str, signature=SIGNATURE, **options) -> reverb.Table:
  return tables.table(
      dataclasses.replace(tables.uniform(name, 10_000), **options), signature)


def served_tables():
  wide = tensor_spec.add_outer_dim(SPEC._replace(
      observation=tf.TensorSpec([OBSERVATION_SIZE + 1], tf.float32)))
  return [uniform('data'), uniform('empty'), uniform('wide', wide),
          uniform('unsigned', None), uniform('consumed', max_times_sampled=1)]


class Servers:
  """Three servers; server i's 'data' table holds SIZES[i] items of source i."""

  def __init__(self, sizes=SIZES):
    self.servers = [reverb_tables.start_server(served_tables())
                    for _ in sizes]
    self.addresses = [reverb_tables.address(s) for s in self.servers]
    for source, (address, size) in enumerate(zip(self.addresses, sizes)):
      if size:
        push(reverb.Client(address), 'data', source, size)

  def buffer(self, index: int, table: str = 'data', spec=SPEC):
    return reverb_replay_buffer.ReverbReplayBuffer(
        spec, table, sequence_length=NUM_STEPS,
        local_server=self.servers[index])

  def pairs(self, table: str = 'data'):
    return [(address, table) for address in self.addresses]

  def client(self, index: int) -> reverb.Client:
    return reverb.Client(self.addresses[index])

  def stop(self):
    for server in self.servers:
      server.stop()


@pytest.fixture(scope='module')
def servers():
  servers = Servers()
  yield servers
  servers.stop()


@pytest.fixture
def own_servers():
  """Servers a test may change (insert, reset); `make(sizes)` starts them."""
  started = []

  def make(sizes):
    started.append(Servers(sizes))
    return started[-1]

  yield make
  for servers in started:
    servers.stop()


def lazy(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """No prefetch injected, no map made parallel: batch k's weights are then
  computed at most a batch or two before it is asked for (the watchdog's
  interleave draws the batches on a thread of their own, one ahead)."""
  options = tf.data.Options()
  options.experimental_optimization.inject_prefetch = False
  options.experimental_optimization.map_parallelization = False
  return dataset.with_options(options)


def row_sources(experience) -> np.ndarray:
  return np.asarray(experience.observation[:, 0, 0]).astype(np.int64)


def per_source(experience, num_sources: int = 3) -> list:
  """Rows per source, checking that rows are ordered by source."""
  rows = row_sources(experience)
  assert list(rows) == sorted(rows), rows
  return np.bincount(rows, minlength=num_sources).tolist()


def counts_of(dataset, batches: int, num_sources: int = 3) -> list:
  return [per_source(experience, num_sources)
          for experience, _ in dataset.take(batches)]


def expected_counts(weights, batch_size: int, batches: int) -> list:
  apportioner = rounding.Apportioner(len(weights), batch_size)
  return [apportioner.counts(weights) for _ in range(batches)]


# --- The rounding, alone. ----------------------------------------------------

# (weights, B, rows per source of the first batches)
ROUNDING = {
    'sizes_1_2_3': ((1, 2, 3), 64, [[11, 21, 32], [10, 22, 32], [11, 21, 32],
                                    [11, 21, 32], [10, 22, 32]]),
    'equal_thirds_take_turns': ((1, 1, 1), 4, [[2, 1, 1], [1, 2, 1],
                                               [1, 1, 2], [2, 1, 1]]),
    'share_under_half_a_row': ((1, 99), 10, ([[0, 10]] * 5 + [[1, 9]]
                                             + [[0, 10]] * 9 + [[1, 9]])),
    'zero_weight_gets_nothing': ((0, 1, 1), 3, [[0, 2, 1], [0, 1, 2]]),
    'exact_shares': ((1, 3), 8, [[2, 6]] * 3),
    'one_source': ((5,), 7, [[7]] * 2),
}


@pytest.mark.parametrize('weights,batch_size,expected', ROUNDING.values(),
                         ids=ROUNDING.keys())
def test_rounding_cases(weights, batch_size, expected):
  assert expected_counts(weights, batch_size, len(expected)) == expected


def test_rounding_keeps_every_batch_near_its_share_and_the_run_within_a_row():
  """Random weights and batch sizes, 1,000 batches each: every batch holds
  floor(s) or floor(s) + 1 rows of each source, B in all, and each source's
  total stays within one row of batches * s."""
  rng = np.random.default_rng(0)
  for _ in range(20):
    weights = rng.random(rng.integers(1, 7)) * (rng.random() < 0.9)
    weights[0] += 0.01
    batch_size = int(rng.integers(1, 200))
    shares = weights / weights.sum() * batch_size
    apportioner = rounding.Apportioner(len(weights), batch_size)
    total = np.zeros(len(weights))
    for batch in range(1, 1001):
      counts = np.array(apportioner.counts(weights))
      assert counts.sum() == batch_size
      assert np.all(counts >= np.floor(shares - 1e-9))
      assert np.all(counts <= np.floor(shares + 1e-9) + 1)
      total += counts
      assert np.all(np.abs(total - batch * shares) < 1 + 1e-6)


# --- Mixtures on real servers. ------------------------------------------------

def test_every_batch_holds_exactly_its_rows_of_every_source(servers):
  """3 servers, one a buffer, 260 batches of 16: each batch's rows per
  source equal the rule's, rows ordered by source.

  The shares 16 * (1, 2, 3.5) / 6.5 are multiples of 1/13 of a row, so the
  carried remainders repeat every 13 batches: 260 batches run the whole
  cycle 20 times (the rounding alone is checked over 1,000 batches in
  `test_rounding_keeps_every_batch_near_its_share_and_the_run_within_a_row`).
  """
  sources = [servers.buffer(0)] + servers.pairs()[1:]
  weights = [1.0, 2.0, 3.5]
  batches = 260
  dataset = rlds_reverb.replay_mixture(sources, weights, 16)
  got = counts_of(dataset, batches)
  assert got == expected_counts(weights, 16, batches)
  totals = np.sum(got, axis=0)
  assert np.all(np.abs(totals - batches * 16 * np.array(weights) / 6.5) < 1)


def test_each_iterator_starts_at_batch_0_with_its_own_carry(servers):
  """Two iterators of one mixture, drawn in turns: each gets the rule's
  batches 0, 1, 2, ... (1:2:3 of 64: 11, 21, 32, then 10, 22, 32, ...)."""
  dataset = rlds_reverb.replay_mixture(servers.pairs(), [1, 2, 3], 64)
  first, second = iter(dataset), iter(dataset)
  got = {'first': [], 'second': []}
  for _ in range(4):
    got['first'].append(per_source(next(first)[0]))
    got['second'].append(per_source(next(second)[0]))
  want = expected_counts([1, 2, 3], 64, 4)
  assert got == {'first': want, 'second': want}


def test_an_iterator_whose_counts_were_dropped_fails_that_batch():
  """After MAX_ITERATORS newer iterators, the oldest one's carry is gone."""
  def counts():
    while True:
      yield [1, 1], [True, True]

  iterators = choices.Iterators(counts, watchdog.Demand(2), 2)
  oldest = iterators.start()
  for _ in range(choices.MAX_ITERATORS):
    iterators.start()
  rows, message = iterators.next(oldest)
  assert rows.tolist() == [0, 0]
  assert message.decode() == (
      f'This iterator of the mixture was dropped: {choices.MAX_ITERATORS} '
      f'newer iterators of it were made since.')
  assert iterators.next(oldest + 1)[1] == b''


def test_rows_are_the_items_written(servers):
  dataset = rlds_reverb.replay_mixture(servers.pairs(), [1, 1, 1], 30)
  written = [episode(source, size)['observation']
             for source, size in enumerate(SIZES)]
  seen = [set() for _ in SIZES]
  for experience, _ in dataset.take(80):
    observation = np.asarray(experience.observation)
    for row in observation:
      source, serial = int(row[0, 0]), int(row[0, 1])
      np.testing.assert_array_equal(row, written[source][serial:serial + 2])
      seen[source].add(serial)
  # Every item, in 800 rows a source: P(an item missed) < 30 e^(-800/30).
  assert [len(s) for s in seen] == list(SIZES)


def test_element_structure_is_the_buffers_as_dataset(servers):
  """What `agent.train(experience)` gets from `as_dataset`: the same specs;
  with a buffer among the sources, the same classes too."""
  plain = servers.buffer(0).as_dataset(sample_batch_size=8,
                                       num_steps=NUM_STEPS)
  with_buffer = rlds_reverb.replay_mixture(
      [servers.buffer(0)] + servers.pairs()[1:], 'size', 8)
  assert with_buffer.element_spec == plain.element_spec
  experience, info = next(iter(with_buffer))
  assert isinstance(experience, trajectory.Trajectory)
  assert info.key.shape == (8, NUM_STEPS)
  # Tables alone: the structure rebuilt from their signatures (a namedtuple
  # 'Trajectory' of the same fields), which tf.nest takes as the same.
  pairs = rlds_reverb.replay_mixture(servers.pairs(), 'size', 8)
  tf.nest.assert_same_structure(pairs.element_spec, plain.element_spec)
  assert (tf.nest.flatten(pairs.element_spec)
          == tf.nest.flatten(plain.element_spec))


def test_sources_on_one_server(servers, own_servers):
  """Two tables of one server, and a third server's."""
  mine = own_servers([5, 0, 0])
  push(mine.client(0), 'empty', 1, 7)
  sources = [(mine.addresses[0], 'data'), (mine.addresses[0], 'empty'),
             servers.pairs()[2]]
  dataset = rlds_reverb.replay_mixture(sources, 'size', 42)
  assert counts_of(dataset, 3) == expected_counts([5, 7, 30], 42, 3)


def test_schedules_and_numbers_mix(servers):
  """From step 10, source 0's weight falls 3, 2, 1, 0, 0 and source 2's
  rises 2, 3, 4, 5, 5; source 1's stays 1."""
  dataset = rlds_reverb.replay_mixture(
      servers.pairs(), [lambda step: max(0, 13 - step), 1,
                        lambda step: 2 + min(3, step - 10)], 6,
      start_step=10)
  assert counts_of(dataset, 5) == [[3, 1, 2], [2, 1, 3], [1, 1, 4],
                                   [0, 1, 5], [0, 1, 5]]


def test_keras_schedule_is_a_schedule(servers):
  decay = tf.keras.optimizers.schedules.PolynomialDecay(1.0, 4, 0.0)
  dataset = rlds_reverb.replay_mixture(servers.pairs()[:2], [decay, 1], 4)
  assert counts_of(dataset, 5, 2) == [[2, 2], [2, 2], [1, 3], [1, 3], [0, 4]]


def test_size_weights_give_each_server_its_share_and_each_item_its_chance(
    servers):
  """3 servers holding 10:20:30 items, weights='size', 48,000 rows.

  Each server's share is within 1 percentage point of its size share (1/6,
  2/6, 3/6). This holds with probability 1: the rows per server are exact
  (within one row of their share over the run), not drawn; the rows are
  counted from the tags of the items sampled back.

  Every item equally likely: each server's even-serial and odd-serial
  halves hold within 1 point of their size share too (1/12, ...). Their rows
  are drawn by Reverb's uniform sampler: half of server s's N_s rows is
  Binomial(N_s, 1/2); Hoeffding bounds a miss of 480 (1% of 48,000) by
  2 exp(-2 * 480^2 / N_s) <= 2 exp(-19.2) < 1e-8 for N_s <= 24,000, so the
  test fails by chance with probability below 6e-8 (six halves).
  """
  batches, batch_size = 960, 50
  dataset = rlds_reverb.replay_mixture(servers.pairs(), 'size', batch_size)
  halves = np.zeros((3, 2))
  for experience, _ in dataset.take(batches):
    observation = np.asarray(experience.observation)
    sources = observation[:, 0, 0].astype(np.int64)
    parity = observation[:, 0, 1].astype(np.int64) % 2
    np.add.at(halves, (sources, parity), 1)
  total = batches * batch_size
  size_share = np.array(SIZES) / sum(SIZES)
  assert np.all(np.abs(halves.sum(axis=1) / total - size_share) < 1e-4)
  assert np.all(np.abs(halves / total - size_share[:, None] / 2) < 0.01)


def test_sizes_are_read_again_every_k_batches_as_they_grow(own_servers):
  """Sizes 10:10 give 6 + 6 of 12 rows; 20 items pushed into source 1 after
  batch 6 show at the next reading, batch 10 (every 5 batches): 3 + 9."""
  mine = own_servers([10, 10])
  dataset = lazy(rlds_reverb.replay_mixture(
      mine.pairs(), 'size', 12, refresh_sizes_every=5))
  iterator = iter(dataset)
  before = [per_source(next(iterator)[0], 2) for _ in range(7)]
  with pytest.warns(rlds_reverb.TableNotEmptyWarning):
    push(mine.client(1), 'data', 1, 20, first_serial=100)
  after = [per_source(next(iterator)[0], 2) for _ in range(8)]
  assert before + after == [[6, 6]] * 10 + [[3, 9]] * 5


def test_a_source_without_items_gets_rows_once_a_reading_finds_some(
    own_servers):
  """Read every batch: source 1 empty -> the other two share its rows;
  30 items pushed -> its share comes within a few batches (those built
  ahead keep the old reading), and stays."""
  mine = own_servers([10, 0, 20])
  dataset = lazy(rlds_reverb.replay_mixture(
      mine.pairs(), 'size', 8, refresh_sizes_every=1))
  iterator = iter(dataset)
  apportioner = rounding.Apportioner(3, 8)  # One carry, as the mixture's.
  for _ in range(3):
    assert per_source(next(iterator)[0]) == apportioner.counts([10, 0, 20])
  push(mine.client(1), 'data', 1, 30, first_serial=100)
  got = per_source(next(iterator)[0])
  for _ in range(LOOK_AHEAD):
    if got[1]:
      break
    assert got == apportioner.counts([10, 0, 20])
    got = per_source(next(iterator)[0])
  for _ in range(3):
    assert got == apportioner.counts([10, 30, 20])
    got = per_source(next(iterator)[0])


def test_size_readings_follow_a_table_that_empties_and_fills(own_servers):
  """A reading gives an emptied table weight 0, and its size once it has
  items again."""
  mine = own_servers([10, 20])
  sizes = weights_lib.TableSizes(mine.pairs(), 1, timeout=1)
  assert sizes(0) == [10.0, 20.0]
  mine.client(1).reset('data')
  assert sizes(1) == [10.0, 0.0]
  push(mine.client(1), 'data', 1, 5)
  assert sizes(2) == [10.0, 5.0]


def test_size_readings_keep_a_silent_servers_last_sizes(own_servers):
  """Whether it is gone is the watchdog's to say, after `timeout`."""
  mine = own_servers([10, 20])
  sizes = weights_lib.TableSizes(mine.pairs(), 1, timeout=1)
  assert sizes(0) == [10.0, 20.0]
  mine.servers[1].stop()
  assert sizes(1) == [10.0, 20.0]


def test_size_readings_of_a_server_never_read_raise(own_servers):
  mine = own_servers([10, 20])
  mine.servers[1].stop()
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match=f'No Reverb server at {mine.addresses[1]}'):
    weights_lib.TableSizes(mine.pairs(), 1, timeout=1)(0)


def test_size_weights_start_without_an_empty_source(servers):
  dataset = rlds_reverb.replay_mixture(
      [servers.pairs()[0], (servers.addresses[1], 'empty')], 'size', 4)
  assert counts_of(dataset, 2, 2) == [[4, 0], [4, 0]]


def test_a_removing_table_is_allowed_when_named(servers, own_servers):
  mine = own_servers([0])
  push(mine.client(0), 'consumed', 1, 40)
  dataset = rlds_reverb.replay_mixture(
      [servers.pairs()[0], (mine.addresses[0], 'consumed')], [1, 1], 4,
      allow_removal=[1])
  assert counts_of(dataset, 3, 2) == [[2, 2]] * 3


# --- Errors: each raise, with its message. ----------------------------------

BAD_WEIGHTS = {
    'too_few': ([1, 2], "weights must be one number or schedule f(step) per "
                "source (3), or 'size'; got list [1, 2]."),
    'other_word': ('sizes', "weights must be one number or schedule f(step) "
                   "per source (3), or 'size'; got str 'sizes'."),
    'a_number': (1.0, "weights must be one number or schedule f(step) per "
                 "source (3), or 'size'; got float 1.0."),
    'string_weight': ([1, '2', 3], "weights[1] must be a number >= 0 or a "
                      "schedule f(step) -> weight, got str '2'."),
    'bool_weight': ([1, True, 3], 'weights[1] must be a number >= 0 or a '
                    'schedule f(step) -> weight, got bool True.'),
    'negative': ([1, -0.5, 3], 'weights[1] must be a finite number >= 0, '
                 'got -0.5.'),
    'nan': ([1, 1, math.nan], 'weights[2] must be a finite number >= 0, '
            'got nan.'),
    'infinite': ([math.inf, 1, 1], 'weights[0] must be a finite number >= 0, '
                 'got inf.'),
    'sum_zero': ([0, 0, 0.0], 'weights must sum to more than 0, got '
                 '[0.0, 0.0, 0.0].'),
    'schedules_sum_zero': ([lambda step: 0, 0, 0], 'weights must sum to more '
                           'than 0, got [0.0, 0.0, 0.0] at step 0.'),
    'schedule_negative': ([lambda step: -1, 1, 1], 'weights[0] must be a '
                          'finite number >= 0, got -1.0 from its schedule at '
                          'step 0.'),
    'schedule_not_a_number': ([1, 1, lambda step: 'x'], "weights[2] schedule "
                              "returned 'x' at step 0; expected a number "
                              ">= 0."),
}


@pytest.mark.parametrize('weights,message', BAD_WEIGHTS.values(),
                         ids=BAD_WEIGHTS.keys())
def test_bad_weights(servers, weights, message):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture(servers.pairs(), weights, 4)
  assert str(error.value) == message


def test_schedule_that_goes_bad_later_fails_that_batch(servers):
  """In one line: no Python traceback in the error (nor on stderr:
  `test_a_learner_sees_no_traceback_when_a_schedule_goes_bad`)."""
  dataset = rlds_reverb.replay_mixture(
      servers.pairs(), [lambda step: 1 - step, 1, 1], 4)
  iterator = iter(dataset)
  next(iterator)
  next(iterator)  # Steps 0, 1: weights 1 and 0.
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    next(iterator)
  assert mixture_faults.one_line(error.value) == (
      'weights[0] must be a finite number >= 0, got -1.0 from its schedule '
      'at step 2.')


def test_size_weights_of_empty_tables(servers):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture([(a, 'empty') for a in servers.addresses[:2]],
                               'size', 4)
  first, second = servers.addresses[:2]
  assert str(error.value) == (
      f"weights='size' must sum to more than 0, but every table is empty "
      f'(table empty at {first}, table empty at {second}).')


def test_size_readings_of_tables_that_all_empty_fail_after_the_timeout(
    own_servers):
  """Raised in Python, the dataset fails with this line in the graph (as
  `test_schedule_that_goes_bad_later_fails_that_batch`)."""
  mine = own_servers([3])
  sizes = weights_lib.TableSizes(mine.pairs(), 1, timeout=1)
  sizes(0)
  mine.client(0).reset('data')
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    sizes(1)
  assert str(error.value) == (
      f'With size weights, every table was empty for 1 s (table data at '
      f'{mine.addresses[0]}); a mixture needs items to sample.')


@pytest.mark.parametrize('size', [0, -1, 2.0, True])
def test_bad_batch_size(servers, size):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture(servers.pairs(), 'size', size)
  assert str(error.value) == (
      f'sample_batch_size must be a positive int, got {size!r}.')


@pytest.mark.parametrize('allowed,shown', [([3], '3'), ([-1], '-1'),
                                           (['1'], "'1'")])
def test_bad_allow_removal(servers, allowed, shown):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture(servers.pairs(), 'size', 4,
                               allow_removal=allowed)
  assert str(error.value) == (
      f'allow_removal must hold source indices 0..2, got {shown}.')


def test_numpy_weights(servers):
  dataset = rlds_reverb.replay_mixture(servers.pairs(),
                                       np.array([1.0, 1.0, 2.0]), 4)
  assert counts_of(dataset, 2) == [[1, 1, 2]] * 2


@pytest.mark.parametrize('every', [0, 1.5])
def test_bad_refresh(servers, every):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture(servers.pairs(), 'size', 4,
                               refresh_sizes_every=every)
  assert str(error.value) == (
      f'refresh_sizes_every must be a positive int (batches), got {every!r}.')


def test_a_servers_file_stands_for_its_servers_in_order(servers, tmp_path):
  """Among the sources as (path, table): a source per server, in server
  order (each row tagged with its server); as `sources` itself, with the
  one table it lists."""
  two = servers_files.write(tmp_path / 'two.json', servers.addresses[:2],
                            tables=('data', 'empty'), shuffled=True)
  dataset = rlds_reverb.replay_mixture(
      [(two, 'data'), servers.pairs()[2]], [1, 2, 3], 12)
  assert counts_of(dataset, 3) == expected_counts([1, 2, 3], 12, 3)
  every = servers_files.write(tmp_path / 'every.json', servers.addresses,
                              tables=('data',))
  assert sources_lib.expanded(pathlib.Path(every)) == servers.pairs()


def test_a_servers_file_of_several_tables_needs_one_named(servers, tmp_path):
  path = servers_files.write(tmp_path / 'servers.json', servers.addresses,
                             tables=('data', 'empty'))
  with pytest.raises(rlds_reverb.ServersFileError) as error:
    rlds_reverb.replay_mixture(path, 'size', 4)
  assert str(error.value) == (
      f"{path} lists several tables ('data', 'empty'): name one, as "
      f'({path!r}, TABLE)')


def test_no_sources():
  with pytest.raises(rlds_reverb.MixedReplayError,
                     match='^replay_mixture needs at least one source.$'):
    rlds_reverb.replay_mixture([], 'size', 4)


def test_source_that_is_neither_buffer_nor_address_and_table(servers):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture(servers.pairs()[:2] + [servers.addresses[2]],
                               'size', 4)
  assert str(error.value) == (
      f'source 2 must be a ReverbReplayBuffer or (address, table), got str '
      f'{servers.addresses[2]!r}.')


def test_table_whose_signature_differs_names_field_and_source(servers):
  sources = servers.pairs()[:2] + [(servers.addresses[2], 'wide')]
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture(sources, 'size', 4)
  assert str(error.value) == (
      "The source 2 table 'wide' signature differs from the source 0 data "
      'spec: observation: float32[4] vs float32[3].')


def test_buffer_whose_spec_differs_names_field_and_source(servers):
  other = servers.buffer(1, spec=SPEC._replace(
      reward=tf.TensorSpec([], tf.float64)))
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture([servers.pairs()[0], other], [1, 1], 4)
  assert str(error.value) == (
      'The source 0 table \'data\' signature differs from the source 1 data '
      'spec: reward: float32[] vs float64[].')


def test_buffers_whose_structures_differ(servers):
  other = servers.buffer(1, spec=SPEC._replace(
      policy_info={'logits': tf.TensorSpec([2])}))
  with pytest.raises(rlds_reverb.MixedReplayError,
                     match='^The source 1 data spec has another structure '
                           'than the source 0 data spec: '):
    rlds_reverb.replay_mixture([servers.buffer(0), other], [1, 1], 4)


def test_unsigned_table(servers):
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture(
        [servers.buffer(0), (servers.addresses[1], 'unsigned')], [1, 1], 4)
  assert str(error.value) == (
      f"Table 'unsigned' at {servers.addresses[1]} has no signature, so its "
      'data spec is unknown; pass a ReverbReplayBuffer for it instead.')


@pytest.mark.parametrize('form', ['pair', 'buffer'])
def test_table_that_removes_sampled_items(servers, form):
  consumed = ((servers.addresses[1], 'consumed') if form == 'pair'
              else servers.buffer(1, 'consumed'))
  with pytest.raises(rlds_reverb.MixedReplayError) as error:
    rlds_reverb.replay_mixture([servers.pairs()[0], consumed], [1, 1], 4)
  assert str(error.value) == (
      "The source 1 table 'consumed' removes an item after 1 sample, so the "
      'mixture would drain it; use max_times_sampled=0, or pass '
      'allow_removal=[1] if it is an online table that may.')


def test_missing_table_names_it_and_the_server(servers):
  with pytest.raises(rlds_reverb.TableNotFoundError) as error:
    rlds_reverb.replay_mixture(
        servers.pairs()[:2] + [(servers.addresses[2], 'dta')], 'size', 4)
  assert str(error.value) == (
      f"Reverb server at {servers.addresses[2]} has no table 'dta'; its "
      "tables are ['consumed', 'data', 'empty', 'unsigned', 'wide'].")


def test_unreachable_server_is_named(servers, refused_address):
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match=f'{refused_address}'):
    rlds_reverb.replay_mixture(
        servers.pairs()[:2] + [(refused_address, 'data')], 'size', 4)


def test_server_that_does_not_answer_is_named(servers, silent_address):
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match=f'No Reverb server answered at {silent_address} '
                           'within 1 s'):
    rlds_reverb.replay_mixture(
        [servers.pairs()[0], (silent_address, 'data')], [1, 1], 4, timeout=1)


# --- A server that dies, a table that stays empty: the watchdog. -------------

A, B = 'localhost:1', 'localhost:2'
PLACES = [watchdog.Place('source 0', A, 'data', removes=False),
          watchdog.Place('source 1', B, 'data', removes=False),
          watchdog.Place('source 2', B, 'queue', removes=True)]
UP = {A: {'data': 5}, B: {'data': 5, 'queue': 0}}
B_SILENT = {A: {'data': 5}, B: None}
B_EMPTY = {A: {'data': 5}, B: {'data': 0, 'queue': 0}}
DUE = [True, True, True]
B_SILENT_LINE = (
    'The Reverb server at localhost:2 did not answer for 2 s, so the source 1 '
    'table data and the source 2 table queue cannot be sampled: the server '
    'stopped or cannot be reached, and Reverb retries without end.')
B_EMPTY_LINE = (
    'The source 1 table data at localhost:2 stayed empty for 2 s while '
    'batches need its rows, and Reverb waits for an item without end: insert '
    'items before sampling it, or give it no rows.')
# (checks: (seconds, answers, due) each, the last check's verdict), timeout 2
VERDICTS = {
    'all_well': ([(0, UP, DUE), (1, UP, DUE), (3, UP, DUE)], ''),
    'silent_under_the_timeout': (
        [(0, B_SILENT, DUE), (1.9, B_SILENT, DUE)], ''),
    'silent_for_the_timeout_names_every_table_on_it': (
        [(0, B_SILENT, DUE), (1, B_SILENT, DUE), (2, B_SILENT, DUE)],
        B_SILENT_LINE),
    'back_before_the_timeout_starts_afresh': (
        [(0, B_SILENT, DUE), (1, UP, DUE), (2, B_SILENT, DUE),
         (3.9, B_SILENT, DUE)], ''),
    'empty_and_due_for_the_timeout': (
        [(0, B_EMPTY, DUE), (1, B_EMPTY, DUE), (2, B_EMPTY, DUE)],
        B_EMPTY_LINE),
    'empty_not_due': (
        [(0, B_EMPTY, [True, False, True]), (2, B_EMPTY, [True, False, True])],
        ''),
    'due_again_starts_afresh': (
        [(0, B_EMPTY, DUE), (1, B_EMPTY, [True, False, True]),
         (2, B_EMPTY, DUE), (3.9, B_EMPTY, DUE)], ''),
    'a_removing_table_empty_is_no_fault': (
        [(0, UP, DUE), (5, UP, DUE), (9, UP, DUE)], ''),
    'a_gap_between_checks_starts_afresh': (
        [(0, B_SILENT, DUE), (1, B_SILENT, DUE), (7, B_SILENT, DUE)], ''),
}


@pytest.mark.parametrize('checks,expected', VERDICTS.values(),
                         ids=VERDICTS.keys())
def test_verdict_cases(checks, expected):
  verdict = watchdog.Verdict(PLACES, timeout=2)
  said = [verdict(now, answers, due) for now, answers, due in checks]
  assert said[:-1] == [''] * (len(checks) - 1)
  assert said[-1] == expected


A_SILENT = {A: None, B: {'data': 5, 'queue': 0}}
A_GONE = {B: {'data': 5, 'queue': 0}}  # A dropped: not asked.
B_SILENT_A_GONE = {B: None}
# (checks, the last check's verdict, the servers lost), timeout 2, drop
DROP_VERDICTS = {
    'silent_for_the_timeout_is_lost': (
        [(0, B_SILENT, DUE), (2, B_SILENT, [True, False, False])], '', [B]),
    'silent_under_the_timeout_is_kept': (
        [(0, B_SILENT, DUE), (1.9, B_SILENT, DUE)], '', []),
    'the_last_server_fails_naming_it': (
        [(0, A_SILENT, DUE), (2, A_SILENT, DUE),
         (2.5, A_GONE, [False, True, True]),
         (3, B_SILENT_A_GONE, [False, True, True]),
         (5, B_SILENT_A_GONE, [False, True, True])], B_SILENT_LINE, [A]),
}


@pytest.mark.parametrize('checks,expected,lost', DROP_VERDICTS.values(),
                         ids=DROP_VERDICTS.keys())
def test_drop_verdict_cases(checks, expected, lost):
  verdict = watchdog.Verdict(PLACES, timeout=2, drop=True)
  said = [verdict(now, answers, due) for now, answers, due in checks]
  assert said[:-1] == [''] * (len(checks) - 1)
  assert said[-1] == expected
  assert verdict.lost == lost


@pytest.fixture(scope='module')
def cartpole():
  with mixture_faults.cartpole_server() as address:
    yield address


# (weights, refresh_sizes_every): with 1, the sizes are read from the dead
# server too, and its last sizes kept (the watchdog names it).
KILLED = {'size': ('size', 100), 'size_read_every_batch': ('size', 1),
          'fixed': ([1, 1], 100)}


def selected_cases(request, argname: str) -> list:
  """The values of `argname` in this module's selected tests: a module
  fixture runs only those cases (not the other tier's)."""
  values = []
  for item in request.session.items:
    params = getattr(item, 'callspec', None)
    if (item.module is request.module and params is not None
        and params.params.get(argname) not in (None, *values)):
      values.append(params.params[argname])
  return values


MIXED_REPLAY = 'mixed_replay'  # The case of `rlds_reverb.mixed_replay`.


# ShardedReplayBuffer([alive, doomed]).as_dataset(8): refresh_sizes_every.
SHARDED = {'sharded': 100, 'sharded_read_every_batch': 1}


def killed_dataset(case: str, alive: str, doomed: str) -> tf.data.Dataset:
  """The case's mixture of `alive`'s and `doomed`'s tables 'replay'."""
  if case == MIXED_REPLAY:
    return rlds_reverb.mixed_replay((alive, 'replay'), (doomed, 'replay'),
                                    0.5, 8, timeout=1)
  if case in SHARDED:
    return rlds_reverb.ShardedReplayBuffer(
        [alive, doomed], 'replay', timeout=1).as_dataset(
            8, refresh_sizes_every=SHARDED[case])
  weights, refresh = KILLED[case]
  return rlds_reverb.replay_mixture(
      [(alive, 'replay'), (doomed, 'replay')], weights, 8,
      refresh_sizes_every=refresh, timeout=1)


@pytest.fixture(scope='module')
def killed_errors(request, cartpole):
  """case -> (address, error of `next()`): one server process (a TensorFlow
  start, ~4 s of CPU) killed under a mixture of every selected case (of
  KILLED, SHARDED and MIXED_REPLAY) at once, each two batches in, each with its own
  watchdog."""
  cases = selected_cases(request, 'case')
  with mixture_faults.doomed_server() as doomed:
    iterators = {}
    for case in cases:
      iterators[case] = iter(killed_dataset(case, cartpole, doomed.address))
      next(iterators[case])
      next(iterators[case])
    doomed.kill()  # SIGKILL, while the mixtures sample it.
    # Failed iterators kept alive cost CPU: errors_of_next lets them go.
    errors = mixture_faults.errors_of_next(iterators)
    return {case: (doomed.address, error) for case, error in errors.items()}


@pytest.mark.parametrize('case', KILLED)
def test_a_killed_server_fails_the_mixture_naming_it(killed_errors, case):
  address, error = killed_errors[case]
  assert mixture_faults.one_line(error) == (
      f'The Reverb server at {address} did not answer for 1 s, so the '
      f'source 1 table replay cannot be sampled: the server stopped or cannot '
      f'be reached, and Reverb retries without end.')


@pytest.mark.parametrize('case', SHARDED)
def test_a_killed_server_fails_the_sharded_buffer_naming_it(killed_errors,
                                                           case):
  """`ShardedReplayBuffer.as_dataset` is a 'size' mixture: its watchdog
  names the server, with the sizes read every batch too (the dead server's
  last sizes kept, `weights.TableSizes`)."""
  address, error = killed_errors[case]
  assert mixture_faults.one_line(error) == (
      f'The Reverb server at {address} did not answer for 1 s, so the '
      f'source 1 table replay cannot be sampled: the server stopped or cannot '
      f'be reached, and Reverb retries without end.')


@pytest.mark.parametrize('case', [MIXED_REPLAY])
def test_a_killed_online_server_fails_the_mixed_replay_naming_it(
    killed_errors, case):
  """`mixed_replay` has `replay_mixture`'s watchdog; its message names the
  online table (tests/test_mixed_replay.py has the rest of it)."""
  address, error = killed_errors[case]
  assert mixture_faults.one_line(error) == (
      f'The Reverb server at {address} did not answer for 1 s, so the '
      f'online table replay cannot be sampled: the server stopped or cannot '
      f'be reached, and Reverb retries without end.')


# --- on_server_loss='drop': a killed server left out. -------------------------

# Each a mixture of the in-process server (episode 1) and the doomed one
# (episode 0), B = 8, timeout 1 s: (weights, refresh_sizes_every); 'sharded'
# is ShardedReplayBuffer(on_server_loss='drop').as_dataset(8).
DROPPED = {'size': ('size', 100), 'size_read_every_batch': ('size', 1),
           'fixed': ([1, 1], 100), 'sharded': ('size', 100)}
EVERY_SERVER_LOST = 'every_server_lost'  # Two sources, both on the doomed.
AFTER_LOSS = 30  # Batches drawn after a mixture's warning; the last 20 checked.


def dropped_dataset(case: str, alive: str, doomed: str) -> tf.data.Dataset:
  if case == EVERY_SERVER_LOST:
    return rlds_reverb.replay_mixture(
        [(doomed, 'replay'), (doomed, 'replay')], [1, 1], 8, timeout=1,
        on_server_loss='drop')
  if case == 'sharded':
    return rlds_reverb.ShardedReplayBuffer(
        [alive, doomed], 'replay', timeout=1,
        on_server_loss='drop').as_dataset(8)
  weights, refresh = DROPPED[case]
  return rlds_reverb.replay_mixture(
      [(alive, 'replay'), (doomed, 'replay')], weights, 8,
      refresh_sizes_every=refresh, timeout=1, on_server_loss='drop')


@dataclasses.dataclass
class Drawn:
  """What one mixture gave after the kill."""
  origins: list = dataclasses.field(default_factory=list)  # Per batch.
  error: Optional[BaseException] = None


def draw_past_the_loss(iterator, warned, origin_of, drawn: Drawn) -> None:
  """Batches' row origins until `warned()` (the mixtures' warnings all
  came), then AFTER_LOSS more; or the error that ends the dataset."""
  try:
    after = 0
    while after < AFTER_LOSS:
      after += warned()
      experience, _ = next(iterator)
      drawn.origins.append(
          [origin_of.get(row.tobytes(), 'neither')
           for row in experience.observation.numpy()[:, 0]])
  except BaseException as e:  # pylint: disable=broad-except
    drawn.error = mixture_faults.detached(e)  # Frees the iterator's frames.


def dropped_without_a_hang(iterators: dict) -> None:
  """Drops the iterators (their only references), each on a thread of its
  own, together (each waits in C++: `mixture_faults.errors_of_next`); a drop
  that does not return within the hang guard fails the test."""
  assert mixture_faults.together(
      [(iterators.pop, (key,)) for key in list(iterators)]), (
          'dropping an iterator did not return')


@pytest.fixture(scope='module')
def dropped_runs(request):
  """One server process killed under a drop mixture of every selected case,
  each two batches in -> (doomed address, case -> `Drawn`, texts of the
  ServerLostWarnings, rows' origins before the kill). The warnings come
  from the watchdogs' threads; `catch_warnings` (process-wide) records
  them. The iterators are dropped at the end, their servers lost."""
  cases = selected_cases(request, 'drop_case')
  live = [case for case in cases if case != EVERY_SERVER_LOST]
  with (mixture_faults.cartpole_server(episode=1) as alive,
        mixture_faults.doomed_server(episode=0) as doomed,
        warnings.catch_warnings(record=True) as caught):
    warnings.simplefilter('always')
    origin_of = {**dict.fromkeys(mixture_faults.observations_of(0), 'doomed'),
                 **dict.fromkeys(mixture_faults.observations_of(1), 'alive')}
    iterators = {case: iter(dropped_dataset(case, alive, doomed.address))
                 for case in cases}
    before = {case: [origin_of.get(row.tobytes(), 'neither')
                     for _ in range(2)
                     for row in next(iterator)[0].observation.numpy()[:, 0]]
              for case, iterator in iterators.items()}
    doomed.kill()  # SIGKILL, while the mixtures sample it.

    def warned() -> bool:
      return sum(issubclass(warning.category, rlds_reverb.ServerLostWarning)
                 for warning in caught) >= len(live)

    drawn = {case: Drawn() for case in cases}
    assert mixture_faults.together(
        [(draw_past_the_loss, (iterators[case], warned, origin_of,
                               drawn[case])) for case in cases]), (
                                   'next() still blocked after the hang guard')
    dropped_without_a_hang(iterators)
    texts = [str(warning.message) for warning in caught
             if issubclass(warning.category, rlds_reverb.ServerLostWarning)]
    return doomed.address, drawn, texts, before


@pytest.mark.slow  # A server process killed under 5 mixtures: ~25 s.
@pytest.mark.parametrize('drop_case', DROPPED)
def test_a_dropped_server_leaves_full_batches_of_the_others(dropped_runs,
                                                           drop_case):
  """Before the kill both servers give rows; after it every batch has its
  8 rows (the batches waiting for the dead server's rows when it was
  dropped are left out); once its loss is told, the batches drawn from
  then on (past those built ahead) come from the live server alone."""
  _, drawn, _, before = dropped_runs
  assert set(before[drop_case]) == {'alive', 'doomed'}, before[drop_case]
  runs = drawn[drop_case]
  assert runs.error is None, runs.error
  assert all(len(origins) == 8 for origins in runs.origins)
  assert all(set(origins) <= {'alive', 'doomed'} for origins in runs.origins)
  assert all(origins == ['alive'] * 8 for origins in runs.origins[-20:]), (
      runs.origins)


@pytest.mark.slow  # A server process killed under 5 mixtures: ~25 s.
@pytest.mark.parametrize('drop_case', DROPPED)
def test_each_drop_mixture_warns_once_naming_the_server(dropped_runs,
                                                        drop_case):
  """One ServerLostWarning per mixture (the mixtures share the server:
  their count is the cases'), naming the server and its table."""
  address, drawn, texts, _ = dropped_runs
  live = [case for case in drawn if case != EVERY_SERVER_LOST]
  assert drop_case in live
  assert texts == [
      f'The Reverb server at {address} did not answer for 1 s: the mixture '
      f'goes on without it, and gives the source 1 table replay no rows from '
      f'now on (a server that comes back is not sampled again).'] * len(live)


@pytest.mark.slow  # A server process killed under 5 mixtures: ~25 s.
@pytest.mark.parametrize('drop_case', [EVERY_SERVER_LOST])
def test_a_drop_mixture_that_loses_every_server_fails_naming_it(
    dropped_runs, drop_case):
  address, drawn, _, _ = dropped_runs
  assert mixture_faults.one_line(drawn[drop_case].error) == (
      f'The Reverb server at {address} did not answer for 1 s, so the '
      f'source 0 table replay and the source 1 table replay cannot be '
      f'sampled: the server stopped or cannot be reached, and Reverb retries '
      f'without end.')


def test_a_drop_mixture_of_live_servers_holds_exact_shares(servers):
  """The same counts as without 'drop', the iterator dropped early by
  `take`."""
  weights = [1.0, 2.0, 3.5]
  dataset = rlds_reverb.replay_mixture(servers.pairs(), weights, 16,
                                       on_server_loss='drop')
  assert counts_of(dataset, 26) == expected_counts(weights, 16, 26)


def test_weights_of_the_sources_left_summing_to_0_raise():
  """[1, 0] with source 0's server dropped: nothing left to sample."""
  weights = weights_lib.WithoutLost(weights_lib.Scheduled([1, 0], 0),
                                    [A, B], lambda: {A})
  with pytest.raises(rlds_reverb.MixedReplayError) as raised:
    weights(0)
  assert str(raised.value) == (
      'weights of the sources still in the mixture sum to 0 ([0.0, 0.0]) '
      'since the servers at localhost:1 were dropped: nothing is left to '
      'sample.')


def test_weights_without_a_loss_are_as_given():
  weights = weights_lib.WithoutLost(weights_lib.Scheduled([1, 3], 0),
                                    [A, B], frozenset)
  assert weights(0) == [1.0, 3.0]


def test_the_sources_of_a_dropped_server_weigh_0():
  """Called on tf.data's threads in a mixture, which coverage.py does not
  trace: here directly (the killed-server runs check the batches)."""
  weights = weights_lib.WithoutLost(weights_lib.Scheduled([1, 3, 2], 0),
                                    [A, B, A], lambda: {A})
  assert weights(0) == [0.0, 3.0, 0.0]


def test_a_server_lost_warning_made_an_error_fails_with_its_text(
    servers, refused_address):
  """A watchdog of a live server and a refused one, dropping: under an
  'error' filter the warning's text becomes the verdict the dataset fails
  with (the thread goes on telling it)."""
  places = [watchdog.Place('source 0', servers.addresses[0], 'data', False),
            watchdog.Place('source 1', refused_address, 'data', False)]
  with warnings.catch_warnings():
    warnings.simplefilter('error', rlds_reverb.ServerLostWarning)
    guard = watchdog.Watchdog(places, 1, watchdog.Demand(2),
                              dropping.Lost(places))
    deadline = time.monotonic() + mixture_faults.HANG_GUARD_S
    verdicts = ['']
    while verdicts[-1] == '' and time.monotonic() < deadline:
      verdicts.append(guard.queue.dequeue().numpy().decode())
  assert verdicts[-1] == (
      f'The Reverb server at {refused_address} did not answer for 1 s: the '
      f'mixture goes on without it, and gives the source 1 table data no '
      f'rows from now on (a server that comes back is not sampled again).')
  assert guard.queue.dequeue().numpy().decode() == verdicts[-1]  # It stands.


def test_drop_needs_every_fields_shape_known():
  """Filler rows are zeros of the rows' shapes (an as_dataset's spec here:
  (trajectory, info), B = 4 first)."""
  sampled = tf.data.Dataset.from_generator(lambda: iter(()), output_signature=(
      {'observation': tf.TensorSpec([4, 2, None], tf.float32)},
      tf.TensorSpec([4, 2], tf.int64)))
  with pytest.raises(rlds_reverb.MixedReplayError) as raised:
    dropping.answered(sampled, 0, 'source 1', 4, dropping.Lost([]))
  assert str(raised.value) == (
      "on_server_loss='drop' needs the shape of every field known, but the "
      'source 1 field observation is float32[4,2,?] (B first): its filler '
      "rows could not be batched with its rows; use 'raise'.")


@pytest.mark.parametrize('value', ['ignore', None, 1])
def test_bad_on_server_loss(servers, value):
  with pytest.raises(rlds_reverb.MixedReplayError) as raised:
    rlds_reverb.replay_mixture(servers.pairs(), 'size', 4,
                               on_server_loss=value)
  assert str(raised.value) == (
      f"on_server_loss must be 'raise' or 'drop', got {value!r}.")


def test_an_empty_table_due_rows_fails_the_mixture_naming_it(servers):
  empty = (servers.addresses[1], 'empty')
  iterator = iter(rlds_reverb.replay_mixture(
      [servers.pairs()[0], empty], [1, 1], 4, timeout=1))
  assert mixture_faults.one_line(mixture_faults.error_of_next(iterator)) == (
      f'The source 1 table empty at {servers.addresses[1]} stayed empty for '
      f'1 s while batches need its rows, and Reverb waits for an item without '
      f'end: insert items before sampling it, or give it no rows.')
  # Items end the Reverb samples the failed mixture left waiting: its
  # iterator is let go at once (~3 s, waiting). Then emptied again.
  push(servers.client(1), 'empty', 1, 2)
  del iterator
  servers.client(1).reset('empty')


def test_an_empty_table_of_weight_0_is_no_fault(servers):
  """Drawn for three timeouts: every batch from source 0. (A timeout of 0.5 s,
  the watchdog's check interval: a verdict that counted the table would fail
  at the second check.)"""
  iterator = iter(rlds_reverb.replay_mixture(
      [servers.pairs()[0], (servers.addresses[1], 'empty')], [1, 0], 4,
      timeout=0.5))
  until = time.monotonic() + 1.5
  while time.monotonic() < until:
    assert per_source(next(iterator)[0], 2) == [4, 0]


def run_learner(config: dict, env=None, **popen) -> subprocess.Popen:
  return subprocess.Popen(
      [sys.executable, '-m', 'tests.mixture_learner', json.dumps(config)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
      **popen)


@pytest.fixture(scope='module')
def gated():
  """A server whose table 'gated' holds 1 item and samples from 2 (its
  MinSize): sampling it waits, yet it is not empty, so a mixture's watchdog
  lets the wait be until a test empties the table."""
  server = reverb_tables.start_server([uniform('gated', min_size=2)])
  push(reverb_tables.client_of(server), 'gated', 1, 1)
  yield reverb_tables.address(server)
  server.stop()


@pytest.fixture(scope='module')
def learner_runs(servers, gated):
  """One learner process (a TensorFlow start, ~4 s of CPU) at TensorFlow's
  loudest log level (TF_CPP_MIN_LOG_LEVEL=0), two mixtures in turn, each
  iterator kept alive to the exit:
    1. a schedule that goes bad at step 2 (batches 0, 1, then its error),
       with on_server_loss='drop' (its fillers alive at the exit too);
    2. batches 0-2 from source 0; batch 3 needs the table 'gated', whose
       sampling waits in C++; after 'batch 2' a SIGINT, and only then the
       table is emptied: the watchdog's clock starts after the SIGINT, and
       fails the dataset `timeout` s later, the SIGINT recorded by the
       learner's handler as docs/mixed_replay.md advises (with Python's own
       handler, the KeyboardInterrupt raised inside TensorFlow's error path
       was lost and the heap corrupted at exit in 4 of 17 runs under load).
  (With an empty table from the start, the clock ran from when tf.data
  built ahead to batch 3, before 'batch 2' was printed: a SIGINT later than
  the timeout, from a loaded machine, met a learner already stopped by
  InvalidArgumentError, and exit status 0 or -2.) The SIGINT comes after
  TensorFlow's and Reverb's threads have all started: a SIGINT within ~0.1 s
  of an iterator's start crashed TF-Agents' own `as_dataset` in 1 of 9 runs.
  -> (run 1's stdout lines, run 2's stdout, stderr, exit status)."""
  learner = run_learner(
      {'runs': [{'sources': servers.pairs(), 'weights': [[1, -1, 0], 1, 1],
                 'timeout': 30, 'on_server_loss': 'drop'},
                {'sources': [servers.pairs()[0], (gated, 'gated')],
                 # The wait after the SIGINT. A timeout also fails a server
                 # silent that long: 2 s of margin for a loaded machine.
                 'weights': [1, [1, 0, 3]], 'timeout': 2,
                 'sigint': 'record'}]},
      env={**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '0'})
  try:
    first = []
    while not first or not first[-1].startswith('text: '):
      first.append(learner.stdout.readline())
      assert first[-1], (first, learner.wait(), learner.stderr.read())
    for batch in range(3):
      assert learner.stdout.readline() == f'batch {batch}\n'
    learner.send_signal(signal.SIGINT)
    reverb.Client(gated).reset('gated')  # Starved from now on.
    out, err = learner.communicate(timeout=mixture_faults.HANG_GUARD_S)
  finally:
    learner.kill()
  return [line.rstrip('\n') for line in first], out, err, learner.returncode


def test_ctrl_c_stops_a_learner_that_waits_on_a_starved_table(learner_runs,
                                                             gated):
  """Run 2 of `learner_runs`: the learner sees its Ctrl-C once `next()`
  returns, at the latest when the watchdog fails the dataset (the table
  stays empty, and the error names it; none if the SIGINT came before the
  `next()`); then the process exits, its iterators still alive."""
  _, out, err, code = learner_runs
  assert code == 130, (out, err)
  stopped, text = out.splitlines()[:2]
  assert stopped == 'stopped: KeyboardInterrupt', out
  assert (text == 'text: ' or
          f'The source 1 table gated at {gated} stayed empty' in text), out


def test_a_learner_sees_no_traceback_when_a_schedule_goes_bad(learner_runs):
  """Run 1 of `learner_runs`, TensorFlow's own log on: an exception raised
  inside a dataset's Python is logged there with its traceback while the
  batch is built ahead; ours fails in the graph. The learner then goes on
  (and exits, in run 2) with its iterator alive."""
  first, _, err, _ = learner_runs
  assert 'Traceback' not in err, err
  assert first[:3] == ['batch 0', 'batch 1', 'stopped: InvalidArgumentError']
  assert ('assertion failed: [weights[0] must be a finite number >= 0, got '
          '-1.0 from its schedule at step 2.]') in first[3]
