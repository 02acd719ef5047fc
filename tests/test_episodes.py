"""Whole episodes as tensors: order, indices, empty episodes, the next step."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from rlds_reverb.convert import episodes as episodes_lib  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import step_spec as step_spec_lib  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top

# Episode lengths; 0 is an empty episode, which vanishes but keeps its index.
LENGTHS = (3, 0, 1, 4)


def episodes():
  return [rlds_data.flat_episode(length, seed)
          for seed, length in enumerate(LENGTHS)]


def read(pair_episodes: bool):
  rlds = rlds_data.as_rlds(episodes())
  dense = episodes_lib.dense_episodes(
      rlds, step_spec_lib.step_format(rlds), pair_episodes=pair_episodes)
  return dense, [tf.nest.map_structure(lambda x: x.numpy(), element)
                 for element in dense]


def assert_steps_equal(got, want):
  assert sorted(got) == sorted(want)
  for key in want:
    np.testing.assert_array_equal(got[key], want[key], err_msg=key)


@pytest.mark.parametrize('pair_episodes', [False, True])
def test_episodes_in_order_with_their_index(pair_episodes):
  _, got = read(pair_episodes)
  want = [(i, e) for i, e in enumerate(episodes()) if len(e['is_first'])]
  assert [int(g.index) for g in got] == [i for i, _ in want]
  for element, (_, episode) in zip(got, want):
    assert_steps_equal(element.steps, episode)


def test_unpaired_episodes_carry_no_next_step():
  dense, got = read(pair_episodes=False)
  assert dense.element_spec.next_step == ()
  assert all(element.next_step == () for element in got)


def test_paired_episodes_carry_the_next_first_step_then_the_pad_step():
  _, got = read(pair_episodes=True)
  non_empty = [e for e in episodes() if len(e['is_first'])]
  want_next = [{key: value[0] for key, value in e.items()}
               for e in non_empty[1:]]
  pad = {key: np.zeros_like(value[0]) for key, value in non_empty[0].items()}
  pad['is_first'] = np.bool_(True)
  want_next.append(pad)
  assert len(got) == len(want_next)
  for element, want in zip(got, want_next):
    assert_steps_equal(element.next_step, want)
