"""RLDS episodes to TF-Agents trajectories, one episode at a time.

    DenseEpisode(index, steps[T], next_step)
      -> next_steps = steps[1:] + next_step      (the overlapping pairs)
      -> types, discounts, checks on [T] vectors (step_types)
      -> TrajectoryBlock(index, Trajectory[T])
      -> unbatch: one Trajectory per RLDS step

No Python or AutoGraph runs per step; `policy_info_fn` is traced once and
applied by tf.data to each step pair.
"""

import functools
from typing import Any, Dict, NamedTuple, Optional

import tensorflow as tf
from tf_agents.trajectories import trajectory

from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.convert import step_types
from rlds_reverb.specs import fields
from rlds_reverb.specs import step_spec as step_spec_lib


class TrajectoryBlock(NamedTuple):
  """The trajectories of one episode, each field with a leading time axis."""
  episode_index: tf.Tensor  # int64, 0-based position in the dataset.
  trajectory: trajectory.Trajectory


def convert_rlds_to_trajectories(
    rlds_data: tf.data.Dataset,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
) -> tf.data.Dataset:
  """A dataset of `Trajectory`s, one per RLDS step, from overlapping step pairs.

  The data is flattened in order and padded at the end with one zero step whose
  `is_first` is True; step i and step i+1 give trajectory i:

      episode 0: s0 s1 s2 | episode 1: s3 s4 | pad
      (s0,s1) (s1,s2) (s2,s3) (s3,s4) (s4,pad)  -> 5 trajectories

  Args:
    rlds_data: a dataset of RLDS episodes, each with a dataset of `steps`.
    policy_info_fn: optional `fn(current_step, next_step)`; its output is the
      trajectory's `policy_info` (else `()`).

  Returns:
    A dataset of `Trajectory` whose spec is `create_trajectory_data_spec`'s
    (up to spec names and bounds).

  Raises:
    ValueError: no `steps`, or an invalid step spec (raised here).
    tf.errors.InvalidArgumentError: while iterating, for a terminal step that is
      not last, a mid step followed by a first step, or a last step not followed
      by a first step; the message ends with '(episode E, step S)'.
  """
  return trajectory_blocks(rlds_data, policy_info_fn).map(
      _trajectory_of).unbatch()


def trajectory_blocks(
    rlds_data: tf.data.Dataset,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
) -> tf.data.Dataset:
  """A dataset of `TrajectoryBlock`s: each episode's trajectories at once."""
  step_spec = step_spec_lib.steps_spec(rlds_data)
  keep_fields = None if policy_info_fn else fields.STEP_FEATURES
  dense = episodes_lib.dense_episodes(
      rlds_data, step_spec, keep_fields,
      pair_episodes=policy_info_fn is not None)
  return dense.map(functools.partial(_to_block, policy_info_fn=policy_info_fn))


def _trajectory_of(block: TrajectoryBlock) -> trajectory.Trajectory:
  return block.trajectory


def _to_block(episode: episodes_lib.DenseEpisode, policy_info_fn):
  steps = episode.steps
  types = step_types.classify(
      steps[fields.IS_FIRST], steps[fields.IS_LAST], steps[fields.IS_TERMINAL],
      _shifted(steps[fields.IS_FIRST], episode.next_step[fields.IS_FIRST]),
      _shifted(steps[fields.IS_LAST], episode.next_step[fields.IS_LAST]))
  checked = step_types.assert_no_problems(episode.index, types.problem)
  policy_info = ()
  if policy_info_fn is not None:
    next_steps = tf.nest.map_structure(_shifted, steps, episode.next_step)
    policy_info = _policy_info(policy_info_fn, steps, next_steps)
  with tf.control_dependencies([checked]):
    return TrajectoryBlock(
        episode_index=tf.identity(episode.index),
        trajectory=trajectory.Trajectory(
            step_type=types.step_type,
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
  """`policy_info_fn` of each (step, next step), stacked along time."""
  pairs = tf.data.Dataset.from_tensor_slices((steps, next_steps))
  return pairs.map(policy_info_fn).batch(episodes_lib.WHOLE_EPISODE).get_single_element()
