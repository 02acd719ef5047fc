"""Static checks of an RLDS dataset's steps, and the steps the conversion reads.

TF-Agents' module checks only that `steps` and the seven step fields exist; a
wrong dtype or a ragged field then fails deep inside tf.data or Reverb. Here
every field is checked up front and errors name the field path.

Real catalog datasets store some fields otherwise than TF-Agents expects.
`StepFormat` says how, and `complete` turns stored steps into the steps the
conversion reads, one whole episode at a time:

    stored                              read as
    discount missing (Open X-Embodiment) 1.0 (float32); still 0 on a
                                         terminal last step
    reward missing (mt_opt/rlds)         0.0 (float32)
    discount or a flag of shape (1,)     the scalar it holds
    (rlu_rwrl), or of any one element

`strict=True` refuses these instead, as TF-Agents does.
"""

import dataclasses
from typing import Any, Dict, List, Tuple

import tensorflow as tf

from rlds_reverb.errors import StepSpecError
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths

# Fields a dataset must have; the others of `STEP_FEATURES` get defaults.
REQUIRED = tuple(name for name in fields.STEP_FEATURES
                 if name not in fields.DEFAULTS)
# Fields whose spec must be a scalar, or hold one element (read as a scalar).
_SCALARS = fields.FLAGS + (fields.DISCOUNT,)


@dataclasses.dataclass(frozen=True)
class StepFormat:
  """How a dataset stores its steps, and the step spec the conversion reads.

  `spec` has every RLDS field, the flags and the discount as scalars; fields
  named in `defaulted` are missing from the data, those in `squeezed` hold
  one element in a shape other than a scalar's.
  """
  stored: Dict[str, Any]
  spec: Dict[str, Any]
  defaulted: Tuple[str, ...] = ()
  squeezed: Tuple[str, ...] = ()

  @property
  def changes(self) -> bool:
    """Whether `complete` does anything."""
    return bool(self.defaulted or self.squeezed)

  def notes(self) -> List[str]:
    """One sentence per field read otherwise than it is stored."""
    notes = [_DEFAULT_NOTES[name] for name in self.defaulted]
    notes += [f'{fields.STEPS}/{name} has shape '
              f'{paths.shape_text(self.stored[name].shape)}: read as the '
              f'scalar it holds.' for name in self.squeezed]
    return notes

  def complete(self, steps: Dict[str, Any]) -> Dict[str, Any]:
    """`steps` as the conversion reads them: a dict of tensors, one step or
    several along leading axes ([T, ...] for an episode)."""
    if not self.changes:
      return steps
    steps = dict(steps)
    stored_rank = self.stored[fields.IS_FIRST].shape.rank
    outer_rank = steps[fields.IS_FIRST].shape.rank - stored_rank
    outer_shape = tf.shape(steps[fields.IS_FIRST])[:outer_rank]
    for name in self.squeezed:
      steps[name] = tf.reshape(steps[name], outer_shape)
    for name in self.defaulted:
      steps[name] = tf.fill(outer_shape, tf.constant(fields.DEFAULTS[name],
                                                     tf.float32))
    return steps


_DEFAULT_NOTES = {
    fields.DISCOUNT: (f'{fields.STEPS}/{fields.DISCOUNT} is missing: every '
                      f'discount is 1.0 (0 on a terminal last step).'),
    fields.REWARD: (f'{fields.STEPS}/{fields.REWARD} is missing: every '
                    f'reward is 0.0 (float32).'),
}


def step_format(rlds_data: tf.data.Dataset, strict: bool = False) -> StepFormat:
  """The validated format of the steps of `rlds_data`'s episodes.

  Steps are a `tf.data.Dataset` (RLDS), or a dict of whole [T, ...] tensors
  (episodes read whole, `whole_reads`).

  Raises:
    StepSpecError (a ValueError): with TF-Agents' texts when `steps` or one of
      the step features is missing (a note names what is missing, or what
      the episodes hold); naming the field otherwise. Missing `discount` or
      `reward`, and one-element discounts and flags, only if `strict`.
  """
  episode_spec = rlds_data.element_spec
  if not isinstance(episode_spec, dict) or fields.STEPS not in episode_spec:
    error = StepSpecError(
        f'No dataset representing RLDS {fields.STEPS} exist in the data.')
    error.add_note(_episode_text(episode_spec))
    raise error
  steps = episode_spec[fields.STEPS]
  if isinstance(steps, tf.data.DatasetSpec):
    return format_of(steps.element_spec, strict)
  if _is_whole(steps):
    return format_of(tf.nest.map_structure(_one_step, steps), strict)
  raise StepSpecError(
      f"RLDS episode field '{fields.STEPS}' must be a tf.data.Dataset of "
      f'steps, got {paths.spec_text(steps)}.')


