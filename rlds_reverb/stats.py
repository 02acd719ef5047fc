"""Episode lengths and returns of an RLDS dataset, for `rlds-reverb inspect`.

One episode at a time, its steps whole (no Python or function per step). A
return is the sum of an episode's rewards; a nested or vector reward is
summed over all its parts. A NaN or infinite return is counted apart
(`summary`'s `nonfinite`, `histogram`'s `left_out`), never in the figures.
`histogram` bins them for `inspect --plot`: a few dozen bars at most, whatever
the data, so that drawing costs the same on 100 episodes as on a million.
"""

import dataclasses
import functools
import math
from typing import Dict, Optional

import numpy as np
import tensorflow as tf

from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields
from rlds_reverb.specs import step_spec as step_spec_lib


@dataclasses.dataclass(frozen=True)
class EpisodeStats:
  """Per-episode lengths (steps) and returns, in dataset order."""
  lengths: np.ndarray  # int64 [episodes]
  returns: np.ndarray  # float64 [episodes]

  @property
  def episodes(self) -> int:
    return len(self.lengths)

  @property
  def steps(self) -> int:
    return int(self.lengths.sum())


def episode_stats(rlds_data: tf.data.Dataset) -> EpisodeStats:
  """Reads `rlds_data` once; empty episodes count with length and return 0.

  Each episode's steps are read whole (image fields left encoded when the
  data comes from `load`: a return needs none of them).
  """
  rlds_data = whole_reads.whole(rlds_data, keep_encoded=True)
  step_format = step_spec_lib.step_format(rlds_data)
  if episodes_lib.is_whole(rlds_data):  # A map: no dataset per episode.
    per_episode = rlds_data.map(functools.partial(
        _whole_length_and_return, step_format=step_format))
  else:
    per_episode = rlds_data.flat_map(functools.partial(
        _length_and_return, step_format=step_format))
  per_episode = per_episode.batch(1024)
  lengths, returns = [], []
  for batch_lengths, batch_returns in per_episode.as_numpy_iterator():
    lengths.append(batch_lengths)
    returns.append(batch_returns)
  return EpisodeStats(
      np.concatenate(lengths) if lengths else np.zeros([0], np.int64),
      np.concatenate(returns) if returns else np.zeros([0], np.float64))


def summary(values: np.ndarray) -> Dict[str, float]:
  """min / mean / median / max of the finite values, all None when there
  are none; of float values (returns), also `nonfinite`: the NaN and
  infinite ones, left out of the rest as `step_stats` leaves them out (one
  -inf return would make the min and the mean -inf, and hide the others).
  """
  values = np.asarray(values)
  finite = values[np.isfinite(values)]
  found = {'min': None, 'mean': None, 'median': None, 'max': None}
  if len(finite):
    found = {'min': _number(np.min(finite)), 'mean': float(np.mean(finite)),
             'median': _number(np.median(finite)),
             'max': _number(np.max(finite))}
  if values.dtype.kind == 'f':
    found['nonfinite'] = len(values) - len(finite)
  return found


def _number(value):
  value = value.item()
  return int(value) if isinstance(value, int) else float(value)


def _length_and_return(episode, step_format) -> tf.data.Dataset:
  """One element: (steps, the sum of every reward's parts as float64)."""
  empty = (tf.constant(0, tf.int64), tf.constant(0.0, tf.float64))
  sums = episodes_lib.whole_steps(episode, step_format).map(_length_and_sum)
  return sums.concatenate(tf.data.Dataset.from_tensors(empty)).take(1)


def _whole_length_and_return(episode, step_format):
  return _length_and_sum(episodes_lib.completed_steps(episode, step_format))


