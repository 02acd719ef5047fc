"""A mixture's watchdog: a dead server or a starved table fails the dataset.

Reverb's sampler never gives up: on a server that does not answer it retries
without end (`Sampler::RunWorker`, backing off up to 1 s), and on an empty
table it waits for an item without end (`rate_limiter_timeout_ms` only
bounds a live server's rate limiter). `next()` on a mixture would then block
for good, in C++, where Ctrl-C cannot reach it. Nothing inside a Reverb
stream fails, so the check runs beside the streams:

    a Python thread, every CHECK_EVERY_S: one server_info per server
      -> Verdict: '' or the one line to fail with
      -> a TF queue of 1 (the thread waits while the last verdict is unread)
                                          |
    the mixture's batches                 v  dequeue: (MARK, empty batch),
      --map--> (REAL, batch) --+     failing with the verdict if it has one
              then END         |          |
                               v          v
          interleave: 2 inputs, each on its own thread (one may block)
            -> take_while(not END) -> filter(REAL) -> shapes restored

The batches pass in their order (one input holds them all); a marker is
dropped unless its verdict is a failure, and then the dataset fails with it
even while the batches' thread is blocked. It fails when (`Verdict`):
  - a server has not answered for `timeout` seconds: naming it, and the
    sources on it;
  - a table that batches take rows from (`Demand`: weight above 0) has been
    empty for `timeout` seconds, its server answering. Tables that remove
    what they hand out are left out: they are empty whenever the streams have
    taken everything ahead, and their own reader fails after `timeout`
    seconds without an item (`reading.ReplayBuffer`).
A server back within `timeout` (restarted, with its items) is waited for:
Reverb's sampler reconnects to it.

Why a thread and a queue, not a generator: tf.data's threads then wait in
TensorFlow, not in Python, and nothing of the watchdog is running in them
when the interpreter exits; the queue is closed then (`at_exit`).
"""

import dataclasses
import threading
import time
from typing import Dict, List, Optional, Sequence

import reverb
import tensorflow as tf

from rlds_reverb.mixture import at_exit

CHECK_EVERY_S = 0.5
ASK_TIMEOUT_S = 1  # server_info's deadline per check; Reverb takes seconds.
# Checks further apart than this (the verdict lay unread: nobody sampled)
# start the clocks afresh: what was seen before the pause is not counted.
FORGET_AFTER_S = 5.0
REAL, MARK, END = 0, 1, 2  # What an element of the interleave is.

TableSizes = Dict[str, int]  # A server's answer: table -> current_size.


@dataclasses.dataclass(frozen=True)
class Place:
  """Where a source's items live, as messages name them."""
  name: str  # 'source 2', 'online'
  address: str
  table: str
  removes: bool  # Sampling removes its items (max_times_sampled > 0).


class Demand:
  """Which sources the batches being built take rows from: set per batch by
  `choices`, read by the watchdog."""

  def __init__(self, num_sources: int):
    self.due = [False] * num_sources

  def set(self, due: Sequence[bool]) -> None:
    self.due = list(due)


class Verdict:
  """The watchdog's judgement over time: '' while all is well, else the
  one-line message the dataset fails with. `now` is passed in (seconds)."""

  def __init__(self, places: Sequence[Place], timeout: float):
    self._places = list(places)
    self._timeout = timeout
    self._silent_since: Dict[str, float] = {}  # address -> first miss
    self._empty_since: Dict[int, float] = {}  # source -> first empty check
    self._last = None  # When the last check was.

  def __call__(self, now: float, answers: Dict[str, Optional[TableSizes]],
               due: Sequence[bool]) -> str:
    """`answers`: per server, its tables' sizes, None if it did not answer."""
    if self._last is not None and now - self._last > FORGET_AFTER_S:
      self._silent_since.clear()
      self._empty_since.clear()
    self._last = now
    for address, sizes in answers.items():
      if sizes is not None:
        self._silent_since.pop(address, None)
      elif self._lasted(self._silent_since, address, now):
        return self.silent_message(address)
    for index, place in enumerate(self._places):
      sizes = answers[place.address]
      if (sizes is None or not due[index] or place.removes
          or sizes.get(place.table, 1) > 0):
        self._empty_since.pop(index, None)
      elif self._lasted(self._empty_since, index, now):
        return self.empty_message(place)
    return ''

  def _lasted(self, since: dict, key, now: float) -> bool:
    """Notes `now` as the start if `key` has none; True once `timeout`
    seconds have passed since."""
    return now - since.setdefault(key, now) >= self._timeout

  def silent_message(self, address: str) -> str:
    # No quotes in these messages: TensorFlow escapes them in an assertion.
    tables = ' and '.join(f'the {place.name} table {place.table}'
                          for place in self._places
                          if place.address == address)
    return (f'The Reverb server at {address} did not answer for '
            f'{self._timeout:g} s, so {tables} cannot be sampled: the server '
            f'stopped or cannot be reached, and Reverb retries without end.')

  def empty_message(self, place: Place) -> str:
    return (f'The {place.name} table {place.table} at {place.address} stayed '
            f'empty for {self._timeout:g} s while batches need its rows, and '
            f'Reverb waits for an item without end: insert items before '
            f'sampling it, or give it no rows.')


