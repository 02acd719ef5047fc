"""Quiet output: TensorFlow, absl, gym and Reverb's C++ logs say nothing.

Two kinds. The command line and the examples silence everything (`silence`,
`quieted`) and show their logs when asked (`--debug`). The library, in a
user's script, drops only lines it knows (`lines_dropped`: see
`rlds_reverb.known_lines`) and leaves every log level as the user set it.

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
import logging as std_logging
import os
import sys
import warnings
from typing import Callable, IO, Iterator, Optional


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
  """absl's Python logging (TF, TFDS, Reverb) at errors only.

  TensorFlow is not imported for it: a command that never needs it (the
  parent of a serve of many servers, of `--workers`) would pay its start
  (~2.7 s of CPU, ~460 MiB) for nothing. Its Python logger is the standard
  one named 'tensorflow' (TensorFlow sets no level on it outside an
  interactive shell), and AutoGraph takes its verbosity from the
  environment until someone sets it; if TensorFlow is already imported,
  its own setter is called too.
  """
  from absl import logging  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  logging.set_verbosity(logging.ERROR)
  std_logging.getLogger('tensorflow').setLevel(std_logging.ERROR)
  os.environ['AUTOGRAPH_VERBOSITY'] = '0'
  tf = sys.modules.get('tensorflow')
  if tf is not None:
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

  fd 2 is silenced first: TensorFlow prints when the command imports it.
  """
  with native_stderr_silenced(enabled):
    if enabled:
      quiet_absl()
    yield


@contextlib.contextmanager
def lines_dropped(known: Callable[[str], bool]) -> Iterator[None]:
  """Lines written to stderr in the block for which `known` is true are
  dropped; the others are written out when the block ends, in their order.

  Both writers are caught: C++ (fd 2: TensorFlow's and Reverb's logs) into
  a temporary file, and Python's `sys.stderr` when it is another stream
  (pytest's, a notebook's, the command line's copy), which is written back
  to that stream. A file rather than a pipe: nothing reads during the block,
  and a process started in it cannot hold its end open.
  """
  # Here, not at the top: `import rlds_reverb` stays cheap (tempfile pulls
  # random and shutil), and what the block quiets imports it anyway.
  import tempfile  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  python_stderr = sys.stderr
  _flush(python_stderr)
  python_caught = None if _on_fd_2(python_stderr) else io.StringIO()
  with tempfile.TemporaryFile() as native_caught:
    saved_fd = os.dup(2)
    os.dup2(native_caught.fileno(), 2)
    if python_caught is not None:
      sys.stderr = python_caught
    try:
      yield
    finally:
      if python_caught is not None:
        sys.stderr = python_stderr
      else:
        _flush(python_stderr)
      os.dup2(saved_fd, 2)
      os.close(saved_fd)
      native_caught.seek(0)
      _write_unknown(native_caught.read(), known, fd=2)
      if python_caught is not None:
        _print_unknown(python_caught.getvalue(), known, python_stderr)


def _on_fd_2(stream: Optional[IO[str]]) -> bool:
  try:
    return stream is not None and stream.fileno() == 2
  except (AttributeError, OSError, ValueError):  # No fileno: not a file.
    return False


def _flush(stream: Optional[IO[str]]) -> None:
  if stream is not None:
    stream.flush()


def _write_unknown(data: bytes, known: Callable[[str], bool], fd: int) -> None:
  """The lines of `data` that `known` does not claim, to `fd` as they came."""
  kept = b''.join(line for line in data.splitlines(keepends=True)
                  if not known(line.decode('utf-8', 'replace').rstrip('\n')))
  while kept:
    kept = kept[os.write(fd, kept):]


def _print_unknown(text: str, known: Callable[[str], bool],
                   stream: Optional[IO[str]]) -> None:
  kept = ''.join(line for line in text.splitlines(keepends=True)
                 if not known(line.rstrip('\n')))
  if kept and stream is not None:
    stream.write(kept)
    stream.flush()
