"""Trajectory specs of RLDS data and the table signature check."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import rlds_to_reverb as tfa  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import trajectory  # pylint: disable=g-import-not-at-top
import tree  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import paths  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top

MISMATCH = 'Replay buffer table signature spec should match RLDS data spec.'


def flat(num_steps=3, seed=0, **kwargs):
  return rlds_data.flat_episode(num_steps, seed, **kwargs)


def with_field(episode, name, value):
  episode = dict(episode)
  episode[name] = value
  return episode


def nested_episode(num_steps=2, seed=1):
  rng = np.random.default_rng(seed)
  return with_field(with_field(flat(num_steps, seed), 'observation', {
      'pixels': rng.integers(0, 256, (num_steps, 6, 8, 3)).astype(np.uint8),
      'last_action': np.zeros(num_steps, np.int64),
      'last_reward': np.zeros(num_steps, np.float32),
  }), 'action', {'move': np.zeros((num_steps, 2), np.int32)})


def expected_spec(observation, action, reward, policy_info=()):
  """The spec TF-Agents' own test writes out by hand, generalised."""
  return trajectory.Trajectory(
      step_type=tf.TensorSpec((), tf.int32, name='step_type'),
      observation=observation,
      action=action,
      policy_info=policy_info,
      next_step_type=tf.TensorSpec((), tf.int32, name='step_type'),
      reward=reward,
      discount=tensor_spec.BoundedTensorSpec(
          (), tf.float32, name='discount', minimum=0.0, maximum=1.0))


SPEC_CASES = {
    'flat': (
        [flat()],
        expected_spec(tf.TensorSpec((3,), tf.float32),
                      tf.TensorSpec((), tf.int64),
                      tf.TensorSpec((), tf.float32))),
    'float64_discount': (
        [flat(discount_dtype=np.float64)],
        expected_spec(tf.TensorSpec((3,), tf.float32),
                      tf.TensorSpec((), tf.int64),
                      tf.TensorSpec((), tf.float32))),
    'int32_reward': (
        [with_field(flat(), 'reward', np.arange(3, dtype=np.int32))],
        expected_spec(tf.TensorSpec((3,), tf.float32),
                      tf.TensorSpec((), tf.int64),
                      tf.TensorSpec((), tf.int32))),
    'uint8_image': (
        [with_field(flat(), 'observation', np.zeros((3, 4, 5, 3), np.uint8))],
        expected_spec(tf.TensorSpec((4, 5, 3), tf.uint8),
                      tf.TensorSpec((), tf.int64),
                      tf.TensorSpec((), tf.float32))),
    'nested': (
        [nested_episode()],
        expected_spec({'pixels': tf.TensorSpec((6, 8, 3), tf.uint8),
                       'last_action': tf.TensorSpec((), tf.int64),
                       'last_reward': tf.TensorSpec((), tf.float32)},
                      {'move': tf.TensorSpec((2,), tf.int32)},
                      tf.TensorSpec((), tf.float32))),
    'extra_field': (
        [with_field(flat(), 'extra', np.zeros(3, np.int32))],
        expected_spec(tf.TensorSpec((3,), tf.float32),
                      tf.TensorSpec((), tf.int64),
                      tf.TensorSpec((), tf.float32))),
}


@pytest.mark.parametrize('episodes, expected', list(SPEC_CASES.values()),
                         ids=list(SPEC_CASES))
def test_trajectory_data_spec(episodes, expected):
  spec = rlds_reverb.create_trajectory_data_spec(rlds_data.as_rlds(episodes))
  assert spec == expected


@pytest.mark.parametrize('episodes', [
    [flat()], [flat(discount_dtype=np.float64)],
    [with_field(flat(), 'reward', np.arange(3, dtype=np.int64))],
    [with_field(flat(), 'extra', np.zeros(3, np.int32)), flat(1, 2)],
], ids=['flat', 'float64_discount', 'int64_reward', 'extra_field'])
def test_spec_equals_tf_agents_for_flat_data(episodes):
  dataset = rlds_data.as_rlds(episodes)
  assert (rlds_reverb.create_trajectory_data_spec(dataset) ==
          tfa.create_trajectory_data_spec(dataset))


