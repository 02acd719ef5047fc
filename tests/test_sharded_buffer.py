"""`ShardedReplayBuffer`: a table split over real Reverb servers read and
written as one replay buffer (rlds_reverb/sharded_buffer.py).

The servers run in the test's process, filled by the checked push, episode
I to server I % 2 as `build --servers 2` spreads them; batches are read
back and each row traced to its server; the observer is driven by a real
TF-Agents `PyDriver` and compared with TF-Agents' own observer fed the same
episodes.
"""

import json

import numpy as np
import pytest
import reverb
import tensorflow as tf
from tf_agents.drivers import py_driver
from tf_agents.environments import suite_gym
from tf_agents.policies import random_py_policy
from tf_agents.replay_buffers import reverb_utils
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import trajectory as trajectory_lib

import rlds_reverb
from rlds_reverb import servers_file
from rlds_reverb import tables
from tests import reverb_tables
from tests import rlds_data

TABLE = 'replay'
# Items: server 0 19 + 9 (episodes 0 and 2), server 1 29 + 15 (1 and 3).
EPISODES = [rlds_data.flat_episode(n, seed=i)
            for i, n in enumerate([20, 30, 10, 16])]


def _pairs(episodes):
  return set(reverb_tables.observation_pairs(episodes))


@pytest.fixture(scope='module')
def servers():
  """Two servers of one uniform table: episode I in server I % 2."""
  signature = reverb_tables.signature_for(rlds_data.as_rlds(EPISODES))
  started = [reverb_tables.start_server(
      [tables.table(tables.uniform(TABLE), signature)]) for _ in range(2)]
  for k, server in enumerate(started):
    rlds_reverb.push(rlds_data.as_rlds(EPISODES[k::2]),
                     reverb_tables.address(server), TABLE)
  yield started
  for server in started:
    server.stop()


def _leaves(spec):
  return [(leaf.shape, leaf.dtype) for leaf in tf.nest.flatten(spec)]


def _servers_file(path, servers):  # pylint: disable=redefined-outer-name
  """What a serve of many servers writes (cli/serve_many)."""
  path.write_text(json.dumps({
      'servers': [{'server': k, 'address': reverb_tables.address(server),
                   'tables': {TABLE: {'items': 0, 'max_size': 1}}}
                  for k, server in enumerate(servers)],
      'tables': [TABLE], 'signature': []}))
  return path


def test_batches_hold_each_servers_share_and_frames_add_up(servers, tmp_path):  # pylint: disable=redefined-outer-name
  """28 items on server 0 and 44 on server 1: 'size' shares of a batch of
  12, rows of server 0 first, each row an item of its server."""
  by_file = rlds_reverb.ShardedReplayBuffer(
      _servers_file(tmp_path / 'servers.json', servers))
  by_pairs = rlds_reverb.ShardedReplayBuffer(
      [(reverb_tables.address(server), TABLE) for server in servers])
  assert by_file.places == by_pairs.places
  assert by_file.num_frames() == 28 + 44
  assert _leaves(by_file.data_spec) == _leaves(
      rlds_reverb.create_trajectory_data_spec(rlds_data.as_rlds(EPISODES)))
  on_server = [_pairs(EPISODES[0::2]), _pairs(EPISODES[1::2])]
  rows = {0: 0, 1: 0}
  for trajectories, _ in by_file.as_dataset(12, num_steps=2).take(20):
    observations = trajectories.observation.numpy()
    assert observations.shape == (12, 2, 3)
    server_of_row = [0 if pair.tobytes() in on_server[0] else 1
                     for pair in observations]
    assert server_of_row == sorted(server_of_row)  # Server 0's rows first.
    for k, pair in zip(server_of_row, observations):
      assert pair.tobytes() in on_server[k]
      rows[k] += 1
  # 12 * 28 / 72 = 4.67 rows of each batch, the rest carried: within 1.
  assert abs(rows[0] - 240 * 28 / 72) <= 1, rows


def test_replay_mixture_takes_a_servers_file(servers, tmp_path):  # pylint: disable=redefined-outer-name
  """Its one table on each server, weighted by 'size' as given."""
  path = _servers_file(tmp_path / 'servers.json', servers)
  on_server = [_pairs(EPISODES[0::2]), _pairs(EPISODES[1::2])]
  batches = rlds_reverb.replay_mixture(str(path), 'size', 12)
  for trajectories, _ in batches.take(3):
    rows = [0 if pair.tobytes() in on_server[0] else 1
            for pair in trajectories.observation.numpy()]
    assert rows.count(0) in (4, 5) and rows == sorted(rows), rows
    assert all(pair.tobytes() in on_server[k] for k, pair in
               zip(rows, trajectories.observation.numpy()))


