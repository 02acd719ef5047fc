"""TF-Agents as the reference for what a push writes, and its helpers.

    episodes_of(lengths, seed) -> numpy episodes -> rlds_data.as_rlds
      -> TF-Agents' observers (trajectory_observer, observe_all) into 'tfa'
         tables, our push into 'ours' tables, signed with signature_of(data)
      -> reverb_tables.drain both, compared (reverb_tables.same_items)
"""

from typing import Dict, List, Sequence

import numpy as np
import tensorflow as tf
from tf_agents.replay_buffers import reverb_utils
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import trajectory
import tree

import rlds_reverb
from tests import rlds_data

EOE = rlds_reverb.EndOfEpisode


def episodes_of(lengths: Sequence[int], seed: int,
                observation_size: int = 3) -> List[Dict[str, object]]:
  """Random episodes of the given lengths, terminal and truncated mixed."""
  rng = np.random.default_rng(seed)
  terminal = rng.permutation(np.arange(len(lengths)) % 2 == 0)
  return [rlds_data.flat_episode(n, seed=seed * 1000 + i,
                                 terminal=bool(terminal[i]),
                                 observation_size=observation_size)
          for i, n in enumerate(lengths)]


def signature_of(data: tf.data.Dataset):
  return tensor_spec.add_outer_dim(rlds_reverb.create_trajectory_data_spec(data))


def trajectory_observer(client, table, sequence_length, stride_length,
                        priority, end_of_episode):
  return reverb_utils.ReverbAddTrajectoryObserver(
      client, table, sequence_length, stride_length=stride_length,
      priority=priority,
      pad_end_of_episodes=end_of_episode is not EOE.DROP,
      tile_end_of_episodes=end_of_episode is EOE.TILE)


def observe_all(trajectories, observers) -> None:
  """Calls each TF-Agents observer per trajectory, then flushes and closes."""
  for entry in trajectories:
    for observer in observers:
      observer(entry)
  for observer in observers:
    observer.flush()
    observer.close()


def assert_same_trajectories(actual, expected):
  """Same count; each field's structure, dtypes, shapes and values equal."""
  assert len(actual) == len(expected), (len(actual), len(expected))
  for index, (got, want) in enumerate(zip(actual, expected)):
    for field in trajectory.Trajectory._fields:
      got_field, want_field = getattr(got, field), getattr(want, field)
      tree.assert_same_structure(want_field, got_field)
      for (path, want_leaf), got_leaf in zip(
          tree.flatten_with_path(want_field), tree.flatten(got_field)):
        want_leaf, got_leaf = np.asarray(want_leaf), np.asarray(got_leaf)
        where = f'trajectory {index}, {field}{list(path)}'
        assert got_leaf.dtype == want_leaf.dtype, (
            f'{where}: dtype {got_leaf.dtype}, expected {want_leaf.dtype}')
        assert got_leaf.shape == want_leaf.shape, (
            f'{where}: shape {got_leaf.shape}, expected {want_leaf.shape}')
        np.testing.assert_array_equal(got_leaf, want_leaf, err_msg=where)
