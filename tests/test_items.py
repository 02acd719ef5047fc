"""Item plans against a step-by-step re-enactment of TF-Agents' observers.

`simulate_trajectory_observer` and `simulate_episode_observer` below replay,
one call at a time, the counting of tf-agents 0.19.0's
`ReverbAddTrajectoryObserver.__call__/reset` and
`ReverbAddEpisodeObserver.__call__` (their `_cached_steps` logic), without
Reverb. The plans in `rlds_reverb.write.items` must agree for every case.
"""

import itertools
from typing import List, NamedTuple, Tuple

import numpy as np
import pytest

from rlds_reverb.write import items

EOE = items.EndOfEpisode


# --- The reference: TF-Agents' observers, counting only. ---------------------

def simulate_trajectory_observer(num_steps: int, sequence_length: int,
                                 stride_length: int, pad: bool,
                                 tile: bool) -> Tuple[int, List[int]]:
  """(pad rows appended, 0-based rows that end an item) for one episode.

  Rows are the episode's trajectories followed by the padding steps, in the
  order the observer appends them to its writer.
  """
  cached_steps = 0
  rows = 0
  item_ends = []

  def write_cached_steps():  # _write_cached_steps / _sequence_lengths_reached
    if (cached_steps >= sequence_length and
        (cached_steps - sequence_length) % stride_length == 0):
      item_ends.append(rows - 1)

  for step in range(num_steps):  # __call__
    rows += 1  # writer.append(trajectory)
    cached_steps += 1
    write_cached_steps()
    is_boundary = step == num_steps - 1
    if is_boundary and pad:  # reset(write_cached_steps=True), padding
      pad_range = range(sequence_length - 1 if tile
                        else sequence_length - cached_steps)
      for _ in pad_range:
        rows += 1
        cached_steps += 1
        write_cached_steps()
    # Without padding: reset(write_cached_steps=False) drops the cache.
  return rows - num_steps, item_ends


def simulate_episode_observer(num_steps: int, max_sequence_length: int) -> bool:
  """Whether the episode observer writes the episode (no overflow)."""
  cached_steps = 0
  overflow = False
  for _ in range(num_steps):
    if cached_steps >= max_sequence_length and not overflow:
      overflow = True
    if not overflow:
      cached_steps += 1
  return not overflow


# --- Named cases, worked out by hand (the module docstring's pictures). ------

class Case(NamedTuple):
  num_steps: int
  sequence_length: int
  stride_length: int
  end_of_episode: items.EndOfEpisode
  num_pad_rows: int
  item_ends: Tuple[int, ...]


NAMED_CASES = {
    'FMML_L3_drop': Case(4, 3, 1, EOE.DROP, 0, (2, 3)),
    'FMML_L3_pad_needs_none': Case(4, 3, 1, EOE.PAD, 0, (2, 3)),
    'FMML_L3_tile': Case(4, 3, 1, EOE.TILE, 2, (2, 3, 4, 5)),
    'FL_L3_drop_nothing': Case(2, 3, 1, EOE.DROP, 0, ()),
    'FL_L3_pad_one_item': Case(2, 3, 1, EOE.PAD, 1, (2,)),
    'FL_L3_tile': Case(2, 3, 1, EOE.TILE, 2, (2, 3)),
    'single_step_L1': Case(1, 1, 1, EOE.DROP, 0, (0,)),
    'single_step_L1_tile_no_pad': Case(1, 1, 1, EOE.TILE, 0, (0,)),
    'single_step_L2_pad': Case(1, 2, 1, EOE.PAD, 1, (1,)),
    'single_step_L5_tile': Case(1, 5, 3, EOE.TILE, 4, (4,)),
    'stride_2_L2_n7_drop': Case(7, 2, 2, EOE.DROP, 0, (1, 3, 5)),
    'stride_2_L2_n7_tile': Case(7, 2, 2, EOE.TILE, 1, (1, 3, 5, 7)),
    'stride_3_L3_n7_pad': Case(7, 3, 3, EOE.PAD, 0, (2, 5)),
    'stride_3_L3_n7_tile': Case(7, 3, 3, EOE.TILE, 2, (2, 5, 8)),
    'stride_longer_than_item': Case(9, 2, 4, EOE.DROP, 0, (1, 5)),
}


