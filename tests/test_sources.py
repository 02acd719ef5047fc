"""Opening RLDS data: TFDS directories written here, catalog names, the bundle.

Fixture layout (module scope, written once with TFDS' own writer):

    catalog/alpha/1.0.0/   train: episodes 0-4 (lengths 3..7), test: 0-1
    catalog/beta/1.0.0/    train: episodes 100-102
    catalog/wide/1.0.0/    train: observations of size 5 (another spec)
"""

import json
import os
import pathlib
import shutil
import socket
import subprocess
import sys
from typing import Callable, NamedTuple

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds

import rlds_reverb
from rlds_reverb import errors
from rlds_reverb import sources
from rlds_reverb.sources import bundled
from tests import rlds_data

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUNDLED_FILES = ('dataset_info.json', 'features.json',
                 'cartpole_mixed-train.tfrecord-00000')
ALPHA_LENGTHS = (3, 4, 5, 6, 7)


# --- Fixtures: real TFDS directories. ----------------------------------------

def rlds_features(observation_size: int) -> tfds.features.FeaturesDict:
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'observation': tfds.features.Tensor(
              shape=(observation_size,), dtype=np.float32),
          'action': np.int64,
          'reward': np.float32,
          'discount': np.float32,
          'is_first': np.bool_,
          'is_last': np.bool_,
          'is_terminal': np.bool_,
      }),
      'episode_id': np.int64,
  })


def keyed_episodes(first_id: int, lengths, observation_size: int = 3):
  """(key, episode) pairs as TFDS' ad hoc writer takes them."""
  return [(i, {'steps': rlds_data.flat_episode(
      length, seed=first_id + i, observation_size=observation_size),
               'episode_id': first_id + i})
          for i, length in enumerate(lengths)]


def store(data_dir: str, name: str, splits, observation_size: int = 3) -> str:
  """Writes data_dir/name/1.0.0 in episode order; returns that directory."""
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name, '1.0.0', rlds_features(observation_size), splits,
      data_dir=data_dir, disable_shuffling=True)
  return os.fspath(builder.data_dir)


@pytest.fixture(scope='module')
def catalog(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp('catalog'))
  store(data_dir, 'alpha', {'train': keyed_episodes(0, ALPHA_LENGTHS),
                            'test': keyed_episodes(0, (2, 2))})
  store(data_dir, 'beta', {'train': keyed_episodes(100, (2, 3, 4))})
  store(data_dir, 'wide', {'train': keyed_episodes(200, (2,), 5)},
        observation_size=5)
  return data_dir


def episode_ids(dataset: tf.data.Dataset):
  return [int(episode['episode_id']) for episode in dataset]


def step_counts(dataset: tf.data.Dataset):
  return [int(episode['steps'].reduce(0, lambda n, _: n + 1))
          for episode in dataset]


def dense_episodes(dataset: tf.data.Dataset):
  """Each episode's steps as numpy arrays with a leading time axis."""
  return [tf.nest.map_structure(
      lambda x: x.numpy(),
      episode['steps'].batch(1_000_000).get_single_element())
          for episode in dataset]


# --- Directories, catalog names, splits, concatenation. ----------------------

LOAD_CASES = {
    # id: (dataset relative to the catalog dir or a catalog name, split,
    #      expected episode ids)
    'version_dir': ('alpha/1.0.0', 'train', [0, 1, 2, 3, 4]),
    'parent_dir': ('alpha', 'train', [0, 1, 2, 3, 4]),
    'other_split': ('alpha', 'test', [0, 1]),
    'slice_first_two': ('alpha', 'train[:2]', [0, 1]),
    'slice_from_three': ('alpha/1.0.0', 'train[3:]', [3, 4]),
    'slice_percent': ('alpha', 'train[:40%]', [0, 1]),
    'two_dirs_in_order': (['beta', 'alpha'], 'train',
                          [100, 101, 102, 0, 1, 2, 3, 4]),
    'two_dirs_sliced': (['alpha', 'beta'], 'train[:1]', [0, 100]),
    'same_dir_twice': (['beta', 'beta/1.0.0'], 'train',
                       [100, 101, 102] * 2),
}


def flagged_dir(data_dir: str) -> str:
  """alpha's steps with other metadata: an 'invalid' flag, no 'episode_id'."""
  features = rlds_features(3)
  features = tfds.features.FeaturesDict({
      'steps': features['steps'], 'invalid': np.bool_})
  episodes = [(i, {'steps': rlds_data.flat_episode(n, seed=300 + i),
                   'invalid': i == 1}) for i, n in enumerate((2, 3))]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      'flagged', '1.0.0', features, {'train': episodes}, data_dir=data_dir,
      disable_shuffling=True)
  return os.fspath(builder.data_dir)


