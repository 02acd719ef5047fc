"""Percentiles in one pass and bounded memory: a relative-accuracy sketch.

Exact percentiles need every value; this keeps, per element of a field, a
histogram of logarithmic buckets (DDSketch: Masson, Rim and Lee, VLDB 2019):

    x > 0 -> bucket k = ceil(log_gamma(x)), covering (gamma^(k-1), gamma^k]
    x < 0 -> the same on |x|, in a second histogram;   x == 0 -> a count
    gamma = (1 + a) / (1 - a), a = `relative_accuracy`

A bucket's value 2 gamma^k / (gamma + 1) is within a * |x| of every x in it;
it is then clipped to the least and greatest x the bucket holds, so that a
bucket of one value (a constant, a reward of 1.0, most integers) gives that
value exactly. So the percentile q returned is within a * |x_q| of x_q, the
value of rank floor(q / 100 * (n - 1)) in sorted order (`np.percentile(...,
method='lower')`).

Memory: each histogram keeps the `buckets` highest buckets of its element
([top - buckets + 1, top]); smaller magnitudes fall into the lowest one, as
DDSketch's collapsing store does. With a = 0.01 and 1,024 buckets that is
8.9 decades below the largest |x| of the element: a percentile whose value
is smaller than that is within that bucket's bound (|x| <= max |x| * gamma^-
(buckets - 1)) of the truth instead. The size is 2 * buckets + 1 cells of
(a count, a least and a greatest value), 48 KB an element, whatever the
number of values.

Pooled over a field's elements (`pooled`): every element's buckets added,
each at its middle value, to one sketch of the same gamma; a middle falls in
the bucket it came from, so the bound holds for the pooled values too.
"""

import math
from typing import Tuple

import numpy as np

RELATIVE_ACCURACY = 0.01
BUCKETS = 1024
# The `top` of a window that holds nothing yet.
_EMPTY = np.iinfo(np.int64).min // 4


def _shifted(row: np.ndarray, shift: int, merge, empty) -> np.ndarray:
  """`row` (buckets from the smallest magnitude up) moved `shift` buckets
  down, the first `shift + 1` merged into one."""
  shift = min(shift, len(row))
  moved = np.full_like(row, empty)
  moved[0] = merge(row[:shift + 1])
  moved[1:len(row) - shift] = row[shift + 1:]
  return moved