def _is_whole(steps: Any) -> bool:
  """Steps read whole (`whole_reads`): a dict of [T, ...] tensors."""
  leaves = tf.nest.flatten(steps)
  return isinstance(steps, dict) and bool(leaves) and all(
      isinstance(leaf, tf.TensorSpec) and leaf.shape.rank for leaf in leaves)


def _one_step(spec: tf.TensorSpec) -> tf.TensorSpec:
  return tf.TensorSpec(spec.shape[1:], spec.dtype)


def steps_spec(rlds_data: tf.data.Dataset,
               strict: bool = False) -> Dict[str, Any]:
  """The step spec the conversion reads (`step_format(...).spec`)."""
  return step_format(rlds_data, strict).spec


def format_of(step_spec: Any, strict: bool = False) -> StepFormat:
  """The `StepFormat` of steps of element spec `step_spec`; raises if unusable."""
  _check_fields_present(step_spec, strict)
  spec = dict(step_spec)
  squeezed = []
  for name in _SCALARS:
    if name not in step_spec:
      continue
    _check_scalar(step_spec[name], name, strict)
    if step_spec[name].shape.rank:
      squeezed.append(name)
      spec[name] = tf.TensorSpec([], step_spec[name].dtype)
  for name in (fields.OBSERVATION, fields.ACTION, fields.REWARD):
    if name in step_spec:
      _check_dense(step_spec[name], f'{fields.STEPS}/{name}')
  defaulted = tuple(name for name in fields.DEFAULTS if name not in step_spec)
  for name in defaulted:
    spec[name] = tf.TensorSpec([], tf.float32)
  return StepFormat(dict(step_spec), spec, defaulted, tuple(squeezed))


def validate_step_spec(step_spec: Any, strict: bool = False) -> None:
  """Checks that `step_spec` describes RLDS steps we can convert."""
  format_of(step_spec, strict)


def _check_fields_present(step_spec: Any, strict: bool) -> None:
  """TF-Agents' error, with a note naming the missing fields."""
  expected = fields.get_rlds_step_features()
  required = expected if strict else REQUIRED
  found = list(step_spec.keys()) if isinstance(step_spec, dict) else step_spec
  present = found if isinstance(step_spec, dict) else []
  missing = [name for name in expected if name not in present]
  if any(name in missing for name in required):
    error = StepSpecError(
        f'Invalid RLDS step spec. Features expected are {expected}, but found '
        f'{found}')
    error.add_note(f'Missing step fields: {", ".join(missing)}.')
    raise error


def _check_scalar(spec: Any, name: str, strict: bool) -> None:
  """A bool flag or a numeric discount, a scalar (or one element if not
  `strict`)."""
  is_flag = name in fields.FLAGS
  kind = 'a bool' if is_flag else 'a numeric'
  ok = isinstance(spec, tf.TensorSpec) and (
      spec.dtype == tf.bool if is_flag else _is_real_number(spec.dtype))
  if ok and strict:
    ok = spec.shape.rank == 0
  elif ok:
    ok = spec.shape.is_fully_defined() and spec.shape.num_elements() == 1
  if not ok:
    one_element = '' if strict else ' (or hold one element)'
    raise StepSpecError(
        f"RLDS step field '{fields.STEPS}/{name}' must be {kind} "
        f'scalar{one_element}, got {paths.spec_text(spec)}.')


def _is_real_number(dtype: tf.DType) -> bool:
  return (dtype.is_floating or dtype.is_integer) and dtype != tf.bool


def _check_dense(structure: Any, path: str) -> None:
  """Every leaf must be a dense tensor: Reverb stores nothing else."""
  for leaf_path, leaf in paths.flatten_with_paths(structure, path):
    if not isinstance(leaf, tf.TensorSpec):
      raise StepSpecError(
          f"RLDS step field '{leaf_path}' must be a dense tensor, got "
          f'{paths.spec_text(leaf)}.')


def _episode_text(spec: Any) -> str:
  """What the elements of a dataset without `steps` hold, in one sentence."""
  if not isinstance(spec, dict):
    return (f'Each element is {paths.spec_text(spec)}, not a dict with '
            f"'{fields.STEPS}'.")
  held = paths.nest_text(spec)
  if fields.IS_FIRST in spec:
    return (f'Its elements are RLDS steps ({held}), not episodes: pass a '
            f"dataset of {{'{fields.STEPS}': Dataset of steps}}.")
  return f'Its elements hold {held or "no fields"}.'
