"""`push` and `push_rlds_to_reverb` against TF-Agents on real Reverb servers.

The reference is TF-Agents itself: `rlds_to_reverb.push_rlds_to_reverb` with
real `ReverbAddTrajectoryObserver`s / `ReverbAddEpisodeObserver`s writes into
tables `tfa_*`, our push into identically configured tables `ours_*`; both are
read back (each item once: FIFO tables with max_times_sampled=1) and compared
as multisets of (priority, data).

To keep the run short, one TF-Agents push may feed several observers through
`FanOut` (TF-Agents' function still converts and calls each observer per
trajectory, then each observer is flushed), so the slow TF-Agents conversion
runs once per dataset.
"""

import json
import pathlib
import re
import subprocess
import sys
import tempfile
import time
from typing import List

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.replay_buffers import reverb_utils
from tf_agents.replay_buffers import rlds_to_reverb as tfa_rlds
import tree

import rlds_reverb
from tests import reverb_tables
from tests import rlds_data
from tests import warm_process
from tests.reverb_tables import client_of
from tests.reverb_tables import drain
from tests.reverb_tables import same_items
from tests.tfa_reference import EOE
from tests.tfa_reference import episodes_of
from tests.tfa_reference import observe_all
from tests.tfa_reference import signature_of
from tests.tfa_reference import trajectory_observer

HANG_GUARD_S = 60  # Not a speed check: only proves a call came back.

# tf-agents 0.19.0's text for an episode longer than `max_sequence_length`.
EPISODE_TOO_LONG = (
    'The number of trajectories within the same episode exceeds '
    '`max_sequence_length`. Consider increasing the `max_sequence_length` or '
    'set `bypass_partial_episodes` to true to bypass the episodes with length '
    'more than `max_sequence_length`.')
SIGNATURE_MISMATCH = (
    'Replay buffer table signature spec should match RLDS data spec.')


# --- Data. -------------------------------------------------------------------

def varied_lengths(sequence_length: int, seed: int) -> List[int]:
  """Lengths 1, shorter than, equal to and longer than an item, and random."""
  rng = np.random.default_rng(seed)
  lengths = [1, max(sequence_length - 1, 1), sequence_length,
             sequence_length + 1, 2 * sequence_length + 1]
  lengths += rng.integers(1, 12, 3).tolist()
  return rng.permutation(lengths).tolist()


class FanOut:
  """One observer to TF-Agents' push that feeds several real observers."""

  def __init__(self, observers):
    self._observers = list(observers)

  def get_table_signature(self):
    return self._observers[0].get_table_signature()

  def __call__(self, entry):
    for observer in self._observers:
      observer(entry)


def tfa_push(data, observers) -> int:
  """TF-Agents' push through each observer, flushed and closed."""
  count = tfa_rlds.push_rlds_to_reverb(data, FanOut(observers))
  for observer in observers:
    observer.flush()
    observer.close()
  return count


def ours_push(data, observer) -> int:
  count = rlds_reverb.push_rlds_to_reverb(data, observer)
  observer.close()
  return count


# --- 1. push_rlds_to_reverb writes what TF-Agents' observers write. ----------

STRIDES = (1, 2, 3)
MODES = (EOE.DROP, EOE.PAD, EOE.TILE)


# 5 is slow tier: 2 (the default) and 3 (items longer than a transition)
# are the default tier's cases.
@pytest.mark.parametrize('sequence_length', [
    2, 3, pytest.param(5, marks=pytest.mark.slow)])
