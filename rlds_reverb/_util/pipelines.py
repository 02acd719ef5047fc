"""The one way the package iterates its own tf.data pipelines.

Each pipeline here reads whole episodes with a fixed parallelism set stage
by stage, so tf.data has nothing to tune or rewrite:
- autotuning off: its model thread only costs; deleting an iterator at the
  end of a push waited up to 0.46 s for it in 3 of 10 pushes of 20,000
  steps here;
- tf.data's default graph rewrites off: they run when each iterator is made
  (a push makes two: the checks' read and the write), cost about a fifth of
  a small push's CPU, and found nothing to gain on whole episodes
  (`benchmarks/push_throughput.py`, docs/performance.md).
"""

import tensorflow as tf

# Blocks read ahead of the one being used: one decoded, one in flight.
AHEAD = 2


def _fixed_options() -> tf.data.Options:
  options = tf.data.Options()
  options.autotune.enabled = False
  options.experimental_optimization.apply_default_optimizations = False
  return options


def fixed(dataset: tf.data.Dataset) -> tf.data.Dataset:
  """`dataset`, AHEAD elements prefetched, no autotuning, no rewrites."""
  return dataset.prefetch(AHEAD).with_options(_fixed_options())


def numpy_of(dataset: tf.data.Dataset):
  """`fixed(dataset)` as numpy elements."""
  return fixed(dataset).as_numpy_iterator()
