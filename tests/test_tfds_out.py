"""The RLDS dataset writer: features from specs, TFDS's bytes, real directories.

Every directory is written by `EpisodeWriter` and read back by TFDS itself
(`builder_from_directory`), by `rlds_reverb.load` and by the CLI.
"""

import collections
import os
import shutil
import tracemalloc

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
from tensorflow_datasets.core import example_serializer  # pylint: disable=g-import-not-at-top
from tensorflow_datasets.proto import tf_feature_pb2  # pylint: disable=g-import-not-at-top
from tf_agents.specs import array_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import errors  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import Durability  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import encode  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import EpisodeWriter  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import features_from_specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import ImageEncoding  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import layout  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import encoded as encoded_spec  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import example  # pylint: disable=g-import-not-at-top
from tests import dataset_shapes  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top
from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top

FLAGS = {name: tf.TensorSpec([], tf.bool)
         for name in ('is_first', 'is_last', 'is_terminal')}


def rlds_spec(observation, **more):
  return {'observation': observation, 'action': tf.TensorSpec([], tf.int64),
          **FLAGS, **more}


def describe(features) -> dict:
  """{path: 'Image(png, (8, 8, 3))' or 'Tensor(float32, (3,))'} per leaf."""
  return {column.name: (f'Image({column.image_format}, {column.shape})'
                        if column.image_format else
                        f'Tensor({column.dtype.name}, {column.shape})')
          for column in encode.columns_of(features)}


FLAG_LEAVES = {'steps/action': 'Tensor(int64, ())',
               'steps/is_first': 'Tensor(bool, ())',
               'steps/is_last': 'Tensor(bool, ())',
               'steps/is_terminal': 'Tensor(bool, ())'}
Info = collections.namedtuple('Info', ['value', 'pixels'])
FRAME = tf.TensorSpec([84, 84, 3], tf.uint8)


def stored(image_format, frame=FRAME, outer=()):
  """The spec of a field a table holds encoded (one string per step)."""
  return encoded_spec.EncodedImage(image_format, frame).stored(outer)


# name: (step spec, metadata spec, images, the leaves besides FLAG_LEAVES)
FEATURE_CASES = {
    'png_by_default': (
        rlds_spec({'frame': FRAME, 'vector': tf.TensorSpec([3], tf.float32)}),
        None, ImageEncoding.PNG,
        {'steps/observation/frame': 'Image(png, (84, 84, 3))',
         'steps/observation/vector': 'Tensor(float32, (3,))'}),
    'jpeg_for_all_by_name': (
        rlds_spec(FRAME), {'thumbnail': tf.TensorSpec([8, 8, 1], tf.uint8)},
        'jpeg', {'steps/observation': 'Image(jpeg, (84, 84, 3))',
                 'thumbnail': 'Image(jpeg, (8, 8, 1))'}),
    'none_stores_plain_tensors': (
        rlds_spec(FRAME), None, 'none',
        {'steps/observation': 'Tensor(uint8, (84, 84, 3))'}),
    'per_field': (
        rlds_spec({'a': FRAME, 'b': FRAME, 'c': FRAME}), None,
        {'steps/observation/a': 'jpeg', 'steps/observation/b': 'none'},
        {'steps/observation/a': 'Image(jpeg, (84, 84, 3))',
         'steps/observation/b': 'Tensor(uint8, (84, 84, 3))',
         'steps/observation/c': 'Image(png, (84, 84, 3))'}),
    'rgba_gray_and_unknown_size_images': (
        rlds_spec({'rgba': tf.TensorSpec([4, 4, 4], tf.uint8),
                   'gray': tf.TensorSpec([None, None, 1], tf.uint8)}),
        None, 'png',
        {'steps/observation/rgba': 'Image(png, (4, 4, 4))',
         'steps/observation/gray': 'Image(png, (None, None, 1))'}),
    'uint8_that_is_no_image': (
        rlds_spec({'two_channels': tf.TensorSpec([4, 4, 2], tf.uint8),
                   'bytes': tf.TensorSpec([16], tf.uint8),
                   'int16_image': tf.TensorSpec([4, 4, 3], tf.int16)}),
        None, 'png',
        {'steps/observation/two_channels': 'Tensor(uint8, (4, 4, 2))',
         'steps/observation/bytes': 'Tensor(uint8, (16,))',
         'steps/observation/int16_image': 'Tensor(int16, (4, 4, 3))'}),
    'stored_encoded_frames_keep_their_format': (
        rlds_spec({'png': stored('png'), 'jpeg': stored('jpeg'),
                   'gray': stored('png', tf.TensorSpec([None, None, 1],
                                                       tf.uint8)),
                   'raw': FRAME}),
        None, 'jpeg',
        {'steps/observation/png': 'Image(png, (84, 84, 3))',
         'steps/observation/jpeg': 'Image(jpeg, (84, 84, 3))',
         'steps/observation/gray': 'Image(png, (None, None, 1))',
         'steps/observation/raw': 'Image(jpeg, (84, 84, 3))'}),
    'stored_encoded_frames_whatever_images_says': (
        rlds_spec(stored('png')), None, {'steps/observation': 'png'},
        {'steps/observation': 'Image(png, (84, 84, 3))'}),
    'namedtuples_as_dicts_and_array_specs': (
        rlds_spec(array_spec.ArraySpec((2,), np.float64),
                  policy_info=Info(array_spec.ArraySpec((), np.int32),
                                   tf.TensorSpec([2, 2, 3], tf.uint8))),
        {'name': tf.TensorSpec([], tf.string)}, 'png',
        {'steps/observation': 'Tensor(float64, (2,))',
         'steps/policy_info/value': 'Tensor(int32, ())',
         'steps/policy_info/pixels': 'Image(png, (2, 2, 3))',
         'name': 'Tensor(object, ())'}),
}


