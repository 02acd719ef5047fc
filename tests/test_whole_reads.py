"""Episodes read whole from TFDS's records equal TFDS's own step-by-step read.

`load` remembers how to read its episodes whole (`whole_reads`); everything
the package computes from them (episodes, trajectories, items) must be what
the standard read gives, only faster. Directories are real TFDS directories
written by TFDS's writer and by ours.
"""

import os
from typing import Any, Dict, List

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
import tree

import rlds_reverb
from rlds_reverb import stats
from rlds_reverb import validation
from rlds_reverb.sources import whole_reads
from rlds_reverb.tfds_out import EpisodeWriter
from tests import dataset_shapes
from tests import rlds_dirs


def _numpy(value: Any) -> Any:
  return tree.map_structure(lambda leaf: np.asarray(leaf), value)


def standard_episodes(rlds_data: tf.data.Dataset) -> List[Dict[str, Any]]:
  """Episodes as TFDS's standard read gives them, steps joined to [T, ...]."""
  episodes = []
  for episode in rlds_data:
    steps = list(episode['steps'].as_numpy_iterator())
    joined = (tree.map_structure(_stack, *steps) if steps
              else _empty_steps(episode['steps'].element_spec))
    episodes.append({**_numpy({k: v for k, v in episode.items()
                               if k != 'steps'}), 'steps': joined})
  return episodes


def _stack(*steps) -> np.ndarray:
  """Steps stacked as tf.data gives [T] strings: an object array."""
  if isinstance(steps[0], bytes):
    return np.array(steps, dtype=object)
  return np.stack(steps)


def _empty_steps(spec) -> Any:
  return tree.map_structure(
      lambda s: np.zeros([0] + s.shape.as_list(), s.dtype.as_numpy_dtype),
      spec)


def whole_episodes(rlds_data: tf.data.Dataset, keep_encoded: bool = False
                   ) -> List[Dict[str, Any]]:
  read = whole_reads.whole(rlds_data, keep_encoded=keep_encoded)
  assert read is not rlds_data, 'load() should read its episodes whole'
  return [_numpy(episode) for episode in read]


def _tfds_shape_dir(name: str, data_dir: str) -> str:
  directory, _ = dataset_shapes.write(name, data_dir)
  return directory


def _ours_dir(tmp_path, shard_episodes: int = 2) -> str:
  directory = os.fspath(tmp_path / 'ours')
  with EpisodeWriter(directory, rlds_dirs.features(), name='ours',
                     shard_episodes=shard_episodes) as writer:
    for index in range(5):
      writer.write(rlds_dirs.episode(index))
  return directory


def _dir_with_empty_episodes(tmp_path) -> str:
  """TFDS's writer, episodes of 3, 0, 2 and 0 steps."""
  lengths = (3, 0, 2, 0)
  episodes = [{'steps': {**_flags(n),
                         'observation': np.arange(n * 2, dtype=np.float32
                                                  ).reshape(n, 2),
                         'action': np.arange(n, dtype=np.int64),
                         'reward': np.ones(n, np.float32),
                         'discount': np.ones(n, np.float32)}}
              for n in lengths]
  features = tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tfds.features.Tensor(shape=(2,), dtype=np.float32),
      'action': tfds.features.Tensor(shape=(), dtype=np.int64),
      'reward': tfds.features.Tensor(shape=(), dtype=np.float32),
      'discount': tfds.features.Tensor(shape=(), dtype=np.float32),
      'is_first': tfds.features.Tensor(shape=(), dtype=np.bool_),
      'is_last': tfds.features.Tensor(shape=(), dtype=np.bool_),
      'is_terminal': tfds.features.Tensor(shape=(), dtype=np.bool_)})})
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      'holes', '1.0.0', features, {'train': list(enumerate(episodes))},
      data_dir=os.fspath(tmp_path), disable_shuffling=True)
  return os.fspath(builder.data_dir)


def _flags(n: int) -> Dict[str, np.ndarray]:
  return {'is_first': np.arange(n) == 0, 'is_last': np.arange(n) == n - 1,
          'is_terminal': np.arange(n) == n - 1}


