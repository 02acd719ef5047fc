"""Numpy trajectory blocks as the flat rows Reverb's writers append."""

from typing import List

import numpy as np
import tree
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory


def flat_columns(block: trajectory.Trajectory) -> List[np.ndarray]:
  """The block's leaves in `tree.flatten` order, each [T, ...]."""
  return [np.asarray(leaf) for leaf in tree.flatten(block)]


def zero_rows(leaf: np.ndarray, num_rows: int) -> np.ndarray:
  """`num_rows` rows of `leaf`'s dtype and row shape, as `tf.zeros_like`.

  Strings (numpy `object` arrays of bytes, as tf.data gives them) become
  b''; bool, integers and floats become zeros. `np.zeros` alone would give
  strings the integer 0, which Reverb rejects as a column of the wrong dtype.
  """
  shape = (num_rows,) + leaf.shape[1:]
  if leaf.dtype == object:
    return np.full(shape, b'', dtype=object)
  return np.zeros(shape, leaf.dtype)


def pad_columns(block: trajectory.Trajectory, num_rows: int) -> List[np.ndarray]:
  """`num_rows` zero boundary steps (LAST -> FIRST), TF-Agents' padding.

  As `ReverbAddTrajectoryObserver._get_padding_step`: `tf.zeros_like` of every
  field, with step_type LAST and next_step_type FIRST.
  """
  pad = tree.map_structure(
      lambda leaf: zero_rows(np.asarray(leaf), num_rows), block)
  pad = pad._replace(
      step_type=np.full(num_rows, ts.StepType.LAST, pad.step_type.dtype),
      next_step_type=np.full(num_rows, ts.StepType.FIRST,
                             pad.next_step_type.dtype))
  return [np.asarray(leaf) for leaf in tree.flatten(pad)]
