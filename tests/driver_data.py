"""Trajectories collected by a real TF-Agents `PyDriver`, split into episodes.

A `RandomPyEnvironment` with a nested observation (a uint8 image and a
vector) ends episodes by termination (discount 0) at random; a `TimeLimit`
truncates the long ones (LAST with discount 1). A `RandomPyPolicy` gives a
dict `policy_info` (or a namedtuple one). Each episode's trajectories end
with the boundary trajectory (LAST -> FIRST), as the driver emits them.
"""

import collections
from typing import Any, List, NamedTuple

import numpy as np
import tensorflow as tf
from tf_agents.drivers import py_driver
from tf_agents.environments import random_py_environment
from tf_agents.environments import wrappers
from tf_agents.policies import random_py_policy
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

TIME_LIMIT = 5

OBSERVATION_SPEC = {
    'pixels': array_spec.BoundedArraySpec((6, 5, 3), np.uint8, 0, 255),
    'position': array_spec.ArraySpec((3,), np.float32),
}
ACTION_SPEC = array_spec.BoundedArraySpec((), np.int64, 0, 3)
DICT_INFO_SPEC = {
    'log_probability': array_spec.ArraySpec((), np.float32),
    'mode': array_spec.BoundedArraySpec((2,), np.int32, 0, 9),
}
PolicyInfo = collections.namedtuple('PolicyInfo', ['log_probability', 'mode'])
NAMEDTUPLE_INFO_SPEC = PolicyInfo(**DICT_INFO_SPEC)


class Collected(NamedTuple):
  episodes: List[trajectory.Trajectory]  # Each field [T, ...], numpy.
  trajectory_spec: Any  # The driver's (array specs).
  terminal: List[bool]  # Whether each episode terminated (else truncated).


def collect(num_episodes: int, seed: int, info_spec: Any = DICT_INFO_SPEC,
            observers=()) -> Collected:
  """`num_episodes` whole episodes from a PyDriver; also fed to `observers`."""
  environment = wrappers.TimeLimit(random_py_environment.RandomPyEnvironment(
      OBSERVATION_SPEC, ACTION_SPEC, episode_end_probability=0.2, seed=seed,
      reward_fn=_reward), TIME_LIMIT)
  policy = random_py_policy.RandomPyPolicy(
      environment.time_step_spec(), environment.action_spec(),
      info_spec=info_spec, seed=seed)
  trajectories = []
  driver = py_driver.PyDriver(
      environment, policy, [trajectories.append, *observers],
      max_episodes=num_episodes)
  driver.run(environment.reset())
  episodes = split_episodes(trajectories)
  assert len(episodes) == num_episodes, len(episodes)
  spec = trajectory.from_transition(
      environment.time_step_spec(), policy.policy_step_spec,
      environment.time_step_spec())
  return Collected(episodes, spec, [_terminated(e) for e in episodes])


def _reward(step_type, action, observation):
  del step_type
  return np.float32(action) + observation['position'][0]


def split_episodes(trajectories) -> List[trajectory.Trajectory]:
  """Stacked trajectories per episode, each ending with its boundary one."""
  episodes, current = [], []
  for item in trajectories:
    current.append(item)
    if item.step_type == ts.StepType.LAST:
      episodes.append(stack(current))
      current = []
  return episodes


def stack(trajectories) -> trajectory.Trajectory:
  """Stacked along a new time axis; strings as object arrays, as TF gives."""
  return tf.nest.map_structure(_stack, *trajectories)


def _stack(*values):
  if isinstance(values[0], bytes) or (
      isinstance(values[0], np.ndarray) and values[0].dtype == object):
    return np.array(values, dtype=object)
  return np.stack(values)


def _terminated(episode: trajectory.Trajectory) -> bool:
  """The trajectory before the boundary has discount 0 (not a time limit)."""
  return bool(episode.discount[-2] == 0)
