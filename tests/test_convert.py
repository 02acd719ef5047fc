"""Conversion of RLDS episodes to trajectories, against numpy expectations.

Every expected value is computed here from the episodes' numpy arrays, the way
TF-Agents' module defines it: all steps flattened in order, one step with
is_first=True appended, trajectory i from steps (i, i+1).
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import trajectory  # pylint: disable=g-import-not-at-top
import tree  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests.tfa_reference import assert_same_trajectories  # pylint: disable=g-import-not-at-top

FIRST, MID, LAST = 0, 1, 2


# ---------------------------------------------------------------- helpers --


def episode_with_flags(is_first, is_last, is_terminal, seed=0):
  """A flat episode whose flags are exactly the given lists."""
  episode = rlds_data.flat_episode(len(is_first), seed)
  episode['is_first'] = np.array(is_first, bool)
  episode['is_last'] = np.array(is_last, bool)
  episode['is_terminal'] = np.array(is_terminal, bool)
  return episode


def good(num_steps, seed=0, terminal=True, **kwargs):
  return rlds_data.flat_episode(num_steps, seed, terminal=terminal, **kwargs)


def empty_like(episode):
  """An episode of zero steps with `episode`'s structure and dtypes."""
  return tree.map_structure(lambda x: np.asarray(x)[:0], episode)


def step_type_of(is_first, is_last):
  return FIRST if is_first else LAST if is_last else MID


def expected_trajectories(episodes, policy_info_fn=None):
  """TF-Agents' conversion, in numpy; `policy_info_fn` gets numpy steps."""
  steps = []
  for episode in episodes:
    for t in range(len(episode['is_first'])):
      steps.append(tree.map_structure(lambda x, t=t: np.asarray(x)[t],
                                      episode))
  if steps:
    pad = tree.map_structure(np.zeros_like, steps[0])
    pad['is_first'] = np.bool_(True)
    steps.append(pad)
  result = []
  for current, following in zip(steps[:-1], steps[1:]):
    step_type = step_type_of(current['is_first'], current['is_last'])
    next_step_type = step_type_of(following['is_first'], following['is_last'])
    if step_type == FIRST and next_step_type == FIRST:
      step_type = next_step_type = LAST
    if current['is_last'] and current['is_terminal']:
      discount = np.float32(0.0)
    else:
      discount = np.float32(current['discount'])
    result.append(trajectory.Trajectory(
        step_type=np.int32(step_type),
        observation=current['observation'],
        action=current['action'],
        policy_info=(policy_info_fn(current, following)
                     if policy_info_fn else ()),
        next_step_type=np.int32(next_step_type),
        reward=current['reward'],
        discount=discount))
  return result


def convert(episodes, policy_info_fn=None, metadata=None):
  dataset = rlds_data.as_rlds(episodes, metadata)
  return list(rlds_reverb.convert_rlds_to_trajectories(
      dataset, policy_info_fn).as_numpy_iterator())


# ------------------------------------------------------------------ data --


def dmlab_like_episode(num_steps, seed, terminal=True):
  """Observations as in rlu_dmlab (small pixels), nested dict actions."""
  rng = np.random.default_rng(seed)
  return {
      'observation': {
          'pixels': rng.integers(0, 256, (num_steps, 6, 8, 3)).astype(np.uint8),
          'last_action': rng.integers(0, 9, num_steps).astype(np.int64),
          'last_reward': rng.standard_normal(num_steps).astype(np.float32),
      },
      'action': {
          'move': rng.integers(-1, 2, (num_steps, 2)).astype(np.int32),
          'fire': rng.integers(0, 2, num_steps).astype(bool),
      },
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': rng.uniform(0.5, 1.0, num_steps).astype(np.float32),
      **rlds_data.flags(num_steps, terminal),
  }


def image_episode(num_steps, seed):
  episode = good(num_steps, seed)
  rng = np.random.default_rng(seed + 100)
  episode['observation'] = rng.integers(
      0, 256, (num_steps, 4, 5, 3)).astype(np.uint8)
  return episode


def float64_discount_episode(num_steps, seed, terminal=True):
  return good(num_steps, seed, terminal=terminal, discount_dtype=np.float64)


