"""TF-Agents trajectories of one episode to RLDS steps: the rules inverted.

Trajectory t becomes RLDS step t; the columns map one to one:

    forward (step_types, trajectories)      inverse (here)
    RLDS steps t, t+1  -> trajectory t      trajectory t  -> RLDS step t
    step_type      of step t                is_first  step_type FIRST, or
                                                      (LAST, LAST): one step
                                            is_last   step_type LAST
    next_step_type of step t+1              (checked: one whole episode)
    discount  0 if step t is a terminal     discount  the trajectory's
              last step, else step t's
                                            is_terminal  on the last step: the
                                              discount of the trajectory whose
                                              next_step_type is LAST is 0
    observation, action, reward             the same
    policy_info_fn(step t, step t+1)        policy_info: a step field

The trajectories of one episode, in order, have the step types

    T >= 2:  FIRST MID ... MID LAST        next: MID ... MID LAST FIRST
    T == 1:  LAST                          next: LAST   (a one-step episode)

A TF-Agents driver gives the first kind: its last trajectory is the boundary
(LAST -> FIRST), whose reward and discount are the reset's (0 and 1). The
trajectory before it (-> LAST) carries the environment's final discount: 0
when the episode terminated. An environment that truncates with discount 0
(gym's CartPole-v1 `TimeLimit`) looks terminated: pass `terminal=False`.

What does not round-trip:
  RLDS -> trajectories -> RLDS
    - a terminal last step's discount comes back 0 (the forward rule sets it);
    - `is_terminal` comes back as (discount before the last step == 0), for a
      one-step episode (its own discount == 0): data whose flag disagrees
      comes back otherwise unless `terminal` is given;
    - fields other than the seven and episode metadata: trajectories have no
      place for them (only what `policy_info_fn` returns comes back, as the
      `policy_info` field); defaults and one-element fields of
      `specs.step_spec.StepFormat` come back as the conversion read them
      (discount as float32, flags as scalars).
  trajectories -> RLDS -> trajectories
    - the boundary trajectory of a terminal episode comes back with discount
      0, not the reset's 1 (the forward rule, as TF-Agents' own);
    - tuples in observations or policy_info come back as dicts (TFDS has no
      tuples), namedtuples as dicts of their fields.
"""

import collections.abc
from typing import Any, Dict, Mapping, Optional

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import trajectory as trajectory_lib
import tree

from rlds_reverb.convert import step_types
from rlds_reverb.errors import MalformedEpisodeError
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths

POLICY_INFO = 'policy_info'


def trajectories_to_steps(
    trajectory: trajectory_lib.Trajectory,
    *,
    terminal: Optional[bool] = None,
    policy_info_field: str = POLICY_INFO,
) -> Dict[str, Any]:
  """The RLDS steps of one episode's trajectories, each field [T, ...].

  Args:
    trajectory: a `Trajectory` of numpy arrays (or values numpy takes), each
      with a leading time axis: one whole episode, in order (see the module).
    terminal: whether the episode terminated; None reads it from the
      discount of the trajectory whose next step is LAST (0: terminated).
    policy_info_field: the step field that holds `policy_info` (left out
      when `policy_info` is `()`).

  Returns:
    {observation, action, reward, discount, is_first, is_last, is_terminal,
    [policy_info]}, numpy arrays with the trajectory's dtypes; namedtuples
    as dicts.

  Raises:
    MalformedEpisodeError: no trajectories, fields of different lengths, or
      step types that are not one whole episode (says which trajectory).
    ValueError: `policy_info_field` is one of the seven RLDS fields.
  """
  _check_field_name(policy_info_field)
  arrays = as_dicts(tree.map_structure(np.asarray, trajectory))
  _check_lengths(arrays)
  step_type = arrays.step_type.astype(np.int32)
  next_step_type = arrays.next_step_type.astype(np.int32)
  _check_step_types(step_type, next_step_type)
  is_last = step_type == step_types.LAST
  before_boundary = next_step_type == step_types.LAST
  if terminal is None:  # One trajectory is before the boundary (checked).
    terminal = bool(np.all(arrays.discount[before_boundary] == 0))
  steps = {
      fields.OBSERVATION: arrays.observation,
      fields.ACTION: arrays.action,
      fields.REWARD: arrays.reward,
      fields.DISCOUNT: arrays.discount,
      fields.IS_FIRST: (step_type == step_types.FIRST) | (
          is_last & before_boundary),
      fields.IS_LAST: is_last,
      fields.IS_TERMINAL: is_last & terminal,
  }
  if not _is_empty(arrays.policy_info):
    steps[policy_info_field] = arrays.policy_info
  return steps


def rlds_step_spec(trajectory_spec: trajectory_lib.Trajectory, *,
                   policy_info_field: str = POLICY_INFO) -> Dict[str, Any]:
  """The spec of one step of `trajectories_to_steps`' output.

  Leaves are those of `trajectory_spec` (`tf.TensorSpec`s or TF-Agents'
  array specs); the flags are `tf.bool` scalars; namedtuples become dicts.
  """
  _check_field_name(policy_info_field)
  spec = as_dicts(trajectory_spec)
  flag = tf.TensorSpec([], tf.bool)
  step_spec = {
      fields.OBSERVATION: spec.observation,
      fields.ACTION: spec.action,
      fields.REWARD: spec.reward,
      fields.DISCOUNT: spec.discount,
      fields.IS_FIRST: flag,
      fields.IS_LAST: flag,
      fields.IS_TERMINAL: flag,
  }
  if not _is_empty(spec.policy_info):
    step_spec[policy_info_field] = spec.policy_info
  return step_spec


