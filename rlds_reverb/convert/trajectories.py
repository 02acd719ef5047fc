"""RLDS episodes to TF-Agents trajectories, one episode at a time.

    DenseEpisode(index, steps[T])
      -> types, discounts, checks on [T] vectors (step_types); the step after
         the last is a first step, so an episode alone decides them
      -> policy_info_fn only: next_steps = steps[1:] + next_step (the pairs)
      -> TrajectoryBlock(index, Trajectory[T])
      -> unbatch: one Trajectory per RLDS step

No Python or AutoGraph runs per step; `policy_info_fn` is traced once and
applied by tf.data to each step pair. Episodes are converted
`_PARALLEL_EPISODES` at a time, in order, ahead of the consumer.
"""

import functools
from typing import Any, Dict, NamedTuple, Optional

import tensorflow as tf
from tf_agents.trajectories import trajectory

from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.convert import step_types
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields
from rlds_reverb.specs import step_spec as step_spec_lib

# Episodes converted at the same time (besides those being read).
_PARALLEL_EPISODES = 2


class TrajectoryBlock(NamedTuple):
  """The trajectories of one episode, each field with a leading time axis."""
  episode_index: tf.Tensor  # int64, 0-based position in the dataset.
  trajectory: trajectory.Trajectory


def convert_rlds_to_trajectories(
    rlds_data: tf.data.Dataset,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
    *,
    strict: bool = False,
) -> tf.data.Dataset:
  """A dataset of `Trajectory`s, one per RLDS step, from overlapping step pairs.

  The data is flattened in order and padded at the end with one zero step whose
  `is_first` is True; step i and step i+1 give trajectory i:

      episode 0: s0 s1 s2 | episode 1: s3 s4 | pad
      (s0,s1) (s1,s2) (s2,s3) (s3,s4) (s4,pad)  -> 5 trajectories

  Args:
    rlds_data: a dataset of RLDS episodes, each with a dataset of `steps`.
    policy_info_fn: optional `fn(current_step, next_step)`; its output is the
      trajectory's `policy_info` (else `()`). It sees the steps as converted:
      with the default `discount`/`reward` of data that lacks them.
    strict: refuse data without `discount` or `reward`, or with a discount
      or flag of shape (1,), as TF-Agents does (else defaults and scalars,
      `specs.step_spec`).

  Returns:
    A dataset of `Trajectory` whose spec is `create_trajectory_data_spec`'s
    (up to spec names and bounds).

  Raises:
    ValueError: no `steps`, or an invalid step spec (raised here).
    tf.errors.InvalidArgumentError: while iterating, for a terminal step that is
      not last, a mid step followed by a first step, or a last step not followed
      by a first step; the message ends with '(episode E, step S)'.
  """
  return _dense_episodes(rlds_data, policy_info_fn, strict).map(
      functools.partial(_to_trajectory, policy_info_fn=policy_info_fn),
      num_parallel_calls=_PARALLEL_EPISODES, deterministic=True).unbatch()


def trajectory_blocks(
    rlds_data: tf.data.Dataset,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
    strict: bool = False,
) -> tf.data.Dataset:
  """A dataset of `TrajectoryBlock`s: each episode's trajectories at once."""
  return _dense_episodes(rlds_data, policy_info_fn, strict).map(
      functools.partial(_to_block, policy_info_fn=policy_info_fn),
      num_parallel_calls=_PARALLEL_EPISODES, deterministic=True)


def _dense_episodes(rlds_data, policy_info_fn, strict) -> tf.data.Dataset:
  """Validates the step spec (raising now, not while iterating); the episodes.

  Fields other than the step features are batched with their episode and then
  left unused: selecting them per step would cost a function call per step.
  """
  rlds_data = whole_reads.whole(rlds_data)
  return episodes_lib.dense_episodes(
      rlds_data, step_spec_lib.step_format(rlds_data, strict),
      pair_episodes=policy_info_fn is not None)


def _to_trajectory(episode: episodes_lib.DenseEpisode,
                   policy_info_fn) -> trajectory.Trajectory:
  """`_to_block` without the index: one map, not two, per episode."""
  return _to_block(episode, policy_info_fn).trajectory


@tf.function  # Traced once per element spec, reused by each dataset mapping it.
def _to_block(episode: episodes_lib.DenseEpisode, policy_info_fn):
  """The trajectories of one episode; the checks run before they are used.

  Types and checks take a first step after the last step, even when
  `next_step` (given for `policy_info_fn` only) is the next episode's: that
  episode's own check reports a missing `is_first`, so errors are the same
  with or without `policy_info_fn`.
  """
  steps = episode.steps
  types = step_types.classify_episode(
      steps[fields.IS_FIRST], steps[fields.IS_LAST], steps[fields.IS_TERMINAL])
  checked = step_types.assert_no_problems(episode.index, types.problem)
  policy_info = ()
  if policy_info_fn is not None:
    next_steps = tf.nest.map_structure(_shifted, steps, episode.next_step)
    policy_info = _policy_info(policy_info_fn, steps, next_steps)
  with tf.control_dependencies([checked]):
    step_type = tf.identity(types.step_type)
  return TrajectoryBlock(
      episode_index=episode.index,
      trajectory=trajectory.Trajectory(
          step_type=step_type,
          observation=steps[fields.OBSERVATION],
          action=steps[fields.ACTION],
          policy_info=policy_info,
          next_step_type=types.next_step_type,
          reward=steps[fields.REWARD],
          discount=step_types.discounts(
              steps[fields.DISCOUNT], types.zero_discount),
      ))


def _shifted(values: tf.Tensor, next_value: tf.Tensor) -> tf.Tensor:
  """values[1:] followed by next_value: the next step of each step."""
  return tf.concat([values[1:], next_value[tf.newaxis]], axis=0)


def _policy_info(policy_info_fn, steps: Dict[str, Any],
                 next_steps: Dict[str, Any]) -> Any:
  """`policy_info_fn` of each (step, next step), stacked along time.

  The batch size is the episode length: tf.data fuses `map` and `batch` into
  one op that allocates the whole batch size, so `WHOLE_EPISODE` never returns.
  """
  length = tf.shape(steps[fields.IS_FIRST], out_type=tf.int64)[0]
  pairs = tf.data.Dataset.from_tensor_slices((steps, next_steps))
  return pairs.map(policy_info_fn).batch(length).get_single_element()