@pytest.mark.parametrize('case', list(FEATURE_CASES))
def test_features_from_specs(case):
  step_spec, metadata_spec, images, leaves = FEATURE_CASES[case]
  features = features_from_specs(step_spec, metadata_spec,
                                 image_encoding=images)
  assert describe(features) == {**FLAG_LEAVES, **leaves}


@pytest.mark.parametrize('image_format, tfds_format', [
    ('png', 'png'), ('jpeg', 'jpeg'),
    ('image', None),  # Either: TFDS decodes whatever the bytes are.
])
def test_a_stored_encoded_field_is_an_image_of_its_format(image_format,
                                                           tfds_format):
  features = features_from_specs(rlds_spec(stored(image_format)),
                                 image_encoding='none')
  image = features['steps']['observation']
  assert type(image) is tfds.features.Image  # pylint: disable=unidiomatic-typecheck
  assert (image.shape, image.np_dtype, image.encoding_format) == (
      (84, 84, 3), np.uint8, tfds_format)


STRING_SPEC = tf.TensorSpec([], tf.string)
FEATURE_ERRORS = {
    'a_tuple': (
        rlds_spec((FRAME, FRAME)), None, 'png', errors.FeaturesError,
        'steps/observation is a tuple: TFDS features have no tuples (use a '
        'dict or a namedtuple).'),
    'not_a_spec': (
        rlds_spec({'x': 3}), None, 'png', errors.FeaturesError,
        'steps/observation/x is a int, not a spec.'),
    'a_list_of_steps': (
        [FRAME], None, 'png', errors.FeaturesError,
        'The steps spec is a list; expected a dict (or namedtuple) of specs.'),
    'uint64': (
        rlds_spec(tf.TensorSpec([], tf.uint64)), None, 'png',
        errors.FeaturesError,
        'steps/observation is uint64[]; TFDS stores bool, int8, int16, int32, '
        'int64, uint8, uint16, uint32, float16, float32, float64, string.'),
    'unknown_dimension': (
        rlds_spec(tf.TensorSpec([None, 3], tf.float32)), None, 'png',
        errors.FeaturesError,
        'steps/observation is float32[?,3]; a TFDS Tensor feature needs a '
        'known shape (only an image may have unknown height and width).'),
    'unknown_rank': (
        rlds_spec(tf.TensorSpec(None, tf.float32)), None, 'png',
        errors.FeaturesError,
        'steps/observation is float32[...]; a TFDS Tensor feature needs a '
        'known shape (only an image may have unknown height and width).'),
    'metadata_named_steps': (
        rlds_spec(FRAME), {'steps': STRING_SPEC}, 'png', errors.FeaturesError,
        "Episode metadata cannot be named 'steps': the steps are."),
    'metadata_not_a_dict': (
        rlds_spec(FRAME), [STRING_SPEC], 'png', errors.FeaturesError,
        'The metadata spec is a list; expected a dict (or namedtuple) of '
        'specs.'),
    'unknown_encoding': (
        rlds_spec(FRAME), None, 'gif', errors.FeaturesError,
        "image_encoding is 'gif'; expected one of 'png', 'jpeg', 'none'."),
    'unknown_encoding_of_a_field': (
        rlds_spec(FRAME), None, {'steps/observation': 'webp'},
        errors.FeaturesError,
        "image_encoding['steps/observation'] is 'webp'; expected one of "
        "'png', 'jpeg', 'none'."),
    'images_names_no_image': (
        rlds_spec({'frame': FRAME, 'v': STRING_SPEC}), None,
        {'steps/observation/v': 'png'}, errors.FeaturesError,
        "image_encoding names 'steps/observation/v', which is no image field "
        '(uint8 [H, W, C], C in 1, 3, 4); image fields: '
        'steps/observation/frame.'),
    'images_names_nothing_and_there_is_no_image': (
        rlds_spec(STRING_SPEC), None, {'observation': 'png'},
        errors.FeaturesError,
        "image_encoding names 'observation', which is no image field (uint8 "
        '[H, W, C], C in 1, 3, 4); image fields: none.'),
    'images_asking_another_encoding_of_a_stored_field': (
        rlds_spec(stored('png')), None, {'steps/observation': 'jpeg'},
        errors.FeaturesError,
        "image_encoding['steps/observation'] is 'jpeg', but steps/observation "
        'is stored encoded as png: its bytes are written as they are, never '
        'encoded again.'),
    'stored_frames_with_another_axis': (
        rlds_spec(stored('jpeg', outer=[2])), None, 'png',
        errors.FeaturesError,
        'steps/observation is string[2] of encoded jpeg frames; an Image '
        'feature holds one frame per step.'),
    'not_rlds': (
        {'observation': FRAME, 'action': STRING_SPEC}, None, 'png',
        errors.StepSpecError,
        "Invalid RLDS step spec. Features expected are ['observation', "
        "'action', 'reward', 'discount', 'is_first', 'is_last', "
        "'is_terminal'], but found ['observation', 'action']"),
    'a_flag_not_bool': (
        rlds_spec(FRAME, is_last=tf.TensorSpec([], tf.int32)), None, 'png',
        errors.StepSpecError,
        "RLDS step field 'steps/is_last' must be a bool scalar (or hold one "
        "element), got int32[]."),
}