def as_dicts(structure: Any) -> Any:
  """`structure` with every namedtuple below the top as a dict of its fields,
  and every mapping as a dict; other values as they are.

  TFDS has no tuples: a namedtuple comes back from a dataset as a dict. The
  top level keeps its type, so a `Trajectory` stays one.
  """
  if _is_namedtuple(structure):
    return type(structure)(*[_as_dict(value) for value in structure])
  return _as_dict(structure)


def _as_dict(structure: Any) -> Any:
  if _is_namedtuple(structure):
    return {name: _as_dict(value)
            for name, value in zip(structure._fields, structure)}
  if isinstance(structure, collections.abc.Mapping):  # Faster than typing's.
    return {key: _as_dict(value) for key, value in structure.items()}
  return structure


def check_flags(steps: Mapping[str, np.ndarray], where: str) -> None:
  """Raises unless the flags of `steps` ([T] bools) are those of one episode:
  is_first at step 0 only, is_last at the last step only, is_terminal on the
  last step or nowhere (the forward conversion's checks, on numpy).

  Raises:
    MalformedEpisodeError: '{where}: steps/is_last is True at step 3 of 10,
      ...'.
  """
  length = len(steps[fields.IS_FIRST])
  index = np.arange(length)
  for name, expected, rule in (
      (fields.IS_FIRST, index == 0, 'only step 0 is first'),
      (fields.IS_LAST, index == length - 1, 'only the last step is last'),
      (fields.IS_TERMINAL, steps[fields.IS_TERMINAL] & (index == length - 1),
       'only the last step may be terminal')):
    wrong = np.flatnonzero(steps[name] != expected)
    if wrong.size:
      step = int(wrong[0])
      raise MalformedEpisodeError(
          f'{where}: {fields.STEPS}/{name} is {bool(steps[name][step])} at '
          f'step {step} of {length}; {rule}.')


def _check_field_name(name: str) -> None:
  if name in fields.STEP_FEATURES:
    raise ValueError(
        f"policy_info_field '{name}' is an RLDS step field; choose another "
        f'name.')


def _check_lengths(arrays: trajectory_lib.Trajectory) -> None:
  """Every field has T >= 1 as its leading dimension, T of step_type."""
  length = np.shape(arrays.step_type)[0] if np.ndim(arrays.step_type) else 0
  if length == 0:
    raise MalformedEpisodeError(
        'The episode has no trajectories: step_type is '
        f'{paths.shape_text(np.shape(arrays.step_type))}; expected [T] with '
        f'T >= 1.')
  if all(_leads_with(leaf, length) for leaf in tree.flatten(arrays)):
    return  # The usual case, without the cost of naming every path.
  for path, leaf in paths.flatten_with_paths(arrays._asdict()):
    if not _leads_with(leaf, length):
      raise MalformedEpisodeError(
          f'Trajectory field {path} has shape '
          f'{paths.shape_text(np.shape(leaf))}; every '
          f'field needs the leading dimension of step_type, {length}.')


def _leads_with(leaf, length: int) -> bool:
  shape = np.shape(leaf)
  return bool(shape) and shape[0] == length


def _check_step_types(step_type: np.ndarray, next_step_type: np.ndarray):
  """Raises unless the step types are one whole episode's (module doc)."""
  length = len(step_type)
  expected, expected_next = _episode_step_types(length)
  wrong = np.flatnonzero((step_type != expected) |
                         (next_step_type != expected_next))
  if wrong.size:
    t = int(wrong[0])
    name = step_types.name
    raise MalformedEpisodeError(
        f'Trajectory {t} of {length} goes {name(step_type[t])} -> '
        f'{name(next_step_type[t])}; one episode of {length} goes '
        f'{name(expected[t])} -> {name(expected_next[t])} there '
        f'({_pattern(length)}).')


def _episode_step_types(length: int):
  """(step_type, next_step_type) of one whole episode of `length`."""
  if length == 1:
    return np.array([step_types.LAST]), np.array([step_types.LAST])
  step_type = np.full(length, step_types.MID)
  step_type[0], step_type[-1] = step_types.FIRST, step_types.LAST
  next_step_type = np.full(length, step_types.MID)
  next_step_type[-2], next_step_type[-1] = step_types.LAST, step_types.FIRST
  return step_type, next_step_type


def _pattern(length: int) -> str:
  if length == 1:
    return 'a one-step episode is LAST -> LAST'
  return 'FIRST, MID..., LAST, each followed by the next, the last by FIRST'


def _is_namedtuple(value) -> bool:
  return isinstance(value, tuple) and hasattr(value, '_fields')


def _is_empty(value) -> bool:
  return isinstance(value, (tuple, list, dict)) and not value and not (
      _is_namedtuple(value))
