"""Shared data and timing helpers for the benchmarks (D4RL halfcheetah shapes)."""

import os
import platform
import statistics
import time

from rlds_reverb import quiet

quiet.silence()  # Before TensorFlow and gym load.

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

OBSERVATION_SIZE = 17
ACTION_SIZE = 6


def episode_arrays(num_steps: int, seed: int, terminal: bool = True) -> dict:
  """One episode of random halfcheetah-shaped steps as numpy arrays."""
  rng = np.random.default_rng(seed)
  index = np.arange(num_steps)
  return {
      'observation': rng.standard_normal(
          (num_steps, OBSERVATION_SIZE)).astype(np.float32),
      'action': rng.uniform(-1, 1, (num_steps, ACTION_SIZE)).astype(np.float32),
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': np.ones(num_steps, np.float32),
      'is_first': index == 0,
      'is_last': index == num_steps - 1,
      'is_terminal': (index == num_steps - 1) & terminal,
  }


def in_memory_rlds(num_episodes: int, num_steps: int) -> tf.data.Dataset:
  """RLDS episodes held in memory: a dataset of {'steps': Dataset}."""
  stacked = [episode_arrays(num_steps, seed) for seed in range(num_episodes)]
  arrays = {key: np.stack([e[key] for e in stacked]) for key in stacked[0]}
  return tf.data.Dataset.from_tensor_slices(arrays).map(_as_episode)


def streamed_rlds(num_episodes: int, num_steps: int) -> tf.data.Dataset:
  """RLDS episodes made one at a time, never all in memory."""
  return tf.data.Dataset.range(num_episodes).map(
      lambda seed: tf.py_function(
          lambda s: list(episode_arrays(num_steps, int(s)).values()), [seed],
          [tf.float32, tf.float32, tf.float32, tf.float32, tf.bool, tf.bool,
           tf.bool])).map(_from_list)


def _from_list(*values):
  keys = ('observation', 'action', 'reward', 'discount', 'is_first', 'is_last',
          'is_terminal')
  shapes = ([None, OBSERVATION_SIZE], [None, ACTION_SIZE], [None], [None],
            [None], [None], [None])
  steps = {}
  for key, value, shape in zip(keys, values, shapes):
    steps[key] = tf.ensure_shape(value, shape)
  return _as_episode(steps)


def _as_episode(steps):
  return {'steps': tf.data.Dataset.from_tensor_slices(steps)}


def timed(fn, repeats: int):
  """(median seconds, result of the last call) over `repeats` calls."""
  seconds, result = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    result = fn()
    seconds.append(time.perf_counter() - start)
  return statistics.median(seconds), result


def machine() -> str:
  return (f'{platform.machine()}, {os.cpu_count()} cores, Python '
          f'{platform.python_version()}, TensorFlow {tf.__version__}')
