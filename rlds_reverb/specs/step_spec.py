"""Static checks of an RLDS dataset's element spec, before any pipeline is built.

TF-Agents' module checks only that `steps` and the seven step fields exist; a
wrong dtype or a ragged field then fails deep inside tf.data or Reverb. Here
every field is checked up front and errors name the field path.
"""

from typing import Any, Dict

import tensorflow as tf

from rlds_reverb.errors import StepSpecError
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths


def steps_spec(rlds_data: tf.data.Dataset) -> Dict[str, Any]:
  """The validated element spec of the steps of `rlds_data`'s episodes.

  Raises:
    StepSpecError (a ValueError): with TF-Agents' texts when `steps` or one of
      the step features is missing; naming the field otherwise.
  """
  episode_spec = rlds_data.element_spec
  if not isinstance(episode_spec, dict) or fields.STEPS not in episode_spec:
    raise StepSpecError(
        f'No dataset representing RLDS {fields.STEPS} exist in the data.')
  steps = episode_spec[fields.STEPS]
  if not isinstance(steps, tf.data.DatasetSpec):
    raise StepSpecError(
        f"RLDS episode field '{fields.STEPS}' must be a tf.data.Dataset of "
        f'steps, got {steps}.')
  validate_step_spec(steps.element_spec)
  return steps.element_spec


def validate_step_spec(step_spec: Any) -> None:
  """Checks that `step_spec` describes RLDS steps we can convert."""
  expected = fields.get_rlds_step_features()
  if not isinstance(step_spec, dict) or not all(
      name in step_spec for name in expected):
    found = list(step_spec.keys()) if isinstance(step_spec, dict) else step_spec
    raise StepSpecError(
        f'Invalid RLDS step spec. Features expected are {expected}, but found '
        f'{found}')
  for name in fields.FLAGS:
    _check_scalar(step_spec[name], f'{fields.STEPS}/{name}', 'a bool',
                  lambda dtype: dtype == tf.bool)
  _check_scalar(step_spec[fields.DISCOUNT], f'{fields.STEPS}/{fields.DISCOUNT}',
                'a numeric', _is_real_number)
  for name in (fields.OBSERVATION, fields.ACTION, fields.REWARD):
    _check_dense(step_spec[name], f'{fields.STEPS}/{name}')


def _is_real_number(dtype: tf.DType) -> bool:
  return (dtype.is_floating or dtype.is_integer) and dtype != tf.bool


def _check_scalar(spec: Any, path: str, kind: str, dtype_ok) -> None:
  if (not isinstance(spec, tf.TensorSpec) or spec.shape.rank != 0 or
      not dtype_ok(spec.dtype)):
    raise StepSpecError(
        f"RLDS step field '{path}' must be {kind} scalar, got {spec}.")


def _check_dense(structure: Any, path: str) -> None:
  """Every leaf must be a dense tensor: Reverb stores nothing else."""
  for leaf_path, leaf in paths.flatten_with_paths(structure, path):
    if not isinstance(leaf, tf.TensorSpec):
      raise StepSpecError(
          f"RLDS step field '{leaf_path}' must be a dense tensor, got {leaf}.")
