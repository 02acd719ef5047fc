"""Numpy trajectory blocks as the flat rows Reverb's writers append."""

from typing import List

import numpy as np
import tree
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory


def flat_columns(block: trajectory.Trajectory) -> List[np.ndarray]:
  """The block's leaves in `tree.flatten` order, each [T, ...]."""
  return [np.asarray(leaf) for leaf in tree.flatten(block)]


def pad_columns(block: trajectory.Trajectory, num_rows: int) -> List[np.ndarray]:
  """`num_rows` zero boundary steps (LAST -> FIRST), TF-Agents' padding.

  As `ReverbAddTrajectoryObserver._get_padding_step`: zeros everywhere, with
  step_type LAST and next_step_type FIRST.
  """
  def zeros(leaf):
    leaf = np.asarray(leaf)
    return np.zeros((num_rows,) + leaf.shape[1:], leaf.dtype)
  pad = tree.map_structure(zeros, block)
  pad = pad._replace(
      step_type=np.full(num_rows, ts.StepType.LAST, pad.step_type.dtype),
      next_step_type=np.full(num_rows, ts.StepType.FIRST,
                             pad.next_step_type.dtype))
  return [np.asarray(leaf) for leaf in tree.flatten(pad)]

