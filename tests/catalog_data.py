"""Synthetic datasets with a catalog structure's features, and what they become.

    write(structure, data_dir)   random values for every feature, well-formed
                                 RLDS flags -> a TFDS directory (TFDS's writer)
    source_episodes(directory)   what TFDS decodes from it (JPEG is lossy: this,
                                 not the random input, is the source)
    expected_trajectories(eps)   the README's conversion rules, step by step
    expected_items(eps)          the 2-step items a push writes (DROP)

The rules, written here independently of the package:
    step_type       FIRST if is_first, else LAST if is_last, else MID;
                    a single-step episode is LAST -> LAST
    discount        float32: 0 on a terminal last step, else the step's
                    discount (the scalar a size-1 discount holds), 1 if absent
    reward          as stored; float32 0 if absent
    observation, action: as stored; policy_info ()
Flags may be stored with shape (1,): they are read as the scalar they hold.
TFDS's `RandomFakeGenerator` is not used: its flags are random bits (not an
RLDS episode) and it sizes open dimensions anew for every step, which no
Reverb item can stack.
"""

import os
import zlib
from typing import Any, Dict, List

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory
import tree

from tests import catalog

Episode = Dict[str, Any]  # 'steps': {field: [T, ...] numpy}, plus metadata.

FIRST, MID, LAST = (int(ts.StepType.FIRST), int(ts.StepType.MID),
                    int(ts.StepType.LAST))
FLAGS = ('is_first', 'is_last', 'is_terminal')
# Episode lengths: a single-step episode among longer ones; fewer steps when
# the features fix large images (megabytes per step).
LENGTHS = (4, 1, 3)
LENGTHS_LARGE = (2, 1, 2)
LARGE_STEP_VALUES = 200_000
# Sizes of the dimensions the features leave open (robosuite's `image` is
# (None, None, 3)): constant within an episode, different between episodes.
OPEN_IMAGE_SIZES = ((6, 8), (4, 10), (5, 7))  # Height, width.
OPEN_SIZES = (3, 2, 4)  # Any other open dimension.


def write(structure: catalog.Structure, data_dir: str) -> str:
  """Writes a few random episodes with `structure`'s features; the TFDS dir."""
  features = structure.features
  rng = np.random.default_rng(zlib.crc32(structure.name.encode()))
  episodes = [random_episode(features, length, terminal=i % 2 == 0, rng=rng,
                             index=i)
              for i, length in enumerate(lengths(features))]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      catalog.dataset_name(structure), '1.0.0', features,
      {'train': list(enumerate(episodes))}, data_dir=data_dir,
      disable_shuffling=True)
  return os.fspath(builder.data_dir)


def lengths(features: tfds.features.FeaturesDict):
  values = sum(int(np.prod([s or OPEN_SIZES[0] for s in f.shape]))
               for f in _leaves(features['steps'].feature))
  return LENGTHS_LARGE if values > LARGE_STEP_VALUES else LENGTHS


def random_episode(features: tfds.features.FeaturesDict, length: int,
                   terminal: bool, rng: np.random.Generator,
                   index: int = 0) -> Episode:
  """Random steps, then RLDS flags and a discount as the features store them.

  `index` picks the sizes of open dimensions (`OPEN_SIZES`) for the episode.
  """
  step_features = features['steps'].feature
  steps = [random_value(step_features, rng, index) for _ in range(length)]
  for t, step in enumerate(steps):
    last = t == length - 1
    for name, value in zip(FLAGS, (t == 0, last, terminal and last)):
      step[name] = _like(step_features[name], value)
    if 'discount' in step_features:
      step['discount'] = _discount(step_features['discount'], rng)
  metadata = {name: random_value(feature, rng, index)
              for name, feature in features.items() if name != 'steps'}
  return {'steps': steps, **metadata}