def assert_same(got: Any, want: Any) -> None:
  assert len(got) == len(want), (len(got), len(want))
  for index, (g, w) in enumerate(zip(got, want)):
    tree.assert_same_structure(w, g)
    for (path, w_leaf), g_leaf in zip(tree.flatten_with_path(w),
                                      tree.flatten(g)):
      where = f'element {index}: {"/".join(map(str, path))}'
      assert g_leaf.dtype == w_leaf.dtype, where
      assert g_leaf.shape == w_leaf.shape, where
      np.testing.assert_array_equal(g_leaf, w_leaf, err_msg=where)


# --- The episodes themselves. ------------------------------------------------

@pytest.mark.parametrize('name', ['rlu_dmlab', 'robotics', 'dtypes'])
def test_whole_read_equals_tfds_read_on_catalog_shapes(tmp_path, name):
  data = rlds_reverb.load(_tfds_shape_dir(name, os.fspath(tmp_path)))
  assert_same(whole_episodes(data), standard_episodes(data))


def test_whole_read_equals_tfds_read_across_shards_and_sources(tmp_path):
  """PNG images, strings, nested dicts, five shards and two sources."""
  ours = _ours_dir(tmp_path, shard_episodes=1)
  other = _tfds_shape_dir('robotics', os.fspath(tmp_path))
  data = rlds_reverb.load([ours, ours])
  got = whole_episodes(data)
  assert [int(e['episode_id']) for e in got] == [0, 1, 2, 3, 4] * 2
  assert_same(got, standard_episodes(data))
  del other


def test_keep_encoded_keeps_the_encoded_bytes(tmp_path):
  data = rlds_reverb.load(_ours_dir(tmp_path))
  encoded = whole_episodes(data, keep_encoded=True)
  for episode, source in zip(encoded, standard_episodes(data)):
    pixels = episode['steps']['observation']['pixels']
    assert pixels.dtype == object
    decoded = np.stack([tf.io.decode_png(p).numpy() for p in pixels])
    np.testing.assert_array_equal(decoded,
                                  source['steps']['observation']['pixels'])


def test_a_transformed_dataset_reads_the_standard_way(tmp_path):
  data = rlds_reverb.load(_ours_dir(tmp_path))
  for changed in (data.take(2), data.skip(1), data.shuffle(2)):
    assert whole_reads.whole(changed) is changed


def test_datasets_not_from_load_read_the_standard_way(tmp_path):
  data = tfds.builder_from_directory(_ours_dir(tmp_path)).as_dataset(
      split='train')
  assert whole_reads.whole(data) is data


# --- What the package computes from them. ------------------------------------

def _standard(directory: str) -> tf.data.Dataset:
  """The same episodes, in the same order, without `load`'s whole reader."""
  return tfds.builder_from_directory(directory).as_dataset(
      split='train', shuffle_files=False)


def _trajectories(rlds_data: tf.data.Dataset) -> List[Any]:
  return [_numpy(t) for t in
          rlds_reverb.convert_rlds_to_trajectories(rlds_data)]


@pytest.mark.parametrize('make', [_ours_dir, _dir_with_empty_episodes],
                         ids=['images-strings', 'empty-episodes'])
def test_trajectories_equal_the_standard_reads(tmp_path, make):
  directory = make(tmp_path)
  assert_same(_trajectories(rlds_reverb.load(directory)),
              _trajectories(_standard(directory)))


def test_checks_and_statistics_equal_the_standard_reads(tmp_path):
  directory = _dir_with_empty_episodes(tmp_path)
  whole, standard = rlds_reverb.load(directory), _standard(directory)
  assert validation.validate(whole) == validation.validate(standard)
  assert validation.validate(whole).empty_episodes == [1, 3]
  got, want = stats.episode_stats(whole), stats.episode_stats(standard)
  np.testing.assert_array_equal(got.lengths, want.lengths)
  np.testing.assert_array_equal(got.returns, want.returns)
  np.testing.assert_array_equal(got.lengths, [3, 0, 2, 0])