def test_empty_dataset_spec_is_derivable():
  empty = rlds_data.empty_rlds(nested_episode())
  assert (rlds_reverb.create_trajectory_data_spec(empty) ==
          SPEC_CASES['nested'][1])


def shapes_and_dtypes(spec):
  return tree.map_structure(lambda s: (tuple(s.shape.as_list()), s.dtype),
                            spec)


def nested_info(current, following):
  return {'pixels_sum': tf.reduce_sum(
              tf.cast(current['observation']['pixels'], tf.int32), axis=-1),
          'pair': (current['reward'], following['is_first']),
          'move': current['action']['move']}


def extra_info(current, following):
  del following
  return {'extra': current['extra'], 'doubled': tf.cast(current['extra'],
                                                       tf.float64) * 2}


ELEMENT_SPEC_CASES = {
    'flat': ([flat(), flat(1, 2)], None),
    'float64_discount': ([flat(discount_dtype=np.float64)], None),
    'int_reward': (
        [with_field(flat(), 'reward', np.arange(3, dtype=np.int64))], None),
    'nested': ([nested_episode(), nested_episode(1, 3)], None),
    'nested_policy_info': ([nested_episode(), nested_episode(1, 3)],
                           nested_info),
    'extra_field_policy_info': (
        [with_field(flat(), 'extra', np.arange(3, dtype=np.int32))],
        extra_info),
}


@pytest.mark.parametrize('episodes, policy_info_fn',
                         list(ELEMENT_SPEC_CASES.values()),
                         ids=list(ELEMENT_SPEC_CASES))
def test_element_spec_matches_spec(episodes, policy_info_fn):
  dataset = rlds_data.as_rlds(episodes)
  spec = specs.trajectory_spec(specs.steps_spec(dataset), policy_info_fn)
  converted = rlds_reverb.convert_rlds_to_trajectories(dataset, policy_info_fn)
  tree.assert_same_structure(spec, converted.element_spec)
  assert (shapes_and_dtypes(converted.element_spec) ==
          shapes_and_dtypes(spec))
  # And the data itself has those shapes and dtypes.
  first = next(iter(converted))
  assert (tree.map_structure(lambda x: (tuple(x.shape), x.dtype), first) ==
          shapes_and_dtypes(spec))


def test_policy_info_spec_of_nested_output():
  dataset = rlds_data.as_rlds([nested_episode()])
  spec = specs.trajectory_spec(specs.steps_spec(dataset), nested_info)
  assert spec.policy_info == {
      'pixels_sum': tf.TensorSpec((6, 8), tf.int32),
      'pair': (tf.TensorSpec((), tf.float32), tf.TensorSpec((), tf.bool)),
      'move': tf.TensorSpec((2,), tf.int32),
  }


def test_no_policy_info_fn_gives_empty_policy_info():
  dataset = rlds_data.as_rlds([flat()])
  assert specs.trajectory_spec(specs.steps_spec(dataset)).policy_info == ()


# ----------------------------------------------------------- signature --


def _spec_of(episodes, policy_info_fn=None):
  dataset = rlds_data.as_rlds(episodes)
  return specs.trajectory_spec(specs.steps_spec(dataset), policy_info_fn)


def _outer(spec):
  return tensor_spec.add_outer_dim(spec)


def test_unsigned_table_passes():
  specs.check_table_signature(None, _spec_of([flat()]))


@pytest.mark.parametrize('episodes, policy_info_fn', [
    ([flat()], None), ([nested_episode()], None),
    ([nested_episode()], nested_info)], ids=['flat', 'nested', 'policy_info'])
def test_matching_signature_passes(episodes, policy_info_fn):
  spec = _spec_of(episodes, policy_info_fn)
  specs.check_table_signature(_outer(spec), spec)
  specs.check_table_signature(specs.table_signature(spec), spec, table='t')


