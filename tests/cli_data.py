"""Small flat RLDS datasets written as TFDS directories, and the tables they
go into: what the command-line tests push, validate and serve.

    CLEAN (3 episodes, 9 steps) / MIXED (5: flagged, malformed, fine)
      -> write_tfds(root, name, episodes) -> TFDS version dir
    fixtures: dirs (CLEAN's and MIXED's directories), served_tables ('a',
      'b' signed for them, 'f64' not: what conftest's `server` serves)
"""

import pathlib

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import reverb_tables
from tests import rlds_data

_episode = rlds_data.flat_episode_with

# 3 well-formed episodes: 9 steps, 6 items of 2 steps.
CLEAN = [_episode(3, 0), _episode(4, 1), _episode(2, 2)]
# Episode 1 flagged in metadata, 2 and 4 malformed, 0 and 3 fine.
MIXED = [_episode(3, 10), _episode(3, 11), _episode(4, 12, is_terminal={1: True}),
         _episode(5, 13), _episode(2, 14, is_first={0: False})]
MIXED_INVALID = [False, True, False, False, False]


def features(with_invalid: bool, observation_size: int = 3, action=None):
  """The TFDS features of flat episodes: float32 observations of
  `observation_size`, `action` (an int64 scalar unless given), an 'invalid'
  flag in the metadata or not."""
  scalar = tfds.features.Scalar
  steps = tfds.features.Dataset({
      'observation': tfds.features.Tensor(shape=(observation_size,),
                                          dtype=np.float32),
      'action': action or scalar(dtype=np.int64),
      'reward': scalar(dtype=np.float32),
      'discount': scalar(dtype=np.float32),
      'is_first': scalar(dtype=np.bool_),
      'is_last': scalar(dtype=np.bool_),
      'is_terminal': scalar(dtype=np.bool_),
  })
  found = {'steps': steps}
  if with_invalid:
    found['invalid'] = scalar(dtype=np.bool_)
  return tfds.features.FeaturesDict(found)


def write_tfds(root, name, episodes, invalid=None) -> str:
  """A TFDS directory of `episodes`, in order; returns its version dir."""
  examples = []
  for index, steps in enumerate(episodes):
    example = {'steps': steps}
    if invalid is not None:
      example['invalid'] = invalid[index]
    examples.append((index, example))
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name=name, version='1.0.0', features=features(invalid is not None),
      split_datasets={'train': examples}, data_dir=str(root),
      disable_shuffling=True)
  return str(builder.data_dir)


@pytest.fixture(scope='module')
def dirs(tmp_path_factory):
  """{'clean': CLEAN's directory, 'mixed': MIXED's, flagged as invalid}."""
  root = tmp_path_factory.mktemp('tfds')
  return {
      'clean': write_tfds(root, 'clean_rlds', CLEAN),
      'mixed': write_tfds(root, 'mixed_rlds', MIXED, MIXED_INVALID),
  }


@pytest.fixture(scope='module')
def served_tables():
  """Tables 'a' and 'b' signed for CLEAN's trajectory spec, 'f64' not."""
  signature = reverb_tables.signature_for(rlds_data.as_rlds(CLEAN))
  return [reverb_tables.fifo_table('a', signature),
          reverb_tables.fifo_table('b', signature),
          reverb_tables.fifo_table('f64',
                                   reverb_tables.float64_signature(signature))]


def corrupt_second_record(version_dir: str) -> None:
  """Overwrites 8 bytes in the middle of the directory's one record file."""
  [records] = pathlib.Path(version_dir).glob('*.tfrecord*')
  data = bytearray(records.read_bytes())
  middle = len(data) // 2
  data[middle:middle + 8] = bytes(8 * [0xFF])
  records.write_bytes(bytes(data))
