"""Each batch's rows per source, computed in Python, as a stream of choices.

    iterator starts      -> `Iterators.start`: a fresh `counts()` generator
                            (its own rounding carry), under a new id
    batch 0, 1, 2, ...   -> `Iterators.next(id)`: (rows per source, '') and
                            which sources are due rows (told to `Demand`);
                            our own error as (no rows, its one line)
      -> Assert(message == '')    the batch fails with that line
      -> [n_0 zeros, n_1 ones, ...] -> unbatched: one source index per row

Python runs through `tf.numpy_function` once per iterator and once per
batch (each call known to `at_exit`), not through `Dataset.from_generator`:
a generator's dataset calls Python again when its iterator is destroyed,
which for an iterator alive at exit is after Python stops serving other
threads (`at_exit`). An exception raised in Python would also carry a whole
traceback into the error's text; errors travel as data and fail in the
graph instead.
"""

import collections
import itertools
import threading
from typing import Callable, Iterator, List, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rlds_reverb.errors import RldsReverbError
from rlds_reverb.mixture import at_exit
from rlds_reverb.mixture import watchdog

# A function yielding, for batch 0, 1, 2, ...: (rows per source, which
# sources are due rows: the watchdog fails the dataset if one stays empty).
BatchCounts = Callable[[], Iterator[Tuple[Sequence[int], Sequence[bool]]]]
# Iterators of one mixture whose counts are kept; an older one's are dropped.
MAX_ITERATORS = 1024


class Iterators:
  """The `counts()` generator of each iterator of one mixture, by id."""

  def __init__(self, counts: BatchCounts, demand: watchdog.Demand,
               num_sources: int):
    self._counts = counts
    self._demand = demand
    self._num_sources = num_sources
    self._ids = itertools.count()
    self._live = collections.OrderedDict()
    self._lock = threading.Lock()

  def start(self) -> np.int64:
    with at_exit.call(), self._lock:
      iterator_id = next(self._ids)
      self._live[iterator_id] = reported(self._counts, self._demand,
                                         self._num_sources)
      if len(self._live) > MAX_ITERATORS:
        self._live.popitem(last=False)
    return np.int64(iterator_id)

  def next(self, iterator_id) -> Tuple[np.ndarray, bytes]:
    """(rows per source, b'') for the iterator's next batch, or (no rows,
    the message to fail with)."""
    with at_exit.call():
      with self._lock:
        rows = self._live.get(int(iterator_id))
      if rows is None:
        return (np.zeros(self._num_sources, np.int64),
                f'This iterator of the mixture was dropped: '
                f'{MAX_ITERATORS} newer iterators of it were made '
                f'since.'.encode())
      counts, message = next(rows)
      return np.asarray(counts, np.int64), message.encode()


def reported(counts: BatchCounts, demand: watchdog.Demand,
             num_sources: int) -> Iterator[Tuple[List[int], str]]:
  """(rows per source, '') per batch, telling `demand` who is due rows; once
  our own error is raised, (no rows, its text) from then on."""
  batches = counts()
  while True:
    try:  # Not around the yield: closing the generator would pass here.
      rows, due = next(batches)
    except RldsReverbError as e:
      message = str(e)
      break
    demand.set(due)
    yield list(rows), ''
  while True:
    yield [0] * num_sources, message


def choices(counts: BatchCounts, demand: watchdog.Demand,
            num_sources: int) -> tf.data.Dataset:
  """int64 source indices, B per batch: batch k's rows in source order."""
  iterators = Iterators(counts, demand, num_sources)
  ids = tf.data.Dataset.from_tensors(0).map(
      lambda _: tf.numpy_function(iterators.start, [], tf.int64))
  return ids.flat_map(
      lambda iterator_id: tf.data.Dataset.from_tensors(iterator_id).repeat()
  ).map(lambda iterator_id: batch_rows(iterators, iterator_id, num_sources)
        ).map(checked_row_sources).unbatch()


def batch_rows(iterators: Iterators, iterator_id: tf.Tensor,
               num_sources: int) -> Tuple[tf.Tensor, tf.Tensor]:
  counts, message = tf.numpy_function(iterators.next, [iterator_id],
                                      (tf.int64, tf.string))
  counts.set_shape([num_sources])
  message.set_shape([])
  return counts, message


def checked_row_sources(counts: tf.Tensor, message: tf.Tensor) -> tf.Tensor:
  """`row_sources(counts)`, failing with `message` unless it is ''."""
  check = tf.debugging.Assert(tf.equal(message, ''), [message])
  with tf.control_dependencies([check]):
    return row_sources(counts)


def row_sources(counts: tf.Tensor) -> tf.Tensor:
  """int64[B]: counts[0] zeros, then counts[1] ones, ..."""
  return tf.repeat(tf.range(tf.size(counts, out_type=tf.int64)), counts)
