"""Driver -> RldsRecorder -> rlds_reverb.push: TF-Agents' observer's items.

A real driver (PyDriver unbatched and with 4 envs; a TF driver with 3)
records nested observations with a uint8 image and a dict policy_info.
The same trajectories, each whole episode in the order the recorder wrote
it, feed TF-Agents' `ReverbAddTrajectoryObserver` (2-step items, table
'observer'); the recording is read by `rlds_reverb.load` and pushed by
`rlds_reverb.push` (table 'pushed') of one real Reverb server. The items
are equal but for the one difference the conversion's rules make: a
terminal episode's boundary trajectory (LAST -> FIRST) has discount 0,
where the observer has the reset's 1.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import dynamic_step_driver  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
from tf_agents.utils import common  # pylint: disable=g-import-not-at-top
import tree  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from tests import record_envs  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests.export_data import leaf_index  # pylint: disable=g-import-not-at-top
from tests.export_data import policy_info  # pylint: disable=g-import-not-at-top
from tests.record_envs import numpy_list_observer  # pylint: disable=g-import-not-at-top
from tests.record_envs import tf_setup  # pylint: disable=g-import-not-at-top


def record_py(directory, batch_size):
  """(trajectory spec, the driver's trajectories) of a PyDriver recorded."""
  if batch_size is None:
    env = record_envs.random_env(seed=81)
  else:
    env = record_envs.batched([record_envs.random_env(seed=81 + i)
                               for i in range(batch_size)])
  policy = record_envs.policy(env, seed=82)
  recorder = rlds_reverb.RldsRecorder(directory, policy.trajectory_spec,
                                      env=env)
  trajectories = []
  driver = py_driver.PyDriver(env, policy, [recorder, trajectories.append],
                              max_episodes=10)
  final, _ = driver.run(env.reset())
  recorder.close(final_time_step=final)
  return policy.trajectory_spec, trajectories


def record_tf(directory, batch_size):
  tf_env, policy = tf_setup(batch_size=batch_size, seed=83)
  recorder = rlds_reverb.RldsRecorder(directory, policy.trajectory_spec,
                                      env=tf_env)
  trajectories = []
  driver = dynamic_step_driver.DynamicStepDriver(
      tf_env, policy, [recorder.tf_observer,
                       numpy_list_observer(trajectories)], num_steps=30)
  time_step, _ = common.function(driver.run)()
  recorder.close(final_time_step=time_step)
  plain_spec = tf.nest.map_structure(lambda x: x, policy.trajectory_spec)
  return plain_spec, [tree.map_structure(np.asarray, t) for t in trajectories]


def observe_whole_episodes(address, trajectories, batch_size):
  """Feeds each whole episode, in the recorder's order, to TF-Agents'
  observer; returns how many episodes and which of them terminated."""
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), 'observer', sequence_length=2)
  episodes = record_envs.episodes_in_end_order(trajectories, batch_size)
  for episode, _, _ in episodes:
    for step in range(len(episode.step_type)):
      observer(tree.map_structure(lambda x, s=step: x[s], episode))
  observer.close()
  return [(len(e.step_type), bool(e.discount[-2] == 0))
          for e, _, _ in episodes]


@pytest.mark.parametrize('driver, batch_size', [
    ('py', None), ('py', 4), ('tf', 3)])
def test_pushed_recording_equals_the_observers_items(make_server, tmp_path,
                                                     driver, batch_size):
  server = make_server([reverb_tables.fifo_table('observer'),
                        reverb_tables.fifo_table('pushed')])
  address = reverb_tables.address(server)
  record = record_py if driver == 'py' else record_tf
  spec, trajectories = record(tmp_path, batch_size)
  whole = observe_whole_episodes(address, trajectories, batch_size)
  assert {terminal for _, terminal in whole} == {True, False}

  # The recording's whole episodes only: those cut at close are extra.
  rlds_data = rlds_reverb.load(os.fspath(tmp_path)).take(len(whole))
  result = rlds_reverb.push(rlds_data, address, 'pushed',
                            policy_info_fn=policy_info)
  expected = reverb_tables.drain_flat(address, 'observer')
  assert len(expected) == sum(length - 1 for length, _ in whole)
  discount = leaf_index(spec, 'discount')
  step_type = leaf_index(spec, 'step_type')
  ends = np.cumsum([length - 1 for length, _ in whole]) - 1
  for end, (_, terminal) in zip(ends, whole):
    item = expected[end]  # Its second trajectory is the boundary.
    assert item[step_type][1] == ts.StepType.LAST
    assert item[discount][1] == 1.0  # The reset's, in the observer's item.
    if terminal:
      item[discount] = np.array([0.0, 0.0], np.float32)
  pushed = reverb_tables.drain_flat(address, 'pushed')
  assert result.items == len(pushed) == len(expected)
  reverb_tables.assert_same_flat_items(pushed, expected)
