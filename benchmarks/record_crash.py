"""SIGKILL a process recording a TF-Agents PyDriver at random points; recover.

    python benchmarks/record_crash.py --rounds 20 [--seed 0] [--json]

Each round starts a child process that records a `PyDriver` with
`RldsRecorder(DIR, append=True, shard_episodes=3)` (the default durability,
FLUSH: each episode handed to the OS before the driver steps again) and
prints each episode's id once the recorder wrote it. The environment's
episode k depends on k only (`IndexedEnv`), and the child starts at the id
the recorder continues from, so an uninterrupted recording of the same ids
is the reference. After a random number of printed episodes (0-6) and a
random delay (0-40 ms) the child gets SIGKILL. Then `rlds_reverb.recover`
(what `rlds-reverb recover DIR` and `append=True` run), and the checks of
`rlds_write_crash.py`:

    lost       finished episodes not recovered: must be 0
    exact      the recovered records equal, byte for byte, the uninterrupted
               recording's first records; at the end TFDS reads the same
               values from both
    ids        the child's ids continue from the recovered count

Exit status 1 if an episode was lost or differs.
"""

import os
import random
import sys
from typing import Any, Dict

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.environments import py_environment  # pylint: disable=g-import-not-at-top
from tf_agents.policies import py_policy  # pylint: disable=g-import-not-at-top
from tf_agents.specs import array_spec  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import policy_step  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top

try:
  from benchmarks import rlds_write_crash  # pylint: disable=g-import-not-at-top
except ImportError:  # Run as a script: this directory is on the path.
  import rlds_write_crash  # pylint: disable=g-import-not-at-top
from rlds_reverb import RldsRecorder  # pylint: disable=g-import-not-at-top

NAME = 'recording'
SHARD_EPISODES = 3


class IndexedEnv(py_environment.PyEnvironment):
  """Episode k (k = first, first + 1, ...) depends on k only: 3 + k % 5
  transitions of a 48x48x3 frame and a vector; k % 3 == 0 ends by
  truncation (discount 1), the others by termination."""

  def __init__(self, first: int = 0, actor: int = 0):
    super().__init__(handle_auto_reset=True)
    self._actor = actor  # Actors' episodes differ.
    self._episode = first - 1
    self._count = 0

  def observation_spec(self):
    return {'pixels': array_spec.ArraySpec((48, 48, 3), np.uint8),
            'position': array_spec.ArraySpec((3,), np.float32)}

  def action_spec(self):
    return array_spec.BoundedArraySpec((), np.int32, 0, 1)

  def _reset(self):
    self._episode += 1
    self._count = 0
    return ts.restart(self._observation())

  def _step(self, action):
    self._count += 1
    reward = np.float32(int(action) + 0.5 * self._count)
    if self._count < 3 + self._episode % 5:
      return ts.transition(self._observation(), reward)
    if self._episode % 3 == 0:
      return ts.truncation(self._observation(), reward)
    return ts.termination(self._observation(), reward)

  def _observation(self):
    rng = np.random.default_rng([self._actor, self._episode, self._count])
    return {'pixels': rng.integers(0, 256, (48, 48, 3), np.uint8),
            'position': rng.standard_normal(3).astype(np.float32)}


class IndexedPolicy(py_policy.PyPolicy):
  """Its action and policy_info follow from the observation alone."""

  def __init__(self, env: IndexedEnv):
    super().__init__(env.time_step_spec(), env.action_spec(), info_spec={
        'log_probability': array_spec.ArraySpec((), np.float32)})

  def _action(self, time_step, policy_state):
    position = time_step.observation['position']
    return policy_step.PolicyStep(
        np.int32(position[0] > 0), policy_state,
        {'log_probability': np.float32(-abs(position[1]))})


def record(directory: str, episodes=None, on_episode=None,
           close: bool = True, actor: int = 0) -> None:
  """Records `episodes` more episodes (None: until killed) into `directory`,
  appending; `on_episode(id)` after each is written. `close=False` leaves
  the recorder as a killed one would: its last shard open."""
  spec = IndexedPolicy(IndexedEnv()).trajectory_spec
  recorder = RldsRecorder(directory, spec, name=NAME, append=True,
                          shard_episodes=SHARD_EPISODES)
  env = IndexedEnv(first=recorder.num_episodes, actor=actor)
  observers = [recorder]
  if on_episode is not None:
    observers.append(lambda t: t.is_boundary() and on_episode(
        recorder.num_episodes - 1))
  driver = py_driver.PyDriver(env, IndexedPolicy(env), observers,
                              max_steps=None,
                              max_episodes=episodes or 2**62)
  driver.run(env.reset())
  if close:
    recorder.close()


def child(directory: str) -> None:
  record(directory, on_episode=lambda index: print(index, flush=True))


def kill_round(directory: str, rng: random.Random) -> Dict[str, Any]:
  """A recording child killed at a random point; what it had finished."""
  return rlds_write_crash.kill_round(directory, rng, __file__)


class Reference:
  """An uninterrupted recording of the same episode ids."""

  def __init__(self, directory: str):
    self.directory = directory
    self._count = 0

  def records(self, count: int):
    if count > self._count:
      record(self.directory, episodes=count - self._count)
      self._count = count
    return rlds_write_crash.shard_records(self.directory)[:count]


# Recovering and comparing are the same as for the episode writer's benchmark.
check_round = rlds_write_crash.check_round
values_equal = rlds_write_crash.values_equal


def run(rounds: int, seed: int, directory: str) -> Dict[str, Any]:
  """`rounds` kill-and-recover rounds of a recording driver."""
  return rlds_write_crash.run(rounds, seed, directory, sys.modules[__name__])


if __name__ == '__main__':
  sys.exit(rlds_write_crash.main(sys.modules[__name__]))