def random_value(feature, rng: np.random.Generator, index: int = 0):
  """A random value any feature of the catalog accepts, nested as it is."""
  if isinstance(feature, tfds.features.FeaturesDict):
    return {name: random_value(f, rng, index) for name, f in feature.items()}
  if isinstance(feature, tfds.features.Image):
    return _random_image(feature, rng, index)
  if isinstance(feature, tfds.features.Text):
    return _random_text(rng)
  if isinstance(feature, tfds.features.Tensor):
    open_size = OPEN_SIZES[index % len(OPEN_SIZES)]
    shape = tuple(open_size if s is None else s for s in feature.shape)
    return _random_array(shape, np.dtype(feature.np_dtype), rng)
  raise TypeError(f'No random values for a {type(feature).__name__} feature; '
                  f'teach tests/catalog_data.py this kind.')


def _random_image(feature: tfds.features.Image, rng: np.random.Generator,
                  index: int):
  height, width, channels = feature.shape
  open_height, open_width = OPEN_IMAGE_SIZES[index % len(OPEN_IMAGE_SIZES)]
  shape = (height or open_height, width or open_width, channels)
  if np.dtype(feature.np_dtype) == np.float32:
    return rng.standard_normal(shape).astype(np.float32)
  return rng.integers(0, 256, shape).astype(feature.np_dtype)


def _random_text(rng: np.random.Generator) -> str:
  words = ('pick', 'place', 'the', 'red', 'block', 'open', 'drawer', 'cup')
  return ' '.join(rng.choice(words, size=rng.integers(1, 6)))


def _random_array(shape, dtype: np.dtype, rng: np.random.Generator):
  if dtype == np.bool_:
    return rng.integers(0, 2, shape).astype(bool)
  if np.issubdtype(dtype, np.integer):
    return rng.integers(0, 100, shape).astype(dtype)
  if np.issubdtype(dtype, np.floating):
    return rng.standard_normal(shape).astype(dtype)
  if dtype == np.object_:
    return np.array([_random_text(rng).encode() for _ in range(
        int(np.prod(shape)))], dtype=object).reshape(shape) if shape else (
            _random_text(rng).encode())
  raise TypeError(f'No random values of dtype {dtype}.')


def _like(feature, value):
  """`value` with the feature's dtype and shape (a scalar or (1,) flag)."""
  return np.full(feature.shape, value, dtype=feature.np_dtype)


def _discount(feature, rng: np.random.Generator):
  """A discount away from 1 (so a default of 1 would show), or 0/1 if int."""
  dtype = np.dtype(feature.np_dtype)
  value = (rng.integers(0, 2) if np.issubdtype(dtype, np.integer)
           else rng.uniform(0.5, 0.99))
  return np.full(feature.shape, value, dtype=dtype)


def _leaves(feature) -> List[Any]:
  if isinstance(feature, tfds.features.FeaturesDict):
    return [leaf for f in feature.values() for leaf in _leaves(f)]
  return [feature]


# --- Reading back: the source, and what it must become. ---------------------

def source_episodes(directory: str) -> List[Episode]:
  """TFDS's own decoding of the directory, in order, as numpy episodes."""
  dataset = tfds.builder_from_directory(directory).as_dataset(
      split='train', shuffle_files=False)
  episodes = []
  for episode in dataset:
    batches = list(tfds.as_numpy(episode['steps'].batch(16)))
    metadata = {k: v for k, v in episode.items() if k != 'steps'}
    episodes.append({
        'steps': tree.map_structure(lambda *parts: np.concatenate(parts),
                                    *batches),
        **tfds.as_numpy(metadata)})
  return episodes


def expected_trajectories(episodes: List[Episode]) -> List[trajectory.Trajectory]:
  """One Trajectory per step, in order, by the rules in the module docstring."""
  steps = [_step(episode['steps'], t) for episode in episodes
           for t in range(_length(episode))]
  pad = {'is_first': True, 'is_last': False}  # After the last step.
  result = []
  for i, step in enumerate(steps):
    following = steps[i + 1] if i + 1 < len(steps) else pad
    result.append(_trajectory(step, following))
  return result


