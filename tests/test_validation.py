"""rlds_reverb.validation: every problem, where the converter would fail."""

import numpy as np
import pytest
import tensorflow as tf

import rlds_reverb
from rlds_reverb import validation
from tests import rlds_data


def _episode(num_steps, seed=0, **flag_overrides):
  """A well-formed episode, then flags set: {'is_first': {step: value}}."""
  episode = rlds_data.flat_episode(num_steps, seed)
  for name, steps in flag_overrides.items():
    for step, value in steps.items():
      episode[name][step] = value
  return episode


# (name, episodes, expected [(episode, step, kind)]).
CASES = [
    ('clean', [_episode(3), _episode(1), _episode(4)], []),
    ('terminal_not_last', [_episode(4, is_terminal={1: True})],
     [(0, 1, 'terminal_not_last')]),
    ('episode_not_first', [_episode(3), _episode(3, is_first={0: False})],
     [(1, 0, 'episode_not_first')]),
    ('first_inside_episode', [_episode(4, is_first={2: True})],
     [(0, 1, 'mid_before_first')]),
    ('last_inside_episode', [_episode(4, is_last={1: True})],
     [(0, 1, 'last_before_non_first')]),
    ('no_last_step', [_episode(3, is_last={2: False}, is_terminal={2: False})],
     [(0, 2, 'mid_before_first')]),
    ('every_problem_of_every_episode',
     [_episode(5, is_terminal={1: True, 2: True}), _episode(2),
      _episode(3, is_first={0: False}, is_last={0: True})],
     [(0, 1, 'terminal_not_last'), (0, 2, 'terminal_not_last'),
      (2, 0, 'episode_not_first')]),
]


@pytest.mark.parametrize('name,episodes,expected', CASES,
                         ids=[case[0] for case in CASES])
def test_problems(name, episodes, expected):
  del name
  report = validation.validate(rlds_data.as_rlds(episodes))
  assert [(p.episode, p.step, p.kind) for p in report.problems] == expected
  assert report.episodes == len(episodes)
  assert report.steps == sum(len(e['reward']) for e in episodes)
  assert report.malformed_episodes == sorted({e for e, _, _ in expected})


@pytest.mark.parametrize('name,episodes,expected',
                         [case for case in CASES if case[2]],
                         ids=[case[0] for case in CASES if case[2]])
def test_converter_fails_at_the_first_problem(name, episodes, expected):
  """validate and convert agree: same sentence, same position."""
  del name
  report = validation.validate(rlds_data.as_rlds(episodes))
  first = report.problems[0]
  assert (first.episode, first.step, first.kind) == expected[0]
  with pytest.raises(tf.errors.InvalidArgumentError) as raised:
    list(rlds_reverb.convert_rlds_to_trajectories(rlds_data.as_rlds(episodes)))
  assert (f'{first.message} (episode {first.episode}, step {first.step})'
          in raised.value.message)


def test_messages_are_the_converters_sentences():
  report = validation.validate(rlds_data.as_rlds(
      [_episode(4, is_terminal={1: True})]))
  assert report.problems[0].message == (
      'Terminal step must be the last step of an episode.')


def test_empty_episodes_are_listed_not_problems():
  episodes = [_episode(2), _episode(0), _episode(3), _episode(0)]
  report = validation.validate(rlds_data.as_rlds(episodes))
  assert report.problems == []
  assert report.empty_episodes == [1, 3]
  assert (report.episodes, report.steps) == (4, 5)


def test_metadata_flags():
  episodes = [_episode(2), _episode(2), _episode(2)]
  metadata = [{'invalid': np.bool_(flag)} for flag in (False, True, False)]
  data = rlds_data.as_rlds(episodes, metadata)
  assert validation.invalid_flag_field(data.element_spec) == 'invalid'
  assert validation.validate(data).flagged_invalid == [1]
  assert validation.episode_flags(data).tolist() == [False, True, False]


def test_invalid_flag_field_needs_a_bool_scalar():
  episodes = [_episode(2)]
  as_int = rlds_data.as_rlds(episodes, [{'is_invalid': np.int64(1)}])
  as_bool = rlds_data.as_rlds(episodes, [{'is_invalid': np.bool_(True)}])
  assert validation.invalid_flag_field(as_int.element_spec) is None
  assert validation.invalid_flag_field(as_bool.element_spec) == 'is_invalid'
  assert validation.episode_flags(
      rlds_data.as_rlds(episodes)).tolist() == [False]


def test_without_episodes_keeps_order_of_the_rest():
  episodes = [_episode(n) for n in (1, 2, 3, 4)]
  kept = validation.without_episodes(rlds_data.as_rlds(episodes), [0, 2])
  lengths = [int(e['steps'].cardinality()) for e in kept]
  assert lengths == [2, 4]
  assert validation.without_episodes(rlds_data.as_rlds(episodes), []) is not None


def test_as_dict_is_the_json_shape():
  report = validation.validate(rlds_data.as_rlds(
      [_episode(3, is_terminal={0: True})]))
  assert report.as_dict() == {
      'episodes': 1, 'steps': 3,
      'problems': [{'episode': 0, 'step': 0, 'kind': 'terminal_not_last',
                    'message': 'Terminal step must be the last step of an '
                               'episode.'}],
      'empty_episodes': [], 'flagged_invalid': [], 'notes': []}


def test_bad_step_spec_raises_before_reading():
  data = tf.data.Dataset.from_tensors({'not_steps': tf.constant(1)})
  with pytest.raises(rlds_reverb.StepSpecError,
                     match='No dataset representing RLDS steps'):
    validation.validate(data)


@pytest.mark.parametrize('name,episodes,expected', CASES,
                         ids=[case[0] for case in CASES])
def test_one_numpy_episode_has_the_problems_validate_finds(name, episodes,
                                                           expected):
  """What a Beam worker checks, one episode at a time, is what validate says."""
  del name, expected
  problems = [problem for index, episode in enumerate(episodes)
              for problem in validation.episode_problems(index, episode)]
  assert problems == validation.validate(rlds_data.as_rlds(episodes)).problems
  assert validation.episode_problems(7, rlds_data.flat_episode(0, 1)) == []


FLAG_CASES = [  # (metadata, flagged) as `validate` reads them.
    ({'invalid': np.bool_(True)}, True),
    ({'is_invalid': True}, True),
    ({'invalid': np.bool_(False), 'is_invalid': True}, False),
    ({'invalid': np.int64(1), 'is_invalid': np.bool_(True)}, True),
    ({'invalid': np.array([True])}, False),
    ({}, False),
]


@pytest.mark.parametrize('metadata, flagged', FLAG_CASES)
def test_flagged_invalid_numpy_episode(metadata, flagged):
  episode = {'steps': rlds_data.flat_episode(2, 0), **metadata}
  assert validation.is_flagged_invalid(episode) == flagged
  if metadata:
    data = rlds_data.as_rlds([episode['steps']], [metadata])
    assert validation.validate(data).flagged_invalid == ([0] if flagged else [])
