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
(buckets - 1)) of the truth instead. The size is 2 * buckets * (a count, a
least and a greatest value), 48 KB an element, whatever the number of
values.
"""

import math
from typing import Tuple

import numpy as np

RELATIVE_ACCURACY = 0.01
BUCKETS = 1024
# The `top` of a histogram that holds nothing yet.
_EMPTY = np.iinfo(np.int64).min // 4


class _Store:
  """One sign's buckets, [elements, buckets], a window per element: counts,
  and the least and greatest magnitude each bucket holds."""

  def __init__(self, elements: int, buckets: int):
    self.counts = np.zeros([elements, buckets], np.int64)
    self.low = np.full([elements, buckets], np.inf)
    self.high = np.full([elements, buckets], -np.inf)
    self.top = np.full([elements], _EMPTY, np.int64)

  @property
  def nbytes(self) -> int:
    return sum(array.nbytes for array in (self.counts, self.low, self.high,
                                          self.top))

  def add(self, keys: np.ndarray, magnitudes: np.ndarray,
          selected: np.ndarray) -> None:
    """Counts `magnitudes` [n, elements] of `keys` where `selected`."""
    elements, buckets = self.counts.shape
    if not selected.any():
      return
    highest = np.where(selected, keys, _EMPTY).max(axis=0)
    self._raise_tops(np.maximum(self.top, highest))
    bucket = np.clip(keys - (self.top - buckets + 1), 0, buckets - 1)
    flat = (np.arange(elements) * buckets + bucket)[selected]
    self.counts += np.bincount(flat, minlength=elements * buckets).reshape(
        elements, buckets)
    np.minimum.at(self.low.reshape(-1), flat, magnitudes[selected])
    np.maximum.at(self.high.reshape(-1), flat, magnitudes[selected])

  def _raise_tops(self, tops: np.ndarray) -> None:
    """Moves each element's window up to end at `tops`, the buckets that fall
    below it merged into its lowest one."""
    for element in np.flatnonzero(tops > self.top):
      shift = int(min(tops[element] - self.top[element], self.counts.shape[1]))
      self.counts[element] = _shifted(self.counts[element], shift, np.sum, 0)
      self.low[element] = _shifted(self.low[element], shift, np.min, np.inf)
      self.high[element] = _shifted(self.high[element], shift, np.max, -np.inf)
    self.top = tops

  def keys(self) -> np.ndarray:
    """The key of each bucket, [elements, buckets]."""
    buckets = self.counts.shape[1]
    return self.top[:, None] - buckets + 1 + np.arange(buckets)


def _shifted(row: np.ndarray, shift: int, merge, empty) -> np.ndarray:
  """`row` moved `shift` buckets down, the first `shift + 1` merged."""
  moved = np.full_like(row, empty)
  moved[0] = merge(row[:shift + 1])
  moved[1:len(row) - shift] = row[shift + 1:]
  return moved


class QuantileSketch:
  """Percentiles of each of `elements` streams of numbers (the elements of a
  field), to `relative_accuracy` (module docstring); NaN and infinities are
  left out by the caller."""

  def __init__(self, elements: int, relative_accuracy: float = RELATIVE_ACCURACY,
               buckets: int = BUCKETS):
    if not 0 < relative_accuracy < 1:
      raise ValueError(f'relative_accuracy must be in (0, 1), got '
                       f'{relative_accuracy}')
    self.relative_accuracy = relative_accuracy
    self._gamma = (1 + relative_accuracy) / (1 - relative_accuracy)
    self._log_gamma = math.log(self._gamma)
    self._positive = _Store(elements, buckets)
    self._negative = _Store(elements, buckets)
    self._zeros = np.zeros([elements], np.int64)

  @property
  def nbytes(self) -> int:
    """Bytes the sketch holds: fixed by `elements` and `buckets`."""
    return (self._positive.nbytes + self._negative.nbytes +
            self._zeros.nbytes)

  def add(self, values: np.ndarray, finite: np.ndarray) -> None:
    """Adds `values` [n, elements] (float64) where `finite` is True."""
    magnitude = np.abs(values)
    with np.errstate(divide='ignore', invalid='ignore'):
      keys = np.ceil(np.log(np.where(finite & (magnitude > 0), magnitude, 1.0))
                     / self._log_gamma).astype(np.int64)
    self._positive.add(keys, magnitude, finite & (values > 0))
    self._negative.add(keys, magnitude, finite & (values < 0))
    self._zeros += (finite & (values == 0)).sum(axis=0)

  def percentiles(self, qs: Tuple[float, ...], low: np.ndarray,
                  high: np.ndarray) -> np.ndarray:
    """[len(qs), elements]: percentile q (0..100) of each element, clipped to
    its exact `low` and `high`; NaN for an element with no values."""
    negative, positive = self._negative, self._positive
    # Sorted order: negatives from the largest magnitude down, 0, positives.
    counts = np.concatenate([negative.counts[:, ::-1], self._zeros[:, None],
                             positive.counts], axis=1)
    values = np.concatenate([-self._value(negative)[:, ::-1],
                             np.zeros_like(self._zeros[:, None], np.float64),
                             self._value(positive)], axis=1)
    below = np.cumsum(counts, axis=1)
    total = below[:, -1]
    found = []
    for q in qs:
      rank = np.floor(q / 100 * np.maximum(total - 1, 0))
      index = np.argmax(below > rank[:, None], axis=1)
      value = values[np.arange(len(index)), index]
      value = np.clip(value, low, high) if len(value) else value
      found.append(np.where(total > 0, value, np.nan))
    return np.array(found, np.float64).reshape(len(qs), len(total))

  def _value(self, store: _Store) -> np.ndarray:
    """Each bucket's magnitude: within `relative_accuracy` of all it holds,
    and within the least and greatest it holds (exact if they are equal)."""
    exponent = np.clip(store.keys(), -2000, 2000) * self._log_gamma
    with np.errstate(over='ignore', under='ignore'):
      middle = 2 * np.exp(np.clip(exponent, -745, 709)) / (self._gamma + 1)
    return np.clip(middle, np.minimum(store.low, store.high), store.high)