def int_reward_episode(num_steps, seed, dtype=np.int64):
  episode = good(num_steps, seed)
  episode['reward'] = np.arange(num_steps, dtype=dtype) * 7 - 3
  return episode


def scalar_observation_episode(num_steps, seed):
  episode = good(num_steps, seed)
  episode['observation'] = np.arange(num_steps, dtype=np.float32) + 0.5
  return episode


def with_extra_field(episode):
  episode = dict(episode)
  num_steps = len(episode['is_first'])
  episode['extra'] = np.arange(num_steps, dtype=np.int32) + 100
  episode['extra_vec'] = np.ones((num_steps, 2), np.float64)
  return episode


VALID_CASES = {
    'flat_terminal': [good(4, 0)],
    'flat_truncated': [good(4, 1, terminal=False)],
    'single_step_terminal': [good(1, 2)],
    'single_step_truncated': [good(1, 3, terminal=False)],
    'single_steps_in_a_row': [good(1, 4), good(1, 5, terminal=False),
                              good(1, 6)],
    'terminal_then_truncated': [good(3, 7), good(2, 8, terminal=False),
                                good(1, 9)],
    'dmlab_like_nested': [dmlab_like_episode(3, 10),
                          dmlab_like_episode(1, 11, terminal=False),
                          dmlab_like_episode(2, 12)],
    'uint8_images': [image_episode(3, 13), image_episode(2, 14)],
    'float64_discount': [float64_discount_episode(3, 15),
                         float64_discount_episode(2, 16, terminal=False)],
    'int64_reward': [int_reward_episode(3, 17), int_reward_episode(2, 18)],
    'int32_reward': [int_reward_episode(4, 19, np.int32)],
    'scalar_observation': [scalar_observation_episode(3, 20)],
    'empty_episodes_between': [empty_like(good(2, 21)), good(2, 22),
                               empty_like(good(2, 23)),
                               empty_like(good(2, 24)), good(3, 25)],
    'extra_step_fields': [with_extra_field(good(3, 26)),
                          with_extra_field(good(1, 27))],
}


@pytest.mark.parametrize('episodes', list(VALID_CASES.values()),
                         ids=list(VALID_CASES))
def test_conversion_matches_numpy(episodes):
  assert_same_trajectories(convert(episodes), expected_trajectories(episodes))


def test_nested_leaves_are_the_steps_own_values():
  """Each leaf of trajectory i is step i's value, shaped as one step."""
  episodes = VALID_CASES['dmlab_like_nested']
  got = convert(episodes)
  flat_steps = [(e, t) for e in episodes for t in range(len(e['is_first']))]
  assert len(got) == len(flat_steps) == 6
  for traj, (episode, t) in zip(got, flat_steps):
    assert traj.observation['pixels'].shape == (6, 8, 3)
    assert traj.observation['pixels'].dtype == np.uint8
    assert traj.observation['last_action'].shape == ()
    assert traj.observation['last_reward'].shape == ()
    assert traj.action['move'].shape == (2,)
    assert traj.action['fire'].shape == ()
    np.testing.assert_array_equal(traj.observation['pixels'],
                                  episode['observation']['pixels'][t])
    assert traj.observation['last_action'] == (
        episode['observation']['last_action'][t])
    np.testing.assert_array_equal(traj.action['move'],
                                  episode['action']['move'][t])


@pytest.mark.parametrize(
    'episodes, step_types, next_step_types, discounts',
    [
        ([episode_with_flags([1], [1], [1])], [LAST], [LAST], [0.0]),
        ([episode_with_flags([1], [1], [0])], [LAST], [LAST], [None]),
        ([episode_with_flags([1, 0, 0], [0, 0, 1], [0, 0, 1])],
         [FIRST, MID, LAST], [MID, LAST, FIRST], [None, None, 0.0]),
        ([episode_with_flags([1, 0, 0], [0, 0, 1], [0, 0, 0])],
         [FIRST, MID, LAST], [MID, LAST, FIRST], [None, None, None]),
        ([episode_with_flags([1, 0], [0, 1], [0, 1]),
          episode_with_flags([1], [1], [0])],
         [FIRST, LAST, LAST], [LAST, FIRST, LAST], [None, 0.0, None]),
    ],
    ids=['single_terminal', 'single_truncated', 'three_terminal',
         'three_truncated', 'two_then_single'])
