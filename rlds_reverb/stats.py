"""Episode lengths and returns of an RLDS dataset, for `rlds-reverb inspect`.

One tf.data reduce per episode (no Python per step). A return is the sum of
an episode's rewards; a nested or vector reward is summed over all its parts.
"""

import dataclasses
from typing import Dict

import numpy as np
import tensorflow as tf

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
  """Reads `rlds_data` once; empty episodes count with length and return 0."""
  step_spec_lib.steps_spec(rlds_data)
  per_episode = rlds_data.map(_length_and_return).batch(1024)
  lengths, returns = [], []
  for batch_lengths, batch_returns in per_episode.as_numpy_iterator():
    lengths.append(batch_lengths)
    returns.append(batch_returns)
  return EpisodeStats(
      np.concatenate(lengths) if lengths else np.zeros([0], np.int64),
      np.concatenate(returns) if returns else np.zeros([0], np.float64))


def summary(values: np.ndarray) -> Dict[str, float]:
  """min / mean / median / max; all None when there are no values."""
  if len(values) == 0:  # pylint: disable=g-explicit-length-test
    return {'min': None, 'mean': None, 'median': None, 'max': None}
  return {
      'min': _number(np.min(values)),
      'mean': float(np.mean(values)),
      'median': _number(np.median(values)),
      'max': _number(np.max(values)),
  }


def _number(value):
  value = value.item()
  return int(value) if isinstance(value, int) else float(value)


def _length_and_return(episode):
  rewards = episode[fields.STEPS].map(_step_reward)
  return rewards.reduce((tf.constant(0, tf.int64), tf.constant(0.0, tf.float64)),
                        _accumulate)


def _step_reward(step):
  """The step's reward summed over all its parts, as float64."""
  parts = [tf.reduce_sum(tf.cast(leaf, tf.float64))
           for leaf in tf.nest.flatten(step[fields.REWARD])]
  return tf.add_n(parts) if parts else tf.constant(0.0, tf.float64)


def _accumulate(state, reward):
  length, total = state
  return length + 1, total + reward
