"""Ctrl-C held while the writer counts: real SIGINTs sent to this process.

What a push interrupted inside an episode relies on (`write.interrupts`):
SIGINT raises `KeyboardInterrupt` only where the writer checks, once, and
the handler that was there before comes back; a program's own handler and
other threads are left alone. The push itself, interrupted for real:
`tests/test_faults.py`.
"""

import concurrent.futures
import gc
import os
import signal
import sys
import threading

import pytest

from rlds_reverb.write import interrupts


@pytest.fixture
def default_handler():
  """Python's own SIGINT handler, whatever the test runner set."""
  previous = signal.signal(signal.SIGINT, signal.default_int_handler)
  yield
  signal.signal(signal.SIGINT, previous)


def _ctrl_c() -> None:
  os.kill(os.getpid(), signal.SIGINT)


def test_sigint_waits_for_the_check_and_is_raised_once(default_handler):
  held = interrupts.HeldInterrupt()
  with held:
    _ctrl_c()
    assert held.pending  # Not raised between the writer's two statements.
    with pytest.raises(KeyboardInterrupt):
      held.check()
    held.check()  # Raised once: nothing pending now.
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_sigint_still_held_is_raised_on_the_way_out(default_handler):
  held = interrupts.HeldInterrupt()
  steps = []
  with pytest.raises(KeyboardInterrupt):
    with held:
      _ctrl_c()
      steps.append('after the signal')
  assert steps == ['after the signal']
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_nested_the_handler_is_installed_and_restored_once(default_handler):
  """A push holds SIGINT around its loop; each episode nests inside."""
  held = interrupts.HeldInterrupt()
  with held:
    installed = signal.getsignal(signal.SIGINT)
    assert installed is not signal.default_int_handler
    with held:
      assert signal.getsignal(signal.SIGINT) is installed
    assert signal.getsignal(signal.SIGINT) is installed
    with pytest.raises(KeyboardInterrupt):
      with held:
        _ctrl_c()
      # The inner exit raised it: the episode's end is a place to stop.
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_an_exception_leaves_the_held_sigint_for_the_next_check(
    default_handler):
  held = interrupts.HeldInterrupt()
  with pytest.raises(ValueError):
    with held:
      _ctrl_c()
      raise ValueError('a failure while writing')
  assert signal.getsignal(signal.SIGINT) is signal.default_int_handler
  with pytest.raises(KeyboardInterrupt):  # Ctrl-C is not lost.
    held.check()


def test_a_programs_own_handler_is_left_alone():
  calls = []
  previous = signal.signal(signal.SIGINT, lambda *args: calls.append(args))
  try:
    held = interrupts.HeldInterrupt()
    with held:
      _ctrl_c()
    assert len(calls) == 1 and not held.pending
  finally:
    signal.signal(signal.SIGINT, previous)


def test_other_threads_change_nothing(default_handler):
  seen = []

  def in_a_thread():
    with interrupts.HeldInterrupt():
      seen.append(signal.getsignal(signal.SIGINT))

  thread = threading.Thread(target=in_a_thread)
  thread.start()
  thread.join()
  assert seen == [signal.default_int_handler]


# --- A Ctrl-C that Python lost: raised while a finalizer ran. ---------------

class _LosesCtrlC:
  """Garbage whose `__del__` takes a SIGINT: Python prints the
  KeyboardInterrupt raised there as "Exception ignored" and goes on, as it
  does in TensorFlow's finalizers."""

  def __init__(self):
    self.cycle = self  # Freed by the collector, at an allocation.

  def __del__(self):
    _ctrl_c()
    for _ in range(10_000):  # The handler runs here, between bytecodes.
      pass


def test_a_wait_between_slices_sees_a_ctrl_c_on_record_elsewhere():
  held = interrupts.HeldInterrupt()
  held.check_while_waiting()  # Nothing on record: nothing raised.
  interrupts.also_interrupted_when(lambda: True)
  try:
    with pytest.raises(KeyboardInterrupt):
      held.check_while_waiting()
  finally:
    interrupts.also_interrupted_when(lambda: False)