@pytest.mark.parametrize('case', list(FEATURE_ERRORS))
def test_specs_tfds_cannot_hold_are_refused(case):
  step_spec, metadata_spec, images, error_type, message = FEATURE_ERRORS[case]
  with pytest.raises(error_type) as error:
    features_from_specs(step_spec, metadata_spec, image_encoding=images)
  assert str(error.value) == message


def test_errors_derive_from_the_package_base():
  for error in (errors.FeaturesError, errors.DatasetDirectoryError):
    assert issubclass(error, rlds_reverb.RldsReverbError)
    assert issubclass(error, ValueError)


# ------------------------------------------------------------- encoding --

def shape_episodes():
  """(features, episode) of every catalog-like shape, a few lengths each."""
  for name, shape in dataset_shapes.SHAPES.items():
    for seed, length in enumerate(shape.lengths[:4]):
      yield pytest.param(shape.features, shape.episode(min(length, 40), seed),
                         id=f'{name}-{seed}')
  for index in range(4):
    yield pytest.param(rlds_dirs.features, rlds_dirs.episode(index),
                       id=f'ours-{index}')
  jpeg = lambda: features_from_specs(rlds_dirs.step_spec(),  # pylint: disable=g-long-lambda
                                     rlds_dirs.metadata_spec(),
                                     image_encoding='jpeg')
  yield pytest.param(jpeg, rlds_dirs.episode(5), id='ours-jpeg')


@pytest.mark.parametrize('make_features, episode', shape_episodes())
def test_an_episode_encodes_to_the_bytes_tfds_writes(make_features, episode):
  """TFDS's own path: features.encode_example (step by step), serialized."""
  features = make_features()
  serializer = example_serializer.ExampleSerializer(
      features.get_serialized_info())
  expected = serializer.serialize_example(features.encode_example(episode))
  assert encode.EpisodeEncoder(features).encode(episode, 'Episode 0') == (
      expected)


def test_python_values_are_taken_as_tfds_takes_them():
  """Lists, str and narrower ints and floats, cast to the features' dtypes."""
  features = rlds_dirs.features()
  episode = rlds_dirs.episode(3, length=2)
  loose = {**episode, 'episode_id': 3, 'episode_return': 0.5,
           'steps': {**episode['steps'],
                     'reward': [1, 2],
                     'observation': {**episode['steps']['observation'],
                                     'instruction': ['a', 'bé']}}}
  serializer = example_serializer.ExampleSerializer(
      features.get_serialized_info())
  assert encode.EpisodeEncoder(features).encode(loose, 'Episode 0') == (
      serializer.serialize_example(features.encode_example(loose)))


def extremes_features():
  return tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': {
          'int64': tfds.features.Tensor(shape=(3,), dtype=np.int64),
          'int32': np.int32, 'int8': np.int8, 'uint16': np.uint16,
          'uint32': np.uint32, 'float64': np.float64, 'float16': np.float16,
          'raw_frame': tfds.features.Tensor(shape=(4, 4, 3), dtype=np.uint8)},
      'action': tfds.features.Tensor(shape=(2,), dtype=np.float32),
      'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_})})


