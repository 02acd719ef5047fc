"""The TF-Agents trajectory spec of converted RLDS data.

One step pair becomes one `Trajectory`; its spec is TF-Agents'
`from_transition(time_step_spec(observation, reward), action)`. Unlike TF-Agents'
module, `policy_info` is the spec of what `policy_info_fn` returns, so a table
built from the spec accepts the data.
"""

from typing import Any, Dict, Optional

import tensorflow as tf
from tf_agents.trajectories import policy_step
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

from rlds_reverb.specs import fields
from rlds_reverb.specs import step_spec as step_spec_lib


def create_trajectory_data_spec(
    rlds_data: tf.data.Dataset,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
    *,
    strict: bool = False,
) -> trajectory.Trajectory:
  """The spec of `convert_rlds_to_trajectories(rlds_data, policy_info_fn)`.

  A missing `discount` or `reward` has the float32 scalar spec of its
  default; `strict=True` refuses it (`convert_rlds_to_trajectories`).

  Raises:
    ValueError: if `rlds_data` has no `steps` or its step spec is invalid.
  """
  return trajectory_spec(step_spec_lib.steps_spec(rlds_data, strict),
                         policy_info_fn)


def trajectory_spec(
    step_spec: Dict[str, Any],
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
) -> trajectory.Trajectory:
  """The trajectory spec for steps of `step_spec`."""
  time_step_spec = ts.time_step_spec(
      step_spec[fields.OBSERVATION], step_spec[fields.REWARD])
  action_spec = policy_step.PolicyStep(
      step_spec[fields.ACTION], (), policy_info_spec(step_spec, policy_info_fn))
  return trajectory.from_transition(time_step_spec, action_spec, time_step_spec)


def policy_info_spec(
    step_spec: Dict[str, Any],
    policy_info_fn: Optional[fields.PolicyInfoFn],
) -> Any:
  """The spec of `policy_info_fn(current_step, next_step)`, or `()`.

  Traced the way the converter applies it, as a `tf.data` map over step pairs,
  so dtypes and shapes are exactly those of the data.
  """
  if policy_info_fn is None:
    return ()
  no_steps = tf.data.Dataset.from_generator(
      lambda: iter(()), output_signature=step_spec)
  pairs = tf.data.Dataset.zip((no_steps, no_steps))
  return pairs.map(policy_info_fn).element_spec