def test_the_observer_writes_whole_episode_i_to_server_i_mod_s(make_server):
  """A driver's episodes through `observer()`: each server holds what
  TF-Agents' own observer writes of its episodes, I % 2 == k."""
  env = suite_gym.load('CartPole-v1')
  spec = tensor_spec.add_outer_dim(tensor_spec.from_spec(
      _collect_spec(env)))
  # A reverb.Table belongs to one server: a new one for each.
  sharded, reference = ([make_server([tables.table(tables.uniform(TABLE),
                                                   spec)])
                         for _ in range(2)] for _ in range(2))
  buffer = rlds_reverb.ShardedReplayBuffer(
      [reverb_tables.address(server) for server in sharded], TABLE)
  observer = buffer.observer(sequence_length=2)
  seen = []
  policy = random_py_policy.RandomPyPolicy(env.time_step_spec(),
                                           env.action_spec())
  np.random.seed(0)
  py_driver.PyDriver(env, policy, [observer, seen.append],
                     max_episodes=5).run(env.reset())
  observer.close()
  episodes = _episodes_of(seen)
  assert len(episodes) == 5
  for k, server in enumerate(reference):
    writer = reverb_utils.ReverbAddTrajectoryObserver(
        reverb.Client(reverb_tables.address(server)), TABLE, 2)
    for episode in episodes[k::2]:
      for trajectory in episode:
        writer(trajectory)
    writer.close()
  for k in range(2):
    got = reverb_tables.drain(sharded[k], TABLE)
    assert got and reverb_tables.same_items(
        reverb_tables.drain(reference[k], TABLE), got), k


def _collect_spec(env):
  """One step of what a random policy's driver gives its observers."""
  return trajectory_lib.Trajectory(
      step_type=env.time_step_spec().step_type,
      observation=env.time_step_spec().observation,
      action=env.action_spec(), policy_info=(),
      next_step_type=env.time_step_spec().step_type,
      reward=env.time_step_spec().reward,
      discount=env.time_step_spec().discount)


def _episodes_of(trajectories):
  """The driver's trajectories cut after each boundary (an episode's end)."""
  episodes, current = [], []
  for trajectory in trajectories:
    current.append(trajectory)
    if trajectory.is_boundary():
      episodes.append(current)
      current = []
  return episodes


BAD = {
    'missing_file': ('{tmp}/none.json', None,
                     '{tmp}/none.json: no such servers file (a serve of many '
                     'servers writes it once every server answers, and '
                     'removes it at stop)'),
    'no_table': (['localhost:1'], None,
                 "server 'localhost:1' is given without a table: pass "
                 'table_name=..., or (address, table) pairs.'),
    'no_servers': ([], None,
                   'ShardedReplayBuffer needs at least one server.'),
    'one_string': ('localhost:1', None,
                   'servers must be a servers file (.json) or a sequence of '
                   "(address, table) or of addresses, got 'localhost:1'."),
    'not_a_place': ([3], None,
                    'a server must be an address or (address, table), got 3.'),
}


@pytest.mark.parametrize('servers_arg, table_name, message', BAD.values(),
                         ids=BAD.keys())
def test_bad_servers_are_one_line_before_any_read(servers_arg, table_name,
                                                  message, tmp_path):
  if isinstance(servers_arg, str):
    servers_arg = servers_arg.format(tmp=tmp_path)
  with pytest.raises(rlds_reverb.RldsReverbError) as raised:
    rlds_reverb.ShardedReplayBuffer(servers_arg, table_name)
  assert str(raised.value) == message.format(tmp=tmp_path)


def test_a_servers_file_of_several_tables_needs_one_named(tmp_path):
  path = tmp_path / 'servers.json'
  path.write_text(json.dumps({
      'servers': [{'server': 0, 'address': 'localhost:1'}],
      'tables': ['a', 'b'], 'signature': []}))
  with pytest.raises(rlds_reverb.ServersFileError) as raised:
    rlds_reverb.ShardedReplayBuffer(path)
  assert str(raised.value) == (
      f"{path} lists several tables ('a', 'b'): name one, as ({str(path)!r}, "
      f'TABLE)')
  assert servers_file.places_of(path, 'b') == [('localhost:1', 'b')]


def test_a_server_that_does_not_answer_is_named(servers):  # pylint: disable=redefined-outer-name
  dead = reverb_tables.start_server([reverb.Table.queue(TABLE, 10)])
  address = reverb_tables.address(dead)
  dead.stop()
  with pytest.raises(rlds_reverb.RldsReverbError, match=address):
    rlds_reverb.ShardedReplayBuffer(
        [reverb_tables.address(servers[0]), address], TABLE, timeout=1)


def test_a_bad_on_server_loss_is_one_line_before_any_read():
  with pytest.raises(rlds_reverb.MixedReplayError) as raised:
    rlds_reverb.ShardedReplayBuffer(['localhost:1'], TABLE,
                                    on_server_loss='skip')
  assert str(raised.value) == (
      "on_server_loss must be 'raise' or 'drop', got 'skip'.")