def extremes_episode():
  """Values at the edges of each varint size and of float32."""
  edges = [0, 1, 127, 128, 16383, 16384, 2**31 - 1, -1, -2**31, 2**62,
           2**63 - 1, -2**63]
  floats = [0.0, -0.0, 1e-45, 3.4028235e38, np.inf, -np.inf, np.nan, 1 / 3]
  length = len(edges)
  rng = np.random.default_rng(0)
  return {'steps': {
      'observation': {
          'int64': np.array([[e, -e if e > -2**63 else 0, e // 3]
                             for e in edges], np.int64),
          'int32': np.array([max(min(e, 2**31 - 1), -2**31) for e in edges],
                            np.int32),
          'int8': np.array([max(min(e, 127), -128) for e in edges], np.int8),
          'uint16': np.array([max(min(e, 65535), 0) for e in edges], np.uint16),
          'uint32': np.array([max(min(e, 2**32 - 1), 0) for e in edges],
                             np.uint32),
          'float64': np.array((floats * 2)[:length], np.float64),
          'float16': np.array(([0.0, -0.0, 6e-8, 65504.0, np.inf, np.nan, 1 / 3]
                               * 2)[:length], np.float16),
          'raw_frame': rng.integers(0, 256, (length, 4, 4, 3), dtype=np.uint8)},
      'action': np.array([[f, -f] for f in (floats * 2)[:length]], np.float32),
      **rlds_data.flags(length)}}


def test_numbers_at_every_edge_encode_to_the_bytes_tfds_writes():
  features = extremes_features()
  episode = extremes_episode()
  serializer = example_serializer.ExampleSerializer(
      features.get_serialized_info())
  assert encode.EpisodeEncoder(features).encode(episode, 'Episode 0') == (
      serializer.serialize_example(features.encode_example(episode)))


INT64_LISTS = {  # Each of wire.packed_varints' paths, and their edges.
    'uint8': np.arange(256, dtype=np.uint8).reshape(2, 8, 16),
    'one_byte': np.arange(128, dtype=np.int64),
    'up_to_two_bytes': np.array([0, 127, 128, 255, 256, 0x3FFF], np.int32),
    'more': np.array([0x4000, -1, 2**63 - 1, -2**63, 5], np.int64),
    'empty_uint8': np.zeros((0, 3), np.uint8),
}


@pytest.mark.parametrize('name', INT64_LISTS)
def test_int64_lists_are_the_bytes_protobuf_writes(name):
  values = INT64_LISTS[name]
  expected = tf_feature_pb2.Feature(int64_list=tf_feature_pb2.Int64List(
      value=values.astype(np.int64).ravel().tolist())).SerializeToString()
  assert example.int64_feature(values) == expected


FEATURES_WRITER_CANNOT_STORE = {
    'class_label': (
        {'steps': tfds.features.Dataset({
            'observation': tfds.features.ClassLabel(num_classes=3)})},
        'steps/observation is a ClassLabel feature (ClassLabel(shape=(), '
        'dtype=int64, num_classes=3)); the writer stores plain Tensor, Text '
        'and uint8 Image features (see features_from_specs).'),
    'bytes_encoded_tensor': (
        {'steps': tfds.features.Dataset({
            'observation': tfds.features.Tensor(
                shape=(3,), dtype=np.float32, encoding='bytes')})},
        'steps/observation is a Tensor feature (Tensor(shape=(3,), '
        'dtype=float32)); the writer stores plain Tensor, Text and uint8 '
        'Image features (see features_from_specs).'),
    'no_steps': (
        {'observation': np.float32},
        "The features have no 'steps' Dataset of dicts: NoneType."),
    'steps_of_one_tensor': (
        {'steps': tfds.features.Dataset(np.float32)},
        "The features have no 'steps' Dataset of dicts: Dataset."),
    'no_is_terminal': (
        {'steps': tfds.features.Dataset({'is_first': np.bool_,
                                         'is_last': np.bool_})},
        'steps/is_terminal is missing; an RLDS step flag is a bool scalar.'),
    'flag_of_another_dtype': (
        {'steps': tfds.features.Dataset({'is_first': np.int64,
                                         'is_last': np.bool_,
                                         'is_terminal': np.bool_})},
        'steps/is_first is int64[]; an RLDS step flag is a bool scalar.'),
}


@pytest.mark.parametrize('case', list(FEATURES_WRITER_CANNOT_STORE))
def test_features_the_writer_cannot_store_are_refused(case, tmp_path):
  features, message = FEATURES_WRITER_CANNOT_STORE[case]
  with pytest.raises(errors.FeaturesError) as error:
    EpisodeWriter(tmp_path / 'd', tfds.features.FeaturesDict(features),
                  name='d')
  assert str(error.value) == message
  assert not (tmp_path / 'd').exists()


# ------------------------------------------------------------- writing --

def write(directory, episodes, **options):
  options.setdefault('name', 'ours')
  with EpisodeWriter(directory, rlds_dirs.features(), **options) as writer:
    indices = [writer.write(episode) for episode in episodes]
  return indices


def test_episodes_read_back_in_the_order_written(tmp_path):
  """Shards of 20 episodes: TFDS would read 16 of each in turn unless told."""
  directory = os.fspath(tmp_path / 'ours' / '1.0.0')
  episodes = [rlds_dirs.episode(i, length=1 + i % 3) for i in range(50)]
  assert write(directory, episodes, shard_episodes=20) == list(range(50))
  assert rlds_dirs.shard_lengths(directory) == [20, 20, 10]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(directory), episodes)
  for source in (directory, os.path.dirname(directory)):
    loaded = [int(e['episode_id']) for e in rlds_reverb.load(source)]
    assert loaded == list(range(50))


