"""A mixture's watchdog: a dead server or a starved table fails the dataset.

Reverb's sampler never gives up: on a server that does not answer it retries
without end (`Sampler::RunWorker`, backing off up to 1 s), and on an empty
table it waits for an item without end (`rate_limiter_timeout_ms` only
bounds a live server's rate limiter). `next()` on a mixture would then block
for good, in C++, where Ctrl-C cannot reach it. Nothing inside a Reverb
stream fails, so the check runs beside the streams:

    a Python thread, every CHECK_EVERY_S: one server_info per server
      -> Verdict: '' or the one line to fail with
      -> a TF queue of 1, every TELL_EVERY_S (the last verdict again
         between checks), read while an iterator lives (the thread waits
         while the last verdict is unread: no iterator, no checks)
                                               |
    interleave, 2 at a time, each on its own thread (one may block):
      input 0: the mixture's batches, then one count into `Ends`
      input 1, 2, ...: segments, one per verdict: dequeue it,
               Assert(verdict == ''), yield nothing, end;
               made while `Ends` holds the count it held at the start
    (`beside`; 'drop' mode's fillers beside each source use it too)

The batches pass in their order (one input holds them all), with no tag,
filter, reshaping or copy of their own: the guard costs about 15 us of CPU
per batch (a tag and a filter cost 200 us, a batch(1)/unbatch pair copies
each batch twice). A failing verdict fails inside its segment, and the
dataset fails at once, even while the batches' thread is blocked. Each
segment ends after one verdict, so the interleave gets its thread back every
TELL_EVERY_S: an input that looped inside (a filter never true) could not be
stopped when `take(n)` dropped the iterator early. Dropping an iterator
waits for the segments in flight to get their verdicts (four of them, with
TELL_EVERY_S 0.5 s: `for batch in mixture.take(5)` ended 2.1 s after its
fifth batch; with 0.1 s, 0.1-0.3 s), so verdicts are told more often than
servers are asked. When the batches end (a
buffer given a `rate_limiter_timeout_ms`), the count ends the segments and
the dataset ends; with two iterators of one finite mixture at once, one's
end may end the other's watchdog.

It fails when (`Verdict`):
  - a server has not answered for `timeout` seconds: naming it, and the
    sources on it (with on_server_loss='drop', only the last server: the
    others are handed to `dropping.Lost`, which warns and leaves them out);
  - a table that batches take rows from (`Demand`: weight above 0) has been
    empty for `timeout` seconds, its server answering. Tables that remove
    what they hand out are left out: they are empty whenever the streams have
    taken everything ahead, and their own reader fails after `timeout`
    seconds without an item (`reading.ReplayBuffer`).
A server back within `timeout` (restarted, with its items) is waited for:
Reverb's sampler reconnects to it. The checks go on while an iterator lives,
drawn from or not: a server silent for `timeout` seconds during a long train
step fails the next `next()`.

Why a thread and a queue, not a generator: tf.data's threads then wait in
TensorFlow, not in Python, and nothing of the watchdog is running in them
when the interpreter exits; the queue is closed then (`at_exit`).
"""

import dataclasses
import math
import threading
import time
from typing import Callable, Dict, List, Optional, Sequence

import reverb
import tensorflow as tf

from rlds_reverb.errors import ServerLostWarning
from rlds_reverb.mixture import at_exit

CHECK_EVERY_S = 0.5  # One server_info per server at most this often.
TELL_EVERY_S = 0.1  # A verdict (the last again between checks) this often.
ASK_TIMEOUT_S = 1  # server_info's deadline per check; Reverb takes seconds.
# Checks further apart than this (the verdict lay unread: no iterator) start
# the clocks afresh: what was seen before the gap is not counted.
FORGET_AFTER_S = 5.0

