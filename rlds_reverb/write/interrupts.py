"""Ctrl-C held until the writer's counts match what it handed to Reverb.

Python raises `KeyboardInterrupt` between any two bytecodes, most often just
after a C call returns: after Reverb's `create_item` made an item, before the
writer counted it. The count would then be one short of what the table gets,
and a resumed push would write that item again. So while `SequenceWriter`
writes, SIGINT only sets a flag, and the writer raises `KeyboardInterrupt`
itself where its counts are whole (`check`):

    with held:                      SIGINT -> held.pending = True
      append a row, make its items, count them
      held.check()                  -> KeyboardInterrupt, counts exact
      wait for the server (a slice)
      held.check()
                                    on the way out: raised if still pending

Re-entrant: the outermost `with` installs the handler and restores it, so
a push holds SIGINT once around its loop over episodes, not once per
episode (two `signal.signal` calls cost microseconds; a row tens). Only
Python's default handler is replaced, and only in the main thread (the one
signals reach): a handler of the program's own is left alone.
"""

import signal
import threading
from typing import Callable

# Where else Ctrl-C may be on record. A KeyboardInterrupt raised while a
# finalizer (`__del__`) runs is printed as "Exception ignored" and lost, and
# TensorFlow frees functions in finalizers all the time. A worker of
# `rlds_reverb.parallel` points this at its parent's Ctrl-C event, so that a
# wait for the server still ends the push (a worker blocked by a full queue
# waited out the push's timeout).
_recorded_elsewhere: Callable[[], bool] = lambda: False


# Whether SIGINT reached this process through one of our handlers: a
# worker's error after it is the interruption (`parallel._as_interruption`).
_taken = False


def taken() -> bool:
  """Whether a SIGINT reached `HeldInterrupt` or `raise_and_record` here."""
  return _taken


def raise_and_record(signum, frame) -> None:
  """Python's own SIGINT handler that also records the SIGINT (`taken`).

  A worker listens with it. `HeldInterrupt` treats it as Python's own and
  replaces it while the writer counts: a worker's handler that raised at
  once would make counts one short of the table (CI: a table holding 4,232
  items after workers said they confirmed 4,231).
  """
  global _taken  # pylint: disable=global-statement
  _taken = True
  signal.default_int_handler(signum, frame)


def also_interrupted_when(recorded: Callable[[], bool]) -> None:
  """`HeldInterrupt.check_while_waiting` also raises once `recorded()`."""
  global _recorded_elsewhere  # pylint: disable=global-statement
  _recorded_elsewhere = recorded


class HeldInterrupt:
  """A re-entrant context in which SIGINT waits for `check()`."""

  def __init__(self):
    self.pending = False
    self._depth = 0
    self._previous = None

  def __enter__(self) -> 'HeldInterrupt':
    self._depth += 1
    if self._depth == 1 and default_handler_here():
      self._previous = signal.signal(signal.SIGINT, self._hold)
    return self

  def __exit__(self, exc_type, exc_value, traceback) -> None:
    self._depth -= 1
    if not self._depth and self._previous is not None:
      signal.signal(signal.SIGINT, self._previous)
      self._previous = None
    if exc_type is None:  # A SIGINT held in there is raised on the way out.
      self.check()

  def check(self) -> None:
    """Raises the held `KeyboardInterrupt`, if SIGINT came."""
    if self.pending:
      self.pending = False
      raise KeyboardInterrupt

  def check_while_waiting(self) -> None:
    """`check`, also for a Ctrl-C on record elsewhere (one Python lost);
    called between the slices of a wait, not per row."""
    if _recorded_elsewhere():
      self.pending = True
    self.check()

  def _hold(self, signum, frame) -> None:
    del signum, frame
    global _taken  # pylint: disable=global-statement
    _taken = True
    self.pending = True


def default_handler_here() -> bool:
  """Whether SIGINT reaches Python's own handler here (or a worker's
  `raise_and_record`): the main thread (the one signals reach) and no
  handler of the program's."""
  return (threading.current_thread() is threading.main_thread() and
          signal.getsignal(signal.SIGINT) in (signal.default_int_handler,
                                              raise_and_record))
