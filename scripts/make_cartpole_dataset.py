"""Records the bundled CartPole-v1 RLDS dataset with EnvLogger's TFDS backend.

The package ships a small, real RLDS dataset so `rlds-reverb demo` and the
tests run without internet. It is CartPole-v1 (gym 0.23) played by a mix of
policies, so returns spread from about 10 to the 500-step time limit:

  episode i -> epsilon from EPSILONS (cycled)
  epsilon 1.0  : uniformly random actions        (returns ~10-40)
  epsilon < 1  : a linear balancing controller, with a random action
                 taken with probability epsilon   (returns ~10-500)

Episodes where the pole falls end in a termination (last step has
`is_terminal=True`, discount 0); episodes cut at 500 steps end in a truncation
(`is_last=True`, `is_terminal=False`). Everything is seeded, so the same
arguments write the same episodes.

Regenerate (needs the `record` extra, i.e. envlogger 1.2) from the repo root:

  python scripts/make_cartpole_dataset.py --overwrite

then check `pytest tests/test_sources.py` and commit rlds_reverb/data/cartpole.
"""

import argparse
import os
import shutil
from typing import Optional, Sequence

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

# pylint: disable=g-import-not-at-top
import dm_env
from dm_env import specs
import envlogger
from envlogger.backends import tfds_backend_writer
import gym
import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
# pylint: enable=g-import-not-at-top

DATASET_NAME = 'cartpole_mixed'
VERSION = '1.0.0'
# Per-episode exploration rates, cycled. The controller alone balances for
# the full 500 steps, so only high rates give short and middling episodes:
# mean returns measured ~20 (1.0), ~40 (0.9-0.75), ~100-140 (0.65-0.55),
# ~280 (0.5), ~480 (0.3).
EPSILONS = (1.0, 0.9, 0.75, 0.65, 0.6, 0.55, 0.5, 0.3)
# Gains of the balancing controller on (x, x_dot, theta, theta_dot).
CONTROLLER_GAINS = np.array([0.1, 0.5, 10.0, 2.0], dtype=np.float32)


class GymCartPole(dm_env.Environment):
  """CartPole-v1 as a dm_env, telling a fallen pole from the time limit.

  EnvLogger marks `is_terminal` only when the last discount is 0, so the
  time-limit cut must be a `dm_env.truncation` (discount 1).
  """

  def __init__(self, seed: int):
    self._env = gym.make('CartPole-v1')
    self._seed = seed
    self._episode = 0

  def reset(self) -> dm_env.TimeStep:
    observation = self._env.reset(seed=self._seed + self._episode)
    self._episode += 1
    return dm_env.restart(_as_observation(observation))

  def step(self, action) -> dm_env.TimeStep:
    observation, reward, done, info = self._env.step(int(action))
    observation = _as_observation(observation)
    reward = np.float32(reward)
    if not done:
      return dm_env.transition(reward, observation, discount=np.float32(1.0))
    if info.get('TimeLimit.truncated', False):
      return dm_env.truncation(reward, observation, discount=np.float32(1.0))
    # dm_env.termination's discount is a Python float (float64 in TFDS).
    return dm_env.TimeStep(dm_env.StepType.LAST, reward, np.float32(0.0),
                           observation)

  def observation_spec(self) -> specs.Array:
    return specs.Array((4,), np.float32, 'observation')

  def action_spec(self) -> specs.DiscreteArray:
    return specs.DiscreteArray(2, np.int64, 'action')

  def reward_spec(self) -> specs.Array:
    return specs.Array((), np.float32, 'reward')

  def discount_spec(self) -> specs.BoundedArray:
    return specs.BoundedArray((), np.float32, 0.0, 1.0, 'discount')

  def close(self):
    self._env.close()


def _as_observation(observation) -> np.ndarray:
  return np.asarray(observation, dtype=np.float32)


def controller_action(observation: np.ndarray) -> np.int64:
  """Pushes the cart under the pole: a linear policy that balances well."""
  return np.int64(float(np.dot(CONTROLLER_GAINS, observation)) > 0.0)


def policy_action(observation: np.ndarray, epsilon: float,
                  rng: np.random.Generator) -> np.int64:
  """Epsilon-greedy around the controller; epsilon 1 is a random policy."""
  if rng.uniform() < epsilon:
    return np.int64(rng.integers(2))
  return controller_action(observation)