TableSizes = Dict[str, int]  # A server's answer: table -> current_size.
_KEPT: List['Ends'] = []


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

  def __init__(self, places: Sequence[Place], timeout: float,
               drop: bool = False):
    """`drop`: a server silent for `timeout` is dropped (added to `lost`)
    rather than failed, unless every server would then be lost."""
    self._places = list(places)
    self._timeout = timeout
    self._drop = drop
    self._silent_since: Dict[str, float] = {}  # address -> first miss
    self._empty_since: Dict[int, float] = {}  # source -> first empty check
    self._last = None  # When the last check was.
    self.lost: List[str] = []  # Addresses dropped, in the order dropped.

  def __call__(self, now: float, answers: Dict[str, Optional[TableSizes]],
               due: Sequence[bool]) -> str:
    """`answers`: per server, its tables' sizes, None if it did not answer
    (servers in `lost` are not asked)."""
    if self._last is not None and now - self._last > FORGET_AFTER_S:
      self._silent_since.clear()
      self._empty_since.clear()
    self._last = now
    for address, sizes in answers.items():
      if sizes is not None:
        self._silent_since.pop(address, None)
      elif self._lasted(self._silent_since, address, now):
        if not self._drop or self._last_one(address):
          return self.silent_message(address)
        self.lost.append(address)
    for index, place in enumerate(self._places):
      sizes = answers.get(place.address)
      if (sizes is None or not due[index] or place.removes
          or sizes.get(place.table, 1) > 0):
        self._empty_since.pop(index, None)
      elif self._lasted(self._empty_since, index, now):
        return self.empty_message(place)
    return ''

  def _last_one(self, address: str) -> bool:
    """Whether `address` is the one server not yet lost."""
    return {place.address for place in self._places} - set(self.lost) == {
        address}

  def _lasted(self, since: dict, key, now: float) -> bool:
    """Notes `now` as the start if `key` has none; True once `timeout`
    seconds have passed since."""
    return now - since.setdefault(key, now) >= self._timeout

  def tables_on(self, address: str) -> str:
    return ' and '.join(f'the {place.name} table {place.table}'
                        for place in self._places if place.address == address)

  def silent_message(self, address: str) -> str:
    # No quotes in these messages: TensorFlow escapes them in an assertion.
    tables = self.tables_on(address)
    return (f'The Reverb server at {address} did not answer for '
            f'{self._timeout:g} s, so {tables} cannot be sampled: the server '
            f'stopped or cannot be reached, and Reverb retries without end.')

  def empty_message(self, place: Place) -> str:
    return (f'The {place.name} table {place.table} at {place.address} stayed '
            f'empty for {self._timeout:g} s while batches need its rows, and '
            f'Reverb waits for an item without end: insert items before '
            f'sampling it, or give it no rows.')

  def lost_message(self, address: str) -> str:
    return (f'The Reverb server at {address} did not answer for '
            f'{self._timeout:g} s: the mixture goes on without it, and gives '
            f'{self.tables_on(address)} no rows from now on (a server that '
            f'comes back is not sampled again).')


def table_sizes(client: reverb.Client) -> Optional[TableSizes]:
  """The server's tables' sizes, or None if it does not answer in time."""
  try:
    infos = client.server_info(timeout=ASK_TIMEOUT_S)
  except (reverb.errors.ReverbError, RuntimeError):  # Deadline; socket closed.
    return None
  return {name: info.current_size for name, info in infos.items()}


class Watchdog:
  """The thread that judges the servers, and the queue it tells the dataset
  through. Starts at once; a daemon, idle while its verdict is unread.

  With `lost` (`on_server_loss='drop'`: `dropping.Lost`), a server silent
  for `timeout` seconds is handed to `lost.drop` and not asked again, unless
  it is the last one: then the dataset fails, as without `lost`."""

  def __init__(self, places: Sequence[Place], timeout: float,
               demand: Demand, lost=None):
    self._places = list(places)
    self._timeout = timeout
    self._demand = demand
    self._lost = lost
    self.queue = tf.queue.FIFOQueue(1, tf.string, shapes=[[]])
    thread = threading.Thread(target=self._run, daemon=True,
                              name='rlds_reverb mixture watchdog')
    at_exit.register(self.queue, thread)
    thread.start()

  def _run(self) -> None:
    clients = {place.address: reverb.Client(place.address)
               for place in self._places}
    verdict = Verdict(self._places, self._timeout,
                      drop=self._lost is not None)
    message, checked_at = '', -math.inf
    while not at_exit.exiting():
      now = time.monotonic()
      # A failure stands: every reader gets it.
      if not message and now - checked_at >= CHECK_EVERY_S:
        answers = {address: table_sizes(client)
                   for address, client in clients.items()
                   if address not in verdict.lost}
        checked_at = time.monotonic()
        told = len(verdict.lost)
        message = verdict(checked_at, answers, self._demand.due)
        for address in verdict.lost[told:]:
          message = message or self._dropped(address, verdict)
      try:
        self.queue.enqueue(message)  # Waits while the last is unread.
      except tf.errors.CancelledError:  # Closed: the interpreter exits.
        return
      time.sleep(TELL_EVERY_S)

  def _dropped(self, address: str, verdict: Verdict) -> str:
    """Drops `address` from the mixture: ''; or, if the warning filters
    make its warning an error, the warning's text to fail with (an
    exception here would end the thread, and with it the verdicts)."""
    try:
      self._lost.drop(address, verdict.lost_message(address))
    except ServerLostWarning as e:
      return str(e)
    return ''

  def segment(self, spec) -> tf.data.Dataset:
    """Reads one verdict, fails with it unless it is '', yields nothing."""
    return tf.data.Dataset.from_tensors(0).map(
        lambda _: checked(self.queue.dequeue())).filter(_never).map(
            lambda _: zeros(spec))