def test_trajectory_observer_items_match_tf_agents(make_server,
                                                   sequence_length):
  seed = 10 + sequence_length
  data = rlds_data.as_rlds(
      episodes_of(varied_lengths(sequence_length, seed), seed))
  signature = signature_of(data)
  combos = [(s, m) for s in STRIDES for m in MODES]
  names = {c: f'{c[0]}_{c[1].name}' for c in combos}
  server = make_server(
      [reverb_tables.fifo_table(f'{side}_{names[c]}', signature)
       for c in combos for side in ('tfa', 'ours')])
  client = client_of(server)
  priority = 0.25 + sequence_length  # Not TF-Agents' default of 1.

  tfa_count = tfa_push(data, [
      trajectory_observer(client, f'tfa_{names[c]}', sequence_length, *c[:1],
                          priority, c[1]) for c in combos])

  problems = []
  for combo in combos:
    observer = trajectory_observer(client, f'ours_{names[combo]}',
                                   sequence_length, combo[0], priority,
                                   combo[1])
    count = ours_push(data, observer)
    expected = drain(server, f'tfa_{names[combo]}')
    got = drain(server, f'ours_{names[combo]}')
    if count != tfa_count:
      problems.append(f'{names[combo]}: returned {count}, TF-Agents {tfa_count}')
    if not same_items(expected, got):
      problems.append(f'{names[combo]}: {len(got)} items differ from '
                      f"TF-Agents' {len(expected)}")
    if not expected:
      problems.append(f'{names[combo]}: the case wrote no items at all')
  assert not problems, '\n'.join(problems)


def test_two_tables_per_observer(make_server):
  data = rlds_data.as_rlds(episodes_of([1, 2, 6, 3, 4], seed=3))
  signature = signature_of(data)
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in ('a1', 'a2', 'b1', 'b2')])
  client = client_of(server)
  tfa_count = tfa_push(data, [trajectory_observer(
      client, ['a1', 'a2'], 3, 2, 2.5, EOE.TILE)])
  count = ours_push(data, trajectory_observer(
      client, ['b1', 'b2'], 3, 2, 2.5, EOE.TILE))
  assert count == tfa_count == 16
  for tfa_table, ours_table in (('a1', 'b1'), ('a2', 'b2')):
    expected = drain(server, tfa_table)
    assert len(expected) == 9  # 1 + 1 + 3 + 2 + 2
    assert same_items(expected, drain(server, ours_table))


def episode_observer(client, table, max_sequence_length, bypass, priority=1):
  return reverb_utils.ReverbAddEpisodeObserver(
      client, table, max_sequence_length, priority=priority,
      bypass_partial_episodes=bypass)


EPISODE_CASES = {
    # name: (lengths, max_sequence_length, bypass, items written)
    'all_fit': ([1, 2, 5, 9, 3, 1, 7], 64, False, 7),
    'all_fit_exactly': ([4, 1, 4, 2], 4, False, 4),
    'long_ones_bypassed': ([3, 5, 1, 4, 7, 2], 4, True, 4),
    'first_and_last_bypassed': ([6, 2, 1, 9], 5, True, 2),
}


@pytest.mark.parametrize('lengths, max_length, bypass, num_items',
                         EPISODE_CASES.values(), ids=EPISODE_CASES.keys())
def test_episode_observer_items_match_tf_agents(make_server, lengths,
                                                max_length, bypass, num_items):
  data = rlds_data.as_rlds(episodes_of(lengths, seed=len(lengths)))
  signature = signature_of(data)
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  tfa_count = tfa_push(data, [
      episode_observer(client, 'tfa', max_length, bypass, priority=0.5)])
  count = ours_push(
      data, episode_observer(client, 'ours', max_length, bypass, priority=0.5))
  expected = drain(server, 'tfa')
  got = drain(server, 'ours')
  assert len(expected) == num_items
  assert same_items(expected, got)
  assert tfa_count == sum(lengths)  # TF-Agents counts bypassed steps too.
  assert count == tfa_count


def test_episode_too_long_raises_tf_agents_error(make_server):
  lengths = [3, 4, 5, 2]  # Episode 2 exceeds max_sequence_length=4.
  data = rlds_data.as_rlds(episodes_of(lengths, seed=7))
  signature = signature_of(data)
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  tfa_observer = episode_observer(client, 'tfa', 4, bypass=False)
  with pytest.raises(ValueError) as tfa_error:
    tfa_rlds.push_rlds_to_reverb(data, tfa_observer)
  tfa_observer.flush()  # TF-Agents leaves the first two episodes pending.
  assert str(tfa_error.value) == EPISODE_TOO_LONG

  with pytest.raises(ValueError) as error:
    rlds_reverb.push_rlds_to_reverb(data, episode_observer(client, 'ours', 4,
                                                           bypass=False))
  assert str(error.value) == EPISODE_TOO_LONG
  assert error.value.__notes__ == [
      f'Written and confirmed before this error: 2 whole episodes (2 '
      f'items), in table ours at {client.server_address}.']
  expected = drain(server, 'tfa')
  assert len(expected) == 2
  assert same_items(expected, drain(server, 'ours'))


