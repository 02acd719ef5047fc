"""RLDS episodes for the dataset writer, and directories read back by TFDS.

`step_spec()`/`episode(index)` describe deterministic episodes with every kind
of field the writer stores: a nested observation with a PNG image, a vector
and a string, a dict action, scalars, a dict policy_info and metadata.
`read_episodes(dir)` reads a directory with TFDS itself, in its read order.
"""

import json
import os
from typing import Any, Dict, List

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
import tree

from rlds_reverb.tfds_out import features_from_specs
from tests import rlds_data

Episode = Dict[str, Any]


def step_spec() -> Dict[str, Any]:
  return {
      'observation': {
          'pixels': tf.TensorSpec([6, 5, 3], tf.uint8),
          'position': tf.TensorSpec([3], tf.float32),
          'instruction': tf.TensorSpec([], tf.string),
      },
      'action': {'move': tf.TensorSpec([2], tf.float32),
                 'grip': tf.TensorSpec([], tf.bool)},
      'reward': tf.TensorSpec([], tf.float32),
      'discount': tf.TensorSpec([], tf.float32),
      'is_first': tf.TensorSpec([], tf.bool),
      'is_last': tf.TensorSpec([], tf.bool),
      'is_terminal': tf.TensorSpec([], tf.bool),
      'policy_info': {'log_probability': tf.TensorSpec([], tf.float32),
                      'mode': tf.TensorSpec([], tf.int32)},
  }


def metadata_spec() -> Dict[str, Any]:
  return {'episode_id': tf.TensorSpec([], tf.int64),
          'episode_return': tf.TensorSpec([], tf.float32)}


def features() -> tfds.features.FeaturesDict:
  return features_from_specs(step_spec(), metadata_spec())


def episode(index: int, length: int = 0) -> Episode:
  """Episode `index`: 1..6 steps (or `length`), terminal or truncated."""
  rng = np.random.default_rng(index)
  length = length or int(rng.integers(1, 7))
  steps = {
      'observation': {
          'pixels': rng.integers(0, 256, (length, 6, 5, 3), dtype=np.uint8),
          'position': rng.standard_normal((length, 3)).astype(np.float32),
          'instruction': np.array([f'episode {index} step {t}'.encode()
                                   for t in range(length)], dtype=object),
      },
      'action': {'move': rng.uniform(-1, 1, (length, 2)).astype(np.float32),
                 'grip': rng.integers(0, 2, length).astype(bool)},
      'reward': rng.standard_normal(length).astype(np.float32),
      'discount': np.ones(length, np.float32),
      'policy_info': {
          'log_probability': rng.standard_normal(length).astype(np.float32),
          'mode': rng.integers(0, 4, length).astype(np.int32)},
      **rlds_data.flags(length, terminal=bool(index % 2)),
  }
  return {'steps': steps, 'episode_id': np.int64(index),
          'episode_return': np.float32(steps['reward'].sum())}


def read_episodes(directory: str, split: str = 'train') -> List[Episode]:
  """Every episode of `split`, read by TFDS (`builder_from_directory`)."""
  dataset = tfds.builder_from_directory(directory).as_dataset(split=split)
  return [_numpy_episode(element) for element in dataset]


def _numpy_episode(element) -> Episode:
  """Steps read in blocks and joined: a `batch` after TFDS's decoding `map`
  is fused with it into one op that allocates the whole batch size, so a
  batch of a whole episode (2**31 - 1) never returns."""
  blocks = list(element['steps'].batch(256).as_numpy_iterator())
  return {**{key: value.numpy() for key, value in element.items()
             if key != 'steps'},
          'steps': tree.map_structure(lambda *b: np.concatenate(b), *blocks)}


def assert_same_episodes(got: List[Episode], want: List[Episode]) -> None:
  """Same count, structure, dtypes (as TFDS gives them) and values."""
  assert len(got) == len(want), (len(got), len(want))
  for index, (got_episode, want_episode) in enumerate(zip(got, want)):
    tree.assert_same_structure(want_episode, got_episode)
    for (path, want_leaf), got_leaf in zip(
        tree.flatten_with_path(want_episode), tree.flatten(got_episode)):
      where = f'episode {index}: {"/".join(map(str, path))}'
      want_leaf = np.asarray(want_leaf)
      assert np.asarray(got_leaf).dtype == want_leaf.dtype, where
      np.testing.assert_array_equal(got_leaf, want_leaf, err_msg=where)


def shard_lengths(directory: str, split: str = 'train') -> List[int]:
  """The lengths dataset_info.json registers for `split`."""
  with open(os.path.join(directory, 'dataset_info.json')) as f:
    info = json.load(f)
  [found] = [s for s in info.get('splits', []) if s['name'] == split]
  return [int(n) for n in found.get('shardLengths', [])]


def record_files(directory: str) -> List[str]:
  return sorted(name for name in os.listdir(directory) if '.tfrecord-' in name)


def files_bytes(directory: str) -> Dict[str, bytes]:
  """Every file of `directory` by name, with its content."""
  contents = {}
  for name in sorted(os.listdir(directory)):
    with open(os.path.join(directory, name), 'rb') as f:
      contents[name] = f.read()
  return contents
