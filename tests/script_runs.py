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

from tests.cli_runs import captured
from tests.cli_runs import exit_code


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
  with _script_state(argv, cwd, path0), captured() as output:
    code = exit_code(main, args)
  return subprocess.CompletedProcess(args, code, *output)


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
