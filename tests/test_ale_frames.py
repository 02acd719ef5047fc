"""The benchmarks' real-frame fixtures: ALE episodes as RLDS TFDS datasets.

`benchmarks/ale_frames.py` records random Atari play and writes it with the
package's TFDS writer; here at tiny size: the datasets read back (through
`rlds_reverb.load`) as the episodes recorded (JPEG frames as the codec
gives them back), in rlu_atari's layout. Needs the `bench` extra (ale-py):
skipped without it.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

pytest.importorskip('ale_py')

from benchmarks import ale_frames  # pylint: disable=g-import-not-at-top
import rlds_reverb  # pylint: disable=g-import-not-at-top

NUM_STEPS = 50
MAX_EPISODE_STEPS = 20  # Episodes of 20, 20 and 10 steps.
SHAPES = {'atari_gray_png': (84, 84, 1), 'atari_rgb_png': (210, 160, 3),
          'atari_rgb_jpeg': (210, 160, 3)}


def _read(directory):
  """Each episode's steps as numpy arrays (whole episodes)."""
  episodes = []
  for episode in rlds_reverb.load(directory):
    steps = episode['steps'].batch(10**6).get_single_element()
    episodes.append({key: value.numpy() for key, value in steps.items()})
  return episodes


def _recorded(kind):
  return ale_frames.episodes_of(kind, num_steps=NUM_STEPS,
                                max_episode_steps=MAX_EPISODE_STEPS)


@pytest.fixture(scope='module')
def data_dir(tmp_path_factory):
  return str(tmp_path_factory.mktemp('ale'))


def test_record_makes_rlds_episodes_of_the_asked_length():
  episodes = _recorded('atari_gray_png')
  lengths = [len(e['steps']['action']) for e in episodes]
  assert lengths == [20, 20, 10]
  for episode in episodes:
    steps = episode['steps']
    assert steps['is_first'].tolist() == [True] + [False] * (
        len(steps['is_first']) - 1)
    assert steps['is_last'].tolist() == [False] * (
        len(steps['is_last']) - 1) + [True]
    assert not steps['is_terminal'].any()  # Cut, not game over, at 20.
    assert steps['observation'].shape[1:] == (84, 84, 1)
    assert steps['observation'].dtype == np.uint8


def test_frames_move():
  """Real play: consecutive frames differ, and not every pixel is one colour."""
  frames = _recorded('atari_rgb_png')[0]['steps']['observation']
  assert frames.shape == (20, 210, 160, 3)
  assert len(np.unique(frames[5])) > 2
  changed = [not np.array_equal(a, b) for a, b in zip(frames, frames[1:])]
  assert sum(changed) > len(changed) // 2


@pytest.mark.parametrize('kind', sorted(ale_frames.KINDS))
def test_tfds_dir_reads_back_as_recorded(data_dir, kind):
  directory = ale_frames.tfds_dir(kind, NUM_STEPS, data_dir,
                                  max_episode_steps=MAX_EPISODE_STEPS)
  read, recorded = _read(directory), _recorded(kind)
  assert len(read) == len(recorded) == 3
  for got, want in zip(read, recorded):
    want = want['steps']
    assert got.keys() == want.keys()
    for key in want:
      if key != 'observation':
        np.testing.assert_array_equal(got[key], want[key], err_msg=key)
    assert got['observation'].shape[1:] == SHAPES[kind]
    np.testing.assert_array_equal(got['observation'],
                                  _through(kind, want['observation']))


def _through(kind, frames):
  """`frames` as an image codec gives them back: PNG is lossless; JPEG
  (TFDS's: TensorFlow's encoder at quality 95) is not."""
  if kind.endswith('png'):
    return frames
  return np.stack([tf.io.decode_jpeg(tf.io.encode_jpeg(frame, quality=95))
                   for frame in frames])


def test_features_store_frames_encoded_as_asked():
  for kind, (_, encoding) in ale_frames.KINDS.items():
    image = ale_frames.features(kind)['steps']['observation']
    assert image.encoding_format == encoding
