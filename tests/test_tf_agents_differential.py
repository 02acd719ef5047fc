"""rlds_reverb against TF-Agents' own module, on random data and its own cases."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import rlds_to_reverb as tfa  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import rlds_to_reverb_test as tfa_test  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import trajectory  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests.tfa_reference import assert_same_trajectories  # pylint: disable=g-import-not-at-top

SEEDS = [0, 1, 2, 3, 4]


def random_episodes(seed, num_episodes=None):
  """Episodes of 1..8 steps, each ending terminal or truncated at random."""
  rng = np.random.default_rng(seed)
  num_episodes = num_episodes or int(rng.integers(1, 6))
  return [
      rlds_data.flat_episode(int(rng.integers(1, 9)), seed * 100 + i,
                             terminal=bool(rng.integers(0, 2)))
      for i in range(num_episodes)
  ]


def both(dataset, policy_info_fn=None):
  ours = list(rlds_reverb.convert_rlds_to_trajectories(
      dataset, policy_info_fn).as_numpy_iterator())
  theirs = list(tfa.convert_rlds_to_trajectories(
      dataset, policy_info_fn).as_numpy_iterator())
  return ours, theirs


@pytest.mark.parametrize('seed', SEEDS)
def test_random_flat_data_converts_as_tf_agents(seed):
  episodes = random_episodes(seed)
  ours, theirs = both(rlds_data.as_rlds(episodes))
  assert len(theirs) == sum(len(e['is_first']) for e in episodes)
  assert_same_trajectories(ours, theirs)


def next_step_info(current, following):
  """Uses the next step's values, which cross episode boundaries."""
  return {'next_observation': following['observation'],
          'next_reward': following['reward'],
          'next_is_first': following['is_first'],
          'action': current['action']}


@pytest.mark.parametrize('seed', SEEDS[:3])
def test_random_flat_data_policy_info_as_tf_agents(seed):
  episodes = random_episodes(seed, num_episodes=3)
  ours, theirs = both(rlds_data.as_rlds(episodes), next_step_info)
  assert_same_trajectories(ours, theirs)


@pytest.mark.parametrize('seed', SEEDS)
def test_random_flat_data_spec_as_tf_agents(seed):
  dataset = rlds_data.as_rlds(random_episodes(seed))
  assert (rlds_reverb.create_trajectory_data_spec(dataset) ==
          tfa.create_trajectory_data_spec(dataset))


# ------------------------------------------------ TF-Agents' own cases --

VALID = tfa_test.generate_valid_episodes()
INVALID = tfa_test.generate_invalid_episodes()
# TF-Agents' hand-written spec of its test data.
TFA_DATA_SPEC = trajectory.Trajectory(
    tf.TensorSpec((), tf.int32, name='step_type'),
    tf.TensorSpec((2,), tf.float32),
    tf.TensorSpec((1,), tf.float32),
    (),
    tf.TensorSpec((), tf.int32, name='step_type'),
    tf.TensorSpec((), tf.float32),
    tensor_spec.BoundedTensorSpec((), tf.float32, name='discount',
                                  minimum=[0.0], maximum=[1.0]),
)
VALID_COUNTS = {'complete_episode': 3, 'truncated_episode': 3,
                'single_step_episode': 1, 'extra_param_episode': 1,
                'multiple_episodes': 7}


@pytest.mark.parametrize('case', list(VALID_COUNTS))
def test_tf_agents_valid_case_conversion(case):
  dataset, expected = VALID[case]
  ours, theirs = both(dataset)
  assert len(ours) == len(expected) == VALID_COUNTS[case]
  for got, want in zip(ours, expected):
    assert got.step_type == want.step_type
    assert got.next_step_type == want.next_step_type
    np.testing.assert_array_equal(got.observation, want.observation)
    np.testing.assert_array_equal(got.action, want.action)
    np.testing.assert_array_equal(got.reward, want.reward)
    np.testing.assert_array_equal(got.discount, want.discount)
    assert got.policy_info == ()
  assert_same_trajectories(ours, theirs)


@pytest.mark.parametrize('case', list(VALID_COUNTS))
def test_tf_agents_valid_case_policy_info(case):
  dataset, expected = VALID[case]
  ours, theirs = both(dataset, tfa_test.get_policy_info_test_fn)
  assert len(ours) == len(expected)
  for got, want in zip(ours, expected):
    np.testing.assert_array_equal(got.policy_info['action'], want.action)
  assert_same_trajectories(ours, theirs)


def test_tf_agents_extra_param_policy_info():
  dataset, expected = VALID['extra_param_episode']
  ours, theirs = both(dataset, tfa_test.get_policy_with_extra_param_test_fn)
  assert len(ours) == len(expected) == 1
  assert ours[0].policy_info['extra_param'] == np.True_
  assert_same_trajectories(ours, theirs)


@pytest.mark.parametrize('case', list(VALID_COUNTS))
def test_tf_agents_valid_case_spec(case):
  dataset, _ = VALID[case]
  assert rlds_reverb.create_trajectory_data_spec(dataset) == TFA_DATA_SPEC


@pytest.mark.parametrize('case', ['incorrect_ending', 'incorrect_termination',
                                  'incorrect_beginning'])
@pytest.mark.parametrize('policy_info_fn',
                         [None, tfa_test.get_policy_info_test_fn],
                         ids=['no_policy_info', 'with_policy_info'])
def test_tf_agents_invalid_case(case, policy_info_fn):
  dataset, sentence = INVALID[case]
  converted = rlds_reverb.convert_rlds_to_trajectories(dataset, policy_info_fn)
  with pytest.raises(tf.errors.InvalidArgumentError, match=sentence):
    list(converted.as_numpy_iterator())


@pytest.mark.parametrize('case', ['no_step_episode', 'incorrect_step_spec'])
@pytest.mark.parametrize('function', [
    rlds_reverb.convert_rlds_to_trajectories,
    rlds_reverb.create_trajectory_data_spec,
], ids=['convert', 'spec'])
def test_tf_agents_value_error_case(case, function):
  dataset, message = INVALID[case]
  with pytest.raises(ValueError) as err:
    function(dataset)
  assert str(err.value) == message


def test_tf_agents_different_spec_case():
  """Its table signature check, through check_table_signature."""
  dataset, message = INVALID['different_spec_episode']
  with pytest.raises(ValueError) as err:
    specs.check_table_signature(tensor_spec.add_outer_dim(TFA_DATA_SPEC),
                                rlds_reverb.create_trajectory_data_spec(dataset))
  assert str(err.value) == message