FLAT = _spec_of([flat()])
NESTED = _spec_of([nested_episode()])


def _note(table, path, table_leaf, data_leaf):
  """A note naming both leaves in spec text (pinned by test_spec_text)."""
  where = f"table '{table}'" if table else 'table'
  return (f'{where}: {path}: table has {paths.spec_text(table_leaf)}, data has '
          f'{paths.spec_text(data_leaf)}')


def _data_leaf(spec, *path):
  leaf = _outer(spec)
  for key in path:
    leaf = leaf[key] if not isinstance(key, str) or isinstance(
        leaf, dict) else getattr(leaf, key)
  return leaf


_OBS_4 = tf.TensorSpec((None, 4), tf.float32)
_REWARD_INT = tf.TensorSpec((None,), tf.int64)
_PIXELS_RGBA = tf.TensorSpec((None, 6, 8, 4), tf.uint8)
_INFO = tf.TensorSpec((None,), tf.int32)

SIGNATURE_CASES = {
    'observation_shape': (
        _outer(FLAT)._replace(observation=_OBS_4), FLAT, 'replay',
        [_note('replay', 'observation', _OBS_4,
               _data_leaf(FLAT, 'observation'))]),
    'two_fields': (
        _outer(FLAT)._replace(observation=_OBS_4, reward=_REWARD_INT), FLAT,
        '',
        [_note('', 'observation', _OBS_4, _data_leaf(FLAT, 'observation')),
         _note('', 'reward', _REWARD_INT, _data_leaf(FLAT, 'reward'))]),
    'nested_leaf': (
        _outer(NESTED)._replace(observation={
            **_outer(NESTED).observation, 'pixels': _PIXELS_RGBA}),
        NESTED, 'dmlab',
        [_note('dmlab', 'observation/pixels', _PIXELS_RGBA,
               _data_leaf(NESTED, 'observation', 'pixels'))]),
    'no_time_axis': (
        FLAT._replace(reward=tf.TensorSpec((), tf.float32)),
        FLAT._replace(reward=tf.TensorSpec((), tf.float32)), 't',
        [_note('t', field, getattr(FLAT, field),
               _data_leaf(FLAT, field))
         for field in ('action', 'discount', 'next_step_type', 'observation',
                       'reward', 'step_type')]),
    'table_has_policy_info': (
        _outer(FLAT)._replace(policy_info={'x': _INFO}), FLAT, 't',
        ["table 't': policy_info/x: table has int32[?], data has no field"]),
    'data_has_policy_info': (
        _outer(FLAT), FLAT._replace(policy_info={'x': tf.TensorSpec(
            (), tf.int32)}), 't',
        ["table 't': policy_info/x: table has no field, data has int32[?]"]),
}


@pytest.mark.parametrize('signature, spec, table, notes',
                         list(SIGNATURE_CASES.values()),
                         ids=list(SIGNATURE_CASES))
def test_signature_mismatch(signature, spec, table, notes):
  with pytest.raises(ValueError) as err:
    specs.check_table_signature(signature, spec, table=table)
  assert str(err.value) == MISMATCH
  assert isinstance(err.value, rlds_reverb.SignatureMismatchError)
  assert err.value.__notes__ == notes


def test_signature_mismatch_for_tf_agents_different_spec_case():
  """TF-Agents' 'different_spec_episode': observation [1] against [2]."""
  table_spec = _spec_of([with_field(flat(), 'observation',
                                    np.zeros((3, 2), np.float32))])
  data_spec = _spec_of([with_field(flat(), 'observation',
                                   np.zeros((3, 1), np.float32))])
  with pytest.raises(ValueError) as err:
    specs.check_table_signature(_outer(table_spec), data_spec)
  assert str(err.value) == MISMATCH
  assert err.value.__notes__ == [
      _note('', 'observation', tf.TensorSpec((None, 2), tf.float32),
            tf.TensorSpec((None, 1), tf.float32))]
