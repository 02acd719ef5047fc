"""RLDS datasets shaped like the ones people use, as real TFDS directories.

    name        features                                              like
    rlu_dmlab   TFDS's own `rlu_dmlab_rooms_watermaze` builder's        RL Unplugged DMLab
                (72x96x3 pixels, last_action, last_reward; metadata)
    robotics    a Text and two Images in `observation`, a dict action,  RT-1 / Open X-Embodiment
                language embedding and instruction as extra fields
    d4rl        float32 vectors, float64 `infos` as an extra field      D4RL MuJoCo
    atari       8x8x1 frames, one long episode among short ones         RL Unplugged Atari
    dtypes      float64, int32 and bool leaves, float64 reward/discount

`write(name, data_dir)` writes one with TFDS's writer and returns the
directory and the numpy episodes written, to compare what comes back with.
TFDS stores float64 tensors as 32-bit floats in its records (tf.train.Example
has no float64), so float64 leaves here hold float32 values: what is written
is exactly what TFDS gives back.
`ATARI_LONG_EPISODE` is 2,700 steps (the default test tier's size);
`write(..., lengths=...)` gives other lengths, as the slow tier's Atari shape
with a 27,000-step episode (`ATARI_FULL_EPISODE`, a full game's length).
"""

import os
from typing import Callable, Dict, List, NamedTuple, Optional, Tuple

import numpy as np
import tensorflow_datasets as tfds

from tests import rlds_data

ATARI_LONG_EPISODE = 2_700
ATARI_FULL_EPISODE = 27_000

Episode = Dict[str, object]  # 'steps': {field: [T, ...]}, plus metadata.


class Shape(NamedTuple):
  features: Callable[[], tfds.features.FeaturesDict]
  episode: Callable[[int, int], Episode]  # (num_steps, seed) -> episode
  lengths: Tuple[int, ...]


def _float64(rng: np.random.Generator, shape) -> np.ndarray:
  """float64 values that survive TFDS's 32-bit storage exactly."""
  return rng.standard_normal(shape).astype(np.float32).astype(np.float64)


def _flag_fields() -> Dict[str, object]:
  return {'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_,
          'discount': np.float32}


def dmlab_features() -> tfds.features.FeaturesDict:
  """The features of TFDS's own builder; nothing is downloaded."""
  builder = tfds.builder('rlu_dmlab_rooms_watermaze/training_0',
                         data_dir=os.devnull)
  return builder.info.features


def dmlab_episode(num_steps: int, seed: int) -> Episode:
  rng = np.random.default_rng(seed)
  steps = {
      'observation': {
          'pixels': rng.integers(0, 255, (num_steps, 72, 96, 3), np.uint8),
          'last_action': rng.integers(0, 15, num_steps).astype(np.int64),
          'last_reward': rng.standard_normal(num_steps).astype(np.float32),
      },
      'action': rng.integers(0, 15, num_steps).astype(np.int64),
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': np.ones(num_steps, np.float32),
      **rlds_data.flags(num_steps, terminal=seed % 2 == 0),
  }
  return {'steps': steps, 'episode_id': seed,
          'episode_return': np.float32(steps['reward'].sum())}


def robotics_features() -> tfds.features.FeaturesDict:
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'observation': {
              'image': tfds.features.Image(shape=(8, 8, 3)),
              'wrist_image': tfds.features.Image(shape=(4, 6, 3)),
              'natural_language_instruction': tfds.features.Text(),
              'state': tfds.features.Tensor(shape=(4,), dtype=np.float64),
          },
          'action': {
              'world_vector': tfds.features.Tensor(shape=(3,),
                                                   dtype=np.float32),
              'gripper_closed': np.bool_,
              'mode': np.int32,
          },
          'reward': np.float32,
          'language_embedding': tfds.features.Tensor(shape=(5,),
                                                     dtype=np.float32),
          'language_instruction': tfds.features.Text(),
          **_flag_fields(),
      }),
      'episode_metadata': {'file_path': tfds.features.Text()},
  })


def robotics_episode(num_steps: int, seed: int) -> Episode:
  return {'steps': rlds_data.robotics_episode(num_steps, seed,
                                              terminal=seed % 2 == 0),
          'episode_metadata': {'file_path': f'/data/ep{seed}.npz'}}


