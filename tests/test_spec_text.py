"""One spec text and one spec diff (`specs.paths`) for every message.

spec_text     TensorSpec / array / dtype+shape  ->  'uint8[?,?,3]', 'int32[]'
spec_diff     two specs -> (path, leaf, leaf) per field that differs
messages      sources' concatenation, table signatures, mixed replay: each
              names the differing fields with both in spec text
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
from tf_agents.specs import array_spec  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

from rlds_reverb import errors  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from rlds_reverb.mixture import sources as mixture_sources  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import encoded  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import paths  # pylint: disable=g-import-not-at-top

# --- Spec text. ---------------------------------------------------------------

# id: (spec, its text)
SPEC_TEXT_CASES = {
    'image': (tf.TensorSpec([None, None, 3], tf.uint8), 'uint8[?,?,3]'),
    'scalar': (tf.TensorSpec([], tf.int32), 'int32[]'),
    'matrix': (tf.TensorSpec([2, 4], tf.float32), 'float32[2,4]'),
    'string': (tf.TensorSpec([2], tf.string), 'string[2]'),
    'unknown_rank': (tf.TensorSpec(None, tf.float32), 'float32[...]'),
    'bounded': (tensor_spec.BoundedTensorSpec([], tf.int64, 0, 1), 'int64[]'),
    'array_spec': (array_spec.ArraySpec((3, 2), np.float64), 'float64[3,2]'),
    'array': (np.zeros((4, 2), np.float32), 'float32[4,2]'),
    'bytes_array': (np.array([b'a', b'bc']), 'string[2]'),
    'str_array': (np.array(['a']), 'string[1]'),
    'object_array': (np.array([b'a'], dtype=object), 'string[1]'),
    'ragged': (tf.RaggedTensorSpec([None], tf.int32), 'ragged int32[?]'),
    'encoded_frames': (encoded.EncodedImage(
        'png', tf.TensorSpec([72, 96, 3], tf.uint8)).stored([None]),
                       'string[?]'),
    'missing': (None, 'missing'),
    'a_nest': ({'a': tf.TensorSpec([], tf.int32)}, 'dict'),
    'a_dataset': (tf.data.DatasetSpec(tf.TensorSpec([], tf.int32)),
                  'DatasetSpec'),
}


@pytest.mark.parametrize('spec, text', SPEC_TEXT_CASES.values(),
                         ids=SPEC_TEXT_CASES.keys())
def test_spec_text(spec, text):
  assert paths.spec_text(spec) == text


# id: (dtype, shape, text): dtypes and shapes held apart.
DTYPE_SHAPE_CASES = {
    'tf_dtype_shape': (tf.float32, tf.TensorShape([None, 3]), 'float32[?,3]'),
    'numpy_dtype_tuple': (np.dtype(np.int64), (20, 3), 'int64[20,3]'),
    'numpy_type': (np.float32, [], 'float32[]'),
    'object_is_string': (np.dtype(object), (2,), 'string[2]'),
    'named_axis': (np.dtype(np.float32), ('T', 3), 'float32[T,3]'),
    'unknown_rank': (tf.int32, tf.TensorShape(None), 'int32[...]'),
}


@pytest.mark.parametrize('dtype, shape, text', DTYPE_SHAPE_CASES.values(),
                         ids=DTYPE_SHAPE_CASES.keys())
def test_dtype_shape_text(dtype, shape, text):
  assert paths.dtype_shape_text(dtype, shape) == text


def test_shape_text_alone():
  assert [paths.shape_text(shape) for shape in
          [(), (2, 3), [None, 4], tf.TensorShape([1])]] == [
              '[]', '[2,3]', '[?,4]', '[1]']


def test_nest_text():
  spec = {'observation': {'pixels': tf.TensorSpec([None, None, 3], tf.uint8)},
          'action': tf.TensorSpec([], tf.int64)}
  assert paths.nest_text(spec) == (
      'action int64[], observation/pixels uint8[?,?,3]')
  assert paths.nest_text(tf.TensorSpec([2], tf.int32)) == '<root> int32[2]'
  assert paths.nest_text({}) == ''


# --- Spec diff. ---------------------------------------------------------------

F3 = tf.TensorSpec([3], tf.float32)
F5 = tf.TensorSpec([5], tf.float32)
I0 = tf.TensorSpec([], tf.int32)


def _steps(**leaves):
  return {'steps': tf.data.DatasetSpec(leaves)}


# id: (first, second, same, [(path, first's text, second's text)])
SPEC_DIFF_CASES = {
    'equal': ({'o': F3}, {'o': F3}, None, []),
    'shape': ({'o': F3, 'r': I0}, {'o': F5, 'r': I0}, None,
              [('o', 'float32[3]', 'float32[5]')]),
    'dtype_matrix': ({'o': tf.TensorSpec([2, 4], tf.float32)},
                     {'o': tf.TensorSpec([2, 4], tf.float64)}, None,
                     [('o', 'float32[2,4]', 'float64[2,4]')]),
    'only_in_first': ({'o': F3, 'x': I0}, {'o': F3}, None,
                      [('x', 'int32[]', 'missing')]),
    'only_in_second': ({'o': F3}, {'o': F3, 'x': I0}, None,
                       [('x', 'missing', 'int32[]')]),
    'in_path_order': ({'b': F3, 'a': I0}, {'b': F5, 'a': F3}, None,
                      [('a', 'int32[]', 'float32[3]'),
                       ('b', 'float32[3]', 'float32[5]')]),
    'inside_nested_datasets': (_steps(o=F3, r=I0), _steps(o=F5, r=I0), None,
                               [('steps/o', 'float32[3]', 'float32[5]')]),
    'a_lone_spec': (F3, F5, None, [('', 'float32[3]', 'float32[5]')]),
    'names_when_texts_agree': (
        {'o': F3}, {'o': tf.TensorSpec([3], tf.float32, name='obs')}, None,
        [('o', 'float32[3] unnamed', "float32[3] named 'obs'")]),
    'types_when_names_agree': (
        {'a': tf.TensorSpec([], tf.int64)},
        {'a': tensor_spec.BoundedTensorSpec([], tf.int64, 0, 1)}, None,
        [('a', repr(tf.TensorSpec([], tf.int64)),
          repr(tensor_spec.BoundedTensorSpec([], tf.int64, 0, 1)))]),
    'dtype_and_shape_only': (
        {'o': F3, 'a': tf.TensorSpec([], tf.int64)},
        {'o': tf.TensorSpec([3], tf.float32, name='obs'),
         'a': tensor_spec.BoundedTensorSpec([], tf.int64, 0, 1)},
        paths.same_dtype_and_shape, []),
}


@pytest.mark.parametrize('first, second, same, expected',
                         SPEC_DIFF_CASES.values(), ids=SPEC_DIFF_CASES.keys())
def test_spec_differences(first, second, same, expected):
  found = paths.spec_differences(first, second, *([same] if same else []))
  assert [(path, *paths.difference_texts(a, b)) for path, a, b in found] == (
      expected)


# --- The messages that compare two specs. ------------------------------------

def _store(data_dir, name, observation_shape):
  steps = {'observation': np.zeros((2,) + observation_shape, np.float32),
           'action': np.zeros(2, np.int64),
           'reward': np.zeros(2, np.float32),
           'discount': np.ones(2, np.float32),
           'is_first': np.array([True, False]),
           'is_last': np.array([False, True]),
           'is_terminal': np.array([False, True])}
  features = tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tfds.features.Tensor(shape=observation_shape,
                                          dtype=np.float32),
      'action': np.int64, 'reward': np.float32, 'discount': np.float32,
      'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_})})
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name, '1.0.0', features, {'train': [(0, {'steps': steps})]},
      data_dir=data_dir, disable_shuffling=True)
  return os.fspath(builder.data_dir)


def test_concatenation_names_the_field_in_spec_text(tmp_path):
  first = _store(str(tmp_path), 'narrow', (2, 3))
  second = _store(str(tmp_path), 'wide', (2, 4))
  with pytest.raises(errors.SourceError) as raised:
    sources.load([first, second])
  assert str(raised.value) == (
      f'Cannot concatenate {second}: its episode spec differs from the '
      'datasets before it at steps/observation (float32[2,3] vs '
      'float32[2,4]).')


def test_signature_notes_in_spec_text():
  data = {'o': tf.TensorSpec([2, 3], tf.float32), 'a': I0}
  table = {'o': tf.TensorSpec([None, 2, 4], tf.float32),
           'x': tf.TensorSpec([None], tf.int64)}
  with pytest.raises(errors.SignatureMismatchError) as raised:
    specs.check_table_signature(table, data, table='t')
  assert raised.value.__notes__ == [
      "table 't': a: table has no field, data has int32[?]",
      "table 't': o: table has float32[?,2,4], data has float32[?,2,3]",
      "table 't': x: table has int64[?], data has no field"]


def test_mixed_replay_spec_check_in_spec_text():
  offline = {'o': tf.TensorSpec([2, 4], tf.float32), 'r': I0}
  online = {'o': tf.TensorSpec([2, 5], tf.float32, name='o'), 'r': I0}
  with pytest.raises(errors.MixedReplayError) as raised:
    mixture_sources.check_same_spec(offline, online, 'online data spec',
                                    'offline')
  assert str(raised.value) == (
      'The online data spec differs from the offline data spec: '
      'o: float32[2,5] vs float32[2,4].')