def test_datasets_that_differ_only_in_metadata_concatenate(catalog):
  """What is not alike is dropped (episode_id); the invalid flag is kept,
  False for the episodes of a source without one, so a push still skips
  exactly the flagged episodes."""
  flagged = flagged_dir(catalog)
  data = rlds_reverb.load([os.path.join(catalog, 'beta'), flagged])
  assert sorted(data.element_spec) == ['invalid', 'steps']
  assert [bool(e['invalid']) for e in data] == [False] * 3 + [False, True]
  assert step_counts(data) == [2, 3, 4, 2, 3]
  assert rlds_reverb.validation.validate(data).flagged_invalid == [4]
  first_flagged = rlds_reverb.load([flagged, os.path.join(catalog, 'beta')])
  assert [bool(e['invalid']) for e in first_flagged] == (
      [False, True] + [False] * 3)


@pytest.mark.parametrize('dataset, split, expected_ids',
                         LOAD_CASES.values(), ids=LOAD_CASES.keys())
def test_load_directories(catalog, dataset, split, expected_ids):
  if isinstance(dataset, str):
    dataset = os.path.join(catalog, dataset)
  else:
    dataset = [os.path.join(catalog, d) for d in dataset]
  assert episode_ids(sources.load(dataset, split)) == expected_ids


def test_load_keeps_episode_steps(catalog):
  loaded = dense_episodes(sources.load(os.path.join(catalog, 'alpha')))
  expected = [episode for _, episode in keyed_episodes(0, ALPHA_LENGTHS)]
  assert len(loaded) == len(expected)
  for got, want in zip(loaded, expected):
    assert sorted(got) == sorted(want['steps'])
    for field, values in want['steps'].items():
      np.testing.assert_array_equal(got[field], values, err_msg=field)


def test_load_accepts_path_objects(catalog):
  assert episode_ids(sources.load(pathlib.Path(catalog) / 'beta')) == [
      100, 101, 102]


@pytest.mark.parametrize('name', ['alpha', 'alpha:1.0.0'])
def test_load_catalog_name_from_data_dir(catalog, name):
  assert step_counts(sources.load(name, 'train', data_dir=catalog)) == list(
      ALPHA_LENGTHS)


def test_converted_trajectory_count_equals_step_count(catalog):
  dataset = sources.load([os.path.join(catalog, d) for d in ('alpha', 'beta')])
  trajectories = rlds_reverb.convert_rlds_to_trajectories(dataset)
  count = sum(int(tf.shape(block.step_type)[0])
              for block in trajectories.batch(1000))
  assert count == sum(ALPHA_LENGTHS) + 2 + 3 + 4


# --- Errors, each with its message. ------------------------------------------

@pytest.fixture
def no_network(monkeypatch):
  """Fails any Python socket connection: loading must never download."""

  def refuse(self, address):
    raise AssertionError(f'network access to {address}')

  monkeypatch.setattr(socket.socket, 'connect', refuse)
  monkeypatch.setattr(socket.socket, 'connect_ex', refuse)


def test_catalog_dataset_not_prepared(tmp_path, no_network):
  del no_network
  name = 'd4rl_mujoco_halfcheetah/v0-expert'
  with pytest.raises(errors.DatasetNotPreparedError) as raised:
    sources.load(name, data_dir=str(tmp_path))
  message = str(raised.value)
  assert isinstance(raised.value, FileNotFoundError)
  assert isinstance(raised.value, errors.RldsReverbError)
  assert '\n' not in message
  version_dir = tmp_path / 'd4rl_mujoco_halfcheetah' / 'v0-expert' / '1.2.0'
  assert message == (
      f"TFDS dataset '{name}' is not prepared in data dir {tmp_path} (no "
      f'{version_dir}) and rlds-reverb never downloads: on a machine with '
      f'internet run `tfds build {name} --data_dir DIR`, then copy '
      f'DIR/d4rl_mujoco_halfcheetah into {tmp_path}.')
  assert not os.listdir(tmp_path)  # Nothing half-written.


def write_corrupt_info(catalog_dir: str, tmp_path) -> str:
  target = tmp_path / 'corrupt' / '1.0.0'
  shutil.copytree(os.path.join(catalog_dir, 'beta', '1.0.0'), target)
  (target / 'dataset_info.json').write_text('{"name": "beta", ')
  return str(target)


def write_two_versions(catalog_dir: str, tmp_path) -> str:
  target = tmp_path / 'two'
  for version in ('1.0.0', '2.0.0'):
    shutil.copytree(os.path.join(catalog_dir, 'beta', '1.0.0'),
                    target / version)
  return str(target)


def write_file(unused_catalog_dir: str, tmp_path) -> str:
  path = tmp_path / 'episodes.tfrecord'
  path.write_bytes(b'')
  return str(path)