def test_without_disable_shuffling_tfds_would_not_keep_the_order(tmp_path):
  """Why the writer sets it: the same files, read without it."""
  directory = os.fspath(tmp_path)
  write(directory, [rlds_dirs.episode(i, length=1) for i in range(50)],
        shard_episodes=20)
  info_path = os.path.join(directory, 'dataset_info.json')
  with open(info_path) as f:
    text = f.read()
  with open(info_path, 'w') as f:
    f.write(text.replace('"disableShuffling": true,', ''))
  order = [int(e['episode_id']) for e in tfds.builder_from_directory(
      directory).as_dataset(split='train')]
  assert order == (list(range(16)) + list(range(20, 36)) +
                   list(range(40, 50)) + list(range(16, 20)) +
                   list(range(36, 40)))


@pytest.mark.parametrize('options, lengths', [
    ({'shard_episodes': 3}, [3, 3, 1]),
    ({'shard_episodes': 7}, [7]),
    ({'shard_seconds': 0}, [1] * 7),
    ({'shard_seconds': 3600.0}, [7]),
])
def test_shards_close_after_so_many_episodes_or_seconds(tmp_path, options,
                                                        lengths):
  write(tmp_path, [rlds_dirs.episode(i) for i in range(7)], **options)
  assert rlds_dirs.shard_lengths(tmp_path) == lengths
  assert len(rlds_dirs.record_files(tmp_path)) == len(lengths)


def test_a_shard_is_registered_when_it_closes(tmp_path):
  """Readers see closed shards only; its episodes are on disk meanwhile."""
  writer = EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours',
                         shard_episodes=3)
  assert rlds_dirs.shard_lengths(tmp_path) == []
  for index in range(4):
    writer.write(rlds_dirs.episode(index))
  assert rlds_dirs.shard_lengths(tmp_path) == [3]
  assert len(rlds_dirs.record_files(tmp_path)) == 2
  assert writer.num_episodes == 4
  writer.close()
  writer.close()  # Closing twice is fine.
  assert rlds_dirs.shard_lengths(tmp_path) == [3, 1]


def test_append_continues_the_dataset(tmp_path):
  episodes = [rlds_dirs.episode(i) for i in range(6)]
  write(tmp_path, episodes[:4], shard_episodes=3)
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours',
                     append=True) as writer:
    assert writer.num_episodes == 4
    assert not writer.recovery.changed
    assert [writer.write(e) for e in episodes[4:]] == [4, 5]
  assert rlds_dirs.shard_lengths(tmp_path) == [3, 1, 2]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path), episodes)


def test_append_creates_a_missing_dataset(tmp_path):
  directory = tmp_path / 'new'
  assert write(directory, [rlds_dirs.episode(0)], append=True) == [0]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(directory),
                                 [rlds_dirs.episode(0)])


def test_other_splits_are_kept(tmp_path):
  write(tmp_path, [rlds_dirs.episode(0)])
  write(tmp_path, [rlds_dirs.episode(1), rlds_dirs.episode(2)], append=True,
        split='test')
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path),
                                 [rlds_dirs.episode(0)])
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path, 'test'),
                                 [rlds_dirs.episode(1), rlds_dirs.episode(2)])


def test_append_to_an_envlogger_dataset(tmp_path):
  """The bundled CartPole set (EnvLogger's TFDS backend), appended to."""
  directory = os.fspath(tmp_path / 'cartpole')
  shutil.copytree(sources.bundled_dataset_dir(), directory)
  before = rlds_dirs.read_episodes(directory)
  features = tfds.features.FeatureConnector.from_config(directory)
  new = [{**before[i], 'episode_id': np.int64(64 + i)} for i in range(3)]
  with EpisodeWriter(directory, features, name='cartpole_mixed',
                     append=True) as writer:
    assert [writer.write(e) for e in new] == [64, 65, 66]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(directory),
                                 before + new)


@pytest.mark.parametrize('options, found', [
    ({'name': 'other'}, "name 'ours', not 'other'"),
    ({'version': '1.0.1'}, "version '1.0.0', not '1.0.1'"),
    ({'name': 'other', 'version': '2.0.0'},
     "name 'ours', not 'other'; version '1.0.0', not '2.0.0'"),
])
def test_append_refuses_another_dataset(tmp_path, options, found):
  write(tmp_path, [rlds_dirs.episode(0)])
  before = rlds_dirs.files_bytes(tmp_path)
  with pytest.raises(errors.DatasetDirectoryError) as error:
    EpisodeWriter(tmp_path, rlds_dirs.features(), **{'name': 'ours',
                                                     **options}, append=True)
  assert str(error.value) == (
      f'Cannot append to {tmp_path}: its dataset has {found}.')
  assert rlds_dirs.files_bytes(tmp_path) == before