def nested_episode(num_steps: int, seed: int, terminal: bool):
  """An episode whose observation is a nest of several dtypes and shapes."""
  episode = rlds_data.flat_episode(num_steps, seed, terminal)
  rng = np.random.default_rng(seed + 1)
  episode['observation'] = {
      'pixels': rng.integers(0, 255, (num_steps, 2, 2), dtype=np.uint8),
      'state': {'position': rng.standard_normal((num_steps, 2)).astype(
                    np.float32),
                'velocity': rng.standard_normal(num_steps)},  # float64
  }
  return episode


def test_nested_observations_match_tf_agents_observers(make_server):
  """Nested observations, per step, written as TF-Agents' observers would.

  TF-Agents' own converter cannot be the reference here: its `_pair_to_tuple`
  gives dict-valued fields the whole step pair, so each observation leaf of its
  trajectories has an extra leading axis of 2 (against its own spec). So the
  observers are fed our trajectories, checked first against the episodes.
  """
  lengths = [1, 4, 2, 6]
  episodes = [nested_episode(n, seed=i, terminal=i % 2 == 0)
              for i, n in enumerate(lengths)]
  data = rlds_data.as_rlds(episodes)
  signature = signature_of(data)
  trajectories = list(rlds_reverb.convert_rlds_to_trajectories(data))
  steps_observation = tree.map_structure(
      lambda *leaves: np.concatenate(leaves),
      *[episode['observation'] for episode in episodes])
  assert len(trajectories) == sum(lengths)
  for i, entry in enumerate(trajectories):
    tree.map_structure(
        lambda got, steps, i=i: np.testing.assert_array_equal(got, steps[i]),
        tree.map_structure(np.asarray, entry.observation), steps_observation)

  tables = ('tfa_seq', 'ours_seq', 'tfa_episode', 'ours_episode')
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in tables])
  client = client_of(server)
  observe_all(trajectories, [
      trajectory_observer(client, 'tfa_seq', 3, 1, 1.0, EOE.PAD),
      episode_observer(client, 'tfa_episode', 8, False)])
  assert ours_push(data, trajectory_observer(
      client, 'ours_seq', 3, 1, 1.0, EOE.PAD)) == sum(lengths)
  assert ours_push(data, episode_observer(
      client, 'ours_episode', 8, False)) == sum(lengths)
  for kind, num_items in (('seq', 1 + 2 + 1 + 4), ('episode', 4)):
    expected = drain(server, f'tfa_{kind}')
    got = drain(server, f'ours_{kind}')
    assert len(expected) == num_items
    assert same_items(expected, got)
    observation = got[0][1].observation
    assert observation['pixels'].dtype == np.uint8
    assert observation['pixels'].shape[1:] == (2, 2)
    assert observation['state']['velocity'].dtype == np.float64


# --- 2. push: the first-class API. -------------------------------------------

@pytest.mark.parametrize('end_of_episode', MODES, ids=lambda m: m.name)
@pytest.mark.parametrize('connect_with', ['address', 'client'])
def test_push_matches_observer_and_counts(make_server, end_of_episode,
                                          connect_with):
  lengths = [2, 1, 7, 3, 5]
  data = rlds_data.as_rlds(episodes_of(lengths, seed=21))
  signature = signature_of(data)
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in ('a1', 'a2', 'b1', 'b2')])
  client = client_of(server)
  tfa_push(data, [trajectory_observer(client, ['a1', 'a2'], 3, 2, 1.5,
                                      end_of_episode)])
  target = (reverb_tables.address(server) if connect_with == 'address'
            else client)
  result = rlds_reverb.push(data, target, ['b1', 'b2'], sequence_length=3,
                            stride_length=2, priority=1.5,
                            end_of_episode=end_of_episode, timeout=10)
  expected = {name: drain(server, name) for name in ('a1', 'a2')}
  assert expected['a1']
  assert (result.episodes, result.trajectories, result.items,
          result.skipped_episodes) == (
              len(lengths), sum(lengths),
              len(expected['a1']) + len(expected['a2']), 0)
  assert same_items(expected['a1'], drain(server, 'b1'))
  assert same_items(expected['a2'], drain(server, 'b2'))


