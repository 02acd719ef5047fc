"""rlds_reverb.validation: every problem, where the converter would fail,
and the non-finite values of each float field."""

import dataclasses
import json

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_datasets as tfds
import tree

import rlds_reverb
from rlds_reverb import validation
from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.sources import whole_reads
from tests import export_data
from tests import reverb_tables
from tests import rlds_data
from tests import rlds_dirs
from tests.cli_runs import run_cli_here


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
      'empty_episodes': [], 'flagged_invalid': [], 'notes': [],
      'nonfinite': []}


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


# --- Non-finite values: counted by field, not problems. ----------------------

NAN, INF = float('nan'), float('inf')


def _nested(lengths, changes):
  """Nested episodes (`export_data.nested_episode`) of `lengths`, then values
  set: (episode, field path, index in the field's [T, ...] array, value)."""
  episodes = [export_data.nested_episode(index, max(length, 1))
              for index, length in enumerate(lengths)]
  for episode, length in zip(episodes, lengths, strict=True):
    episode['steps'] = tree.map_structure(lambda x, n=length: x[:n],
                                          episode['steps'])
  for episode, path, where, value in changes:
    node = episodes[episode]['steps']
    for key in path.split('/'):
      node = node[key]
    node[where] = value
  return episodes


def _tfds_dir(root, episodes) -> str:
  """`episodes` written by TFDS itself (it takes an empty one), in order."""
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name='nested_rlds', version='1.0.0', features=rlds_dirs.features(),
      split_datasets={'train': list(enumerate(episodes))},
      data_dir=str(root), disable_shuffling=True)
  return str(builder.data_dir)


# (name, episode lengths, changes, expected [(field, NaN, +inf, -inf,
# episodes, first episode, first step)]).
NONFINITE_CASES = [
    ('all_finite', (3, 3, 3), [], []),
    ('a_nan_in_one_element', (3, 3, 3),
     [(1, 'observation/position', (2, 1), NAN)],
     [('observation/position', 1, 0, 0, 1, 1, 2)]),
    ('infinities_of_both_signs_over_episodes', (3, 3, 3, 3),
     [(2, 'reward', 0, INF), (3, 'reward', 1, -INF), (3, 'reward', 2, -INF)],
     [('reward', 0, 1, 2, 2, 2, 0)]),
    ('the_first_is_the_earliest_step_of_the_earliest_episode', (3, 3, 3),
     [(1, 'action/move', (0, 1), NAN), (0, 'action/move', (2, 0), INF),
      (0, 'action/move', (2, 1), INF)],
     [('action/move', 1, 2, 0, 2, 0, 2)]),
    ('several_fields_by_path', (3, 3, 3, 3),
     [(3, 'policy_info/log_probability', 0, -INF), (0, 'discount', 1, NAN)],
     [('discount', 1, 0, 0, 1, 0, 1),
      ('policy_info/log_probability', 0, 0, 1, 1, 3, 0)]),
    ('after_an_empty_episode', (3, 0, 2),
     [(2, 'observation/position', (1, 0), NAN)],
     [('observation/position', 1, 0, 0, 1, 2, 1)]),
]


@pytest.mark.parametrize('name, lengths, changes, expected', NONFINITE_CASES,
                         ids=[case[0] for case in NONFINITE_CASES])
def test_nonfinite_values_are_counted_by_field(name, lengths, changes,
                                               expected, tmp_path):
  """Both readings: a TFDS directory read whole, and steps as a Dataset."""
  del name
  episodes = _nested(lengths, changes)
  written = rlds_reverb.load(_tfds_dir(tmp_path, episodes))
  in_memory = rlds_data.as_rlds([episode['steps'] for episode in episodes])
  assert episodes_lib.is_whole(whole_reads.whole(written, keep_encoded=True))
  assert not episodes_lib.is_whole(whole_reads.whole(in_memory))
  for data in (written, in_memory):
    report = validation.validate(data)
    assert [dataclasses.astuple(found) for found in report.nonfinite] == (
        expected)
    assert report.problems == []
    assert report.empty_episodes == [i for i, n in enumerate(lengths) if not n]


def _with_unknown_rank(episode):
  """A float step field whose shape tf.data does not know: [NaN] each step."""
  episode = dict(episode)
  episode['steps'] = episode['steps'].map(_unknown_rank_field)
  return episode


def _unknown_rank_field(step):
  value = tf.numpy_function(lambda _: np.array([NAN], np.float32),
                            [step['reward']], tf.float32)
  return {**step, 'extra': value}


def test_a_float_field_of_unknown_rank_is_counted():
  """Steps as a Dataset, an empty episode among them: the empty one gives
  a value of every field, whatever its shape."""
  data = rlds_data.as_rlds([_episode(3), _episode(0), _episode(2)]).map(
      _with_unknown_rank)
  assert data.element_spec['steps'].element_spec['extra'].shape.rank is None
  report = validation.validate(data)
  assert [dataclasses.astuple(found) for found in report.nonfinite] == [
      ('extra', 5, 0, 0, 2, 0, 0)]
  assert report.empty_episodes == [1]


# (NonFinite, its message).
NONFINITE_MESSAGES = [
    (validation.NonFinite('observation/position', 1, 0, 0, 1, 1, 2),
     'observation/position: 1 non-finite value (1 NaN) in 1 episode, the '
     'first at episode 1, step 2'),
    (validation.NonFinite('reward', 0, 1, 2, 2, 2, 0),
     'reward: 3 non-finite values (1 +inf, 2 -inf) in 2 episodes, the first '
     'at episode 2, step 0'),
    (validation.NonFinite('action', 12_000, 0, 1, 310, 0, 7),
     'action: 12,001 non-finite values (12,000 NaN, 1 -inf) in 310 episodes, '
     'the first at episode 0, step 7'),
]


