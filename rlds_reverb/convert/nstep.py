"""n-step transitions from RLDS episodes, as Acme's `NStepTransitionAdder`.

An episode of T steps (step T-1 the last, whose action and reward are not
used) gives K = T - 1 transitions. Transition t, with window m = min(n, K - t)
(shorter at the end of the episode), r and d the steps' reward and discount
and gamma the agent's discount:

    reward          = sum_{k=0}^{m-1} gamma^k (prod_{j=0}^{k-1} d_{t+j}) r_{t+k}
    discount        = gamma^(m-1) prod_{j=0}^{m-1} d_{t+j}
                      and 0 if the window reaches the last step and that step
                      is terminal (never after a truncation)
    observation     = o_t,  action = a_t,  next_observation = o_{t+m}

As in Acme, `discount` leaves out the one gamma the learner applies when it
bootstraps: target = reward + gamma * discount * Q(next_observation). With
n = 1: reward = r_t, discount = d_t (0 into a terminal step).

    steps    o0 o1 o2 o3(last, terminal)     n = 2
    t = 0    o0 -> o2   r0 + g d0 r1         discount g d0 d1
    t = 1    o1 -> o3   r1 + g d1 r2         discount 0 (terminal)
    t = 2    o2 -> o3   r2                   discount 0 (terminal)
"""

import functools
from typing import Any, NamedTuple

import tensorflow as tf

from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.convert import step_types
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields
from rlds_reverb.specs import step_spec as step_spec_lib


class NStepTransition(NamedTuple):
  """Acme's `Transition` fields (without extras)."""
  observation: Any
  action: Any
  reward: Any
  discount: Any
  next_observation: Any


def transition_spec(step_spec) -> NStepTransition:
  """The spec of one transition; also the signature of a table of them.

  Rewards become float32 (float64 stays float64); the discount is float32.
  """
  return NStepTransition(
      observation=step_spec[fields.OBSERVATION],
      action=step_spec[fields.ACTION],
      reward=tf.nest.map_structure(
          lambda s: tf.TensorSpec(s.shape, _return_dtype(s.dtype)),
          step_spec[fields.REWARD]),
      discount=tf.TensorSpec([], tf.float32),
      next_observation=step_spec[fields.OBSERVATION])


def create_nstep_transition_spec(rlds_data: tf.data.Dataset, *,
                                 strict: bool = False) -> NStepTransition:
  """`transition_spec` of `rlds_data`'s steps."""
  return transition_spec(step_spec_lib.steps_spec(rlds_data, strict))


def convert_rlds_to_nstep_transitions(
    rlds_data: tf.data.Dataset, n: int, discount: float, *,
    strict: bool = False) -> tf.data.Dataset:
  """A dataset of `NStepTransition`s, in step order.

  Args:
    rlds_data: RLDS episodes.
    n: the number of steps to accumulate, >= 1.
    discount: gamma, the agent's discount in [0, 1].
    strict: as for `convert_rlds_to_trajectories`.

  Raises:
    ValueError: bad n or discount, or an invalid RLDS spec.
    tf.errors.InvalidArgumentError: malformed episodes, as for trajectories.
  """
  return nstep_transition_blocks(rlds_data, n, discount, strict).map(
      _transitions_of).unbatch()


class TransitionBlock(NamedTuple):
  episode_index: tf.Tensor
  transitions: NStepTransition  # Each field [T - 1, ...].


def check_parameters(n: int, discount: float) -> None:
  """Raises ValueError unless n >= 1 and 0 <= discount <= 1."""
  if n < 1:
    raise ValueError(f'n must be >= 1, got {n}.')
  if not 0.0 <= discount <= 1.0:
    raise ValueError(f'discount must be in [0, 1], got {discount}.')


def nstep_transition_blocks(
    rlds_data: tf.data.Dataset, n: int, discount: float,
    strict: bool = False) -> tf.data.Dataset:
  """One `TransitionBlock` per episode."""
  check_parameters(n, discount)
  rlds_data = whole_reads.whole(rlds_data)
  dense = episodes_lib.dense_episodes(
      rlds_data, step_spec_lib.step_format(rlds_data, strict))
  return dense.map(functools.partial(_to_block, n=n, gamma=discount))


def _transitions_of(block: TransitionBlock) -> NStepTransition:
  return block.transitions


@tf.function  # Traced once per element spec, reused by each dataset mapping it.
def _to_block(episode: episodes_lib.DenseEpisode, n: int, gamma: float):
  steps = episode.steps
  types = step_types.classify_episode(
      steps[fields.IS_FIRST], steps[fields.IS_LAST], steps[fields.IS_TERMINAL])
  checked = step_types.assert_no_problems(episode.index, types.problem)
  num_transitions = tf.shape(steps[fields.IS_FIRST])[0] - 1
  rewards = tf.nest.map_structure(
      lambda r: tf.cast(r[:-1], _return_dtype(r.dtype)), steps[fields.REWARD])
  discounts = tf.cast(steps[fields.DISCOUNT][:-1], tf.float32)
  returns, total_discounts, windows = _accumulate(rewards, discounts, n, gamma)
  offsets = tf.range(num_transitions)
  reaches_end = offsets + windows >= num_transitions
  terminal = steps[fields.IS_TERMINAL][-1]
  with tf.control_dependencies([checked]):
    return TransitionBlock(
        episode_index=tf.identity(episode.index),
        transitions=NStepTransition(
            observation=tf.nest.map_structure(
                lambda o: o[:-1], steps[fields.OBSERVATION]),
            action=tf.nest.map_structure(
                lambda a: a[:-1], steps[fields.ACTION]),
            reward=returns,
            discount=tf.where(reaches_end & terminal, 0.0, total_discounts),
            next_observation=tf.nest.map_structure(
                lambda o: tf.gather(o, offsets + windows),
                steps[fields.OBSERVATION]),
        ))


def _accumulate(rewards, discounts, n: int, gamma: float):
  """Acme's accumulation, for every transition at once.

  Returns (n-step returns, total discounts, window lengths m), each [K].
  """
  num_transitions = tf.shape(discounts)[0]
  offsets = tf.range(num_transitions)
  returns = rewards
  total = discounts
  for i in range(1, n):
    valid = offsets + i < num_transitions
    scaled = total * gamma
    returns = tf.nest.map_structure(
        lambda g, r, i=i, valid=valid, scaled=scaled: tf.where(
            _expand_like(valid, g),
            g + _shift(r, i) * tf.cast(_expand_like(scaled, g), g.dtype), g),
        returns, rewards)
    total = tf.where(valid, scaled * _shift(discounts, i, fill=1.0), total)
  windows = tf.minimum(n, num_transitions - offsets)
  return returns, total, windows


def _shift(values: tf.Tensor, by: int, fill: float = 0.0) -> tf.Tensor:
  """values[t + by], `fill` past the end."""
  padding = tf.fill(tf.concat([[by], tf.shape(values)[1:]], 0),
                    tf.cast(fill, values.dtype))
  return tf.concat([values, padding], 0)[by:]


def _expand_like(vector: tf.Tensor, like: tf.Tensor) -> tf.Tensor:
  """A [K] vector reshaped to broadcast against a [K, ...] tensor."""
  extra = tf.ones([tf.rank(like) - 1], tf.int32)
  return tf.reshape(vector, tf.concat([tf.shape(vector), extra], 0))


def _return_dtype(dtype: tf.DType) -> tf.DType:
  return tf.float64 if dtype == tf.float64 else tf.float32