def checked(message: tf.Tensor) -> tf.Tensor:
  """`message`, failing with it unless it is ''."""
  check = tf.debugging.Assert(tf.equal(message, ''), [message])
  with tf.control_dependencies([check]):
    return tf.identity(message)


def guarded(dataset: tf.data.Dataset,
            watchdog: Watchdog) -> tf.data.Dataset:
  """`dataset`'s elements, in order; fails with `watchdog`'s first failure
  even while `dataset` blocks; ends when `dataset` ends."""
  spec = dataset.element_spec
  return beside(dataset, lambda: watchdog.segment(spec))


def beside(dataset: tf.data.Dataset,
           make_segment: Callable[[], tf.data.Dataset]) -> tf.data.Dataset:
  """`dataset`'s elements in order, and those of `make_segment()`'s datasets
  (one after another, each on the thread beside `dataset`'s) until `dataset`
  ends. Each segment must end after a wait that ends (one verdict): an
  input that waited without end could not be stopped."""
  ends = Ends()
  inputs = tf.data.Dataset.from_tensors(ends.after(dataset)).concatenate(
      ends.segments(make_segment))
  # Not deterministic: a deterministic interleave would wait for the blocked
  # dataset's turn. The op's argument overrides the user's tf.data options.
  return inputs.interleave(_itself, cycle_length=2, num_parallel_calls=2,
                           deterministic=False)


class Ends:
  """A count of a dataset's ends (`after`), so that the segments beside it
  end with it (`segments`)."""

  def __init__(self):
    self.queue = tf.queue.FIFOQueue(2**31 - 1, tf.int32, shapes=[[]])
    # Kept for good, as the watchdog is (its thread never ends): a queue is
    # deleted with its Python object, and a dataset's functions hold only
    # its handle.
    _KEPT.append(self)

  def after(self, dataset: tf.data.Dataset) -> tf.data.Dataset:
    """`dataset`, then one count."""
    return dataset.concatenate(nothing_after(
        lambda: self.queue.enqueue(1), dataset.element_spec))

  def segments(self, make_segment: Callable[[], tf.data.Dataset]
               ) -> tf.data.Dataset:
    """`make_segment()`'s datasets, one after another, until a count."""
    def while_not_ended(start: tf.Tensor) -> tf.data.Dataset:
      return tf.data.Dataset.from_tensors(0).repeat().take_while(
          lambda _: tf.equal(self.queue.size(), start)).map(
              lambda _: make_segment())

    return tf.data.Dataset.from_tensors(0).map(
        lambda _: self.queue.size()).flat_map(while_not_ended)


def _itself(dataset: tf.data.Dataset) -> tf.data.Dataset:
  return dataset


def nothing_after(make_op: Callable[[], tf.Operation],
                  spec) -> tf.data.Dataset:
  """A dataset of `spec` that runs `make_op()` once and yields nothing."""
  return tf.data.Dataset.range(1).map(lambda _: done(make_op())).filter(
      _never).map(lambda _: zeros(spec))


def done(op: tf.Operation) -> tf.Tensor:
  with tf.control_dependencies([op]):
    return tf.constant(0, tf.int64)


def _never(*_) -> tf.Tensor:
  return tf.constant(False)


def zeros(spec):
  """An element of `spec` (never made: its dataset yields nothing)."""
  return tf.nest.map_structure(_zeros, spec)


def _zeros(leaf: tf.TensorSpec) -> tf.Tensor:
  """Zeros of the leaf's shape: 0 for an unknown dimension, a scalar for an
  unknown rank (the interleave's spec keeps the batches' spec)."""
  if leaf.shape.rank is None:
    return tf.zeros([], leaf.dtype)
  return tf.zeros([0 if n is None else n for n in leaf.shape.as_list()],
                  leaf.dtype)


def places_of(sources) -> List[Place]:
  """A `Place` per `sources.Source`."""
  return [Place(source.name, source.address, source.table,
                source.info.max_times_sampled > 0) for source in sources]
