"""The conversion's rules inverted, tested against the forward conversion.

RLDS steps -> `convert_rlds_to_trajectories` -> `trajectories_to_steps` gives
the steps back; a real PyDriver's trajectories -> steps -> forward gives the
trajectories back. What cannot come back (the module docstring's list) is
tested as such, value by value.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import trajectory  # pylint: disable=g-import-not-at-top
import tree  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import MalformedEpisodeError  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import to_rlds  # pylint: disable=g-import-not-at-top
from tests import driver_data  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top

F, M, L = 0, 1, 2  # FIRST, MID, LAST


def assert_same_nest(got, want):
  """Same structure (dicts by keys), dtypes, shapes and values."""
  tree.assert_same_structure(want, got)
  for (path, want_leaf), got_leaf in zip(tree.flatten_with_path(want),
                                         tree.flatten(got)):
    got_leaf, want_leaf = np.asarray(got_leaf), np.asarray(want_leaf)
    where = '/'.join(map(str, path))
    assert got_leaf.dtype == want_leaf.dtype, (where, got_leaf.dtype,
                                               want_leaf.dtype)
    assert got_leaf.shape == want_leaf.shape, (where, got_leaf.shape)
    np.testing.assert_array_equal(got_leaf, want_leaf, err_msg=where)


def forward(steps, policy_info_fn=None) -> trajectory.Trajectory:
  """The forward conversion of one episode, stacked [T, ...]."""
  converted = list(rlds_reverb.convert_rlds_to_trajectories(
      rlds_data.as_rlds([steps]), policy_info_fn).as_numpy_iterator())
  assert len(converted) == len(steps['is_first'])
  return driver_data.stack(converted)


def ended(steps, terminal: bool):
  """`steps` ending as EnvLogger writes: discount 0 before a terminal last
  step, and 0 on the last step (its discount means nothing)."""
  steps = dict(steps)
  steps['discount'] = steps['discount'].copy()
  if terminal and len(steps['discount']) > 1:
    steps['discount'][-2] = 0
  steps['discount'][-1] = 0 if terminal else steps['discount'][-1]
  return steps


def seven(steps):
  return {name: steps[name] for name in rlds_reverb.get_rlds_step_features()}


def robotics(num_steps, seed, terminal):
  return ended(rlds_data.robotics_episode(num_steps, seed, terminal), terminal)


def language(current, following):
  del following
  return {'embedding': current['language_embedding'],
          'instruction': current['language_instruction']}


# name: (steps, policy_info_fn); each comes back as its seven fields (and
# what policy_info_fn returned, as 'policy_info').
ROUND_TRIPS = {
    'terminal': (ended(rlds_data.flat_episode(6, 0), True), None),
    'truncated': (rlds_data.flat_episode(5, 1, terminal=False), None),
    'truncated_last_discount_0': (
        ended(rlds_data.flat_episode(5, 2, terminal=False), False), None),
    'two_steps_terminal': (ended(rlds_data.flat_episode(2, 3), True), None),
    'single_step_terminal': (ended(rlds_data.flat_episode(1, 4), True), None),
    'single_step_truncated': (
        rlds_data.flat_episode(1, 5, terminal=False), None),
    'nested_images_strings_terminal': (robotics(6, 6, True), None),
    'nested_images_strings_truncated': (robotics(4, 7, False), None),
    'dict_policy_info': (robotics(5, 8, True), language),
    'dict_policy_info_single_step': (robotics(1, 9, False), language),
}


@pytest.mark.parametrize('case', list(ROUND_TRIPS))
def test_rlds_steps_come_back_from_their_trajectories(case):
  steps, policy_info_fn = ROUND_TRIPS[case]
  got = to_rlds.trajectories_to_steps(forward(steps, policy_info_fn))
  expected = seven(steps)
  if policy_info_fn:
    expected['policy_info'] = language(steps, None)
  assert_same_nest(got, expected)


def test_a_terminal_last_step_discount_comes_back_0():
  steps = rlds_data.flat_episode(4, 10)
  steps['discount'][-2] = 0  # Terminal, last step's discount 0.99...
  got = to_rlds.trajectories_to_steps(forward(steps))
  assert steps['discount'][-1] != 0
  np.testing.assert_array_equal(got['discount'][:-1], steps['discount'][:-1])
  assert got['discount'][-1] == 0
  np.testing.assert_array_equal(got['is_terminal'], steps['is_terminal'])


@pytest.mark.parametrize('terminal', [True, False])
def test_is_terminal_comes_from_the_discount_before_the_last_step(terminal):
  """Data whose flag disagrees with that discount comes back otherwise,
  unless `terminal` says it."""
  steps = rlds_data.flat_episode(5, 11, terminal=terminal)
  steps['discount'][-2] = 1.0 if terminal else 0.0
  trajectories = forward(steps)
  derived = to_rlds.trajectories_to_steps(trajectories)
  assert derived['is_terminal'][-1] == (not terminal)
  given = to_rlds.trajectories_to_steps(trajectories, terminal=terminal)
  np.testing.assert_array_equal(given['is_terminal'], steps['is_terminal'])


def test_float64_discounts_come_back_float32_as_the_forward_rule_reads_them():
  steps = ended(rlds_data.flat_episode(3, 12, discount_dtype=np.float64), True)
  got = to_rlds.trajectories_to_steps(forward(steps))
  assert got['discount'].dtype == np.float32
  np.testing.assert_array_equal(got['discount'],
                                steps['discount'].astype(np.float32))


def policy_info(current, following):
  del following
  return current['policy_info']


@pytest.mark.parametrize('info_spec', [driver_data.DICT_INFO_SPEC,
                                       driver_data.NAMEDTUPLE_INFO_SPEC],
                         ids=['dict', 'namedtuple'])
def test_driver_trajectories_come_back_but_terminal_boundary_discounts(
    info_spec):
  """A boundary trajectory carries the reset's discount 1; the forward rule
  gives a terminal episode's 0 (TF-Agents' own conversion does the same)."""
  collected = driver_data.collect(8, seed=3, info_spec=info_spec)
  assert True in collected.terminal and False in collected.terminal
  for episode, terminal in zip(collected.episodes, collected.terminal):
    steps = to_rlds.trajectories_to_steps(episode)
    assert steps['is_terminal'][-1] == terminal
    expected = to_rlds.as_dicts(episode)
    if terminal:
      expected = expected._replace(discount=np.concatenate(
          [episode.discount[:-1], [0.0]]).astype(np.float32))
    assert_same_nest(forward(steps, policy_info), expected)


def test_the_step_spec_is_that_of_the_steps():
  collected = driver_data.collect(2, seed=4,
                                  info_spec=driver_data.NAMEDTUPLE_INFO_SPEC)
  spec = to_rlds.rlds_step_spec(collected.trajectory_spec)
  steps = to_rlds.trajectories_to_steps(collected.episodes[0])
  tree.assert_same_structure(spec, steps)
  for leaf_spec, values in zip(tree.flatten(spec), tree.flatten(steps)):
    assert tf.as_dtype(leaf_spec.dtype) == tf.as_dtype(values.dtype)
    assert tuple(leaf_spec.shape) == values.shape[1:]
  assert spec['policy_info'] == {
      'log_probability': driver_data.DICT_INFO_SPEC['log_probability'],
      'mode': driver_data.DICT_INFO_SPEC['mode']}


def test_no_policy_info_gives_no_field():
  steps = rlds_data.flat_episode(3, 13)
  assert 'policy_info' not in to_rlds.trajectories_to_steps(forward(steps))
  spec = rlds_reverb.create_trajectory_data_spec(rlds_data.as_rlds([steps]))
  assert 'policy_info' not in to_rlds.rlds_step_spec(spec)


def test_policy_info_goes_in_the_field_named():
  collected = driver_data.collect(1, seed=5)
  steps = to_rlds.trajectories_to_steps(collected.episodes[0],
                                        policy_info_field='agent')
  assert_same_nest(steps['agent'], collected.episodes[0].policy_info)
  spec = to_rlds.rlds_step_spec(collected.trajectory_spec,
                                policy_info_field='agent')
  assert spec['agent'] == driver_data.DICT_INFO_SPEC


def episode_of(step_type, next_step_type, **fields):
  length = len(step_type)
  values = dict(step_type=np.array(step_type, np.int32),
                observation=np.zeros((length, 3), np.float32),
                action=np.zeros(length, np.int64), policy_info=(),
                next_step_type=np.array(next_step_type, np.int32),
                reward=np.zeros(length, np.float32),
                discount=np.ones(length, np.float32))
  values.update(fields)
  return trajectory.Trajectory(**values)


TAIL = 'FIRST, MID..., LAST, each followed by the next, the last by FIRST'
MALFORMED = {
    'mid_not_followed_by_last': (
        episode_of([F, M, M], [M, M, L]),
        f'Trajectory 1 of 3 goes MID -> MID; one episode of 3 goes MID -> '
        f'LAST there ({TAIL}).'),
    'two_episodes': (
        episode_of([F, L, F, L], [L, F, L, F]),
        f'Trajectory 0 of 4 goes FIRST -> LAST; one episode of 4 goes FIRST '
        f'-> MID there ({TAIL}).'),
    'no_boundary': (
        episode_of([F, M, L], [M, L, L]),
        f'Trajectory 2 of 3 goes LAST -> LAST; one episode of 3 goes LAST '
        f'-> FIRST there ({TAIL}).'),
    'begins_mid_way': (
        episode_of([M, L], [L, F]),
        f'Trajectory 0 of 2 goes MID -> LAST; one episode of 2 goes FIRST -> '
        f'LAST there ({TAIL}).'),
    'one_trajectory_not_last_last': (
        episode_of([F], [L]),
        'Trajectory 0 of 1 goes FIRST -> LAST; one episode of 1 goes LAST -> '
        'LAST there (a one-step episode is LAST -> LAST).'),
    'unknown_step_type': (
        episode_of([F, 7], [L, F]),
        f'Trajectory 1 of 2 goes 7 -> FIRST; one episode of 2 goes LAST -> '
        f'FIRST there ({TAIL}).'),
    'no_trajectories': (
        episode_of([], []),
        'The episode has no trajectories: step_type is [0]; expected [T] '
        'with T >= 1.'),
    'a_field_of_another_length': (
        episode_of([F, M, L], [M, L, F],
                   observation={'x': np.zeros((2, 3), np.float32)}),
        'Trajectory field observation/x has shape [2,3]; every field needs '
        'the leading dimension of step_type, 3.'),
    'a_scalar_field': (
        episode_of([F, L], [L, F], reward=np.float32(1)),
        'Trajectory field reward has shape []; every field needs the leading '
        'dimension of step_type, 2.'),
}


@pytest.mark.parametrize('case', list(MALFORMED))
def test_trajectories_that_are_not_one_episode_are_refused(case):
  episode, message = MALFORMED[case]
  with pytest.raises(MalformedEpisodeError) as error:
    to_rlds.trajectories_to_steps(episode)
  assert str(error.value) == message


@pytest.mark.parametrize('convert', [
    lambda: to_rlds.trajectories_to_steps(episode_of([L], [L]),
                                          policy_info_field='reward'),
    lambda: to_rlds.rlds_step_spec(episode_of([L], [L]),
                                   policy_info_field='reward'),
], ids=['steps', 'spec'])
def test_policy_info_cannot_take_an_rlds_field_name(convert):
  with pytest.raises(ValueError) as error:
    convert()
  assert str(error.value) == (
      "policy_info_field 'reward' is an RLDS step field; choose another name.")


def test_as_dicts_turns_inner_namedtuples_into_dicts_and_keeps_the_top():
  info = driver_data.PolicyInfo(np.float32(1), {'inner': driver_data.PolicyInfo(
      2, 3)})
  converted = to_rlds.as_dicts(info)
  assert type(converted) is driver_data.PolicyInfo  # pylint: disable=unidiomatic-typecheck
  assert converted.mode == {'inner': {'log_probability': 2, 'mode': 3}}
  assert to_rlds.as_dicts({'a': info}) == {
      'a': {'log_probability': np.float32(1),
            'mode': {'inner': {'log_probability': 2, 'mode': 3}}}}
  assert to_rlds.as_dicts([1, 2]) == [1, 2]
