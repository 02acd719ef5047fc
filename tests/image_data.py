"""Episodes of image frames, as TFDS directories and as tf.data, for tests of
encoded image storage.

    steps_of(episode, length) -> frames H x W x C (a noisy moving gradient)
      -> write_image_dir(dir, 'png' | 'jpeg')  TFDS Image features, encoded
      -> plain_dataset()                       raw uint8 frames in tf.data
    tables_for(data, **encoding) -> (raw signature, encoded signature)
"""

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tree

import rlds_reverb
from rlds_reverb import specs
from rlds_reverb.specs import encoded as encoded_spec

H, W, C = 12, 16, 3
LENGTHS = (5, 1, 7, 3)


def frames(episode: int, length: int, channels: int = C) -> np.ndarray:
  """[T, H, W, C] frames of a moving gradient with noise: PNG can't cheat."""
  rng = np.random.default_rng(episode)
  ys, xs = np.mgrid[:H, :W]
  out = np.empty((length, H, W, channels), np.uint8)
  for t in range(length):
    base = (ys * 9 + xs * 5 + t * 11 + episode * 3) % 256
    noise = rng.integers(0, 20, (H, W, channels))
    out[t] = ((base[..., None] + noise) % 256).astype(np.uint8)
  return out


def steps_of(episode: int, length: int, channels: int = C,
             nested: bool = False) -> dict:
  """Observations are frames, or {'pixels': frames, 'speed'} if `nested`
  (TF-Agents' converter keeps step pairs in nested observations: its
  observer is compared on flat ones)."""
  is_last = np.zeros(length, bool)
  is_last[-1] = True
  pixels = frames(episode, length, channels)
  return {
      'observation': ({'pixels': pixels,
                       'speed': np.arange(length, dtype=np.float32)}
                      if nested else pixels),
      'action': np.arange(length, dtype=np.int64) % 3,
      'reward': np.linspace(0, 1, length).astype(np.float32),
      'discount': np.ones(length, np.float32),
      'is_first': np.arange(length) == 0,
      'is_last': is_last,
      'is_terminal': is_last & (episode % 2 == 0),
  }


def image_features(image_format: str = 'png', channels: int = C):
  return tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tfds.features.Image(shape=(H, W, channels),
                                         encoding_format=image_format),
      'action': np.int64, 'reward': np.float32, 'discount': np.float32,
      'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_,
  })})


def write_image_dir(tmp_path, image_format='png', lengths=LENGTHS,
                    channels=C, name='images'):
  episodes = [(i, {'steps': steps_of(i, n, channels)})
              for i, n in enumerate(lengths)]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name=name, version='1.0.0', features=image_features(image_format,
                                                          channels),
      split_datasets={'train': episodes}, data_dir=str(tmp_path),
      disable_shuffling=True)
  return builder.data_dir


def plain_dataset(lengths=LENGTHS, nested=True) -> tf.data.Dataset:
  """The episodes as a plain tf.data source: raw uint8 frames."""
  def gen():
    for i, n in enumerate(lengths):
      yield steps_of(i, n, nested=nested)
  signature = tree.map_structure(
      lambda a: tf.TensorSpec((None,) + a.shape[1:], tf.as_dtype(a.dtype)),
      steps_of(0, 2, nested=nested))
  steps = tf.data.Dataset.from_generator(gen, output_signature=signature)
  return steps.map(lambda s: {'steps': tf.data.Dataset.from_tensor_slices(s)})


def tables_for(rlds_data, length=2, **encoding):
  """(raw signature, encoded signature) of `rlds_data`'s trajectories."""
  raw = specs.table_signature(rlds_reverb.create_trajectory_data_spec(
      rlds_data))
  fields = encoding.pop('fields', ['observation'])
  stored = encoded_spec.encoded_spec(raw, fields, **encoding)
  del length
  return raw, stored
