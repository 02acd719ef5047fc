"""Tables written by TF-Agents' own observers, from a real PyDriver, exported.

`ReverbAddTrajectoryObserver` (2-step items, each episode its own Reverb
episode, 1-3-row chunks) and `ReverbAddEpisodeObserver` (one item per whole
episode) write into tables signed as TF-Agents' `ReverbReplayBuffer` signs
them; the export must give each episode the driver collected, as
`to_rlds.trajectories_to_steps` makes it of the driver's own trajectories.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import to_rlds  # pylint: disable=g-import-not-at-top
from tests import driver_data  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top

EPISODES = 12


@pytest.fixture(scope='module')
def observed(tmp_path_factory):
  """A checkpoint of tables 'steps' and 'episodes' that a driver's observers
  filled, and what the driver collected."""
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
  collected = driver_data.collect(EPISODES, seed=7,
                                  observers=[steps, episodes])
  steps.close()
  episodes.close()
  assert True in collected.terminal and False in collected.terminal
  directory = export_data.checkpoint(server)
  server.stop()
  return directory, collected


def _expected(collected):
  return [{'steps': to_rlds.trajectories_to_steps(episode)}
          for episode in collected.episodes]


@pytest.mark.parametrize('table', ['steps', 'episodes'])
def test_observers_tables_give_the_drivers_episodes(observed, tmp_path,
                                                    table):
  directory, collected = observed

  report = rlds_reverb.export(table, tmp_path / 'out', checkpoint=directory)

  rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / 'out'),
                                 _expected(collected))
  assert (report.episodes, report.lost) == (EPISODES, False)
  assert report.steps == sum(len(e.step_type) for e in collected.episodes)
