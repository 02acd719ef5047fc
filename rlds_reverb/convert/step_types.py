"""Step types, discounts and checks of whole episodes, from one truth table.

The rules for one step pair are plain Python, written once (`pair_rules`):

    step_type       FIRST if is_first, else LAST if is_last, else MID
    next_step_type  the same of the next step
    FIRST, FIRST -> LAST, LAST                (a single-step episode)
    discount        0 if is_last and is_terminal, else the step's discount
    problem         the first that applies, in this order:
        EPISODE_NOT_FIRST      step 0 of an episode without is_first (ours)
        TERMINAL_NOT_LAST      is_terminal without is_last       (TF-Agents')
        MID_BEFORE_FIRST       a mid step followed by a first step  (TF-Agents')
        LAST_BEFORE_NON_FIRST  a last step not followed by a first  (TF-Agents')

They are tabulated for all 64 combinations of the six flags; an episode's
values are then one gather from the table, whatever its length. TF-Agents never
looks at episode starts (it flattens first), so it takes a first episode that
begins mid-way and an episode that continues the previous one; we reject both.
"""

import enum
import itertools
from typing import NamedTuple

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import time_step as ts

FIRST = int(ts.StepType.FIRST)
MID = int(ts.StepType.MID)
LAST = int(ts.StepType.LAST)
_NAMES = {FIRST: 'FIRST', MID: 'MID', LAST: 'LAST'}


def name(step_type) -> str:
  """'FIRST', 'MID' or 'LAST' (in messages); any other value as its number."""
  return _NAMES.get(int(step_type), str(int(step_type)))


class Problem(enum.IntEnum):
  """What is wrong with a step pair; the value is an index of `MESSAGES`."""
  NONE = 0
  EPISODE_NOT_FIRST = 1
  TERMINAL_NOT_LAST = 2
  MID_BEFORE_FIRST = 3
  LAST_BEFORE_NON_FIRST = 4


# By `Problem`; TF-Agents' sentences verbatim where it has the check.
MESSAGES = (
    '',
    'First step of an episode must have is_first set.',
    'Terminal step must be the last step of an episode.',
    'Mid step should not be followed by a first step.',
    'Last step of an episode must be followed by a first step.',
)


class PairRule(NamedTuple):
  step_type: int
  next_step_type: int
  zero_discount: bool
  problem: Problem


def _step_type(is_first: bool, is_last: bool) -> int:
  return FIRST if is_first else LAST if is_last else MID


def pair_rules(is_first: bool, is_last: bool, is_terminal: bool,
               next_is_first: bool, next_is_last: bool,
               episode_start: bool) -> PairRule:
  """The conversion of one step pair; `episode_start` marks step 0."""
  step_type = _step_type(is_first, is_last)
  next_step_type = _step_type(next_is_first, next_is_last)
  if step_type == FIRST and next_step_type == FIRST:
    step_type = next_step_type = LAST
  if episode_start and not is_first:
    problem = Problem.EPISODE_NOT_FIRST
  elif is_terminal and not is_last:
    problem = Problem.TERMINAL_NOT_LAST
  elif not is_first and not is_last and next_is_first:
    problem = Problem.MID_BEFORE_FIRST
  elif is_last and not next_is_first:
    problem = Problem.LAST_BEFORE_NON_FIRST
  else:
    problem = Problem.NONE
  return PairRule(step_type, next_step_type, is_last and is_terminal, problem)


# Row i: the rule for the flags whose bit j (of 6, in pair_rules' order) is set.
_TABLE = np.array(
    [pair_rules(*reversed(bits))
     for bits in itertools.product((False, True), repeat=6)], np.int32)
_BIT_WEIGHTS = np.array([1, 2, 4, 8, 16, 32], np.int32)


class EpisodeTypes(NamedTuple):
  """Per-step results of `classify`, each a [T] tensor."""
  step_type: tf.Tensor  # int32
  next_step_type: tf.Tensor  # int32
  zero_discount: tf.Tensor  # int32 0/1
  problem: tf.Tensor  # int32 `Problem`


def classify(is_first, is_last, is_terminal, next_is_first,
             next_is_last) -> EpisodeTypes:
  """`pair_rules` of every step of an episode; flags are [T] bool tensors."""
  episode_start = tf.range(tf.shape(is_first)[0]) == 0
  bits = tf.stack([is_first, is_last, is_terminal, next_is_first, next_is_last,
                   episode_start], axis=-1)
  rows = tf.gather(_TABLE, tf.linalg.matvec(tf.cast(bits, tf.int32),
                                            _BIT_WEIGHTS))
  return EpisodeTypes(*tf.unstack(rows, num=4, axis=-1))


def classify_episode(is_first, is_last, is_terminal) -> EpisodeTypes:
  """`classify` of one episode, followed by a first step (as the pad step).

  Every episode is checked to begin with `is_first`, so whatever follows an
  episode is a first step; the next episode's values are never needed here.
  """
  return classify(is_first, is_last, is_terminal,
                  _followed_by(is_first, True), _followed_by(is_last, False))


def _followed_by(flags: tf.Tensor, next_flag: bool) -> tf.Tensor:
  """flags[1:] then `next_flag`: each step's next step's flag."""
  return tf.concat([flags[1:], [next_flag]], axis=0)


def discounts(discount: tf.Tensor, zero_discount: tf.Tensor) -> tf.Tensor:
  """float32 discounts, 0 where an episode ends in a terminal step."""
  return tf.where(zero_discount > 0, 0.0, tf.cast(discount, tf.float32))


def assert_no_problems(episode_index: tf.Tensor, problem: tf.Tensor):
  """Fails with the first problem's sentence and '(episode E, step S)'.

  The message is built for every episode (a few µs): a `tf.cond` building it
  only on failure costs more than that, its branches being functions.
  """
  return tf.debugging.Assert(tf.reduce_all(problem == 0),
                             [_first_problem(episode_index, problem)])


def _first_problem(episode_index, problem) -> tf.Tensor:
  """The sentence of the first nonzero problem with its place ('' if none)."""
  step = tf.argmax(tf.cast(problem > 0, tf.int32), output_type=tf.int64)
  return tf.strings.join([
      tf.gather(MESSAGES, problem[step]),
      tf.strings.format(' (episode {}, step {})', (episode_index, step)),
  ])
