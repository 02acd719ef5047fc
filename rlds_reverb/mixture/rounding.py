"""Rows per source in each batch: largest remainder, remainders carried.

    weights w (>= 0, sum > 0), batch size B          1 : 2 : 3, B = 64
      -> shares s = w / sum(w) * B                   10.67  21.33  32.00
      -> floor(s) each                               10     21     32
      -> the B - sum(floor(s)) rows left go to the sources with the
         largest credit: the remainders s - floor(s) summed over the
         batches so far, less the rows they were given for them (ties:
         the earlier source)
      -> batch 0: [11, 21, 32]; 1: [10, 22, 32]; 2: [11, 21, 32]; ...

Every batch holds floor(s_i) or floor(s_i) + 1 rows of source i (in the
first batch exactly largest-remainder rounding), B rows in all. Carrying the
remainders keeps the long run true to the weights: over K batches of the same
weights, source i gets K * s_i rows to within one. Rounding each batch alone
would give 11 of 64 rows to the first source every time (17.2% instead of
16.7%), and a source whose share is under half a row nothing at all.
"""

from typing import List, Sequence

import numpy as np


class Apportioner:
  """Turns each batch's weights into its rows per source, carrying credit."""

  def __init__(self, num_sources: int, batch_size: int):
    self.batch_size = batch_size
    self._credit = np.zeros(num_sources)

  def counts(self, weights: Sequence[float]) -> List[int]:
    """Rows per source for the next batch; `weights` are checked numbers
    (>= 0, finite, some > 0). A source of weight 0 gets no row and loses
    its credit."""
    weights = np.asarray(weights, np.float64)
    shares = weights / weights.sum() * self.batch_size
    counts = np.floor(shares).astype(np.int64)
    active = weights > 0
    self._credit[~active] = 0.0
    self._credit[active] += shares[active] - counts[active]
    left = self.batch_size - int(counts.sum())
    order = sorted(np.flatnonzero(active), key=lambda i: -self._credit[i])
    for source in order[:left]:
      counts[source] += 1
      self._credit[source] -= 1.0
    return counts.tolist()
