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

A watchdog's thread outlives the iterators: a daemon, it waits on its
queue, or asks a server for its tables (a deadline of 1 s). One still inside
that call when the process ends crashed it: `examples/mix_datasets.py`
ended 'terminate called without an active exception' (SIGABRT) once in
the slow tier of 2026-12-07, after its last train step, its server stopped.

So at exit, while Python still serves every thread (`atexit`):
  1. every watchdog is told the process exits, and its queue closed: a
     dequeue that waits fails at once, and so does the thread's enqueue;
  2. the exit waits until no call is running and none has started for
     QUIET_S (tf.data refilling its buffers after the last `next()`), at
     most SETTLE_S;
  3. and until every watchdog thread has returned, at most THREADS_S (one
     server_info's deadline, and a margin).
"""

import atexit
import contextlib
import threading
import time
from typing import Iterator, List

import tensorflow as tf

QUIET_S = 0.2
SETTLE_S = 3.0
THREADS_S = 2.0

_exiting = threading.Event()
_queues: List[tf.queue.FIFOQueue] = []
_threads: List[threading.Thread] = []
_lock = threading.Lock()
_running = 0  # Calls from tf.data into Python under way.
_last_call = 0.0  # time.monotonic() of the last one's start or end.


def register(queue: tf.queue.FIFOQueue, thread: threading.Thread) -> None:
  """At exit, `queue` is closed and `thread` waited for."""
  _queues.append(queue)
  _threads.append(thread)


def exiting() -> bool:
  """Whether the process exits: a watchdog asks no server any more."""
  return _exiting.is_set()


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
  """Closes the queues, then waits until the calls have settled and the
  watchdogs' threads returned."""
  _exiting.set()
  for queue in _queues:
    queue.close(cancel_pending_enqueues=True)
  deadline = time.monotonic() + limit_s
  while time.monotonic() < deadline:
    with _lock:
      settled = (_running == 0
                 and time.monotonic() - _last_call >= quiet_s)
    if settled:
      break
    time.sleep(quiet_s / 4)
  threads_deadline = time.monotonic() + THREADS_S
  for thread in _threads:
    thread.join(max(0.0, threads_deadline - time.monotonic()))


atexit.register(settle)