def test_step_types_and_discounts(episodes, step_types, next_step_types,
                                  discounts):
  """Explicit values: LAST->LAST single steps, discount 0 only at terminal."""
  got = convert(episodes)
  assert len(got) == len(step_types)
  all_discounts = np.concatenate([e['discount'] for e in episodes])
  assert [int(t.step_type) for t in got] == step_types
  assert [int(t.next_step_type) for t in got] == next_step_types
  for traj, discount, source in zip(got, discounts, all_discounts):
    assert traj.discount.dtype == np.float32
    want = np.float32(source) if discount is None else np.float32(discount)
    assert traj.discount == want


def test_float64_discount_becomes_float32_with_equal_values():
  episodes = [float64_discount_episode(3, 30, terminal=False)]
  episodes[0]['discount'] = np.array([0.25, 0.5, 0.75], np.float64)
  got = convert(episodes)
  assert len(got) == 3
  assert [t.discount.dtype for t in got] == [np.float32] * 3
  np.testing.assert_array_equal([t.discount for t in got],
                                np.float32([0.25, 0.5, 0.75]))


def test_episode_metadata_is_ignored():
  episodes = [good(2, 31), good(3, 32, terminal=False)]
  metadata = [{'episode_id': np.int64(i), 'agent': np.bytes_(b'a%d' % i)}
              for i in range(2)]
  got = convert(episodes, metadata=metadata)
  assert_same_trajectories(got, expected_trajectories(episodes))


def test_empty_dataset_yields_nothing():
  dataset = rlds_data.empty_rlds(good(2, 33))
  assert not list(rlds_reverb.convert_rlds_to_trajectories(dataset))


def test_only_empty_episodes_yield_nothing():
  dataset = rlds_data.as_rlds([empty_like(good(2, 34))] * 2)
  assert not list(rlds_reverb.convert_rlds_to_trajectories(dataset))


# ---------------------------------------------------------- policy info --


def extra_fields_info(current, following):
  """Extra step fields and the next step's values, nested."""
  return {
      'extra': current['extra'],
      'nested': {'vec': current['extra_vec'],
                 'next_observation': following['observation'],
                 'next_is_first': following['is_first']},
      'pair': (current['reward'], following['reward']),
  }


def action_info(current, following):
  del following
  return {'action': current['action']}


@pytest.mark.parametrize(
    'episodes, policy_info_fn',
    [
        (VALID_CASES['extra_step_fields'], extra_fields_info),
        ([with_extra_field(good(1, 40))], extra_fields_info),
        ([with_extra_field(good(2, 41)), with_extra_field(good(3, 42)),
          with_extra_field(good(1, 43, terminal=False))], extra_fields_info),
        ([with_extra_field(empty_like(good(2, 44))),
          with_extra_field(good(2, 45)),
          with_extra_field(empty_like(good(2, 46))),
          with_extra_field(good(2, 47))], extra_fields_info),
        (VALID_CASES['dmlab_like_nested'], action_info),
    ],
    ids=['two_episodes', 'single_step', 'three_episodes',
         'empty_episodes_between', 'nested_action'])
def test_policy_info_fn(episodes, policy_info_fn):
  got = convert(episodes, policy_info_fn)
  assert_same_trajectories(
      got, expected_trajectories(episodes, policy_info_fn))


# ------------------------------------------------------ invalid episodes --

TERMINAL_NOT_LAST = 'Terminal step must be the last step of an episode.'
MID_BEFORE_FIRST = 'Mid step should not be followed by a first step.'
LAST_BEFORE_NON_FIRST = (
    'Last step of an episode must be followed by a first step.')
NOT_FIRST = 'First step of an episode must have is_first set.'


def _later_episode(**flag_changes):
  """Two good episodes, then a 6-step one with `flag_changes` applied."""
  bad = good(6, 52)
  for name, (index, value) in flag_changes.items():
    bad[name] = bad[name].copy()
    bad[name][index] = value
  return [good(2, 50), good(3, 51), bad]


def _no_last(episode):
  episode = dict(episode)
  episode['is_last'] = np.zeros_like(episode['is_last'])
  episode['is_terminal'] = np.zeros_like(episode['is_terminal'])
  return episode


