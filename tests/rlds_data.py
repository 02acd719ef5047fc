"""RLDS datasets for tests: episodes given as numpy arrays, made into tf.data."""

from typing import Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

Episode = Dict[str, object]  # Step fields, each with a leading time axis.


def flags(num_steps: int, terminal: bool = True) -> Dict[str, np.ndarray]:
  """is_first / is_last / is_terminal of one well-formed episode."""
  index = np.arange(num_steps)
  return {
      'is_first': index == 0,
      'is_last': index == num_steps - 1,
      'is_terminal': (index == num_steps - 1) & terminal,
  }


def flat_episode(num_steps: int, seed: int, terminal: bool = True,
                 observation_size: int = 3,
                 discount_dtype=np.float32) -> Episode:
  """A random well-formed episode with flat float observations."""
  rng = np.random.default_rng(seed)
  return {
      'observation': rng.standard_normal(
          (num_steps, observation_size)).astype(np.float32),
      'action': rng.integers(0, 5, num_steps).astype(np.int64),
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': rng.uniform(0.5, 1.0, num_steps).astype(discount_dtype),
      **flags(num_steps, terminal),
  }


def flat_episode_with(num_steps: int, seed: int, **flag_overrides) -> Episode:
  """`flat_episode`, then flags set: is_terminal={1: True} (step: value)."""
  episode = flat_episode(num_steps, seed)
  for name, steps in flag_overrides.items():
    for step, value in steps.items():
      episode[name][step] = value
  return episode


def as_rlds(episodes: Sequence[Episode],
            metadata: Optional[List[Dict[str, object]]] = None
            ) -> tf.data.Dataset:
  """A dataset of {'steps': Dataset, **metadata} from numpy episodes.

  Episodes may differ in length (they are fed through a generator), but must
  share structure and dtypes.
  """
  episodes = list(episodes)
  if not episodes:
    raise ValueError('as_rlds needs at least one episode for the spec; use '
                     'empty_rlds for an empty dataset.')
  metadata = metadata or [{} for _ in episodes]
  signature = {
      'steps': tf.nest.map_structure(
          lambda x: tf.TensorSpec((None,) + np.shape(x)[1:],
                                  tf.as_dtype(np.asarray(x).dtype)),
          episodes[0]),
      **{key: tf.TensorSpec(np.shape(value), tf.as_dtype(np.asarray(value).dtype))
         for key, value in metadata[0].items()},
  }
  elements = [{'steps': e, **m} for e, m in zip(episodes, metadata)]
  return tf.data.Dataset.from_generator(
      lambda: iter(elements), output_signature=signature).map(_steps_dataset)


def empty_rlds(like: Episode) -> tf.data.Dataset:
  """A dataset with no episodes, with the spec of `like`'s steps."""
  return as_rlds([like]).take(0)


def _steps_dataset(episode):
  episode = dict(episode)
  episode['steps'] = tf.data.Dataset.from_tensor_slices(episode['steps'])
  return episode


def robotics_episode(num_steps: int, seed: int, terminal: bool = True) -> Episode:
  """An RT-1 / Open X-Embodiment-like episode: strings, images, many dtypes.

  A Text field and two images inside `observation`, a dict action with an int32
  and a bool leaf, float64 state, and two extra step fields (a language
  embedding and the instruction) that reach `policy_info_fn`.
  """
  rng = np.random.default_rng(seed)
  words = np.array([f'ep{seed} step{i}: pick the block'.encode()
                    for i in range(num_steps)], dtype=object)
  return {
      'observation': {
          'image': rng.integers(0, 255, (num_steps, 8, 8, 3), dtype=np.uint8),
          'wrist_image': rng.integers(0, 255, (num_steps, 4, 6, 3),
                                      dtype=np.uint8),
          'natural_language_instruction': words,
          # float64 holding float32 values: TFDS stores float64 as 32 bits.
          'state': rng.standard_normal((num_steps, 4)).astype(
              np.float32).astype(np.float64),
      },
      'action': {
          'world_vector': rng.uniform(-1, 1, (num_steps, 3)).astype(np.float32),
          'gripper_closed': rng.integers(0, 2, num_steps).astype(bool),
          'mode': rng.integers(0, 3, num_steps).astype(np.int32),
      },
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': np.ones(num_steps, np.float32),
      'language_embedding': rng.standard_normal((num_steps, 5)).astype(
          np.float32),
      'language_instruction': np.array(
          [f'instruction {seed}'.encode()] * num_steps, dtype=object),
      **flags(num_steps, terminal),
  }