def expected_items(episodes: List[Episode]) -> List[trajectory.Trajectory]:
  """The 2-step items of each episode (stride 1, no item across episodes)."""
  trajectories = expected_trajectories(episodes)
  items, start = [], 0
  for episode in episodes:
    length = _length(episode)
    for t in range(start, start + length - 1):
      items.append(tree.map_structure(lambda a, b: np.stack([a, b]),
                                      trajectories[t], trajectories[t + 1]))
    start += length
  return items


def _length(episode: Episode) -> int:
  return len(episode['steps']['is_first'])


def _step(steps: Dict[str, Any], t: int) -> Dict[str, Any]:
  """Step t's values as arrays (`[t, ...]`: a string stays an object array)."""
  return tree.map_structure(lambda leaf: leaf[t, ...], steps)


def _flag(step: Dict[str, Any], name: str) -> bool:
  return bool(np.asarray(step[name]).reshape(()))


def _step_type(step) -> int:
  return FIRST if _flag(step, 'is_first') else (
      LAST if _flag(step, 'is_last') else MID)


def _trajectory(step, following) -> trajectory.Trajectory:
  step_type, next_step_type = _step_type(step), _step_type(following)
  if step_type == FIRST and next_step_type == FIRST:
    step_type = next_step_type = LAST
  terminal = _flag(step, 'is_last') and _flag(step, 'is_terminal')
  discount = (np.asarray(step['discount']).reshape(()) if 'discount' in step
              else 1.0)
  return trajectory.Trajectory(
      step_type=np.int32(step_type),
      observation=step['observation'],
      action=step['action'],
      policy_info=(),
      next_step_type=np.int32(next_step_type),
      reward=step['reward'] if 'reward' in step else np.float32(0.0),
      discount=np.float32(0.0 if terminal else discount))


# --- Comparing. --------------------------------------------------------------

def assert_equal(expected: Any, got: Any, where: str) -> None:
  """Same structure, dtypes, shapes and values; the first difference raised."""
  got = tree.map_structure(np.asarray, got)
  expected = tree.map_structure(np.asarray, expected)
  try:
    tree.assert_same_structure(expected, got, check_types=False)
  except (ValueError, TypeError) as e:
    raise AssertionError(f'{where}: structure differs: {e}') from e
  for (path, want), (_, have) in zip(tree.flatten_with_path(expected),
                                     tree.flatten_with_path(got)):
    at = f"{where} {'/'.join(map(str, path))}"
    if have.dtype != want.dtype or have.shape != want.shape:
      raise AssertionError(f'{at}: got {have.dtype}{list(have.shape)}, '
                           f'expected {want.dtype}{list(want.shape)}')
    if want.dtype == object:
      same = have.ravel().tolist() == want.ravel().tolist()
    else:
      same = np.array_equal(have, want)
    if not same:
      raise AssertionError(f'{at}: values differ')


def assert_spec_matches(spec: Any, expected: trajectory.Trajectory,
                        where: str) -> None:
  """Each spec leaf has the dtype of the data and a shape compatible with it."""
  try:
    tree.assert_same_structure(expected, spec, check_types=False)
  except (ValueError, TypeError) as e:
    raise AssertionError(f'{where}: structure differs: {e}') from e
  for (path, leaf), (_, leaf_spec) in zip(tree.flatten_with_path(expected),
                                          tree.flatten_with_path(spec)):
    leaf = np.asarray(leaf)
    at = f"{where} {'/'.join(map(str, path))}"
    if (tf.as_dtype(leaf_spec.dtype) != tf.as_dtype(leaf.dtype)
        or not leaf_spec.shape.is_compatible_with(leaf.shape)):
      raise AssertionError(f'{at}: spec {leaf_spec.dtype.name}'
                           f'{leaf_spec.shape}, data {leaf.dtype}'
                           f'{list(leaf.shape)}')