def test_push_one_table_by_name(make_server):
  data = rlds_data.as_rlds(episodes_of([4, 2], seed=5))
  server = make_server([reverb_tables.fifo_table('t', signature_of(data))])
  result = rlds_reverb.push(data, reverb_tables.address(server), 't')
  assert (result.episodes, result.trajectories, result.items) == (2, 6, 4)
  assert len(drain(server, 't')) == 4


# --- 3. Any other observer is called once per trajectory. --------------------

def test_plain_callable_observer_gets_each_trajectory():
  lengths = [3, 1, 4]
  data = rlds_data.as_rlds(episodes_of(lengths, seed=8))
  received = []

  def observer(trajectory):
    received.append(tree.map_structure(np.asarray, trajectory))

  count = rlds_reverb.push_rlds_to_reverb(data, observer)
  expected = [tree.map_structure(np.asarray, t)
              for t in tfa_rlds.convert_rlds_to_trajectories(data)]
  assert count == len(received) == len(expected) == sum(lengths)
  for got, want in zip(received, expected):
    tree.assert_same_structure(got, want)
    for got_leaf, want_leaf in zip(tree.flatten(got), tree.flatten(want)):
      assert got_leaf.dtype == want_leaf.dtype
      np.testing.assert_array_equal(got_leaf, want_leaf)


# --- 4. Table signatures. ----------------------------------------------------

def with_int32_action(episode):
  return {**episode, 'action': episode['action'].astype(np.int32)}


SIGNATURE_CASES = {
    # name: (table's episode maker, differing field)
    'observation_shape': (
        lambda: rlds_data.flat_episode(3, 0, observation_size=4),
        'observation'),
    'action_dtype': (lambda: with_int32_action(rlds_data.flat_episode(3, 0)),
                     'action'),
}


@pytest.mark.parametrize('make_table_episode, field',
                         SIGNATURE_CASES.values(), ids=SIGNATURE_CASES.keys())
@pytest.mark.parametrize('api', ['push', 'push_rlds_to_reverb'])
def test_signature_mismatch_writes_nothing(make_server, make_table_episode,
                                           field, api):
  data = rlds_data.as_rlds(episodes_of([3, 4], seed=1))
  table_data = rlds_data.as_rlds([make_table_episode()])
  server = make_server(
      [reverb_tables.fifo_table('signed', signature_of(table_data))])
  client = client_of(server)
  with pytest.raises(rlds_reverb.SignatureMismatchError) as error:
    if api == 'push':
      rlds_reverb.push(data, reverb_tables.address(server), 'signed')
    else:
      rlds_reverb.push_rlds_to_reverb(
          data, trajectory_observer(client, 'signed', 2, 1, 1, EOE.DROP))
  assert isinstance(error.value, ValueError)
  assert str(error.value) == SIGNATURE_MISMATCH
  notes = error.value.__notes__
  assert len(notes) == 1
  assert notes[0].startswith(f"table 'signed': {field}: table has ")
  assert reverb_tables.table_size(client, 'signed') == 0
  # TF-Agents rejects the same data with the same text.
  with pytest.raises(ValueError, match=SIGNATURE_MISMATCH):
    tfa_rlds.push_rlds_to_reverb(
        data, trajectory_observer(client, 'signed', 2, 1, 1, EOE.DROP))