@pytest.mark.parametrize('case', NAMED_CASES.values(), ids=NAMED_CASES.keys())
def test_named_cases(case):
  plan = items.SequenceItems(case.sequence_length, case.stride_length,
                             case.end_of_episode).plan(case.num_steps)
  assert plan.num_pad_rows == case.num_pad_rows
  assert plan.item_ends.tolist() == list(case.item_ends)


@pytest.mark.parametrize('case', NAMED_CASES.values(), ids=NAMED_CASES.keys())
def test_named_cases_agree_with_simulation(case):
  """The hand-worked cases are themselves what the observer does."""
  pad_rows, ends = simulate_trajectory_observer(
      case.num_steps, case.sequence_length, case.stride_length,
      pad=case.end_of_episode is not EOE.DROP,
      tile=case.end_of_episode is EOE.TILE)
  assert (pad_rows, ends) == (case.num_pad_rows, list(case.item_ends))


# --- Every combination against the simulation. -------------------------------

NUM_STEPS = range(1, 17)
LENGTHS = range(1, 7)
STRIDES = range(1, 8)


@pytest.mark.parametrize('end_of_episode', list(EOE), ids=lambda e: e.name)
@pytest.mark.parametrize('sequence_length', LENGTHS)
def test_sequence_plan_matches_observer(sequence_length, end_of_episode):
  mismatches = []
  for num_steps, stride_length in itertools.product(NUM_STEPS, STRIDES):
    expected = simulate_trajectory_observer(
        num_steps, sequence_length, stride_length,
        pad=end_of_episode is not EOE.DROP, tile=end_of_episode is EOE.TILE)
    plan = items.SequenceItems(
        sequence_length, stride_length, end_of_episode).plan(num_steps)
    got = (plan.num_pad_rows, plan.item_ends.tolist())
    if got != expected:
      mismatches.append(
          f'n={num_steps} S={stride_length}: expected {expected}, got {got}')
  assert not mismatches, '\n'.join(mismatches)


@pytest.mark.parametrize('end_of_episode', list(EOE), ids=lambda e: e.name)
def test_item_ends_are_valid_rows(end_of_episode):
  """Ends are increasing ints, each with a full item of rows behind it."""
  for num_steps, length, stride in itertools.product(NUM_STEPS, LENGTHS,
                                                     STRIDES):
    plan = items.SequenceItems(length, stride, end_of_episode).plan(num_steps)
    ends = plan.item_ends
    assert np.issubdtype(ends.dtype, np.integer)
    assert np.all(np.diff(ends) == stride)
    assert np.all(ends >= length - 1)
    assert np.all(ends < num_steps + plan.num_pad_rows)


@pytest.mark.parametrize('max_sequence_length', range(1, 9))
def test_episode_items_fit_like_observer(max_sequence_length):
  plan = items.EpisodeItems(max_sequence_length)
  got = {n: plan.fits(n) for n in NUM_STEPS}
  expected = {n: simulate_episode_observer(n, max_sequence_length)
              for n in NUM_STEPS}
  assert got == expected


@pytest.mark.parametrize('bypass', [False, True])
def test_episode_items_keep_bypass_flag(bypass):
  plan = items.EpisodeItems(4, bypass_partial_episodes=bypass)
  assert plan.bypass_partial_episodes is bypass
  assert plan.fits(4) and not plan.fits(5)


OBSERVER_FLAGS = {
    'default': ((False, False), EOE.DROP),
    'pad': ((True, False), EOE.PAD),
    'pad_and_tile': ((True, True), EOE.TILE),
}


@pytest.mark.parametrize('flags, expected', OBSERVER_FLAGS.values(),
                         ids=OBSERVER_FLAGS.keys())
def test_end_of_episode_from_observer_flags(flags, expected):
  assert EOE.from_observer_flags(*flags) is expected


INVALID_SEQUENCE_ITEMS = {
    'zero_length': ((0, 1), 'sequence_length and stride_length must be >= 1, '
                            'got 0 and 1.'),
    'zero_stride': ((2, 0), 'sequence_length and stride_length must be >= 1, '
                            'got 2 and 0.'),
    'negative_both': ((-1, -3), 'sequence_length and stride_length must be '
                                '>= 1, got -1 and -3.'),
}


@pytest.mark.parametrize('args, message', INVALID_SEQUENCE_ITEMS.values(),
                         ids=INVALID_SEQUENCE_ITEMS.keys())
def test_invalid_sequence_items(args, message):
  with pytest.raises(ValueError) as info:
    items.SequenceItems(*args)
  assert str(info.value) == message