def _no_first(episode):
  episode = dict(episode)
  episode['is_first'] = np.zeros_like(episode['is_first'])
  return episode


INVALID_CASES = {
    # TF-Agents' three cases.
    'terminal_not_last': (
        [episode_with_flags([1, 0, 0], [0, 0, 0], [0, 0, 1])],
        TERMINAL_NOT_LAST, 0, 2),
    'mid_before_first_in_episode': (
        [episode_with_flags([1, 0, 1], [0, 0, 0], [0, 0, 0])],
        MID_BEFORE_FIRST, 0, 1),
    'last_before_mid': (
        [episode_with_flags([1, 0, 0], [0, 1, 0], [0, 1, 0])],
        LAST_BEFORE_NON_FIRST, 0, 1),
    # In a later episode, step 4.
    'terminal_not_last_episode_2': (
        _later_episode(is_terminal=(4, True)), TERMINAL_NOT_LAST, 2, 4),
    'mid_before_first_episode_2': (
        _later_episode(is_first=(5, True)), MID_BEFORE_FIRST, 2, 4),
    'last_before_mid_episode_2': (
        _later_episode(is_last=(4, True)), LAST_BEFORE_NON_FIRST, 2, 4),
    'first_not_set_episode_2_step_0': (
        _later_episode(is_first=(0, False)), NOT_FIRST, 2, 0),
    # Our own check.
    'first_not_set_first_episode': (
        [_no_first(good(3, 53))], NOT_FIRST, 0, 0),
    # Across an episode boundary.
    'mid_at_episode_end_then_first': (
        [_no_last(good(3, 54)), good(2, 55)], MID_BEFORE_FIRST, 0, 2),
    'last_episode_ends_mid': (
        [good(2, 56), _no_last(good(3, 57))], MID_BEFORE_FIRST, 1, 2),
    'episode_continues_previous_last': (
        [good(3, 58), _no_first(good(2, 59))], NOT_FIRST, 1, 0),
    'episode_continues_previous_mid': (
        [_no_last(good(3, 60)), _no_first(good(2, 61))],
        MID_BEFORE_FIRST, 0, 2),
    # Empty episodes count in the episode index.
    'after_empty_episodes': (
        [good(2, 62), empty_like(good(2, 63)),
         episode_with_flags([1, 0, 0], [1, 0, 1], [0, 0, 1])],
        LAST_BEFORE_NON_FIRST, 2, 0),
    'terminal_after_leading_empty': (
        [empty_like(good(2, 64)), empty_like(good(2, 65)),
         episode_with_flags([1, 0, 0, 0], [0, 0, 0, 1], [0, 1, 0, 1])],
        TERMINAL_NOT_LAST, 2, 1),
    # Several problems: the first step with a problem is reported.
    'first_of_several': (
        [episode_with_flags([1, 0, 0, 0], [0, 0, 1, 0], [0, 1, 1, 1])],
        TERMINAL_NOT_LAST, 0, 1),
}


def _step_info(current, following):
  return {'reward': current['reward'], 'next_first': following['is_first']}


@pytest.mark.parametrize('policy_info_fn', [None, _step_info],
                         ids=['no_policy_info', 'with_policy_info'])
@pytest.mark.parametrize('episodes, sentence, episode, step',
                         list(INVALID_CASES.values()), ids=list(INVALID_CASES))
def test_invalid_episodes_name_their_position(episodes, sentence, episode,
                                              step, policy_info_fn):
  """The same error whether or not a policy_info_fn is given."""
  dataset = rlds_reverb.convert_rlds_to_trajectories(
      rlds_data.as_rlds(episodes), policy_info_fn)  # Raises only when iterated.
  with pytest.raises(tf.errors.InvalidArgumentError) as err:
    list(dataset.as_numpy_iterator())
  assert f'{sentence} (episode {episode}, step {step})' in str(err.value)