@pytest.mark.parametrize('api', ['push', 'push_rlds_to_reverb'])
def test_unsigned_table_accepts_data(make_server, api):
  data = rlds_data.as_rlds(episodes_of([1, 5, 3], seed=4))
  server = make_server([reverb_tables.fifo_table('tfa', signature_of(data)),
                        reverb_tables.fifo_table('unsigned')])
  client = client_of(server)
  tfa_push(data, [trajectory_observer(client, 'tfa', 2, 1, 2.0, EOE.PAD)])
  if api == 'push':
    result = rlds_reverb.push(data, reverb_tables.address(server), 'unsigned',
                              sequence_length=2, priority=2.0,
                              end_of_episode=EOE.PAD)
    assert result.items == 7
  else:
    assert ours_push(data, trajectory_observer(
        client, 'unsigned', 2, 1, 2.0, EOE.PAD)) == 9
  expected = drain(server, 'tfa')
  assert len(expected) == 7
  assert same_items(expected, drain(server, 'unsigned'))


# --- 5. Everything confirmed on return (no pile of pending items). -----------

def expected_pairs(episodes, priority: float) -> List[tuple]:
  """The 2-step DROP items of well-formed episodes, built in numpy."""
  items = []
  for episode in episodes:
    n = len(episode['reward'])
    step_type = np.full(n, 1, np.int32)
    step_type[0], step_type[-1] = 0, 2
    next_step_type = np.append(step_type[1:], np.int32(0))
    discount = episode['discount'].astype(np.float32).copy()
    if episode['is_terminal'][-1]:
      discount[-1] = 0.0
    columns = (step_type, episode['observation'], episode['action'],
               next_step_type, episode['reward'], discount)
    for end in range(2, n + 1):
      items.append((priority, [c[end - 2:end] for c in columns]))
  return items


def test_long_push_is_confirmed_on_return(make_server):
  episodes = episodes_of([400, 400, 400], seed=9)
  data = rlds_data.as_rlds(episodes)
  server = make_server([reverb_tables.fifo_table('t', signature_of(data))])
  client = client_of(server)
  result = rlds_reverb.push(data, client, 't', sequence_length=2, priority=0.5)
  assert reverb_tables.table_size(client, 't') == 3 * 399
  assert (result.episodes, result.trajectories, result.items) == (
      3, 1200, 3 * 399)
  assert same_items(expected_pairs(episodes, 0.5), drain(server, 't'))


# --- 6. Never hang: timeouts and unreachable servers. ------------------------

# A push into a table whose rate limiter blocks inserts, run in a child
# process: after the error, the error is released and the server stopped,
# under a watchdog, and then the child must exit: a Reverb writer left open
# would wait for its items without end at interpreter exit. The case prints
# a JSON report, then 'released', 'stopped'. The child runs these cases last
# (`CHILD_SCRIPT`): the watchdog of the last one stays armed to the exit.
BLOCKED_PUSH_CASE = r"""
def blocked(kind):
  faulthandler.cancel_dump_traceback_later()  # An earlier case's.
  tables = {
      'sample_to_insert_ratio': lambda: tables_lib.table(
          tables_lib.TableOptions('blocked', sampler='fifo', max_size=1000,
                                  samples_per_insert=1.0, error_buffer=1.0)),
      'full_queue': lambda: reverb.Table.queue('blocked', max_size=5),
  }
  server = reverb_tables.start_server([tables[kind]()])
  address = reverb_tables.address(server)
  data = rlds_data.as_rlds(
      [rlds_data.flat_episode(20, seed=seed) for seed in range(3)])
  report = {'address': address, 'raised': None}
  kept_error = None
  start = time.monotonic()
  try:
    rlds_reverb.push(data, address, 'blocked', sequence_length=2, timeout=2)
  except Exception as error:  # pylint: disable=broad-except
    report.update(raised=type(error).__name__, message=str(error),
                  is_timeout_error=isinstance(error, TimeoutError),
                  cause=type(error.__cause__).__name__)
    kept_error = error  # Leaving `except` releases the error: kept for later.
  report['seconds'] = time.monotonic() - start
  say(report)
  faulthandler.dump_traceback_later(%(watchdog_s)d, exit=True)
  del kept_error  # With it, the push's writer.
  gc.collect()
  say('released')
  server.stop()
  say('stopped')
""" % {'watchdog_s': 20}

