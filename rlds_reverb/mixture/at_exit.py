"""A mixture's calls from TensorFlow's threads into Python, settled at exit.

A mixture's dataset runs Python from tf.data's threads (each batch's rows:
`choices`) and waits on a queue that a Python thread fills (`watchdog`).
When the interpreter exits with an iterator still alive, the iterator is
destroyed after Python has stopped serving other threads: a tf.data thread
that then asks for the GIL is stopped, and the destructor waits for it
without end; a dequeue left waiting crashed the exit. Measured 2026-11-28:
a healthy two-server mixture whose script ended right after `next()` hung at
exit in 4 of 6 runs (its generator was called again to finalize it, or to
refill a buffer); with the calls below settled, in 0 of 12.

So at exit, while Python still serves every thread (`atexit`):
  1. every watchdog queue is closed: a dequeue that waits fails at once;
  2. the exit waits until no call is running and none has started for
     QUIET_S (tf.data refilling its buffers after the last `next()`), at
     most SETTLE_S.
"""

import atexit
import contextlib
import threading
import time
from typing import Iterator, List

import tensorflow as tf

QUIET_S = 0.2
SETTLE_S = 3.0

_queues: List[tf.queue.FIFOQueue] = []
_lock = threading.Lock()
_running = 0  # Calls from tf.data into Python under way.
_last_call = 0.0  # time.monotonic() of the last one's start or end.


def register(queue: tf.queue.FIFOQueue) -> None:
  """`queue` is closed at exit."""
  _queues.append(queue)


@contextlib.contextmanager
def call() -> Iterator[None]:
  """Wraps a call from tf.data into Python, so that the exit waits for it."""
  global _running, _last_call
  with _lock:
    _running += 1
    _last_call = time.monotonic()
  try:
    yield
  finally:
    with _lock:
      _running -= 1
      _last_call = time.monotonic()


def settle(quiet_s: float = QUIET_S, limit_s: float = SETTLE_S) -> None:
  """Closes the queues, then waits until the calls have settled."""
  for queue in _queues:
    queue.close(cancel_pending_enqueues=True)
  deadline = time.monotonic() + limit_s
  while time.monotonic() < deadline:
    with _lock:
      settled = (_running == 0
                 and time.monotonic() - _last_call >= quiet_s)
    if settled:
      return
    time.sleep(quiet_s / 4)


atexit.register(settle)