def test_append_refuses_other_features(tmp_path):
  write(tmp_path, [rlds_dirs.episode(0)])
  before = rlds_dirs.files_bytes(tmp_path)
  other = features_from_specs(rlds_dirs.step_spec(), rlds_dirs.metadata_spec(),
                              image_encoding='jpeg')
  with pytest.raises(errors.DatasetDirectoryError) as error:
    EpisodeWriter(tmp_path, other, name='ours', append=True)
  assert str(error.value) == (
      f'Cannot append to {tmp_path}: its dataset has other features (its '
      f'features.json differs).')
  assert rlds_dirs.files_bytes(tmp_path) == before


def test_a_new_dataset_needs_an_empty_directory(tmp_path):
  write(tmp_path / 'dataset', [rlds_dirs.episode(0)])
  (tmp_path / 'other').mkdir()
  (tmp_path / 'other' / 'notes.txt').write_text('mine')
  for name, holds in [
      ('dataset', 'a dataset; pass append=True to add episodes to it'),
      ('other', 'files other than a dataset')]:
    for append in ([False, True] if name == 'other' else [False]):
      with pytest.raises(errors.DatasetDirectoryError) as error:
        EpisodeWriter(tmp_path / name, rlds_dirs.features(), name='ours',
                      append=append)
      assert str(error.value) == (
          f'{tmp_path / name} is not empty: it holds {holds}.')
  assert os.listdir(tmp_path / 'other') == ['notes.txt']
  (tmp_path / 'file').write_text('mine')
  with pytest.raises(errors.DatasetDirectoryError) as error:
    EpisodeWriter(tmp_path / 'file', rlds_dirs.features(), name='ours')
  assert str(error.value) == (
      f'{tmp_path / "file"} is a file: a dataset is written into a directory.')


def test_write_after_close_is_refused(tmp_path):
  writer = EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours')
  writer.write(rlds_dirs.episode(0))
  writer.close()
  with pytest.raises(errors.DatasetDirectoryError) as error:
    writer.write(rlds_dirs.episode(1))
  assert str(error.value) == (
      f'The writer of {tmp_path} is closed; open a new one with append=True '
      f'to write more.')
  assert rlds_dirs.shard_lengths(tmp_path) == [1]


def test_a_split_holds_as_many_shards_as_tfds_reads(tmp_path, monkeypatch):
  """TFDS names shards with 5 digits only up to 99,999 shards (here 2)."""
  monkeypatch.setattr(layout, 'MAX_SHARDS', 2)
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours',
                     shard_episodes=1) as writer:
    writer.write(rlds_dirs.episode(0))
    writer.write(rlds_dirs.episode(1))
    with pytest.raises(errors.DatasetDirectoryError) as error:
      writer.write(rlds_dirs.episode(2))
  assert str(error.value) == (
      f"{tmp_path}: split 'train' has 2 shards, as many as TFDS reads; write "
      f'more episodes per shard (shard_episodes, shard_seconds).')
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path),
                                 [rlds_dirs.episode(0), rlds_dirs.episode(1)])


def test_leaving_the_context_on_an_error_registers_what_was_written(tmp_path):
  with pytest.raises(KeyboardInterrupt):
    with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours') as writer:
      writer.write(rlds_dirs.episode(0))
      writer.write(rlds_dirs.episode(1))
      raise KeyboardInterrupt
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path),
                                 [rlds_dirs.episode(0), rlds_dirs.episode(1)])


def test_flush_durability_writes_the_same_files(tmp_path):
  episodes = [rlds_dirs.episode(i) for i in range(5)]
  write(tmp_path / 'fsync', episodes, shard_episodes=2)
  write(tmp_path / 'flush', episodes, shard_episodes=2,
        durability=Durability.FLUSH)
  assert rlds_dirs.files_bytes(tmp_path / 'fsync') == rlds_dirs.files_bytes(
      tmp_path / 'flush')


def test_the_cli_reads_what_was_written(tmp_path):
  write(tmp_path, [rlds_dirs.episode(i, length=3) for i in range(4)],
        shard_episodes=3)
  for command, expected in [('validate', '4 episodes, 12 steps: no problems'),
                            ('inspect', 'episodes         4 (12 steps)')]:
    result = run_cli_here(command, '--dataset', tmp_path)
    assert result.returncode == 0, result.stderr
    assert expected in result.stdout.splitlines(), result.stdout


def test_memory_does_not_grow_with_the_episodes_written(tmp_path):
  """Python memory after 2,500 episodes and after 2,500 more: the same
  within 8 KB, less than 4 bytes an episode. (It grows over the first
  ~2,000 while allocators fill their pools, then stays.)"""
  episode = rlds_dirs.episode(1, length=1)
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours',
                     shard_episodes=100_000,
                     durability=Durability.FLUSH) as writer:
    tracemalloc.start()
    try:
      for _ in range(2500):
        writer.write(episode)
      before, _ = tracemalloc.get_traced_memory()
      for _ in range(2500):
        writer.write(episode)
      after, _ = tracemalloc.get_traced_memory()
    finally:
      tracemalloc.stop()
  assert after - before < 8192, (before, after)
  assert writer.num_episodes == 5000


# name: (change to episode 2, error type, message); nothing of it is written.
def changed(change):
  episode = rlds_dirs.episode(2, length=4)
  change(episode)
  return episode