BLOCKING_TABLES = ('sample_to_insert_ratio', 'full_queue')
# 'full_queue' is slow tier: the writer meets the same flush deadline whatever
# blocks it; the default tier has 'sample_to_insert_ratio' here, and a push
# into a full Queue failing after --timeout in test_faults.test_capacity_
# warnings_say_what_the_table_does[queue].
BLOCKING_KINDS = [pytest.param(kind, marks=pytest.mark.slow)
                  if kind == 'full_queue' else kind
                  for kind in BLOCKING_TABLES]


def selected(request, argname: str) -> list:
  """The values of `argname` in this module's selected tests, in order: a
  module fixture starts children only for those (not for the other tier's)."""
  values = []
  for item in request.session.items:
    params = getattr(item, 'callspec', None)
    if (item.module is request.module and params is not None
        and argname in params.params
        and params.params[argname] not in values):
      values.append(params.params[argname])
  return values


class ChildRun:
  """`python -c script args`, started when made (forked from the tests'
  zygote: no TensorFlow start of its own); `result()` waits for it.

  Its output goes to files, not pipes, so that it runs unattended while
  other tests run: a pipe nobody reads would fill and stop it."""

  def __init__(self, script: str, *args: str):
    root = pathlib.Path(__file__).resolve().parents[1]
    self._out, self._err = tempfile.TemporaryFile(), tempfile.TemporaryFile()
    self._child = warm_process.WarmPopen(
        [sys.executable, '-c', script, *args], cwd=root, stdout=self._out,
        stderr=self._err)
    self._result = None

  def result(self):
    """(exit code, stdout lines, stderr); exit code None if it did not exit
    within 2 * HANG_GUARD_S of this call (then it is killed)."""
    if self._result is None:
      try:
        code = self._child.wait(timeout=2 * HANG_GUARD_S)
      except subprocess.TimeoutExpired:
        self._kill()
        code = None
      self._result = (code, self._read(self._out).splitlines(),
                      self._read(self._err))
    return self._result

  def stop(self) -> None:
    """Kills the child if it runs, and closes its output files: left open,
    they are finalized whenever the collector runs, maybe in a later test
    whose `pytest.warns` then records their ResourceWarning."""
    self._kill()
    self._out.close()
    self._err.close()

  def _kill(self) -> None:
    if self._child.poll() is None:
      self._child.kill()
      self._child.wait()

  @staticmethod
  def _read(file) -> str:
    file.seek(0)
    return file.read().decode(errors='replace')


def child_cases(request) -> List[str]:
  """The child's cases for this module's selected tests: the timed-out
  cases first ('stop' before 'no_stop'), the blocked pushes last (see the
  comments above)."""
  timed_out = sorted(selected(request, 'case'),
                     key=lambda case: case[1] != 'stop')
  return ([f'timed_out:{size}:{stop}' for size, stop in timed_out] +
          [f'blocked:{kind}' for kind in selected(request, 'kind')])


@pytest.fixture(scope='module', autouse=True)
def child_run(request):
  """The child process of `child`, started before the module's first test:
  the push timeouts it waits out in full (2 s, then 3 s per timed-out case)
  and its Python start pass while this module's other tests run, instead
  of in the test that first asks for its result."""
  cases = child_cases(request)
  run = ChildRun(CHILD_SCRIPT, *cases) if cases else None
  yield run
  if run is not None:
    run.stop()


@pytest.fixture(scope='module')
def child(request, child_run):
  """The cases of this module's selected tests, run in one child process
  (one Python and TensorFlow start-up): case -> its lines' values, in order;
  and the child's exit code and stderr."""
  code, lines, err = child_run.result()
  said = {case: [] for case in child_cases(request)}
  for line in lines:
    case, value = line.split('\t', 1)
    said[case].append(json.loads(value))
  return said, code, err


@pytest.fixture(scope='module')
def blocked_push(child):
  """kind -> (report, lines after it, stderr, exit code)."""
  said, code, err = child

  def result(kind):
    lines = said[f'blocked:{kind}']
    assert lines, f'the child wrote no report; its stderr:\n{err[-3000:]}'
    return lines[0], lines[1:], err, code
  return result


