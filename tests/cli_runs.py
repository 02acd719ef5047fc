"""The `rlds-reverb` command run as users run it, for tests.

    run_cli(*args)       python -m rlds_reverb ARGS, a process of its own
    run_cli_here(*args)  cli.main(ARGS) in this process, fds 1 and 2 captured
      -> subprocess.CompletedProcess(args, returncode, stdout, stderr)
    error_lines(stderr)  the 'rlds-reverb: error:' lines
"""

import contextlib
import faulthandler
import os
import subprocess
import sys
import tempfile

from rlds_reverb import cli
from tests import warm_process

HANG_GUARD_S = 120


def run_cli(*args, env=None, timeout=HANG_GUARD_S):
  return warm_process.run(
      [sys.executable, '-m', 'rlds_reverb', *map(str, args)],
      capture_output=True, text=True, timeout=timeout,
      env=env if env is not None else os.environ.copy())


def run_cli_here(*args) -> subprocess.CompletedProcess:
  """`run_cli` in this process: `cli.main(args)` with file descriptors 1 and 2
  captured, Python's writes and native ones (Reverb, TensorFlow) alike.

  For checks of a command's output and exit code: it saves a Python and
  TensorFlow start-up (~4 s of CPU) a run. What only a process shows (the
  exit status through `python -m rlds_reverb`, TensorFlow's import-time logs
  at any level, signals, closed pipes, a clean stderr at exit) is checked by
  the tests that run the command with `run_cli`.
  """
  argv = list(map(str, args))
  with captured() as output:
    code = exit_code(cli.main, argv)
  return subprocess.CompletedProcess(argv, code, *output)


@contextlib.contextmanager
def captured():
  """File descriptors 1 and 2 (and sys.stdout, sys.stderr on them) into
  files, under the hang guard; yields a list that holds (stdout, stderr)
  once the block ends. Native writes (Reverb, TensorFlow) are caught too."""
  result = []
  with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
    sys.stdout.flush()
    sys.stderr.flush()
    streams = sys.stdout, sys.stderr
    saved = os.dup(1), os.dup(2)
    os.dup2(out.fileno(), 1)
    os.dup2(err.fileno(), 2)
    sys.stdout = open(os.dup(1), 'w', buffering=1, encoding='utf-8')
    sys.stderr = open(os.dup(2), 'w', buffering=1, encoding='utf-8')
    try:
      with _hang_guard(saved[1]):
        yield result
    finally:
      for stream in (sys.stdout, sys.stderr):
        stream.close()
      sys.stdout, sys.stderr = streams
      for fd, copy in zip((1, 2), saved):
        os.dup2(copy, fd)
        os.close(copy)
      out.seek(0)
      err.seek(0)
      result.extend((out.read().decode(), err.read().decode()))


@contextlib.contextmanager
def _hang_guard(stderr_fd: int):
  """A command that hangs ends this test process after HANG_GUARD_S, with
  every thread's traceback on the real stderr: the test fails (pytest-xdist
  reports the worker crashed, and starts another), as `run_cli`'s timeout
  fails it, instead of hanging the suite."""
  with os.fdopen(os.dup(stderr_fd), 'w') as stderr:
    faulthandler.dump_traceback_later(HANG_GUARD_S, exit=True, file=stderr)
    try:
      yield
    finally:
      faulthandler.cancel_dump_traceback_later()


def exit_code(main, argv) -> int:
  """`main(argv)`'s return, or its SystemExit's code as a process's status."""
  try:
    return main(argv)
  except SystemExit as e:  # argparse: usage errors, --help.
    if e.code is None or isinstance(e.code, int):
      return e.code or 0
    print(e.code, file=sys.stderr)
    return 1


def error_lines(stderr: str):
  return [line for line in stderr.splitlines()
          if line.startswith('rlds-reverb: error:')]