def empty_dir(unused_catalog_dir: str, tmp_path) -> str:
  return str(tmp_path)


def missing_dir(unused_catalog_dir: str, tmp_path) -> str:
  return str(tmp_path / 'nope')


def alpha_dir(catalog_dir: str, unused_tmp_path) -> str:
  return os.path.join(catalog_dir, 'alpha')


def alpha_and_wide(catalog_dir: str, unused_tmp_path):
  return [os.path.join(catalog_dir, name) for name in ('alpha', 'wide')]


def bundled_and_alpha(catalog_dir: str, unused_tmp_path):
  return [sources.BUNDLED, os.path.join(catalog_dir, 'alpha')]


def nothing(unused_catalog_dir: str, unused_tmp_path):
  return []


def not_a_name(unused_catalog_dir: str, unused_tmp_path):
  return ['alpha', 7]


def unknown_name(unused_catalog_dir: str, unused_tmp_path) -> str:
  return 'no_such_rlds_dataset_xyz'


def unknown_bundle(unused_catalog_dir: str, unused_tmp_path) -> str:
  return 'bundled:pong'


class ErrorCase(NamedTuple):
  make_dataset: Callable  # (catalog dir, tmp_path) -> the dataset argument
  split: str
  message: str  # '{path}' stands for the dataset argument.
  whole: bool = True  # Else `message` is the start (TFDS' text follows).


SOURCE_ERROR_CASES = {
    'not_a_tfds_dir': ErrorCase(
        empty_dir, 'train',
        '{path} is not a TFDS dataset directory: no dataset_info.json in it '
        'or in a version subdirectory.'),
    'missing_dir': ErrorCase(missing_dir, 'train',
                             '{path}: no such directory.'),
    'file': ErrorCase(write_file, 'train',
                      '{path} is a file, not a TFDS dataset directory.'),
    'two_versions': ErrorCase(
        write_two_versions, 'train',
        '{path} holds several dataset versions (1.0.0, 2.0.0); pass the '
        'directory of one.'),
    'corrupt_info': ErrorCase(
        write_corrupt_info, 'train',
        '{path}: cannot read the TFDS dataset info (', whole=False),
    'unknown_split': ErrorCase(
        alpha_dir, 'validation',
        "Bad split 'validation' for {path}/1.0.0; available splits: test, "
        "train (Unknown split 'validation'. Should be one of ", whole=False),
    'bad_slice': ErrorCase(
        alpha_dir, 'train[:x]',
        "Bad split 'train[:x]' for {path}/1.0.0; available splits: test, "
        "train (Error parsing split 'train[:x]'.", whole=False),
    'different_specs': ErrorCase(
        alpha_and_wide, 'train',
        'Cannot concatenate {path[1]}: its episode spec differs from the '
        'datasets before it at steps/observation (float32[3] vs float32[5]).'),
    'steps_differ': ErrorCase(
        bundled_and_alpha, 'train',
        'Cannot concatenate {path[1]}: its episode spec differs from the '
        'datasets before it at steps/observation (float32[4] vs float32[3]).'),
    'no_dataset': ErrorCase(
        nothing, 'train',
        "No dataset given: pass a TFDS directory, a TFDS catalog name or "
        "'bundled:cartpole'."),
    'not_a_string': ErrorCase(
        not_a_name, 'train',
        'Dataset 7 is a int; expected a directory or a TFDS catalog name '
        '(str).'),
    'unknown_catalog_name': ErrorCase(
        unknown_name, 'train',
        "'{path}' is neither an existing directory nor a TFDS catalog "
        "dataset."),
    'unknown_bundle': ErrorCase(
        unknown_bundle, 'train',
        "Unknown bundled dataset '{path}'; the package bundles "
        "'bundled:cartpole' only."),
}


@pytest.mark.parametrize('case', SOURCE_ERROR_CASES.values(),
                         ids=SOURCE_ERROR_CASES.keys())
def test_source_errors(catalog, tmp_path, case):
  dataset = case.make_dataset(catalog, tmp_path)
  expected = case.message.format(path=dataset)
  with pytest.raises(errors.SourceError) as raised:
    sources.load(dataset, case.split, data_dir=str(tmp_path))
  message = str(raised.value)
  assert isinstance(raised.value, ValueError)
  assert '\n' not in message
  if case.whole:
    assert message == expected
  else:
    assert message.startswith(expected), message


def test_bad_catalog_version(tmp_path):
  with pytest.raises(errors.SourceError) as raised:
    sources.load('mnist:9.9.9', data_dir=str(tmp_path))
  assert str(raised.value).startswith(
      "Cannot open TFDS catalog dataset 'mnist:9.9.9': ")
  assert '9.9.9' in str(raised.value).split(': ', 1)[1]


