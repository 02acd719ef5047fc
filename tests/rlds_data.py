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