@pytest.mark.parametrize('kind', BLOCKING_KINDS)
def test_blocking_rate_limiter_times_out(blocked_push, kind):
  report, _, _, _ = blocked_push(kind)
  assert report['raised'] == 'ReverbTimeoutError'
  assert report['seconds'] < HANG_GUARD_S
  assert "'blocked'" in report['message']
  assert report['address'] in report['message']
  assert 'Confirmed' in report['message']
  assert report['is_timeout_error']
  assert report['cause'] == 'DeadlineExceededError'


@pytest.mark.parametrize('kind', BLOCKING_KINDS)
def test_writer_left_by_timeout_does_not_hang(blocked_push, kind):
  """Releasing the error, stopping the server and exiting all return."""
  _, after, stderr, code = blocked_push(kind)
  assert (after, code) == (['released', 'stopped'], 0), (
      f'after the timeout, releasing the error, stopping the server or '
      f"exiting did not return; the child's stack:\n{stderr[-3000:]}")


# The script: the bundled data into a queue that fills up, the
# timeout caught; with or without `server.stop()`, the script must exit.
# Sized 5000, the queue takes the first confirmation (4,000 rows and more),
# not the second. The queue's items are read back, oldest first.
# One child runs every selected case (SIZE:stop or SIZE:no_stop), each with a
# server, client and queue of its own, kept to the end as a script's globals
# are, and prints a report per case: it must exit after all of them (one
# Python and TensorFlow start-up for all the cases). The timeout, waited out
# in full per case, needs only to outlast the confirmation of the items a
# flush leaves pending (~50) on a healthy server in the same process.
TIMED_OUT_CASE = r"""
def timed_out(size, stop):
  server = reverb.Server([reverb.Table.queue('q', max_size=size)])
  client = reverb.Client(f'localhost:{server.port}')
  kept.append((server, client))
  try:
    rlds_reverb.push(rlds_reverb.load('bundled:cartpole'), client, 'q',
                     timeout=3)
    raise SystemExit('the push into a full queue did not time out')
  except rlds_reverb.ReverbTimeoutError as error:
    message = str(error)
  held = reverb_tables.table_size(client, 'q')
  observations = [np.asarray(sample.data[1]).tolist() for sample in
                  client.sample('q', num_samples=held, emit_timesteps=False)]
  say({'message': message, 'observations': observations})
  if stop:
    server.stop()
"""

# The one child of this module: every selected case of both kinds, in the
# order given; each line it prints is 'CASE<tab>JSON'.
CHILD_SCRIPT = r"""
import faulthandler, gc, json, os, sys, time
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
import numpy as np
import reverb
import rlds_reverb
from rlds_reverb import tables as tables_lib
from tests import reverb_tables, rlds_data

kept = []  # Each timed-out case's server and client, alive to the end.
""" + BLOCKED_PUSH_CASE + TIMED_OUT_CASE + r"""
for case in sys.argv[1:]:
  def say(value, case=case):
    print(case, json.dumps(value), sep='\t', flush=True)
  name, *args = case.split(':')
  if name == 'blocked':
    blocked(*args)
  else:
    timed_out(int(args[0]), args[1] == 'stop')
"""

TIMED_OUT_CASES = [(100, 'no_stop'), (100, 'stop'), (5000, 'stop')]
# (100, 'stop') is slow tier: the default tier exits without stop() after a
# timeout with nothing confirmed (100, 'no_stop') and with stop() after one
# with confirmed items (5000, 'stop').
TIMED_OUT_PARAMS = [
    pytest.param(case, marks=pytest.mark.slow) if case == (100, 'stop')
    else case for case in TIMED_OUT_CASES]


@pytest.fixture(scope='module')
def bundled_pairs():
  """The observations of every 2-step item of the bundled data, in order."""
  pairs = []
  for episode in rlds_reverb.load('bundled:cartpole'):
    steps = next(iter(episode['steps'].batch(100_000)))
    observations = steps['observation'].numpy().tolist()
    pairs += [observations[i:i + 2] for i in range(len(observations) - 1)]
  return pairs