def _set(path, value):
  def change(episode):
    *parents, last = path.split('/')
    target = episode
    for key in parents:
      target = target[key]
    target[last] = value
  return change


def _drop(path):
  def change(episode):
    *parents, last = path.split('/')
    target = episode
    for key in parents:
      target = target[key]
    del target[last]
  return change


EPISODE_ERRORS = {
    'missing_field': (
        _drop('steps/observation/position'), errors.FeaturesError,
        'Episode 2 has no steps/observation/position.'),
    'missing_metadata': (
        _drop('episode_return'), errors.FeaturesError,
        'Episode 2 has no episode_return.'),
    'extra_fields': (
        _set('steps/observation/velocity', np.zeros((4, 3))),
        errors.FeaturesError,
        'Episode 2 has steps/observation/velocity, which the features do '
        'not.'),
    'wrong_dtype_kind': (
        _set('steps/action/grip', np.zeros(4, np.int64)), errors.FeaturesError,
        'Episode 2: steps/action/grip is int64[4]; expected bool[4].'),
    'wrong_shape': (
        _set('steps/observation/position', np.zeros((4, 2), np.float32)),
        errors.FeaturesError,
        'Episode 2: steps/observation/position is float32[4,2]; expected '
        'float32[4,3].'),
    'float_image': (
        _set('steps/observation/pixels', np.zeros((4, 6, 5, 3), np.float32)),
        errors.FeaturesError,
        'Episode 2: steps/observation/pixels is float32[4,6,5,3]; expected '
        'uint8[T,6,5,3].'),
    'steps_of_different_lengths': (
        _set('steps/reward', np.zeros(5, np.float32)), errors.FeaturesError,
        'Episode 2: steps/reward is float32[5]; expected float32[4].'),
    'first_field_sets_the_length': (
        _set('steps/observation/pixels', np.zeros((3, 6, 5, 3), np.uint8)),
        errors.FeaturesError,
        'Episode 2: steps/observation/position is float32[4,3]; expected '
        'float32[3,3].'),
    'a_step_field_without_time_axis': (
        _set('steps/observation/pixels', np.zeros((6, 5, 3), np.uint8)),
        errors.FeaturesError,
        'Episode 2: steps/observation/pixels is uint8[6,5,3]; expected '
        'uint8[T,6,5,3].'),
    'metadata_of_another_shape': (
        _set('episode_id', np.zeros(2, np.int64)), errors.FeaturesError,
        'Episode 2: episode_id is int64[2]; expected int64[].'),
    'string_holding_a_number': (
        _set('steps/observation/instruction', np.array([b'a', 1, b'c', b'd'],
                                                       dtype=object)),
        errors.FeaturesError,
        'Episode 2: steps/observation/instruction holds 1 (int); expected str '
        'or bytes.'),
    'number_for_a_string': (
        _set('steps/observation/instruction', np.zeros(4)),
        errors.FeaturesError,
        'Episode 2: steps/observation/instruction is float64[4]; expected '
        'string[4].'),
    'encoded_frame_that_is_no_image': (
        _set('steps/observation/pixels', np.array([b'\x89PNG'] * 4, object)),
        errors.FeaturesError,
        'Episode 2: steps/observation/pixels, step 0: the bytes are no PNG or '
        'JPEG image; the feature holds 6x5x3 frames.'),
    'encoded_frame_of_another_size': (
        _set('steps/observation/pixels', np.array(
            [tf.io.encode_png(np.zeros((6, 5, 3), np.uint8)).numpy()] * 2 +
            [tf.io.encode_jpeg(np.zeros((5, 6, 3), np.uint8)).numpy()] * 2,
            object)),
        errors.FeaturesError,
        'Episode 2: steps/observation/pixels, step 2: a frame of 5x6x3; the '
        'feature holds 6x5x3 frames.'),
    'encoded_frames_of_another_shape': (
        _set('steps/observation/pixels', np.array([[b'a'], [b'b']], object)),
        errors.FeaturesError,
        'Episode 2: steps/observation/pixels is string[2,1]; expected '
        'uint8[T,6,5,3] frames or string[T] of their PNG/JPEG bytes.'),
    'not_first_at_step_0': (
        _set('steps/is_first', np.zeros(4, bool)), errors.MalformedEpisodeError,
        'Episode 2: steps/is_first is False at step 0 of 4; only step 0 is '
        'first.'),
    'first_again': (
        _set('steps/is_first', np.array([True, False, True, False])),
        errors.MalformedEpisodeError,
        'Episode 2: steps/is_first is True at step 2 of 4; only step 0 is '
        'first.'),
    'last_too_early': (
        _set('steps/is_last', np.array([False, True, False, True])),
        errors.MalformedEpisodeError,
        'Episode 2: steps/is_last is True at step 1 of 4; only the last step '
        'is last.'),
    'terminal_not_last': (
        _set('steps/is_terminal', np.array([False, False, True, False])),
        errors.MalformedEpisodeError,
        'Episode 2: steps/is_terminal is True at step 2 of 4; only the last '
        'step may be terminal.'),
}


