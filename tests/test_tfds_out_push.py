"""Driver -> RLDS directory -> push: the items TF-Agents' observer writes.

A real PyDriver feeds TF-Agents' `ReverbAddTrajectoryObserver` (2-step
items, table 'observer') and a list; each episode's trajectories become RLDS
steps (`to_rlds`), are written by `EpisodeWriter`, read back by
`rlds_reverb.load` and pushed by `rlds_reverb.push` (table 'pushed') of a
real Reverb server. The items are equal but for the one difference the
conversion's rules make: a terminal episode's boundary trajectory (LAST ->
FIRST) has discount 0, where the observer has the reset's 1.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import to_rlds  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import EpisodeWriter  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import features_from_specs  # pylint: disable=g-import-not-at-top
from tests import driver_data  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests.export_data import leaf_index  # pylint: disable=g-import-not-at-top
from tests.export_data import policy_info  # pylint: disable=g-import-not-at-top


def test_recorded_episodes_push_the_observers_items(make_server, tmp_path):
  server = make_server([reverb_tables.fifo_table('observer'),
                        reverb_tables.fifo_table('pushed')])
  address = reverb_tables.address(server)
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), 'observer', sequence_length=2)
  collected = driver_data.collect(10, seed=11, observers=[observer])
  observer.close()
  assert True in collected.terminal and False in collected.terminal

  step_spec = to_rlds.rlds_step_spec(collected.trajectory_spec)
  features = features_from_specs(step_spec)
  with EpisodeWriter(tmp_path, features, name='recorded',
                     shard_episodes=4) as writer:
    for episode in collected.episodes:
      writer.write({'steps': to_rlds.trajectories_to_steps(episode)})
  result = rlds_reverb.push(rlds_reverb.load(os.fspath(tmp_path)), address,
                            'pushed', policy_info_fn=policy_info)

  expected = reverb_tables.drain_flat(address, 'observer')
  assert len(expected) == sum(len(e.step_type) - 1
                              for e in collected.episodes)
  discount = leaf_index(collected.trajectory_spec, 'discount')
  first_items = np.cumsum([0] + [len(e.step_type) - 1
                                 for e in collected.episodes])
  for episode, terminal, first in zip(collected.episodes, collected.terminal,
                                      first_items):
    if terminal:  # Its last item ends with the boundary trajectory.
      item = expected[first + len(episode.step_type) - 2]
      assert item[discount].tolist() == [0.0, 1.0]
      item[discount] = np.array([0.0, 0.0], np.float32)
  pushed = reverb_tables.drain_flat(address, 'pushed')
  assert result.items == len(pushed) == len(expected)
  reverb_tables.assert_same_flat_items(pushed, expected)