class QuantileSketch:
  """Percentiles of each of `elements` streams of numbers (the elements of a
  field), to `relative_accuracy` (module docstring).

  One row per element, its columns in sorted order: `buckets` negative ones
  (the largest magnitude first), the zeros, `buckets` positive ones; for
  each, a count and the least and greatest value it holds. A last cell
  takes what is left out (NaN, infinities) and is never read.
  """

  def __init__(self, elements: int, relative_accuracy: float = RELATIVE_ACCURACY,
               buckets: int = BUCKETS):
    if not 0 < relative_accuracy < 1:
      raise ValueError(f'relative_accuracy must be in (0, 1), got '
                       f'{relative_accuracy}')
    self.relative_accuracy = relative_accuracy
    self._gamma = (1 + relative_accuracy) / (1 - relative_accuracy)
    self._log_gamma = math.log(self._gamma)
    self._elements, self._buckets = elements, buckets
    cells = elements * (2 * buckets + 1) + 1
    self._counts = np.zeros([cells], np.int64)
    self._low = np.full([cells], np.inf)
    self._high = np.full([cells], -np.inf)
    self._top_positive = np.full([elements], _EMPTY, np.int64)
    self._top_negative = np.full([elements], _EMPTY, np.int64)

  @property
  def nbytes(self) -> int:
    """Bytes the sketch holds: fixed by `elements` and `buckets`."""
    return sum(array.nbytes for array in (
        self._counts, self._low, self._high, self._top_positive,
        self._top_negative))

  def add(self, values: np.ndarray, finite: np.ndarray) -> None:
    """Adds `values` [n, elements] (float64) where `finite` is True."""
    self._add(values, finite, None, values, values)

  def pooled(self) -> 'QuantileSketch':
    """One sketch of all the elements' values: each bucket's count, least and
    greatest value added at its middle, which falls in the same bucket of the
    same gamma (so the bound holds), or in the lowest one kept."""
    pooled = QuantileSketch(1, self.relative_accuracy, self._buckets)
    held = self._counts[:-1] > 0
    pooled._add(self._values().reshape(-1)[held][:, None],  # pylint: disable=protected-access
                np.ones([int(held.sum()), 1], bool),
                self._counts[:-1][held], self._low[:-1][held][:, None],
                self._high[:-1][held][:, None])
    return pooled

  def _add(self, values, finite, weights, lows, highs) -> None:
    """Counts `values` [n, elements] where `finite` (each `weights` times, if
    given), with the least and greatest values `lows` and `highs`."""
    buckets = self._buckets
    positive, negative = finite & (values > 0), finite & (values < 0)
    with np.errstate(divide='ignore', invalid='ignore'):
      keys = np.ceil(np.log(np.where(positive | negative, np.abs(values), 1.0))
                     / self._log_gamma).astype(np.int64)
    self._raise(self._top_positive, keys, positive, sign=1)
    self._raise(self._top_negative, keys, negative, sign=-1)
    above = keys - (self._top_positive - buckets + 1)
    below = keys - (self._top_negative - buckets + 1)
    column = np.where(positive, buckets + 1 + np.clip(above, 0, buckets - 1),
                      np.where(negative,
                               buckets - 1 - np.clip(below, 0, buckets - 1),
                               buckets))
    cell = np.where(finite, np.arange(self._elements) * (2 * buckets + 1)
                    + column, len(self._counts) - 1).reshape(-1)
    self._counts += np.bincount(cell, weights, len(self._counts)).astype(
        np.int64) if weights is not None else np.bincount(
            cell, minlength=len(self._counts))
    with np.errstate(invalid='ignore'):  # NaN, into the cell never read.
      np.minimum.at(self._low, cell, lows.reshape(-1))
      np.maximum.at(self._high, cell, highs.reshape(-1))

  def _raise(self, tops: np.ndarray, keys: np.ndarray, selected: np.ndarray,
             sign: int) -> None:
    """Moves each element's window of one sign up to its highest key, the
    buckets that fall below it merged into its lowest one."""
    highest = np.where(selected, keys, _EMPTY).max(axis=0) if len(keys) else (
        tops)
    buckets, width = self._buckets, 2 * self._buckets + 1
    for element in np.flatnonzero(highest > tops):
      shift = int(min(highest[element] - tops[element], buckets))
      start = element * width + (buckets + 1 if sign > 0 else 0)
      window = slice(start, start + buckets)
      order = slice(None) if sign > 0 else slice(None, None, -1)
      for array, merge, empty in ((self._counts, np.sum, 0),
                                  (self._low, np.min, np.inf),
                                  (self._high, np.max, -np.inf)):
        array[window] = _shifted(array[window][order], shift, merge,
                                 empty)[order]
      tops[element] = highest[element]

  def percentiles(self, qs: Tuple[float, ...]) -> np.ndarray:
    """[len(qs), elements]: percentile q (0..100) of each element, NaN for an
    element with no values."""
    width = 2 * self._buckets + 1
    counts = self._counts[:-1].reshape(self._elements, width)
    values = np.clip(self._values(), self._low[:-1].reshape(counts.shape),
                     self._high[:-1].reshape(counts.shape))
    below = np.cumsum(counts, axis=1)
    total = below[:, -1]
    found = []
    for q in qs:
      rank = np.floor(q / 100 * np.maximum(total - 1, 0))
      index = np.argmax(below > rank[:, None], axis=1)
      value = values[np.arange(self._elements), index]
      found.append(np.where(total > 0, value, np.nan))
    return np.array(found, np.float64).reshape(len(qs), self._elements)

  def _values(self) -> np.ndarray:
    """[elements, columns]: each bucket's value, within `relative_accuracy`
    of all it holds."""
    buckets = self._buckets
    offsets = np.arange(buckets)
    positive = self._top_positive[:, None] - buckets + 1 + offsets
    negative = (self._top_negative[:, None] - buckets + 1 + offsets)[:, ::-1]
    zeros = np.zeros([self._elements, 1])
    return np.concatenate([-self._middle(negative), zeros,
                           self._middle(positive)], axis=1)

  def _middle(self, keys: np.ndarray) -> np.ndarray:
    exponent = np.clip(keys, -2000, 2000) * self._log_gamma
    with np.errstate(over='ignore', under='ignore'):
      return 2 * np.exp(np.clip(exponent, -745, 709)) / (self._gamma + 1)
