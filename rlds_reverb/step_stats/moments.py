"""Count, mean, spread, min and max in one pass, merged block by block.

Each block of steps gives, per element, its count n, mean m and M2 (the sum of
squared deviations from m), in float64, two passes over the block in memory.
Blocks merge with Chan, Golub and LeVeque's rule (the parallel form of
Welford's), which never subtracts two large sums:

    n = na + nb;   d = mb - ma;   m = ma + d * nb / n
    M2 = M2a + M2b + d^2 * na * nb / n;        std = sqrt(M2 / n)

NaN and infinities are counted apart (`nonfinite`) and left out of the rest.
"""

import numpy as np


class Moments:
  """Running moments of `elements` streams of numbers."""

  def __init__(self, elements: int):
    self.count = np.zeros([elements], np.int64)
    self.nonfinite = np.zeros([elements], np.int64)
    self.mean = np.zeros([elements], np.float64)
    self.m2 = np.zeros([elements], np.float64)
    self.min = np.full([elements], np.inf)
    self.max = np.full([elements], -np.inf)

  def add(self, values: np.ndarray, finite: np.ndarray) -> None:
    """Adds `values` [n, elements] (float64) where `finite` is True."""
    count = finite.sum(axis=0)
    self.nonfinite += len(values) - count
    kept = np.where(finite, values, 0.0)
    with np.errstate(invalid='ignore', divide='ignore'):
      mean = kept.sum(axis=0) / count
    deviation = np.where(finite, values - mean, 0.0)
    self._merge(count, np.nan_to_num(mean), (deviation * deviation).sum(axis=0))
    self.min = np.minimum(self.min, np.where(finite, values, np.inf).min(axis=0))
    self.max = np.maximum(self.max, np.where(finite, values, -np.inf).max(axis=0))

  def _merge(self, count, mean, m2) -> None:
    total = self.count + count
    share = np.divide(count, total, out=np.zeros_like(mean), where=total > 0)
    delta = mean - self.mean
    self.m2 = self.m2 + m2 + delta * delta * self.count * share
    self.mean = self.mean + delta * share
    self.count = total

  def std(self) -> np.ndarray:
    """Population standard deviation (numpy's default, ddof=0)."""
    with np.errstate(invalid='ignore', divide='ignore'):
      return np.where(self.count > 0, np.sqrt(self.m2 / self.count), np.nan)

  def pooled(self) -> 'Moments':
    """The moments of all elements together, one stream (Chan's rule over
    the elements)."""
    whole = Moments(1)
    whole.nonfinite[:] = self.nonfinite.sum()
    total = self.count.sum()
    whole.count[:] = total
    if total:
      mean = (self.count * self.mean).sum() / total
      whole.mean[:] = mean
      whole.m2[:] = (self.m2 + self.count * (self.mean - mean) ** 2).sum()
      whole.min[:] = self.min.min()
      whole.max[:] = self.max.max()
    return whole

  def means(self) -> np.ndarray:
    """The means, NaN where an element has no finite value."""
    return np.where(self.count > 0, self.mean, np.nan)

  def extremes(self):
    """(min, max), NaN where an element has no finite value."""
    has = self.count > 0
    return np.where(has, self.min, np.nan), np.where(has, self.max, np.nan)