def test_valid_episodes_before_an_invalid_one_are_converted():
  episodes = [good(2, 70), good(3, 71),
              episode_with_flags([1, 0], [0, 0], [1, 0])]
  iterator = rlds_reverb.convert_rlds_to_trajectories(
      rlds_data.as_rlds(episodes)).as_numpy_iterator()
  got = []
  with pytest.raises(tf.errors.InvalidArgumentError) as err:
    for element in iterator:
      got.append(element)
  assert f'{TERMINAL_NOT_LAST} (episode 2, step 0)' in str(err.value)
  assert_same_trajectories(got, expected_trajectories(episodes[:2]))


# ----------------------------------------------------- spec errors ----


def _steps_of(**fields):
  return tf.data.Dataset.from_tensors(
      {'steps': tf.data.Dataset.from_tensor_slices(fields)})


def _flat_fields(**overrides):
  fields = {
      'observation': np.zeros((2, 3), np.float32),
      'action': np.zeros(2, np.int64),
      'reward': np.zeros(2, np.float32),
      'discount': np.ones(2, np.float32),
      'is_first': np.array([True, False]),
      'is_last': np.array([False, True]),
      'is_terminal': np.array([False, True]),
  }
  fields.update(overrides)
  return fields


STEP_FEATURES = ['observation', 'action', 'reward', 'discount', 'is_first',
                 'is_last', 'is_terminal']

def _without(*names):
  return _steps_of(**{k: v for k, v in _flat_fields().items()
                      if k not in names})


def _invalid_step_spec(found):
  return (f'Invalid RLDS step spec. Features expected are {STEP_FEATURES}, '
          f'but found {found}')


# (dataset, message, notes): raised with and without strict.
SPEC_ERROR_CASES = {
    'no_steps': (
        tf.data.Dataset.from_tensors({'random': True}),
        'No dataset representing RLDS steps exist in the data.',
        ['Its elements hold random bool[].']),
    'steps_given_as_episodes': (
        tf.data.Dataset.from_tensor_slices(_flat_fields()),
        'No dataset representing RLDS steps exist in the data.',
        ['Its elements are RLDS steps (action int64[], discount float32[], '
         'is_first bool[], is_last bool[], is_terminal bool[], observation '
         "float32[3], reward float32[]), not episodes: pass a dataset of "
         "{'steps': Dataset of steps}."]),
    'episode_not_a_dict': (
        tf.data.Dataset.from_tensors(tf.constant([1, 2])),
        'No dataset representing RLDS steps exist in the data.',
        ["Each element is int32[2], not a dict with 'steps'."]),
    'invalid_step_spec': (
        tf.data.Dataset.from_tensors({'steps': tf.data.Dataset.from_tensors(
            {'random1': [True, True], 'random2': [False, False]})}),
        _invalid_step_spec(['random1', 'random2']),
        ['Missing step fields: observation, action, reward, discount, '
         'is_first, is_last, is_terminal.']),
    'missing_observation': (
        _without('observation', 'discount'),
        _invalid_step_spec(['action', 'reward', 'is_first', 'is_last',
                            'is_terminal']),
        ['Missing step fields: observation, discount.']),
    'steps_not_a_dataset': (
        tf.data.Dataset.from_tensors({'steps': tf.constant([1, 2])}),
        "RLDS episode field 'steps' must be a tf.data.Dataset of steps, got "
        'int32[2].', []),
    'ragged_nested_observation': (
        _steps_of(**_flat_fields(observation={
            'pixels': np.zeros((2, 2, 2, 3), np.uint8),
            'tokens': tf.ragged.constant([[1], [2, 3]])})),
        "RLDS step field 'steps/observation/tokens' must be a dense tensor, "
        'got ragged int32[?].',
        []),
    'ragged_action': (
        _steps_of(**_flat_fields(action=tf.ragged.constant([[1.0], []]))),
        "RLDS step field 'steps/action' must be a dense tensor, got "
        'ragged float32[?].', []),
    'ragged_reward_in_tuple': (
        _steps_of(**_flat_fields(reward=(np.zeros(2, np.float32),
                                         tf.ragged.constant([[1], []])))),
        "RLDS step field 'steps/reward/1' must be a dense tensor, got "
        'ragged int32[?].', []),
}