# --- The bundled CartPole dataset. -------------------------------------------

def test_bundled_dir_is_inside_the_package():
  path = sources.bundled_dataset_dir()
  package_dir = os.path.dirname(os.path.abspath(rlds_reverb.__file__))
  assert path == os.path.join(package_dir, 'data', 'cartpole')
  assert sorted(os.listdir(path)) == sorted(BUNDLED_FILES)


def test_bundled_files_missing(monkeypatch, tmp_path):
  """A broken install (no package data) says so instead of 'not TFDS'."""
  monkeypatch.setattr(bundled, 'bundled_dataset_dir', lambda: str(tmp_path))
  with pytest.raises(errors.SourceError) as raised:
    sources.load(sources.BUNDLED)
  assert str(raised.value) == (
      f'The bundled dataset is missing from {tmp_path}: the package was '
      f'installed without its data files; reinstall rlds_reverb.')


def test_bundled_spec():
  spec = sources.load(sources.BUNDLED).element_spec
  assert spec['episode_id'] == tf.TensorSpec((), tf.int64)
  assert spec['epsilon'] == tf.TensorSpec((), tf.float32)
  assert spec['steps'].element_spec == {
      'observation': tf.TensorSpec((4,), tf.float32),
      'action': tf.TensorSpec((), tf.int64),
      'reward': tf.TensorSpec((), tf.float32),
      'discount': tf.TensorSpec((), tf.float32),
      'is_first': tf.TensorSpec((), tf.bool),
      'is_last': tf.TensorSpec((), tf.bool),
      'is_terminal': tf.TensorSpec((), tf.bool),
  }


@pytest.fixture(scope='module')
def bundled_episodes():
  return dense_episodes(sources.load(sources.BUNDLED))


def test_bundled_episodes_are_well_formed(bundled_episodes):
  assert len(bundled_episodes) == 64
  for steps in bundled_episodes:
    length = len(steps['reward'])
    np.testing.assert_array_equal(steps['is_first'], np.arange(length) == 0)
    np.testing.assert_array_equal(steps['is_last'],
                                  np.arange(length) == length - 1)
    assert not steps['is_terminal'][:-1].any()


def test_bundled_terminations_and_truncations(bundled_episodes):
  """A fallen pole is terminal (discount 0 before it); the time limit is not."""
  terminal = [e for e in bundled_episodes if e['is_terminal'][-1]]
  truncated = [e for e in bundled_episodes if not e['is_terminal'][-1]]
  assert terminal and truncated
  for steps in terminal:
    assert len(steps['reward']) <= 500
    assert steps['discount'][-2] == 0.0
  for steps in truncated:
    # 500 environment steps, plus the RLDS step holding the last observation.
    assert len(steps['reward']) == 501
    assert (steps['discount'][:-1] == 1.0).all()


def test_bundled_returns_spread(bundled_episodes):
  returns = sorted(float(e['reward'].sum()) for e in bundled_episodes)
  assert returns[0] < 30
  assert returns[-1] == 500
  assert 50 < np.median(returns) < 400


def test_bundled_converts_one_trajectory_per_step(bundled_episodes):
  trajectories = rlds_reverb.convert_rlds_to_trajectories(
      sources.load(sources.BUNDLED))
  count = sum(int(tf.shape(block.step_type)[0])
              for block in trajectories.batch(4096))
  assert count == sum(len(e['reward']) for e in bundled_episodes)


def test_bundled_is_package_data(tmp_path):
  """setup.py ships the dataset: egg_info's file list names every file."""
  subprocess.run(
      [sys.executable, 'setup.py', '-q', 'egg_info', '--egg-base',
       str(tmp_path)],
      cwd=REPO, check=True, capture_output=True)
  listed = (tmp_path / 'rlds_reverb.egg-info' / 'SOURCES.txt').read_text()
  for name in BUNDLED_FILES:
    assert f'rlds_reverb/data/cartpole/{name}' in listed.splitlines(), name


# --- display_name. -----------------------------------------------------------

def test_display_name(catalog):
  alpha = os.path.join(catalog, 'alpha')
  assert sources.display_name(alpha) == f'alpha:1.0.0 ({alpha})'
  assert sources.display_name(['d4rl/x', alpha], data_dir='/data') == (
      f"TFDS 'd4rl/x' in /data + alpha:1.0.0 ({alpha})")
  assert sources.display_name(sources.BUNDLED) == (
      f'bundled:cartpole (CartPole-v1, {sources.bundled_dataset_dir()})')
  assert sources.display_name([]) == '[]'


def test_bundled_info_names_the_dataset():
  with open(os.path.join(sources.bundled_dataset_dir(),
                         'dataset_info.json')) as f:
    info = json.load(f)
  assert (info['name'], info['version']) == ('cartpole_mixed', '1.0.0')
