"""The trajectories a driver gave, held as one growable array per leaf.

    driver step n: the trajectory's leaves [B, ...] (or [...] unbatched)
      -> copied into row n of each leaf's array [rows, B, ...]
    an episode of env i ends at row e (it began at row s)
      -> window(s, e + 1, i): each leaf's rows s..e of column i, [T, ...]
    release(s'): rows before s' are no longer needed; the space is reused

Copying each step into place costs about a microsecond per leaf, keeps what
was recorded safe from environments that reuse their arrays, and leaves
whole episodes stacked already: nothing is stacked at the episode's end.
The rows kept span the oldest open episode, so memory follows the longest
episode, not the number recorded.
"""

from typing import List, Sequence, Tuple

import numpy as np

_INITIAL_ROWS = 64


class StepColumns:
  """Rows of flat trajectory leaves, indexed by the driver step that gave
  them (0, 1, ...); the rows still needed, only."""

  def __init__(self, dtypes: Sequence[np.dtype],
               shapes: Sequence[Tuple[int, ...]]):
    """`shapes` of one driver step's leaves: batch dimension included."""
    self._arrays = [np.zeros((_INITIAL_ROWS,) + tuple(shape), dtype)
                    for dtype, shape in zip(dtypes, shapes)]
    self._first = 0  # The step held in row 0.
    self._next = 0  # The step the next append gets.
    self._kept = 0  # Steps before this one may be dropped.

  @property
  def next_step(self) -> int:
    return self._next

  def append(self, leaves: Sequence[np.ndarray]) -> int:
    """Copies one driver step's leaves in; returns the step's index."""
    row = self._next - self._first
    if row == len(self._arrays[0]):
      row = self._make_room()
    for array, leaf in zip(self._arrays, leaves):
      array[row] = leaf
    self._next += 1
    return self._next - 1

  def window(self, start: int, stop: int, env=None) -> List[np.ndarray]:
    """Each leaf's steps start..stop-1 ([T, ...]), of batch column `env`.

    Views: valid until the next `append`.
    """
    rows = slice(start - self._first, stop - self._first)
    if env is None:
      return [array[rows] for array in self._arrays]
    return [array[rows, env] for array in self._arrays]

  def release(self, keep_from: int) -> None:
    """Steps before `keep_from` will not be asked for again."""
    self._kept = max(self._kept, min(keep_from, self._next))

  def _make_room(self) -> int:
    """Moves the kept rows to the front, growing the arrays if they are more
    than half full; returns the row of the next step."""
    kept = self._next - self._kept
    start = self._kept - self._first
    capacity = len(self._arrays[0])
    grow = kept * 2 > capacity
    for index, array in enumerate(self._arrays):
      moved = (np.zeros((capacity * 2,) + array.shape[1:], array.dtype)
               if grow else array)
      moved[:kept] = array[start:start + kept]  # numpy copes with overlap.
      self._arrays[index] = moved
    self._first = self._kept
    return kept
