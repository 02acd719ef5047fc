"""n-step transitions against a direct numpy computation, and their push."""

import numpy as np
import pytest
import tensorflow as tf

import rlds_reverb
from tests import reverb_tables
from tests import rlds_data
from tests.nstep_data import episodes_with_both_endings
from tests.nstep_data import expected_transitions

GAMMA = 0.9


@pytest.mark.parametrize('n', [1, 3, 5])
@pytest.mark.parametrize('seed', [0, 1])
def test_matches_numpy_at_terminal_and_truncated_ends(n, seed):
  episodes = episodes_with_both_endings(seed)
  got = list(rlds_reverb.convert_rlds_to_nstep_transitions(
      rlds_data.as_rlds(episodes), n, GAMMA).as_numpy_iterator())
  want = expected_transitions(episodes, n, GAMMA)
  assert len(got) == len(want) == sum(len(e['reward']) - 1 for e in episodes)
  for g, w in zip(got, want):
    np.testing.assert_array_equal(g.observation, w['observation'])
    np.testing.assert_array_equal(g.action, w['action'])
    np.testing.assert_allclose(g.reward, w['reward'], rtol=1e-5)
    np.testing.assert_allclose(g.discount, w['discount'], rtol=1e-5)
    np.testing.assert_array_equal(g.next_observation, w['next_observation'])


def test_terminal_gives_zero_bootstrap_truncation_does_not():
  terminal = rlds_data.flat_episode(3, 0, terminal=True)
  truncated = rlds_data.flat_episode(3, 1, terminal=False)
  for episode in (terminal, truncated):
    episode['discount'][:] = 1.0
  got = list(rlds_reverb.convert_rlds_to_nstep_transitions(
      rlds_data.as_rlds([terminal, truncated]), 1, GAMMA).as_numpy_iterator())
  assert [float(t.discount) for t in got] == [1.0, 0.0, 1.0, 1.0]


def test_spec_matches_data_and_float64_rewards_stay_float64():
  episode = rlds_data.flat_episode(4, 0)
  episode['reward'] = episode['reward'].astype(np.float64)
  data = rlds_data.as_rlds([episode])
  spec = rlds_reverb.create_nstep_transition_spec(data)
  converted = rlds_reverb.convert_rlds_to_nstep_transitions(data, 2, GAMMA)
  assert spec.reward.dtype == tf.float64
  assert spec.discount.dtype == tf.float32
  assert tf.nest.map_structure(lambda s: (s.dtype, s.shape), spec) == (
      tf.nest.map_structure(lambda s: (s.dtype, s.shape),
                            converted.element_spec))


def test_integer_rewards_become_float32_returns():
  episode = rlds_data.flat_episode(4, 0)
  episode['reward'] = np.array([1, 2, 3, 4], np.int32)
  episode['discount'][:] = 1.0
  got = list(rlds_reverb.convert_rlds_to_nstep_transitions(
      rlds_data.as_rlds([episode]), 2, 0.5).as_numpy_iterator())
  assert [g.reward.dtype for g in got] == [np.float32] * 3
  assert [float(g.reward) for g in got] == [2.0, 3.5, 3.0]


@pytest.mark.parametrize('n, discount, message', [
    (0, 0.9, 'n must be >= 1, got 0.'),
    (2, 1.5, 'discount must be in [0, 1], got 1.5.'),
])
def test_bad_arguments(n, discount, message):
  data = rlds_data.as_rlds([rlds_data.flat_episode(3, 0)])
  with pytest.raises(ValueError) as error:
    rlds_reverb.convert_rlds_to_nstep_transitions(data, n, discount)
  assert str(error.value) == message


def test_malformed_episode_reports_position():
  bad = rlds_data.flat_episode(4, 1)
  bad['is_terminal'][1] = True
  data = rlds_data.as_rlds([rlds_data.flat_episode(3, 0), bad])
  with pytest.raises(tf.errors.InvalidArgumentError) as error:
    list(rlds_reverb.convert_rlds_to_nstep_transitions(data, 3, GAMMA))
  assert ('Terminal step must be the last step of an episode. '
          '(episode 1, step 1)') in str(error.value)


@pytest.mark.parametrize('n', [1, 3])
def test_push_writes_one_item_per_transition(make_server, n):
  episodes = episodes_with_both_endings(3)
  data = rlds_data.as_rlds(episodes)
  spec = rlds_reverb.create_nstep_transition_spec(data)
  server = make_server([reverb_tables.fifo_table('nstep', signature=spec)])
  result = rlds_reverb.push_nstep_transitions(
      data, reverb_tables.address(server), 'nstep', n=n, discount=GAMMA,
      priority=2.5)
  want = expected_transitions(episodes, n, GAMMA)
  assert (result.episodes, result.trajectories, result.items) == (
      len(episodes), len(want), len(want))
  items = reverb_tables.drain(server, 'nstep')
  assert len(items) == len(want)
  for priority, data_item in items:
    assert priority == 2.5
  got = sorted(items, key=lambda item: item[1].observation.tobytes())
  want = sorted(want, key=lambda w: w['observation'].tobytes())
  for (_, g), w in zip(got, want):
    np.testing.assert_array_equal(g.observation, w['observation'])
    np.testing.assert_array_equal(g.next_observation, w['next_observation'])
    np.testing.assert_allclose(g.reward, w['reward'], rtol=1e-5)
    np.testing.assert_allclose(g.discount, w['discount'], rtol=1e-5)


def test_push_refuses_a_table_signed_for_trajectories(make_server):
  data = rlds_data.as_rlds([rlds_data.flat_episode(3, 0)])
  signature = rlds_reverb.specs.table_signature(
      rlds_reverb.create_trajectory_data_spec(data))
  server = make_server([reverb_tables.fifo_table('t', signature=signature)])
  with pytest.raises(rlds_reverb.SignatureMismatchError):
    rlds_reverb.push_nstep_transitions(
        data, reverb_tables.address(server), 't', n=2, discount=GAMMA)
  client = rlds_reverb.write.server.connect(reverb_tables.address(server))[0]
  assert reverb_tables.table_size(client, 't') == 0