def _length_and_sum(steps):
  """For [T, ...] steps: T, and their rewards summed over all parts (a
  nested or vector reward too), as float64."""
  length = tf.shape(steps[fields.IS_FIRST], out_type=tf.int64)[0]
  parts = [tf.reduce_sum(tf.cast(leaf, tf.float64))
           for leaf in tf.nest.flatten(steps[fields.REWARD])]
  return length, tf.add_n(parts) if parts else tf.constant(0.0, tf.float64)


# Bars of a histogram: enough to see a shape, few enough to draw fast.
MAX_BARS = 40
MIN_BARS = 10
# Skewed data: the middle 80% of values spans less than this share of their
# range, so even bars would squeeze 80% of the episodes into 4 of 40 bars.
SKEW_SHARE = 0.1
# Decades an asinh axis shows below the largest value, at most.
DECADES = 4


@dataclasses.dataclass(frozen=True)
class Histogram:
  """`counts[i]` values in [edges[i], edges[i + 1]); the last bar is closed.

  `linear_width` None: even bars on a linear axis. Otherwise the bars are even
  on matplotlib's 'asinh' axis of that linear width: linear near 0,
  logarithmic beyond, so a long tail and the bulk both show. `whole`: the
  values are whole numbers and, on a linear axis, the edges lie halfway
  between them. `left_out` counts non-finite values (NaN or infinite returns),
  which have no bar.
  """
  edges: np.ndarray  # float64 [bars + 1]
  counts: np.ndarray  # int64 [bars]
  linear_width: Optional[float] = None
  whole: bool = False
  left_out: int = 0


def histogram(values: np.ndarray, max_bars: int = MAX_BARS) -> Histogram:
  """Bars for `values` that show both their bulk and their tail.

  Whole numbers over a short range: one bar per number. Skewed values (a
  27,000-step episode among 1-step ones): MAX_BARS even bars on an asinh axis.
  Otherwise even bars, sqrt(len(values)) of them within [MIN_BARS, MAX_BARS];
  of whole numbers, each bar covers the same count of them.
  """
  values = np.asarray(values, np.float64)
  finite = values[np.isfinite(values)]
  left_out = len(values) - len(finite)
  if len(finite) == 0:  # pylint: disable=g-explicit-length-test
    return Histogram(np.zeros([0]), np.zeros([0], np.int64),
                     left_out=left_out)
  low, high = float(finite.min()), float(finite.max())
  spread = float(np.subtract(*np.percentile(finite, [90, 10])))  # Middle 80%.
  whole = bool(np.all(finite == np.round(finite)))
  linear_width = None
  if whole and high - low < max_bars:
    edges = np.arange(low - 0.5, high + 1)
  elif high - low > spread / SKEW_SHARE:
    linear_width = max(spread, (high - low) / 10**DECADES)
    edges = _asinh_edges(low, high, linear_width, max_bars)
  else:
    edges = _even_edges(low, high, _bar_count(len(finite), max_bars), whole)
  counts, _ = np.histogram(finite, edges)
  return Histogram(edges, counts.astype(np.int64), linear_width, whole,
                   left_out)


def _bar_count(num_values: int, max_bars: int) -> int:
  return min(max_bars, max(MIN_BARS, math.ceil(math.sqrt(num_values))))


def _even_edges(low: float, high: float, bars: int, whole: bool) -> np.ndarray:
  if whole:  # Bars of `step` whole numbers each, centred on them.
    step = math.ceil((high - low + 1) / bars)
    return np.arange(low - 0.5, high + step, step)
  if low == high:
    return np.array([low - 0.5, high + 0.5])
  return np.linspace(low, high, bars + 1)


def _asinh_edges(low: float, high: float, linear_width: float,
                 bars: int) -> np.ndarray:
  """Edges even in asinh(x / linear_width), the 'asinh' axis' coordinate."""
  ends = np.arcsinh(np.array([low, high]) / linear_width)
  edges = np.sinh(np.linspace(ends[0], ends[1], bars + 1)) * linear_width
  edges[[0, -1]] = low, high  # Exact, so that no value falls outside.
  return edges