def d4rl_features() -> tfds.features.FeaturesDict:
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'observation': tfds.features.Tensor(shape=(17,), dtype=np.float32),
          'action': tfds.features.Tensor(shape=(6,), dtype=np.float32),
          'reward': np.float32,
          'infos': {
              'qpos': tfds.features.Tensor(shape=(9,), dtype=np.float64),
              'qvel': tfds.features.Tensor(shape=(8,), dtype=np.float64),
              'action_log_probs': np.float64,
          },
          **_flag_fields(),
      }),
  })


def d4rl_episode(num_steps: int, seed: int) -> Episode:
  rng = np.random.default_rng(seed)
  return {'steps': {
      'observation': rng.standard_normal((num_steps, 17)).astype(np.float32),
      'action': rng.uniform(-1, 1, (num_steps, 6)).astype(np.float32),
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': np.ones(num_steps, np.float32),
      'infos': {'qpos': _float64(rng, (num_steps, 9)),
                'qvel': _float64(rng, (num_steps, 8)),
                'action_log_probs': _float64(rng, num_steps)},
      **rlds_data.flags(num_steps, terminal=False),
  }}


def atari_features() -> tfds.features.FeaturesDict:
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'observation': tfds.features.Image(shape=(8, 8, 1)),
          'action': np.int64,
          'reward': np.float32,
          **_flag_fields(),
      }),
      'episode_return': np.float32,
  })


def atari_episode(num_steps: int, seed: int) -> Episode:
  rng = np.random.default_rng(seed)
  steps = {
      'observation': rng.integers(0, 255, (num_steps, 8, 8, 1), np.uint8),
      'action': rng.integers(0, 18, num_steps).astype(np.int64),
      'reward': rng.integers(-1, 2, num_steps).astype(np.float32),
      'discount': np.ones(num_steps, np.float32),
      **rlds_data.flags(num_steps, terminal=True),
  }
  return {'steps': steps, 'episode_return': np.float32(steps['reward'].sum())}


def dtypes_features() -> tfds.features.FeaturesDict:
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'observation': {
              'position': tfds.features.Tensor(shape=(2,), dtype=np.float64),
              'counts': tfds.features.Tensor(shape=(3,), dtype=np.int32),
              'contact': np.bool_,
          },
          'action': np.int32,
          'reward': np.float64,
          'discount': np.float64,
          'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_,
      }),
  })


def dtypes_episode(num_steps: int, seed: int) -> Episode:
  rng = np.random.default_rng(seed)
  return {'steps': {
      'observation': {
          'position': _float64(rng, (num_steps, 2)),
          'counts': rng.integers(0, 9, (num_steps, 3)).astype(np.int32),
          'contact': rng.integers(0, 2, num_steps).astype(bool),
      },
      'action': rng.integers(0, 4, num_steps).astype(np.int32),
      'reward': _float64(rng, num_steps),
      'discount': rng.uniform(0.5, 1, num_steps).astype(np.float32).astype(
          np.float64),
      **rlds_data.flags(num_steps, terminal=seed % 3 == 0),
  }}


SHAPES = {
    'rlu_dmlab': Shape(dmlab_features, dmlab_episode, (12, 1, 7)),
    'robotics': Shape(robotics_features, robotics_episode, (5, 1, 2, 9, 3)),
    'd4rl': Shape(d4rl_features, d4rl_episode, (30, 17, 2)),
    'atari': Shape(atari_features, atari_episode,
                   (ATARI_LONG_EPISODE,) + (1, 2, 3) * 10),
    'dtypes': Shape(dtypes_features, dtypes_episode, (4, 1, 6, 3)),
}


def write(name: str, data_dir: str, lengths: Optional[Tuple[int, ...]] = None
          ) -> Tuple[str, List[Episode]]:
  """Writes shape `name` as a TFDS directory, its episodes of `lengths` (the
  shape's own by default); (its path, the episodes)."""
  shape = SHAPES[name]
  episodes = [shape.episode(n, seed)
              for seed, n in enumerate(lengths or shape.lengths)]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name, '1.0.0', shape.features(), {'train': list(enumerate(episodes))},
      data_dir=data_dir, disable_shuffling=True)
  return os.fspath(builder.data_dir), episodes