class _FreesOneWhenWaitedOn(concurrent.futures.Future):
  """A pending future; the first wait that reads its state frees a
  `_LosesCtrlC` (on the waiting thread, inside the wait)."""
  armed = False

  @property
  def _state(self):
    if self.armed:
      self.armed = False
      _LosesCtrlC()
      gc.collect()
    return self.__dict__['state']

  @_state.setter
  def _state(self, value):
    self.__dict__['state'] = value


def test_the_parent_of_workers_sees_a_ctrl_c_python_lost(default_handler):
  """`parallel`'s wait for its workers: a SIGINT whose KeyboardInterrupt a
  finalizer swallowed still interrupts it (a script waited for the push's
  whole timeout before)."""
  del default_handler
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  pending = _FreesOneWhenWaitedOn()
  pending.armed = True
  timer = threading.Timer(5, pending.set_result, [None])  # Not a hang.
  timer.start()
  lost, hook = [], sys.unraisablehook
  sys.unraisablehook = lambda unraisable: lost.append(unraisable.exc_type)
  try:
    with pytest.raises(KeyboardInterrupt):
      parallel._wait_noting_ctrl_c([pending])  # pylint: disable=protected-access
  finally:
    sys.unraisablehook = hook
    timer.cancel()
  assert lost == [KeyboardInterrupt]  # Python lost the first one.
  assert not pending.done()


def test_a_workers_error_after_a_ctrl_c_is_the_interruption(
    default_handler, monkeypatch):
  """A KeyboardInterrupt raised inside TensorFlow's C++ can come out as
  another error (CI: "shard 1/2: AttributeError: 'Trajectory' object has no
  attribute '_type_spec'"): after a SIGINT reached the worker's task, its
  error is reported as the interruption, with what it confirmed."""
  del default_handler
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  monkeypatch.setattr(parallel, '_interrupted', threading.Event())  # A worker.
  monkeypatch.setattr(interrupts, '_taken', False)
  mangled = "'Trajectory' object has no attribute '_type_spec'"
  outcome = parallel._failed('1/2', AttributeError(mangled), plan=None)  # pylint: disable=protected-access
  assert (outcome.error_type, outcome.error) == ('AttributeError', mangled)
  with pytest.raises(KeyboardInterrupt):
    with parallel._listen_for_ctrl_c():  # pylint: disable=protected-access
      _ctrl_c()
  outcome = parallel._failed('1/2', AttributeError(mangled), plan=None)  # pylint: disable=protected-access
  assert outcome.interrupted
  assert outcome.notes == ('Nothing was written.',)
  noted = RuntimeError('lost')
  noted.add_note('Written and confirmed before this error: 2 whole episodes.')
  outcome = parallel._failed('0/2', noted, plan=None)  # pylint: disable=protected-access
  assert outcome.interrupted
  assert outcome.notes == (noted.__notes__[0],)


def test_a_worker_listening_for_ctrl_c_still_holds_it_while_it_writes(
    default_handler, monkeypatch):
  """A worker's handler (which records the SIGINT) is held like Python's
  own: one that raised at once made counts one short of the table (CI:
  4,232 items held, 4,231 said confirmed, one written twice on resume)."""
  del default_handler
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  monkeypatch.setattr(parallel, '_interrupted', threading.Event())  # A worker.
  monkeypatch.setattr(interrupts, '_taken', False)
  steps = []
  with pytest.raises(KeyboardInterrupt):
    with parallel._listen_for_ctrl_c():  # pylint: disable=protected-access
      held = interrupts.HeldInterrupt()
      with held:
        _ctrl_c()
        steps.append('counted')  # Not interrupted between the two.
        assert held.pending
        held.check()
  assert steps == ['counted']
  assert interrupts.taken()