@pytest.fixture(scope='module')
def timed_out_pushes(child):
  """(size, stop) -> (exit code, report, stderr)."""
  said, code, err = child

  def result(case):
    reports = said[f'timed_out:{case[0]}:{case[1]}']
    return code, reports[0] if reports else None, err
  return result


@pytest.mark.parametrize('case', TIMED_OUT_PARAMS,
                         ids=lambda case: f'queue{case[0]}-{case[1]}')
def test_script_that_caught_a_timeout_exits(timed_out_pushes, bundled_pairs,
                                            case):
  """The script exits 0; the error's counts agree with the queue's items."""
  code, report, stderr = timed_out_pushes(case)
  assert code == 0, f'exit code {code} (None: hung); stderr:\n{stderr[-3000:]}'
  message = report['message']
  confirmed = _number(re.search(
      r'Confirmed before: [\d,]+ whole episodes? \(([\d,]+) items?\)',
      message)[1])
  unconfirmed = _number(re.search(
      r'The ([\d,]+) items? written after those(?: \(of episodes? [^)]*\))? '
      r'(?:was|were) not confirmed and may or may not be in the table',
      message)[1])
  held = report['observations']
  assert held == bundled_pairs[:len(held)]  # The data's first items, in order.
  assert confirmed <= len(held) <= confirmed + unconfirmed
  assert (confirmed > 0) == (case[0] == 5000)


def _number(text: str) -> int:
  return int(text.replace(',', ''))


def test_stopped_server_is_unavailable(make_server):
  data = rlds_data.as_rlds(episodes_of([3], seed=2))
  server = make_server([reverb_tables.fifo_table('t')])
  address = reverb_tables.address(server)
  server.stop()
  start = time.monotonic()
  with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
    rlds_reverb.push(data, address, 't', timeout=2)
  assert time.monotonic() - start < HANG_GUARD_S
  assert address in str(error.value)
  assert isinstance(error.value, ConnectionError)


@pytest.mark.parametrize('api', ['push', 'push_rlds_to_reverb'])
def test_missing_table(make_server, api):
  data = rlds_data.as_rlds(episodes_of([3], seed=2))
  server = make_server([reverb_tables.fifo_table(name, signature_of(data))
                        for name in ('b', 'a')])
  client = client_of(server)
  with pytest.raises(rlds_reverb.TableNotFoundError) as error:
    if api == 'push':
      rlds_reverb.push(data, reverb_tables.address(server), ['a', 'missing'])
    else:
      rlds_reverb.push_rlds_to_reverb(data, trajectory_observer(
          client, ['a', 'missing'], 2, 1, 1, EOE.DROP))
  assert str(error.value) == (
      f"Reverb server at {client.server_address} has no table 'missing'; its "
      f"tables are ['a', 'b'].")
  assert reverb_tables.table_size(client, 'a') == 0


# --- 7. Malformed data: what was written is confirmed and said. --------------

@pytest.mark.parametrize('api', ['push', 'push_rlds_to_reverb'])
def test_malformed_episode_keeps_confirmed_prefix(make_server, api):
  episodes = episodes_of([4, 3, 5, 2], seed=6)
  episodes[2]['is_terminal'][1] = True  # Terminal, but not last.
  data = rlds_data.as_rlds(episodes)
  signature = signature_of(data)
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  tfa_push(rlds_data.as_rlds(episodes[:2]),
           [trajectory_observer(client, 'tfa', 2, 1, 1, EOE.DROP)])
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    if api == 'push':  # Read once, as TF-Agents does (checked push: 'raise').
      rlds_reverb.push(data, client, 'ours', sequence_length=2,
                       on_invalid='stop')
    else:
      rlds_reverb.push_rlds_to_reverb(data, trajectory_observer(
          client, 'ours', 2, 1, 1, EOE.DROP))
  message = str(error.value)
  assert 'Terminal step must be the last step of an episode.' in message
  assert '(episode 2, step 1)' in message
  assert error.value.__notes__ == [
      f'Written and confirmed before this error: 2 whole episodes (5 '
      f'items), in table ours at {client.server_address}.']
  expected = drain(server, 'tfa')
  assert len(expected) == 5
  assert same_items(expected, drain(server, 'ours'))
