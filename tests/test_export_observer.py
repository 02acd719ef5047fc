"""Tables written by TF-Agents' own observers, from a real PyDriver, exported.

`ReverbAddTrajectoryObserver` (2-step items, each episode its own Reverb
episode, 1-3-row chunks) and `ReverbAddEpisodeObserver` (one item per whole
episode) write into tables signed as TF-Agents' `ReverbReplayBuffer` signs
them; the export must give each episode the driver collected, as
`to_rlds.trajectories_to_steps` makes it of the driver's own trajectories,
and the dataset an `RldsRecorder` of the same driver writes: the same
features, steps and metadata. An episode still open in a live table is left
out and counted.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.environments import random_py_environment  # pylint: disable=g-import-not-at-top
from tf_agents.policies import random_py_policy  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import to_rlds  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import layout  # pylint: disable=g-import-not-at-top
from tests import driver_data  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top

EPISODES = 12


@pytest.fixture(scope='module')
def observed(tmp_path_factory):
  """A checkpoint of tables 'steps' and 'episodes' that a driver's observers
  filled, what the driver collected, and its recording by an RldsRecorder."""
  tmp_path = tmp_path_factory.mktemp('observed')
  spec = tensor_spec.from_spec(driver_data.collect(1, seed=0).trajectory_spec)
  server = export_data.checkpointed_server(
      [export_data.signed_table('steps', spec),
       export_data.signed_table('episodes', spec)], tmp_path / 'ckpt')
  client = reverb.Client(f'localhost:{server.port}')
  steps = reverb_utils.ReverbAddTrajectoryObserver(
      client, 'steps', sequence_length=2, stride_length=1)
  episodes = reverb_utils.ReverbAddEpisodeObserver(
      client, 'episodes', max_sequence_length=100)
  recorder = rlds_reverb.RldsRecorder(tmp_path / 'recorded', spec)
  collected = driver_data.collect(EPISODES, seed=7,
                                  observers=[steps, episodes, recorder])
  steps.close()
  episodes.close()
  assert recorder.close().episodes == EPISODES
  assert True in collected.terminal and False in collected.terminal
  directory = export_data.checkpoint(server)
  server.stop()
  return directory, collected, os.fspath(tmp_path / 'recorded')


def _expected(collected):
  return [{'steps': to_rlds.trajectories_to_steps(episode)}
          for episode in collected.episodes]


@pytest.mark.parametrize('table', ['steps', 'episodes'])
def test_observers_tables_give_the_drivers_episodes(observed, tmp_path,
                                                    table):
  directory, collected, _ = observed

  report = rlds_reverb.export(table, tmp_path / 'out', checkpoint=directory)

  rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / 'out'),
                                 _expected(collected))
  assert (report.episodes, report.lost) == (EPISODES, False)
  assert report.steps == sum(len(e.step_type) for e in collected.episodes)


def test_an_export_holds_what_a_recording_of_the_driver_holds(observed,
                                                             tmp_path):
  """One writer for both: the same features.json, steps and metadata."""
  directory, collected, recorded = observed

  rlds_reverb.export('steps', tmp_path / 'out', checkpoint=directory)

  out = os.fspath(tmp_path / 'out')
  assert layout.read_features_json(out) == layout.read_features_json(recorded)
  exported = rlds_dirs.read_episodes(out)
  rlds_dirs.assert_same_episodes(exported, rlds_dirs.read_episodes(recorded))
  assert [(e['episode_id'], e['episode_length'], bool(e['terminated']))
          for e in exported] == [
              (i, len(episode.step_type), terminal) for i, (episode, terminal)
              in enumerate(zip(collected.episodes, collected.terminal))]
  with np.errstate(over='ignore'):  # Random rewards: some sums are inf.
    returns = [np.sum(episode.reward, dtype=np.float32)
               for episode in collected.episodes]
  np.testing.assert_array_equal([e['episode_return'] for e in exported],
                                returns)


def _position_reward(step_type, action, observation):
  del step_type
  return np.float32(action) + observation['position'][0]


def test_episode_still_open_is_left_out_and_counted(tmp_path):
  """A live table: 3 whole episodes, then 3 steps of one not yet ended."""
  spec = tensor_spec.from_spec(driver_data.collect(1, seed=0).trajectory_spec)
  server = export_data.checkpointed_server(
      [export_data.signed_table('steps', spec)], tmp_path / 'ckpt')
  client = reverb.Client(f'localhost:{server.port}')
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      client, 'steps', sequence_length=2, stride_length=1)
  collected = driver_data.collect(3, seed=5, observers=[observer])
  environment = random_py_environment.RandomPyEnvironment(
      driver_data.OBSERVATION_SPEC, driver_data.ACTION_SPEC,
      episode_end_probability=0.0, seed=6, reward_fn=_position_reward)
  policy = random_py_policy.RandomPyPolicy(
      environment.time_step_spec(), environment.action_spec(),
      info_spec=driver_data.DICT_INFO_SPEC, seed=6)
  py_driver.PyDriver(environment, policy, [observer], max_steps=3).run(
      environment.reset())
  observer.flush()
  directory = export_data.checkpoint(server)
  server.stop()

  report = rlds_reverb.export('steps', tmp_path / 'out', checkpoint=directory)

  rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / 'out'),
                                 _expected(collected))
  assert (report.missing_end.count, report.missing_end.rows) == (1, 3)
  assert report.items_left_out == 2
  assert (report.missing_start.count, report.missing_rows.count) == (0, 0)
