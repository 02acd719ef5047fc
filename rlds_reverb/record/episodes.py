"""A recorded episode's trajectories: the leaves they are kept as, and the
step that closes an episode still open when the recording closes.

    trajectories of one env, FIRST ... LAST -> FIRST (the boundary)
      -> the flat leaves of the data spec (`leaves_of`): one column each
    an episode still open when the recording closes:
      + closing_step(final time step): the boundary the driver would have
        given next (the final observation; the reset's reward 0 and
        discount 1; zeros for the action and policy_info never taken)

`tfds_out.TrajectoryWriter` turns the whole episode into RLDS steps and its
metadata (`episode_id`, `episode_length`, `episode_return`, `terminated`).
"""

import dataclasses
from typing import List, Sequence, Tuple

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import trajectory as trajectory_lib
import tree

from rlds_reverb.convert import step_types
from rlds_reverb.errors import FeaturesError
from rlds_reverb.specs import dtypes
from rlds_reverb.specs import paths


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
          f'data_spec {name} has shape {paths.shape_text(shape)}; the '
          f'recorder needs fully known shapes.')
    leaves.append(Leaf(name, path[0], dtypes.numpy_dtype(spec.dtype),
                       tuple(shape.as_list())))
  return leaves


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
