"""Ctrl-C held while the writer counts: real SIGINTs sent to this process.

What a push interrupted inside an episode relies on (`write.interrupts`):
SIGINT raises `KeyboardInterrupt` only where the writer checks, once, and
the handler that was there before comes back; a program's own handler and
other threads are left alone. The push itself, interrupted for real:
`tests/test_faults.py`.
"""

import os
import signal
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