def dataset_config() -> tfds.rlds.rlds_base.DatasetConfig:
  """The RLDS features: float32[4] observation, int64 action, float32 rest."""
  return tfds.rlds.rlds_base.DatasetConfig(
      name=DATASET_NAME,
      description=('CartPole-v1 (gym 0.23) under a mix of random and '
                   'epsilon-greedy balancing policies; recorded with '
                   'EnvLogger. Regenerate with '
                   'scripts/make_cartpole_dataset.py.'),
      observation_info=tfds.features.Tensor(shape=(4,), dtype=tf.float32),
      action_info=tf.int64,
      reward_info=tf.float32,
      discount_info=tf.float32,
      episode_metadata_info={'episode_id': tf.int64, 'epsilon': tf.float32})


def record(output_dir: str, episodes: int, seed: int) -> None:
  """Plays `episodes` episodes and writes them as one TFDS directory."""
  rng = np.random.default_rng(seed)
  epsilons = [EPSILONS[i % len(EPSILONS)] for i in range(episodes)]
  metadata = {'episode_id': 0, 'epsilon': 0.0}

  def episode_fn(unused_timestep, unused_action, unused_env):
    return {'episode_id': np.int64(metadata['episode_id']),
            'epsilon': np.float32(metadata['epsilon'])}

  writer = tfds_backend_writer.TFDSBackendWriter(
      data_directory=output_dir, ds_config=dataset_config(),
      max_episodes_per_file=episodes, version=VERSION)
  with envlogger.EnvLogger(GymCartPole(seed), episode_fn=episode_fn,
                           backend=writer) as env:
    for episode_id, epsilon in enumerate(epsilons):
      metadata.update(episode_id=episode_id, epsilon=epsilon)
      timestep = env.reset()
      while not timestep.last():
        timestep = env.step(policy_action(timestep.observation, epsilon, rng))


def prepare_output_dir(output_dir: str, overwrite: bool) -> None:
  """Refuses to mix with old shards, which TFDS would silently append to."""
  if os.path.isdir(output_dir) and os.listdir(output_dir):
    if not overwrite:
      raise SystemExit(f'{output_dir} is not empty; pass --overwrite to '
                       'replace it.')
    shutil.rmtree(output_dir)
  os.makedirs(output_dir, exist_ok=True)


def summarize(output_dir: str) -> str:
  """One line of episode, step and return statistics, read back via TFDS."""
  builder = tfds.builder_from_directory(output_dir)
  lengths, returns, terminal = [], [], 0
  for episode in builder.as_dataset(split='train'):
    steps = episode['steps'].batch(1_000_000).get_single_element()
    lengths.append(int(tf.size(steps['reward'])))
    returns.append(float(tf.reduce_sum(steps['reward'])))
    terminal += int(steps['is_terminal'][-1])
  size = sum(os.path.getsize(os.path.join(output_dir, name))
             for name in os.listdir(output_dir))
  return (f'{len(lengths)} episodes ({terminal} terminal, '
          f'{len(lengths) - terminal} truncated), {sum(lengths)} steps, '
          f'returns min {min(returns):.0f} / mean {np.mean(returns):.1f} / '
          f'max {max(returns):.0f}, {size / 1024:.0f} KiB in {output_dir}')


def parse_args(argv: Optional[Sequence[str]]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--output-dir', default=os.path.join(
      'rlds_reverb', 'data', 'cartpole'),
                      help='TFDS directory to write (gets dataset_info.json).')
  parser.add_argument('--episodes', type=int, default=64,
                      help='Episodes to record (one shard).')
  parser.add_argument('--seed', type=int, default=0,
                      help='Seeds the environment resets and the policy.')
  parser.add_argument('--overwrite', action='store_true',
                      help='Delete a non-empty --output-dir first.')
  return parser.parse_args(argv)


def main(argv: Optional[Sequence[str]] = None) -> None:
  args = parse_args(argv)
  prepare_output_dir(args.output_dir, args.overwrite)
  record(args.output_dir, args.episodes, args.seed)
  print(summarize(args.output_dir))


if __name__ == '__main__':
  main()