@pytest.mark.parametrize('found, message', NONFINITE_MESSAGES)
def test_nonfinite_messages(found, message):
  assert found.message == message
  assert found.as_dict()['count'] == found.count


def test_nonfinite_values_are_in_the_json_shape():
  episode = _episode(3)
  episode['observation'][1] = [NAN, INF, 0.5]
  report = validation.validate(rlds_data.as_rlds([_episode(2), episode]))
  assert report.as_dict()['nonfinite'] == [
      {'field': 'observation', 'nan': 1, 'posinf': 1, 'neginf': 0,
       'episodes': 1, 'episode': 1, 'step': 1, 'count': 2}]


def test_an_overflowing_sum_is_not_a_nonfinite_value():
  """The first look sums each field; a sum past float32's range is not an
  infinity in the data."""
  episode = _episode(3)
  episode['observation'][:] = np.finfo(np.float32).max
  assert validation.validate(rlds_data.as_rlds([episode])).nonfinite == []


def test_nonfinite_values_do_not_fail_a_push(make_server):
  """Not problems: push writes them as they are (its read-ahead is
  `validate`)."""
  episode = _episode(3)
  episode['observation'][1] = [NAN, -INF, 0.5]
  data = rlds_data.as_rlds([episode])
  server = make_server([reverb_tables.fifo_table(
      'replay', reverb_tables.signature_for(data))])
  result = rlds_reverb.push(data, reverb_tables.address(server), 'replay')
  assert result.items == 2
  observations = [leaves[1] for leaves in reverb_tables.drain_flat(
      server, 'replay')]  # Oldest first; leaf 1 is the observation.
  np.testing.assert_array_equal(  # NaN equals NaN here.
      np.stack(observations), np.stack([episode['observation'][[0, 1]],
                                        episode['observation'][[1, 2]]]))


# --- `rlds-reverb validate`: notes, or failures with --strict. ---------------

NONFINITE_CHANGES = [(1, 'observation/position', (1, 0), NAN),
                     (1, 'observation/position', (2, 2), INF),
                     (3, 'reward', 1, -INF)]
NOTED = [
    'observation/position: 2 non-finite values (1 NaN, 1 +inf) in 1 episode, '
    'the first at episode 1, step 1',
    'reward: 1 non-finite value (1 -inf) in 1 episode, the first at episode '
    '3, step 1']
TERMINAL_NOT_LAST = ('episode 0, step 0: terminal_not_last: Terminal step '
                     'must be the last step of an episode.')


@pytest.fixture(scope='module')
def nonfinite_dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp('nonfinite')
  return {
      'nonfinite': _tfds_dir(root / 'nonfinite', _nested(
          (3, 3, 3, 3), NONFINITE_CHANGES)),
      'and_malformed': _tfds_dir(root / 'and_malformed', _nested(
          (3, 3, 3, 3), NONFINITE_CHANGES[2:] + [(0, 'is_terminal', 0, True)])),
  }


# (name, dataset, options, exit status, stdout lines).
VALIDATE_CASES = [
    ('noted', 'nonfinite', [], 0,
     [f'note: {line}' for line in NOTED] + [
         '4 episodes, 12 steps: no problems; 3 non-finite values in 2 fields '
         'noted (--strict fails on them)']),
    ('strict', 'nonfinite', ['--strict'], 1,
     NOTED + ['4 episodes, 12 steps: 3 non-finite values in 2 fields']),
    ('noted_beside_a_problem', 'and_malformed', [], 1,
     [f'note: {NOTED[1]}', TERMINAL_NOT_LAST,
      '4 episodes, 12 steps: 1 problem in 1 episode; 1 non-finite value in '
      '1 field noted (--strict fails on them)']),
    ('strict_beside_a_problem', 'and_malformed', ['--strict'], 1,
     [NOTED[1], TERMINAL_NOT_LAST,
      '4 episodes, 12 steps: 1 problem in 1 episode; 1 non-finite value in '
      '1 field']),
]


@pytest.mark.parametrize('name, dataset, options, status, lines',
                         VALIDATE_CASES, ids=[c[0] for c in VALIDATE_CASES])
def test_validate_command_reports_nonfinite_values(nonfinite_dirs, name,
                                                   dataset, options, status,
                                                   lines):
  del name
  result = run_cli_here('validate', '--dataset', nonfinite_dirs[dataset],
                        *options)
  assert (result.returncode, result.stdout.splitlines()) == (status, lines), (
      result.stderr)


@pytest.mark.parametrize('options, status', [([], 0), (['--strict'], 1)])
def test_validate_json_lists_nonfinite_values(nonfinite_dirs, options, status):
  result = run_cli_here('validate', '--dataset', nonfinite_dirs['nonfinite'],
                        '--json', *options)
  assert result.returncode == status, result.stderr
  assert json.loads(result.stdout)['nonfinite'] == [
      {'field': 'observation/position', 'nan': 1, 'posinf': 1, 'neginf': 0,
       'episodes': 1, 'episode': 1, 'step': 1, 'count': 2},
      {'field': 'reward', 'nan': 0, 'posinf': 0, 'neginf': 1, 'episodes': 1,
       'episode': 3, 'step': 1, 'count': 1}]
