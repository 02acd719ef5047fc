"""A recorded episode's trajectories -> the RLDS episode the writer takes.

    trajectories of one env, FIRST ... LAST -> FIRST (the boundary)
      -> to_rlds.trajectories_to_steps(terminal=...)      the steps
      -> episode_id, episode_length, episode_return, terminated
    an episode still open when the recording closes:
      + closing_step(final time step): the boundary the driver would have
        given next (the final observation; the reset's reward 0 and
        discount 1; zeros for the action and policy_info never taken)

`episode_length` counts RLDS steps: the environment's transitions plus the
final observation's step. `episode_return` sums the rewards (the boundary's
is 0), in the reward's dtype and shape. `terminated` is False for an episode
cut by a time limit or by the end of the recording (`is_terminal` of its
last step says the same).
"""

import dataclasses
from typing import Any, Dict, List, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import trajectory as trajectory_lib
import tree

from rlds_reverb.convert import step_types
from rlds_reverb.convert import to_rlds
from rlds_reverb.errors import FeaturesError
from rlds_reverb.specs import dtypes
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths

EPISODE_ID = 'episode_id'
EPISODE_LENGTH = 'episode_length'
EPISODE_RETURN = 'episode_return'
TERMINATED = 'terminated'


@dataclasses.dataclass(frozen=True)
class Leaf:
  """One leaf of the trajectory spec: where it is, and what it holds."""
  path: str  # 'observation/pixels'
  field: str  # The Trajectory field: 'observation'.
  dtype: np.dtype  # object for strings.
  shape: Tuple[int, ...]


def leaves_of(data_spec: trajectory_lib.Trajectory) -> List[Leaf]:
  """The leaves of a trajectory spec, in `tree.flatten` order.

  Raises:
    FeaturesError: `data_spec` is not a `Trajectory` of specs, or a leaf has
      a shape not fully known (the recorder keeps fixed-size columns).
  """
  if not isinstance(data_spec, trajectory_lib.Trajectory):
    raise FeaturesError(
        f'data_spec is a {type(data_spec).__name__}; expected the '
        f'Trajectory spec of the data (agent.collect_data_spec, '
        f'policy.trajectory_spec).')
  leaves = []
  for path, spec in tree.flatten_with_path(data_spec):
    name = paths.join(path)
    if not hasattr(spec, 'dtype') or not hasattr(spec, 'shape'):
      raise FeaturesError(f'data_spec {name} is a {type(spec).__name__}, '
                          f'not a spec.')
    shape = tf.TensorShape(spec.shape)
    if not shape.is_fully_defined():
      raise FeaturesError(
          f'data_spec {name} has shape {shape}; the recorder needs fully '
          f'known shapes.')
    leaves.append(Leaf(name, path[0], dtypes.numpy_dtype(spec.dtype),
                       tuple(shape.as_list())))
  return leaves


def metadata_spec(data_spec: trajectory_lib.Trajectory) -> Dict[str, Any]:
  """The spec of each episode's metadata (see the module)."""
  reward = tf.nest.map_structure(
      lambda spec: tf.TensorSpec(spec.shape, spec.dtype), data_spec.reward)
  return {
      EPISODE_ID: tf.TensorSpec([], tf.int64),
      EPISODE_LENGTH: tf.TensorSpec([], tf.int64),
      EPISODE_RETURN: reward,
      TERMINATED: tf.TensorSpec([], tf.bool),
  }


def rlds_episode(trajectory: trajectory_lib.Trajectory, episode_id: int, *,
                 truncated: bool, policy_info_field: str) -> Dict[str, Any]:
  """{'steps': ..., **metadata} of one whole episode's trajectories.

  `truncated`: a time limit or the recording's end cut the episode, whatever
  its last discount; else the discounts say whether it terminated.
  """
  steps = to_rlds.trajectories_to_steps(
      trajectory, terminal=False if truncated else None,
      policy_info_field=policy_info_field)
  return {
      fields.STEPS: steps,
      EPISODE_ID: np.int64(episode_id),
      EPISODE_LENGTH: np.int64(len(steps[fields.IS_LAST])),
      EPISODE_RETURN: tf.nest.map_structure(_total, steps[fields.REWARD]),
      TERMINATED: np.bool_(steps[fields.IS_TERMINAL][-1]),
  }


def _total(rewards: np.ndarray) -> np.ndarray:
  with np.errstate(over='ignore'):  # inf is the sum then, as TF would say.
    return np.asarray(rewards.sum(axis=0), rewards.dtype)


def closing_step(leaves: Sequence[Leaf],
                 observation: Sequence[np.ndarray]) -> List[np.ndarray]:
  """The flat leaves of the boundary trajectory after an episode's last
  step: `observation` (its flat leaves) and, for the rest, what a driver's
  boundary holds (see the module); each [1, ...]."""
  observations = iter(observation)
  closing = []
  for leaf in leaves:
    if leaf.field == 'observation':
      value = np.asarray(next(observations), leaf.dtype)
    else:
      value = _closing_value(leaf)
    closing.append(value[np.newaxis])
  return closing


def _closing_value(leaf: Leaf) -> np.ndarray:
  if leaf.field == 'step_type':
    return np.full(leaf.shape, step_types.LAST, leaf.dtype)
  if leaf.field == 'next_step_type':
    return np.full(leaf.shape, step_types.FIRST, leaf.dtype)
  if leaf.field == 'discount':
    return np.ones(leaf.shape, leaf.dtype)
  if leaf.dtype == np.object_:
    return np.full(leaf.shape, b'', object)
  return np.zeros(leaf.shape, leaf.dtype)
