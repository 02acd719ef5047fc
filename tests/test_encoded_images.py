"""Encoded images (issue 23): pushed as PNG/JPEG bytes, sampled decoded.

Every comparison is on real servers, frame for frame: the encoded push,
decoded, against the raw push and TF-Agents' observer of the same data.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
import tree  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import rlds_to_reverb  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import encoded  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import encoded as encoded_spec  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top

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


@pytest.fixture(scope='module')
def png_dir(tmp_path_factory):
  return write_image_dir(tmp_path_factory.mktemp('png'))


@pytest.fixture(scope='module')
def jpeg_dir(tmp_path_factory):
  return write_image_dir(tmp_path_factory.mktemp('jpeg'), 'jpeg')


def sampled(address: str, table: str):
  """Every item of a fifo table, in order, as its data nest (numpy)."""
  client = reverb.Client(address)
  count = reverb_tables.table_size(client, table)
  samples = list(client.sample(table, num_samples=count,
                               emit_timesteps=False))
  assert reverb_tables.table_size(client, table) == 0
  return [sample.data for sample in samples]


def decoded_items(address: str, table: str, stored_signature):
  """Every item of a fifo table, decoded by `decode_images`, flat, in order."""
  items = sampled(address, table)
  dataset = tf.data.Dataset.from_generator(
      lambda: (tree.unflatten_as(stored_signature, item) for item in items),
      output_signature=tree.map_structure(
          lambda spec: tf.TensorSpec(spec.shape, spec.dtype),
          stored_signature))
  decoded = rlds_reverb.decode_images(dataset, stored_signature)
  return [[np.asarray(leaf) for leaf in tree.flatten(element)]
          for element in decoded.as_numpy_iterator()]


def raw_items(address: str, table: str):
  return [[np.asarray(leaf) for leaf in item]
          for item in sampled(address, table)]


def assert_same_flat_items(got, want) -> None:
  assert len(got) == len(want), (len(got), len(want))
  for index, (got_item, want_item) in enumerate(zip(got, want)):
    assert len(got_item) == len(want_item)
    for leaf, (g, w) in enumerate(zip(got_item, want_item)):
      assert g.dtype == w.dtype, (index, leaf)
      np.testing.assert_array_equal(g, w, err_msg=f'item {index}, leaf {leaf}')


def tables_for(rlds_data, length=2, **encoding):
  """(raw signature, encoded signature) of `rlds_data`'s trajectories."""
  raw = specs.table_signature(rlds_reverb.create_trajectory_data_spec(
      rlds_data))
  fields = encoding.pop('fields', ['observation'])
  stored = encoded_spec.encoded_spec(raw, fields, **encoding)
  del length
  return raw, stored


@pytest.mark.parametrize('end', ['drop', 'pad', 'tile'])
@pytest.mark.parametrize('source_format', ['png', 'jpeg'])
def test_encoded_push_decodes_to_the_raw_push_and_the_observer(
    png_dir, jpeg_dir, make_server, end, source_format):
  directory = png_dir if source_format == 'png' else jpeg_dir
  data = rlds_reverb.load(directory)
  raw_sig, stored_sig = tables_for(data, format=source_format)
  server = make_server([
      reverb_tables.fifo_table('raw', raw_sig),
      reverb_tables.fifo_table('observer', raw_sig),
      reverb_tables.fifo_table('encoded', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 'raw', sequence_length=3,
                   end_of_episode=end)
  result = rlds_reverb.push(data, address, 'encoded', sequence_length=3,
                            end_of_episode=end, images='encoded')
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), 'observer', sequence_length=3,
      pad_end_of_episodes=end != 'drop', tile_end_of_episodes=end == 'tile')
  rlds_to_reverb.push_rlds_to_reverb(rlds_reverb.load(directory), observer)
  observer.close()
  assert result.items > 0
  got = decoded_items(address, 'encoded', stored_sig)
  assert_same_flat_items(got, raw_items(address, 'raw'))
  assert_same_flat_items(got, raw_items(address, 'observer'))


def test_the_stored_frames_are_the_datasets_own_bytes(png_dir, make_server):
  data = rlds_reverb.load(png_dir)
  _, stored_sig = tables_for(data)
  server = make_server([reverb_tables.fifo_table('t', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 't', images='encoded')
  builder = tfds.builder_from_directory(png_dir)
  stored = builder.as_dataset(split='train', decoders={'steps': {
      'observation': tfds.decode.SkipDecoding()}})
  first_episode = next(iter(stored))['steps']
  want = [step['observation'].numpy() for step in first_episode.take(2)]
  item = tree.unflatten_as(stored_sig, sampled(address, 't')[0])
  assert list(item.observation) == want
