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


# Steps read at a time from a dataset of trajectories (`observed_steps`).
BLOCK_STEPS = 512


def observe_all(trajectories, observers) -> None:
  """Calls each TF-Agents observer per trajectory, then flushes and closes."""
  for entry in observed_steps(trajectories):
    for observer in observers:
      observer(entry)
  for observer in observers:
    observer.flush()
    observer.close()


def observed_steps(trajectories):
  """The trajectories one by one, as numpy (as a PyDriver gives observers
  its steps). A dataset of fixed shapes is read in blocks and sliced: read
  a step at a time, tf.data costs ~1 ms a step, most of a 27,000-step
  reference. Slices keep 0-d arrays (`leaf[i, ...]`), so strings stay
  object arrays, as a step's `.numpy()` gives them, not fixed-width bytes."""
  if not isinstance(trajectories, tf.data.Dataset) or not all(
      spec.shape.is_fully_defined()
      for spec in tf.nest.flatten(trajectories.element_spec)):
    yield from trajectories
    return
  for block in trajectories.batch(BLOCK_STEPS).as_numpy_iterator():
    for index in range(len(tree.flatten(block)[0])):
      yield tree.map_structure(lambda leaf, i=index: leaf[i, ...], block)


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
