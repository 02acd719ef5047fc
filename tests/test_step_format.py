"""Steps stored otherwise than TF-Agents expects: defaults and one-element fields.

Each case stores episodes as a real catalog dataset does (no `discount`, as 13
Open X-Embodiment sets; neither `discount` nor `reward`, as `mt_opt/rlds`;
`discount` and `reward` of shape (1,), as `rlu_rwrl`; flags of shape (1,)).
The reference is the same episodes written out explicitly (discount 1.0,
reward 0.0, scalars), which TF-Agents' own module converts and its observers
write: ours on the stored form must give exactly that.
"""

import copy

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.replay_buffers import reverb_utils
from tf_agents.replay_buffers import rlds_to_reverb as tfa_rlds

import rlds_reverb
from rlds_reverb import stats
from rlds_reverb import validation
from tests import reverb_tables
from tests import rlds_data
from tests.reverb_tables import client_of
from tests.reverb_tables import drain
from tests.reverb_tables import same_items
from tests.tfa_reference import assert_same_trajectories
from tests.tfa_reference import episodes_of
from tests.tfa_reference import observe_all
from tests.tfa_reference import signature_of

DISCOUNT_NOTE = ('steps/discount is missing: every discount is 1.0 (0 on a '
                 'terminal last step).')
REWARD_NOTE = 'steps/reward is missing: every reward is 0.0 (float32).'


def shape_1_note(field):
  return f'steps/{field} has shape [1]: read as the scalar it holds.'


def without(*names):
  def stored(episode):
    return {k: v for k, v in episode.items() if k not in names}
  return stored


def with_axis(*names):
  def stored(episode):
    return {k: v[:, np.newaxis] if k in names else v
            for k, v in episode.items()}
  return stored


def defaults_written_out(episode):
  """What the stored forms above mean, as TF-Agents reads it."""
  explicit = dict(episode)
  explicit['discount'] = np.ones(len(episode['is_first']), np.float32)
  return explicit


def no_reward_written_out(episode):
  explicit = defaults_written_out(episode)
  explicit['reward'] = np.zeros(len(episode['is_first']), np.float32)
  return explicit


# name: (stored form, the explicit form it means, notes)
CASES = {
    'no_discount': (without('discount'), defaults_written_out,
                    [DISCOUNT_NOTE]),
    'no_discount_no_reward': (without('discount', 'reward'),
                              no_reward_written_out,
                              [DISCOUNT_NOTE, REWARD_NOTE]),
    'discount_of_shape_1': (with_axis('discount'), dict,
                            [shape_1_note('discount')]),
    'rwrl_discount_and_reward_of_shape_1': (
        with_axis('discount', 'reward'), with_axis('reward'),
        [shape_1_note('discount')]),
    'flags_of_shape_1': (
        with_axis('is_first', 'is_last', 'is_terminal'), dict,
        [shape_1_note(f) for f in ('is_first', 'is_last', 'is_terminal')]),
}


@pytest.fixture(params=sorted(CASES), scope='module')
def case(request):
  """(stored dataset, explicit dataset, notes) of random episodes whose
  discounts are not all 1, so that a default cannot pass by chance."""
  stored_form, explicit_form, notes = CASES[request.param]
  episodes = episodes_of([3, 1, 4, 2, 5], seed=7)
  stored = rlds_data.as_rlds([stored_form(e) for e in episodes])
  explicit = rlds_data.as_rlds([explicit_form(e) for e in episodes])
  return stored, explicit, notes


def test_spec_is_that_of_the_explicit_data(case):
  stored, explicit, notes = case
  assert (rlds_reverb.create_trajectory_data_spec(stored) ==
          tfa_rlds.create_trajectory_data_spec(explicit))
  assert rlds_reverb.specs.step_format(stored).notes() == notes


def test_conversion_equals_tf_agents_on_the_explicit_data(case):
  stored, explicit, _ = case
  ours = list(rlds_reverb.convert_rlds_to_trajectories(
      stored).as_numpy_iterator())
  theirs = list(tfa_rlds.convert_rlds_to_trajectories(
      explicit).as_numpy_iterator())
  assert_same_trajectories(ours, theirs)


def policy_info(current, following):
  return {'discount': current['discount'],
          'next_is_first': following['is_first']}


def test_policy_info_fn_sees_the_steps_as_converted(case):
  stored, explicit, _ = case
  ours = list(rlds_reverb.convert_rlds_to_trajectories(
      stored, policy_info).as_numpy_iterator())
  expected = list(rlds_reverb.convert_rlds_to_trajectories(
      explicit, policy_info).as_numpy_iterator())
  assert_same_trajectories(ours, expected)


def test_push_writes_what_tf_agents_observers_write(make_server, case):
  stored, explicit, _ = case
  server = make_server([reverb_tables.fifo_table(name, signature_of(explicit))
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  observe_all(tfa_rlds.convert_rlds_to_trajectories(explicit), [
      reverb_utils.ReverbAddTrajectoryObserver(client, 'tfa', 3,
                                               pad_end_of_episodes=True)])
  result = rlds_reverb.push(stored, client, 'ours', sequence_length=3,
                            end_of_episode='pad')
  expected = drain(server, 'tfa')
  assert expected and result.items == len(expected)
  assert same_items(expected, drain(server, 'ours'))
  assert list(result.notes) == rlds_reverb.specs.step_format(stored).notes()


def test_nstep_transitions_equal_those_of_the_explicit_data(case):
  stored, explicit, _ = case
  ours = list(rlds_reverb.convert_rlds_to_nstep_transitions(
      stored, n=2, discount=0.9).as_numpy_iterator())
  expected = list(rlds_reverb.convert_rlds_to_nstep_transitions(
      explicit, n=2, discount=0.9).as_numpy_iterator())
  assert len(ours) == len(expected) > 0
  for got, want in zip(ours, expected):
    tf.nest.map_structure(np.testing.assert_array_equal, got, want)


def test_validation_and_statistics_read_the_stored_form(case):
  stored, explicit, notes = case
  report = validation.validate(stored)
  assert report.notes == notes and report.as_dict()['notes'] == notes
  assert (report.episodes, report.steps, report.problems) == (5, 15, [])
  ours, theirs = stats.episode_stats(stored), stats.episode_stats(explicit)
  np.testing.assert_array_equal(ours.lengths, theirs.lengths)
  np.testing.assert_allclose(ours.returns, theirs.returns)


def test_malformed_episodes_are_found_in_the_stored_form():
  """Flags of shape (1,) are checked as the scalars they hold."""
  episodes = episodes_of([3, 2], seed=3)
  episodes[1] = copy.deepcopy(episodes[1])
  episodes[1]['is_terminal'][0] = True  # A terminal step that is not last.
  stored = rlds_data.as_rlds(
      [with_axis('is_first', 'is_last', 'is_terminal')(e) for e in episodes])
  problems = validation.validate(stored).problems
  assert [(p.episode, p.step, p.kind) for p in problems] == [
      (1, 0, 'terminal_not_last')]
  with pytest.raises(tf.errors.InvalidArgumentError,
                     match=r'Terminal step .* \(episode 1, step 0\)'):
    list(rlds_reverb.convert_rlds_to_trajectories(stored))


def test_empty_dataset_of_the_stored_form_converts_to_nothing():
  stored = rlds_data.empty_rlds(without('discount')(rlds_data.flat_episode(2, 0)))
  assert list(rlds_reverb.convert_rlds_to_trajectories(stored)) == []
  assert validation.validate(stored).episodes == 0