# (dataset, the field and what it got): the flags and the discount must be
# scalars (strict=True) or hold one element (by default).
SCALAR_ERROR_CASES = {
    'is_first_int': (
        _steps_of(**_flat_fields(is_first=np.array([1, 0], np.int64))),
        'is_first', 'a bool',
        'int64[]'),
    'is_last_two_elements': (
        _steps_of(**_flat_fields(is_last=np.array([[False, False],
                                                   [True, True]]))),
        'is_last', 'a bool',
        'bool[2]'),
    'is_terminal_float': (
        _steps_of(**_flat_fields(is_terminal=np.array([0.0, 1.0], np.float32))),
        'is_terminal', 'a bool',
        'float32[]'),
    'discount_string': (
        _steps_of(**_flat_fields(discount=np.array([b'a', b'b']))),
        'discount', 'a numeric',
        'string[]'),
    'discount_bool': (
        _steps_of(**_flat_fields(discount=np.array([True, True]))),
        'discount', 'a numeric',
        'bool[]'),
    'discount_vector': (
        _steps_of(**_flat_fields(discount=np.ones((2, 2), np.float32))),
        'discount', 'a numeric',
        'float32[2]'),
}

# (dataset, message, notes): refused with strict=True only, TF-Agents' way.
STRICT_ERROR_CASES = {
    'missing_discount': (
        _without('discount'),
        _invalid_step_spec(['observation', 'action', 'reward', 'is_first',
                            'is_last', 'is_terminal']),
        ['Missing step fields: discount.']),
    'missing_reward_and_discount': (
        _without('reward', 'discount'),
        _invalid_step_spec(['observation', 'action', 'is_first', 'is_last',
                            'is_terminal']),
        ['Missing step fields: reward, discount.']),
    'discount_of_shape_1': (
        _steps_of(**_flat_fields(discount=np.ones((2, 1), np.float32))),
        "RLDS step field 'steps/discount' must be a numeric scalar, got "
        'float32[1].', []),
    'is_last_of_shape_1': (
        _steps_of(**_flat_fields(is_last=np.array([[False], [True]]))),
        "RLDS step field 'steps/is_last' must be a bool scalar, got "
        'bool[1].', []),
}

SPEC_FUNCTIONS = [rlds_reverb.convert_rlds_to_trajectories,
                  rlds_reverb.create_trajectory_data_spec]


def assert_spec_error(error, message, notes):
  assert str(error) == message
  assert getattr(error, '__notes__', []) == notes
  assert isinstance(error, rlds_reverb.StepSpecError)
  assert isinstance(error, rlds_reverb.RldsReverbError)


@pytest.mark.parametrize('strict', [False, True], ids=['default', 'strict'])
@pytest.mark.parametrize('function', SPEC_FUNCTIONS, ids=['convert', 'spec'])
@pytest.mark.parametrize('dataset, message, notes',
                         list(SPEC_ERROR_CASES.values()),
                         ids=list(SPEC_ERROR_CASES))
def test_spec_errors_raised_at_call(dataset, message, notes, function, strict):
  with pytest.raises(ValueError) as err:
    function(dataset, strict=strict)
  assert_spec_error(err.value, message, notes)


@pytest.mark.parametrize('strict', [False, True], ids=['default', 'strict'])
@pytest.mark.parametrize('dataset, field, kind, got',
                         list(SCALAR_ERROR_CASES.values()),
                         ids=list(SCALAR_ERROR_CASES))
def test_flags_and_discount_must_be_scalars(dataset, field, kind, got, strict):
  with pytest.raises(ValueError) as err:
    rlds_reverb.create_trajectory_data_spec(dataset, strict=strict)
  one_element = '' if strict else ' (or hold one element)'
  assert_spec_error(
      err.value, f"RLDS step field 'steps/{field}' must be {kind} "
      f'scalar{one_element}, got {got}.', [])


@pytest.mark.parametrize('function', SPEC_FUNCTIONS, ids=['convert', 'spec'])
@pytest.mark.parametrize('dataset, message, notes',
                         list(STRICT_ERROR_CASES.values()),
                         ids=list(STRICT_ERROR_CASES))
def test_strict_refuses_what_tf_agents_refuses(dataset, message, notes,
                                               function):
  with pytest.raises(ValueError) as err:
    function(dataset, strict=True)
  assert_spec_error(err.value, message, notes)
  function(dataset)  # Accepted by default.
