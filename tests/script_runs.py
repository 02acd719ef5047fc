"""A Python script run in the test's process, as `python SCRIPT ARGS` runs it.

    run_script_here(path, *args, cwd=None)
      -> subprocess.CompletedProcess(args, returncode, stdout, stderr)
    run_here(function, *args, cwd=None)   the same for function(*args)

The script runs as `__main__` (`runpy.run_path`), with `sys.argv` and
`sys.path[0]` as Python sets them for a script, file descriptors 1 and 2
captured (native writes too: Reverb's and TensorFlow's lines), its exit status
from `sys.exit` or its return. It saves a Python and TensorFlow start-up (~4 s
of CPU) a run. What only a process shows (a clean stderr at import, e.g. gym's
notice or TensorFlow's start-up lines; a traceback at exit) is checked by a
test that runs the script in a process of its own.

What the examples change for their own process is put back afterwards: the
environment, the working directory, absl's verbosity and TensorFlow's logger
level (`rlds_reverb._util.quiet`).
"""

import contextlib
import logging
import os
import runpy
import subprocess
import sys
import tempfile

from tests.cli_runs import _exit_code  # pylint: disable=protected-access
from tests.cli_runs import _hang_guard  # pylint: disable=protected-access


def run_script_here(path, *args, cwd=None) -> subprocess.CompletedProcess:
  """`python PATH ARGS` in this process; see the module docstring."""
  argv = [str(path), *map(str, args)]
  return _run(_run_main, argv, argv, cwd,
              os.path.dirname(os.path.abspath(path)))


def run_here(function, *args, cwd=None) -> subprocess.CompletedProcess:
  """`function(*args)` as a script's body: its return (or SystemExit) the
  exit status, its output captured, the process's state put back."""
  return _run(lambda _: function(*args) or 0, list(map(str, args)),
              sys.argv, cwd, None)


def _run(main, args, argv, cwd, path0) -> subprocess.CompletedProcess:
  with _script_state(argv, cwd, path0), _captured() as captured:
    code = _exit_code(main, args)
  return subprocess.CompletedProcess(args, code, *captured)


def _run_main(argv) -> int:
  runpy.run_path(argv[0], run_name='__main__')
  return 0  # A script that ends without sys.exit exits 0.


@contextlib.contextmanager
def _script_state(argv, cwd, path0):
  """sys.argv, sys.path[0] (a script's directory), the working directory;
  restored after, with the environment, `__main__` and the log levels a
  script may set."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  tf_logger = logging.getLogger('tensorflow')
  saved = (sys.argv, list(sys.path), os.getcwd(), dict(os.environ),
           absl_logging.get_verbosity(), tf_logger.level,
           list(tf_logger.filters), sys.modules['__main__'])
  sys.argv = list(argv)
  if path0 is not None:
    sys.path.insert(0, path0)
  if cwd is not None:
    os.chdir(cwd)
  try:
    yield
  finally:
    sys.argv, sys.path[:] = saved[0], saved[1]
    os.chdir(saved[2])
    os.environ.clear()
    os.environ.update(saved[3])
    absl_logging.set_verbosity(saved[4])
    tf_logger.setLevel(saved[5])
    tf_logger.filters[:] = saved[6]
    sys.modules['__main__'] = saved[7]


@contextlib.contextmanager
def _captured():
  """File descriptors 1 and 2 (and sys.stdout, sys.stderr on them) into
  files; yields a list that holds (stdout, stderr) once the block ends."""
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