@pytest.mark.parametrize('case', list(EPISODE_ERRORS))
def test_an_episode_that_does_not_fit_is_refused_before_writing(tmp_path,
                                                                 case):
  change, error_type, message = EPISODE_ERRORS[case]
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours') as writer:
    writer.write(rlds_dirs.episode(0))
    writer.write(rlds_dirs.episode(1))
    before = rlds_dirs.files_bytes(tmp_path)
    with pytest.raises(error_type) as error:
      writer.write(changed(change))
    assert str(error.value) == message
    assert rlds_dirs.files_bytes(tmp_path) == before
    assert writer.write(rlds_dirs.episode(2)) == 2
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path),
                                 [rlds_dirs.episode(i) for i in range(3)])


def test_encoded_frames_are_written_as_they_are(tmp_path):
  """Frames given as PNG/JPEG bytes (as an encoded table holds them) are the
  dataset's bytes, whatever encoder made them; as frames they read back as
  the pixels those bytes hold."""
  episodes = [rlds_dirs.episode(i) for i in range(3)]
  given = []
  for episode in episodes:
    pixels = episode['steps']['observation']['pixels']
    # Not what TFDS would write: PNG at another level, and JPEG.
    encoded = [tf.io.encode_png(frame, compression=9).numpy() if t % 2 else
               tf.io.encode_jpeg(frame, quality=50).numpy()
               for t, frame in enumerate(pixels)]
    given.append(encoded)
    episode['steps']['observation']['pixels'] = np.array(encoded, object)
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours') as writer:
    for episode in episodes:
      writer.write(episode)

  builder = tfds.builder_from_directory(os.fspath(tmp_path))
  stored = builder.as_dataset(split='train', decoders={'steps': {
      'observation': {'pixels': tfds.decode.SkipDecoding()}}})
  read = [list(episode['steps']['observation']['pixels'])
          for episode in tfds.as_numpy(stored.map(
              lambda e: {'steps': e['steps'].batch(1000).get_single_element()}))]
  assert read == given
  for frames, episode in zip(given, rlds_dirs.read_episodes(tmp_path)):
    np.testing.assert_array_equal(
        episode['steps']['observation']['pixels'],
        [tf.io.decode_image(data, channels=3).numpy() for data in frames])


def test_an_episode_that_is_no_dict_is_refused(tmp_path):
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours') as writer:
    with pytest.raises(errors.FeaturesError) as error:
      writer.write([rlds_dirs.episode(0)])
    assert writer.num_episodes == 0
  assert str(error.value) == (
      "Episode 0 is a list; expected a dict {'steps': {field: [T, ...] "
      'values}, **metadata}.')


def test_an_episode_without_steps_is_refused(tmp_path):
  features = features_from_specs(rlds_spec(tf.TensorSpec([2], tf.float32)))
  empty = {'steps': {'observation': np.zeros((0, 2), np.float32),
                     'action': np.zeros(0, np.int64),
                     **{name: np.zeros(0, bool) for name in FLAGS}}}
  with EpisodeWriter(tmp_path, features, name='ours') as writer:
    with pytest.raises(errors.FeaturesError) as error:
      writer.write(empty)
  assert str(error.value) == (
      'Episode 0 has no steps: an episode has one or more.')
  assert rlds_dirs.record_files(tmp_path) == []


@pytest.mark.parametrize('options, message', [
    ({'name': 'my-data'}, "Dataset name 'my-data' must be letters, digits and "
                          'underscores: it names the record files.'),
    ({'split': 'train[:5]'}, "Split 'train[:5]' must be letters, digits and "
                             'underscores: it names the record files.'),
    ({'version': '1.0'}, "Version '1.0' is not a TFDS version 'X.Y.Z'."),
    ({'shard_episodes': 0}, 'shard_episodes must be an int >= 1, got 0.'),
    ({'shard_episodes': 2.5}, 'shard_episodes must be an int >= 1, got 2.5.'),
    ({'shard_episodes': True}, 'shard_episodes must be an int >= 1, got '
                               'True.'),
    ({'shard_seconds': -1}, 'shard_seconds must be None or finite and >= 0, '
                            'got -1.'),
    ({'shard_seconds': float('nan')}, 'shard_seconds must be None or finite '
                                      'and >= 0, got nan.'),
    ({'shard_seconds': float('inf')}, 'shard_seconds must be None or finite '
                                      'and >= 0, got inf.'),
    ({'durability': 'fsync'}, "durability must be a Durability (FSYNC, "
                              "FLUSH), got 'fsync'."),
])
def test_bad_options_are_refused_before_anything_is_written(tmp_path, options,
                                                            message):
  with pytest.raises(ValueError) as error:
    EpisodeWriter(tmp_path / 'd', rlds_dirs.features(),
                  **{'name': 'ours', **options})
  assert str(error.value) == message
  assert not (tmp_path / 'd').exists()
