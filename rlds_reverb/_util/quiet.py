"""Quiet output: TensorFlow, absl, gym and Reverb's C++ logs say nothing.

For the command line and the examples, which show their logs when asked.

TensorFlow's C++ logger reads `TF_CPP_MIN_LOG_LEVEL` once, at its first
message, which is printed while `tensorflow` is imported; gym prints a notice
to stderr when imported. So `silence()` must run before either is imported.
It sets the level to 3 whatever the user's environment says: at 2, common in
training scripts, TensorFlow still prints three cuDNN/cuFFT/cuBLAS "Unable to
register factory" lines at import. A program that wants TensorFlow's logs
(`--debug`) does not call it.
"""

import contextlib
import io
import os
import sys
import warnings


def silence() -> None:
  """Sets the log levels and imports gym with its notice swallowed."""
  os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'  # Also for our child processes.
  os.environ.setdefault('PYGAME_HIDE_SUPPORT_PROMPT', 'hide')
  warnings.filterwarnings('ignore', category=DeprecationWarning)
  warnings.filterwarnings('ignore', category=UserWarning)
  # Autograph compiles TF-Agents' `x is ()` checks: Python 3.11 warns of them.
  warnings.filterwarnings('ignore', category=SyntaxWarning)
  with contextlib.redirect_stderr(io.StringIO()):
    try:
      import gym  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
    except ImportError:
      pass


def quiet_absl() -> None:
  """absl's Python logging (TF, TFDS, Reverb) at errors only."""
  from absl import logging  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  logging.set_verbosity(logging.ERROR)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  tf.get_logger().setLevel('ERROR')
  tf.autograph.set_verbosity(0)


@contextlib.contextmanager
def native_stderr_silenced(enabled: bool = True):
  """C++ writes to fd 2 (Reverb's server and client logs) go to /dev/null.

  Python's `sys.stderr` keeps the real stderr (a copy of fd 2), so our own
  errors, notes and progress bar still show, on a terminal too. fd 2 is
  restored first on the way out, even when that copy's reader is gone.
  """
  if not enabled:
    yield
    return
  sys.stderr.flush()
  saved_fd = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  os.dup2(devnull, 2)
  os.close(devnull)
  python_stderr = sys.stderr
  sys.stderr = os.fdopen(os.dup(saved_fd), 'w', buffering=1)
  try:
    yield
  finally:
    copy, sys.stderr = sys.stderr, python_stderr
    os.dup2(saved_fd, 2)
    os.close(saved_fd)
    try:
      copy.close()
    except BrokenPipeError:
      pass  # The reader is gone; the caller has or will hit it too.


@contextlib.contextmanager
def quieted(enabled: bool = True):
  """`quiet_absl` and `native_stderr_silenced`, unless a flag asks for logs.

  fd 2 is silenced first: `quiet_absl` imports TensorFlow, which prints.
  """
  with native_stderr_silenced(enabled):
    if enabled:
      quiet_absl()
    yield
