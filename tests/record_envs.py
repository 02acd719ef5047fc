"""Real TF-Agents environments and policies for the recorder's tests, and the
episodes they should record.

`random_env(seed)` is driver_data's: a nested observation (a 6x5x3 uint8
image and a vector), episodes that terminate at random (discount 0) or are
truncated by TF-Agents' `TimeLimit` (discount 1); `policy(env, seed)` a
random policy with a dict `policy_info`. `cartpole(limit)` is gym's
CartPole-v1 through `suite_gym`, its time limit gym's own (discount 0 and
`TimeLimit.truncated` in the info). `tf_setup(batch_size, seed)` is a
batch of random environments as a TF environment, with a random TF policy;
`numpy_list_observer` a TF driver's observer that keeps its trajectories as
numpy. `expected_episodes` splits what a driver
gave (all its trajectories, batched or not) into each environment's
episodes, in the order they ended, as the recorder should write them.
"""

from typing import Any, Dict, List, Optional, Sequence

import gym
import numpy as np
import tensorflow as tf
from tf_agents.environments import batched_py_environment
from tf_agents.environments import random_py_environment
from tf_agents.environments import suite_gym
from tf_agents.environments import tf_py_environment
from tf_agents.environments import wrappers
from tf_agents.policies import random_py_policy
from tf_agents.policies import random_tf_policy
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
import tree

from rlds_reverb.convert import to_rlds
from tests import driver_data


def random_env(seed: int, time_limit: int = driver_data.TIME_LIMIT):
  return wrappers.TimeLimit(random_py_environment.RandomPyEnvironment(
      driver_data.OBSERVATION_SPEC, driver_data.ACTION_SPEC,
      episode_end_probability=0.2, seed=seed,
      reward_fn=driver_data._reward), time_limit)  # pylint: disable=protected-access


def batched(envs: Sequence[Any]):
  return batched_py_environment.BatchedPyEnvironment(list(envs),
                                                     multithreading=False)


def policy(env, seed: int, info_spec=driver_data.DICT_INFO_SPEC):
  outer = (env.batch_size,) if env.batched else ()
  return random_py_policy.RandomPyPolicy(
      env.time_step_spec(), env.action_spec(), info_spec=info_spec,
      seed=seed, outer_dims=outer)


def cartpole(limit: int):
  """CartPole-v1 whose episodes gym's TimeLimit cuts after `limit` steps."""
  return suite_gym.load('CartPole-v1', gym_env_wrappers=[
      lambda env: gym.wrappers.TimeLimit(env, limit)])


def tf_setup(batch_size: int, seed: int):
  """A batch of random environments as one TF environment; a random TF
  policy for it with a dict policy_info."""
  tf_env = tf_py_environment.TFPyEnvironment(batched(
      [random_env(seed=seed + i) for i in range(batch_size)]))
  policy = random_tf_policy.RandomTFPolicy(
      tf_env.time_step_spec(), tf_env.action_spec(),
      info_spec=tensor_spec.from_spec(driver_data.DICT_INFO_SPEC))
  return tf_env, policy


def numpy_list_observer(trajectories):
  """The driver's own trajectories, as numpy, from inside its graph."""
  def observe(trajectory):
    def append(*leaves):
      trajectories.append(tree.unflatten_as(trajectory, list(leaves)))
      return np.bool_(True)
    return tf.numpy_function(append, tf.nest.flatten(trajectory), tf.bool)
  return observe


def per_env(trajectories: List[Any], batch_size: Optional[int]):
  """Each environment's trajectories, in order (numpy, unbatched)."""
  if batch_size is None:
    return [list(trajectories)]
  return [[tree.map_structure(lambda x, i=i: np.asarray(x)[i], t)
           for t in trajectories] for i in range(batch_size)]


def episodes_in_end_order(trajectories: List[Any],
                          batch_size: Optional[int]):
  """(stacked episode, env, end step) of every whole episode, ordered by the
  driver step that ended it, then env: the recorder's writing order."""
  found = []
  for env, stream in enumerate(per_env(trajectories, batch_size)):
    current = []
    for step, item in enumerate(stream):
      if item.step_type == ts.StepType.FIRST:
        current = []
      current.append(item)
      if item.step_type == ts.StepType.LAST and current[0].step_type == (
          ts.StepType.FIRST):
        found.append((driver_data.stack(current), env, step))
        current = []
  return sorted(found, key=lambda entry: (entry[2], entry[1]))


def expected_episode(episode, index: int,
                     truncated: bool = False) -> Dict[str, Any]:
  """What the recorder writes for one whole episode, as TFDS reads it."""
  steps = to_rlds.trajectories_to_steps(
      episode, terminal=False if truncated else None)
  return {
      'steps': steps,
      'episode_id': np.int64(index),
      'episode_length': np.int64(len(steps['is_last'])),
      'episode_return': np.asarray(_sum(steps['reward']), np.float32),
      'terminated': np.bool_(steps['is_terminal'][-1]),
  }


def _sum(values: np.ndarray):
  with np.errstate(over='ignore'):  # driver_data's rewards may reach inf.
    return values.sum()