def table_sizes(client: reverb.Client) -> Optional[TableSizes]:
  """The server's tables' sizes, or None if it does not answer in time."""
  try:
    infos = client.server_info(timeout=ASK_TIMEOUT_S)
  except (reverb.errors.ReverbError, RuntimeError):  # Deadline; socket closed.
    return None
  return {name: info.current_size for name, info in infos.items()}


class Watchdog:
  """The thread that judges the servers, and the queue it tells the dataset
  through. Starts at once; a daemon, idle while its verdict is unread."""

  def __init__(self, places: Sequence[Place], timeout: float,
               demand: Demand):
    self._places = list(places)
    self._timeout = timeout
    self._demand = demand
    self.queue = tf.queue.FIFOQueue(1, tf.string, shapes=[[]])
    at_exit.register(self.queue)
    threading.Thread(target=self._run, daemon=True,
                     name='rlds_reverb mixture watchdog').start()

  def _run(self) -> None:
    clients = {place.address: reverb.Client(place.address)
               for place in self._places}
    verdict = Verdict(self._places, self._timeout)
    message = ''
    while True:
      if not message:  # A failure stands: every reader gets it.
        answers = {address: table_sizes(client)
                   for address, client in clients.items()}
        message = verdict(time.monotonic(), answers, self._demand.due)
      try:
        self.queue.enqueue(message)  # Waits while the last is unread.
      except tf.errors.CancelledError:  # Closed: the interpreter exits.
        return
      time.sleep(CHECK_EVERY_S)

  def markers(self, spec) -> tf.data.Dataset:
    """(MARK, an empty element of `spec`) per verdict, failing with it
    unless it is ''."""
    return tf.data.Dataset.from_tensors(0).repeat().map(
        lambda _: failed_marker(self.queue.dequeue(), spec))


def guarded(dataset: tf.data.Dataset,
            watchdog: Watchdog) -> tf.data.Dataset:
  """`dataset`'s elements, in order; fails with `watchdog`'s first failure
  even while `dataset` blocks. `dataset` has a static element spec."""
  spec = dataset.element_spec
  real = dataset.map(as_real).concatenate(
      tf.data.Dataset.range(1).map(lambda _: marker(END, spec)))
  markers = watchdog.markers(spec)
  both = tf.data.Dataset.from_tensors(real).concatenate(
      tf.data.Dataset.from_tensors(markers))
  # Not deterministic: a deterministic interleave would wait for the blocked
  # batches' turn. The op's argument overrides the user's tf.data options.
  merged = both.interleave(lambda inner: inner, cycle_length=2,
                           num_parallel_calls=2, deterministic=False)
  return merged.take_while(lambda kind, _: kind != END).filter(
      lambda kind, _: kind == REAL).map(
          lambda _, element: restored(element, spec))


def as_real(*element):
  return tf.constant(REAL, tf.int8), (element if len(element) > 1
                                      else element[0])


def marker(kind: int, spec):
  """(kind, an element of `spec` with 0 rows): nothing to copy."""
  return tf.constant(kind, tf.int8), tf.nest.map_structure(empty, spec)


def failed_marker(message: tf.Tensor, spec):
  """A marker that fails with `message` unless it is ''."""
  check = tf.debugging.Assert(tf.equal(message, ''), [message])
  with tf.control_dependencies([check]):
    return marker(MARK, spec)


def empty(spec: tf.TensorSpec) -> tf.Tensor:
  return tf.zeros([0] + spec.shape.as_list()[1:], spec.dtype)


def restored(element, spec):
  """`element` with `spec`'s static shapes (the interleave relaxed the
  batch dimension, which the markers lack)."""
  return tf.nest.map_structure(
      lambda tensor, leaf: tf.ensure_shape(tensor, leaf.shape), element,
      spec)


def places_of(sources) -> List[Place]:
  """A `Place` per `sources.Source`."""
  return [Place(source.name, source.address, source.table,
                source.info.max_times_sampled > 0) for source in sources]
