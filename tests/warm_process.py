"""Python processes forked from one that has already imported TensorFlow.

A test that needs a real process (signals, a killed server, exit status,
stdout and stderr of its own) pays ~3 s of CPU for Python, TensorFlow and
Reverb to import before the process does anything; the default tier starts
dozens. `WarmPopen` is `subprocess.Popen` for `python -m MODULE ...`,
`python -c CODE ...` and `python SCRIPT ...`, but forks the process from a
zygote that imported them once per test worker:

    test worker --request (argv, env, cwd; fds 0-2 over a Unix socket)--> zygote
    zygote --fork--> child: fds 0-2, env, cwd, argv set, then runs the
                     module, code or script as __main__; exits as Python
                     does (atexit, finalizers; an uncaught Ctrl-C dies of it)
    zygote --pid, then the wait status when the child ends--> WarmPopen

The child is a real process of its own: its pid takes signals, it can be
killed, its exit status and output are its own. What it does not show is
what happens while those modules import (their log lines, import-time
environment): tests of that (test_imports, test_quiet_library, the
commands run without TF_CPP_MIN_LOG_LEVEL) start `subprocess.Popen`, and
`WarmPopen` falls back to it when the environment asks for other import-time
settings than the zygote's.
"""

import atexit
import builtins
import json
import os
import runpy
import select
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import types

# What the zygote imports once; each child then starts from there.
PRELOAD = ('tensorflow', 'reverb', 'tensorflow_datasets', 'rlds_reverb',
           'rlds_reverb.cli', 'rlds_reverb.checked_push', 'rlds_reverb.write',
           'rlds_reverb.convert', 'rlds_reverb.validation',
           'rlds_reverb.cli.serve', 'rlds_reverb.cli.push')
# Read when those modules import: a child asking for other values than the
# zygote's is started by subprocess.Popen instead (`same_imports`).
IMPORT_TIME_VARIABLES = ('TF_CPP_MIN_LOG_LEVEL', 'TF_CPP_MAX_VLOG_LEVEL',
                         'PYTHONPATH', 'PYTHONWARNINGS', 'PYTHONHASHSEED',
                         'CUDA_VISIBLE_DEVICES', 'TF_ENABLE_ONEDNN_OPTS')
# The zygote starts here (`python -m tests.warm_process`): this repository
# comes first on its sys.path, as for a child with ROOT on its PYTHONPATH.
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_INT = struct.Struct('!q')  # A pid, a wait status, a message's length.
# CPU seconds of this process's zygotes' imports, and of the children each
# forked and reaped (for WarmPopen and for stand-ins alike), by its socket's
# path, as it last said: what RUSAGE_CHILDREN shows for subprocess.Popen's
# children.
CPU = {'zygotes': 0.0}
_CHILDREN_CPU = {}
# In the zygote: the CPU of the children it reaped.
_REAPED = {'cpu': 0.0}
_REAPED_LOCK = threading.Lock()


def _send(conn: socket.socket, message: dict, fds=()) -> None:
  """A JSON message, its length first, with file descriptors beside it."""
  data = json.dumps(message).encode()
  socket.send_fds(conn, [_INT.pack(len(data)) + data], list(fds))


def _receive_request(conn: socket.socket):
  """A message and the file descriptors sent with it (up to 3)."""
  header, fds, _, _ = socket.recv_fds(conn, _INT.size + 65536, 3)
  if len(header) < _INT.size:
    raise EOFError('no request')
  (size,), data = _INT.unpack(header[:_INT.size]), header[_INT.size:]
  return json.loads(data + _receive_exactly(conn, size - len(data))), fds


def _receive(conn: socket.socket) -> dict:
  (size,) = _INT.unpack(_receive_exactly(conn, _INT.size))
  return json.loads(_receive_exactly(conn, size))


def _receive_int(conn: socket.socket) -> int:
  return _INT.unpack(_receive_exactly(conn, _INT.size))[0]


def _receive_exactly(conn: socket.socket, size: int) -> bytes:
  data = b''
  while len(data) < size:
    more = conn.recv(size - len(data))
    if not more:
      raise EOFError('the zygote closed the connection')
    data += more
  return data



# The zygote ---------------------------------------------------------------


def _serve(path: str) -> None:
  """The zygote's loop: a fork per request; a thread per child reports its
  wait status on the request's connection."""
  _die_with_parent()
  for name in PRELOAD:
    __import__(name)
  imported = time.process_time()
  listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  listener.bind(path)
  listener.listen(16)
  print(f'ready {imported}', flush=True)
  while True:
    conn, _ = listener.accept()
    try:
      request, fds = _receive_request(conn)
    except (OSError, EOFError, ValueError, struct.error):
      conn.close()  # A test that went away: nothing to start.
      continue
    if 'ask' in request or len(fds) != 3:
      _answer(conn, request, fds)
      continue
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
      listener.close()
      conn.close()
      _become_child(request, fds)  # Never returns: raises SystemExit.
    for fd in fds:
      os.close(fd)
    conn.sendall(_INT.pack(pid))
    threading.Thread(target=_report_exit, args=(pid, conn),
                     daemon=True).start()


def _answer(conn: socket.socket, request: dict, fds) -> None:
  """What a test asks: the CPU of the children reaped ('cpu'), or the
  zygote's import-time settings ('env', for a stand-in to compare)."""
  for fd in fds:
    os.close(fd)
  if request.get('ask') == 'cpu':
    with _REAPED_LOCK:
      answer = dict(_REAPED)
  else:
    answer = {name: os.environ.get(name)
              for name in request.get('variables', ())}
  try:
    _send(conn, answer)
  except OSError:
    pass
  conn.close()


def _die_with_parent() -> None:
  """A test process killed (by its hang guard, say) takes its zygote along.
  (Not PR_SET_PDEATHSIG: that follows the thread that started the zygote,
  and a test may start it from a thread that then ends.)"""
  parent = os.getppid()
  if parent == 1:  # Gone already.
    os._exit(1)  # pylint: disable=protected-access
  _die_with(parent)


def _report_exit(pid: int, conn: socket.socket) -> None:
  _, status, usage = os.wait4(pid, 0)
  with _REAPED_LOCK:
    _REAPED['cpu'] += usage.ru_utime + usage.ru_stime
  try:
    conn.sendall(_INT.pack(status))
  except OSError:
    pass  # The test is gone: nobody waits.
  conn.close()


def _become_child(request: dict, fds) -> None:
  """Sets the process up as `python ARGV` would find it, then runs it."""
  if request['new_session']:
    os.setsid()
  if request.get('die_with'):
    _die_with(request['die_with'])
  for target, fd in enumerate(fds):
    os.dup2(fd, target)
  for fd in fds:
    if fd > 2:
      os.close(fd)
  os.environ.clear()
  os.environ.update(request['env'])
  tempfile.tempdir = None  # Found again from TMPDIR, as a new process does.
  if request['cwd']:
    os.chdir(request['cwd'])
  what, target, args = request['run']
  _run(what, target, args, request['env'])
  raise SystemExit(0)


def _die_with(pid: int) -> None:
  """This process ends (SIGKILL) when process `pid` does: a stand-in's child
  with its stand-in (a SIGKILL of its process group must not leave the child
  running), the zygote with its test process."""
  try:
    pidfd = os.pidfd_open(pid)
  except OSError:
    os._exit(1)  # pylint: disable=protected-access
  def wait():
    select.select([pidfd], [], [])
    os.kill(os.getpid(), signal.SIGKILL)
  # Started with the signals a stand-in passes on blocked (a thread keeps
  # its creator's mask), so that they reach the main thread: one the kernel
  # gave this thread set Python's flag but did not wake a main thread
  # asleep in C (`time.sleep`), and a Ctrl-C waited out the sleep.
  previous = signal.pthread_sigmask(signal.SIG_BLOCK, _PASSED_ON)
  try:
    threading.Thread(target=wait, daemon=True).start()
  finally:
    signal.pthread_sigmask(signal.SIG_SETMASK, previous)


def same_imports(env: dict, zygote_env: dict) -> bool:
  """Whether a child with `env` imports what the zygote imported: the same
  import-time settings, and on PYTHONPATH nothing more than ROOT."""
  for name in IMPORT_TIME_VARIABLES:
    if name == 'PYTHONPATH':
      ours, zygotes = (set(filter(None, (e.get(name) or '').split(
          os.pathsep))) for e in (env, zygote_env))
      if not ours - zygotes <= {ROOT}:
        return False
    elif env.get(name) != zygote_env.get(name):
      return False
  return True


def _add_python_path(env: dict) -> None:
  """PYTHONPATH's entries after sys.path[0], as Python puts them."""
  entries = [entry for entry in env.get('PYTHONPATH', '').split(os.pathsep)
             if entry and entry not in sys.path]
  sys.path[1:1] = entries


def _run(what: str, target: str, args, env: dict) -> None:
  sys.path[0] = {'module': os.getcwd(), 'code': '',
                 'script': os.path.dirname(os.path.abspath(target))}[what]
  _add_python_path(env)
  if what == 'module':
    sys.argv = [target, *args]
    runpy.run_module(target, run_name='__main__', alter_sys=True)
  elif what == 'script':
    sys.argv = [target, *args]
    runpy.run_path(target, run_name='__main__')
  else:
    sys.argv = ['-c', *args]
    main = types.ModuleType('__main__')
    main.__builtins__ = builtins
    sys.modules['__main__'] = main
    exec(compile(target, '<string>', 'exec'), main.__dict__)  # pylint: disable=exec-used


# The test's side -------------------------------------------------------------


def forked_cpu() -> float:
  """CPU seconds of this process's zygotes so far: their imports and the
  children they reaped (benchmarks/test_costs.py adds it to its children's)."""
  if _ZYGOTE.running():
    try:
      with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
        conn.connect(_ZYGOTE.path)
        _send(conn, {'ask': 'cpu'})
        _CHILDREN_CPU[_ZYGOTE.path] = _receive(conn)['cpu']
    except (OSError, EOFError, ValueError):
      pass
  return CPU['zygotes'] + sum(_CHILDREN_CPU.values())


def _settings(env: dict) -> tuple:
  """A zygote's key: the import-time settings it was started with."""
  return tuple(env.get(name) for name in IMPORT_TIME_VARIABLES)


class _Zygote:
  """One zygote per test process and import-time settings, started at its
  first use."""

  def __init__(self):
    self._lock = threading.Lock()
    self._process = None
    self._path = None
    self._env = None
    self._set_aside = {}  # _settings(env) -> (process, path, env)

  def env(self) -> dict:
    """The environment the zygote imports with: this process's, when the
    first warm child starts it. If this process's own import-time settings
    changed since (Dask's LocalCluster sets PYTHONHASHSEED in the process
    that starts it; a test's monkeypatch), the next warm child comes from a
    zygote started with them, or every later child would start cold. The
    other zygote is set aside, running, for a change back (a monkeypatch
    undone): a zygote's start is a TensorFlow import, ~5 CPU-s."""
    with self._lock:
      self._switch_if_changed()
      return self._env if self.running() else dict(os.environ)

  def ensure(self) -> None:
    """Starts the zygote unless it runs (with this process's settings)."""
    with self._lock:
      self._switch_if_changed()
      if not self.running():
        self._start()

  def _switch_if_changed(self) -> None:
    """Sets aside a zygote started with import-time settings this process
    has since changed, and takes up the one set aside for its settings now,
    if any (atexit holds every zygote, to kill it at the end)."""
    if self._env is None or same_imports(dict(os.environ), self._env):
      return
    if self.running():
      self._set_aside[_settings(self._env)] = (
          self._process, self._path, self._env)
    self._process, self._path, self._env = self._set_aside.pop(
        _settings(os.environ), (None, None, None))

  def connect(self) -> socket.socket:
    self.ensure()
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    conn.connect(self._path)
    return conn

  def running(self) -> bool:
    return self._process is not None and self._process.poll() is None

  @property
  def path(self) -> str:
    return self._path

  def _start(self) -> None:
    directory = tempfile.mkdtemp(prefix='zygote-')
    atexit.register(shutil.rmtree, directory, ignore_errors=True)
    self._path = os.path.join(directory, 'socket')
    self._env = dict(os.environ)
    self._process = subprocess.Popen(
        [sys.executable, '-m', 'tests.warm_process', self._path], cwd=ROOT,
        stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL, text=True)
    line = self._process.stdout.readline()
    if not line.startswith('ready '):
      self._process.kill()
      raise RuntimeError(f'the zygote did not start: {line!r}')
    CPU['zygotes'] += float(line.split()[1])
    atexit.register(self._process.kill)


_ZYGOTE = _Zygote()


def _what_to_run(args):
  """('module'|'code'|'script', target, args) of `python ARGS`; None for
  what `WarmPopen` does not run (interpreter options, another program)."""
  args = list(map(os.fspath, args))
  if not args or args[0] != sys.executable or len(args) < 2:
    return None
  if args[1] in ('-m', '-c') and len(args) >= 3:
    return ('module' if args[1] == '-m' else 'code'), args[2], args[3:]
  if args[1].startswith('-'):
    return None
  return 'script', args[1], args[2:]


class WarmPopen(subprocess.Popen):
  """`subprocess.Popen` whose Python child is forked from the zygote.

  Takes what Popen takes; falls back to Popen's own start for what the
  zygote cannot give (another program, interpreter options, import-time
  settings other than the zygote's, pass_fds, preexec_fn, user or group).
  """

  def __init__(self, args, **kwargs):
    self._zygote_conn = None
    super().__init__(args, **kwargs)

  def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds,
                     cwd, env, startupinfo, creationflags, shell, p2cread,
                     p2cwrite, c2pread, c2pwrite, errread, errwrite,
                     restore_signals, gid, gids, uid, umask,
                     start_new_session, process_group):
    run = None if (shell or executable or preexec_fn or pass_fds or
                   gid is not None or gids is not None or uid is not None or
                   umask >= 0 or process_group not in (None, -1)
                   ) else _what_to_run(args)
    child_env = dict(os.environ if env is None else env)
    if run is None or not same_imports(child_env, _ZYGOTE.env()):
      return super()._execute_child(
          args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
          startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
          c2pwrite, errread, errwrite, restore_signals, gid, gids, uid, umask,
          start_new_session, process_group)
    conn = _ZYGOTE.connect()
    self._zygote_conn = conn
    fds = [fd if fd != -1 else default
           for fd, default in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2))]
    _send(conn, {
        'run': run, 'env': child_env,
        'cwd': os.fspath(cwd) if cwd is not None else os.getcwd(),
        'new_session': bool(start_new_session)}, fds)
    self.pid = _receive_int(conn)
    self._child_created = True
    self._close_pipe_fds(p2cread, p2cwrite, c2pread, c2pwrite, errread,
                         errwrite)

  def _zygote_status(self, block: bool):
    """The child's wait status from the zygote, or None if it still runs."""
    conn = self._zygote_conn
    if not block:
      conn.setblocking(False)
      try:
        if len(conn.recv(_INT.size, socket.MSG_PEEK)) < _INT.size:
          return None
      except BlockingIOError:
        return None
      finally:
        conn.setblocking(True)
    status = _receive_int(conn)
    conn.close()
    return status

  def _try_wait(self, wait_flags):
    if self._zygote_conn is None:
      return super()._try_wait(wait_flags)
    status = self._zygote_status(block=not wait_flags & os.WNOHANG)
    return (0, 0) if status is None else (self.pid, status)

  def _internal_poll(self, _deadstate=None, **kwargs):
    if self._zygote_conn is None:
      return super()._internal_poll(_deadstate=_deadstate, **kwargs)
    if self.returncode is None and self._waitpid_lock.acquire(False):
      try:
        if self.returncode is None:
          status = self._zygote_status(block=False)
          if status is not None:
            self._handle_exitstatus(status)
      finally:
        self._waitpid_lock.release()
    return self.returncode


def run(args, *, input=None, timeout=None, capture_output=False,  # pylint: disable=redefined-builtin
        **kwargs) -> subprocess.CompletedProcess:
  """`subprocess.run` (without `check`) with a `WarmPopen`."""
  if capture_output:
    kwargs['stdout'] = kwargs['stderr'] = subprocess.PIPE
  with WarmPopen(args, **kwargs) as process:
    try:
      stdout, stderr = process.communicate(input, timeout=timeout)
    except subprocess.TimeoutExpired:
      process.kill()
      process.wait()
      raise
  return subprocess.CompletedProcess(process.args, process.returncode, stdout,
                                     stderr)


# A stand-in command -------------------------------------------------------------

ZYGOTE_VARIABLE = 'RLDS_REVERB_TESTS_ZYGOTE'
# Signals a stand-in passes on to its child, as a shell's Ctrl-C, `kill` or
# `kill -USR1` would reach the command itself.
_PASSED_ON = (signal.SIGINT, signal.SIGTERM, signal.SIGUSR1, signal.SIGUSR2,
              signal.SIGHUP, signal.SIGQUIT)


def zygote_socket() -> str:
  """The zygote's socket (starting it), for stand-ins run in child
  processes: put it in their environment as ZYGOTE_VARIABLE."""
  _ZYGOTE.ensure()
  return _ZYGOTE.path


def _ask_env(path: str, variables):
  """The zygote's values of `variables`; None if no zygote answers."""
  try:
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as conn:
      conn.connect(path)
      _send(conn, {'ask': 'env', 'variables': list(variables)})
      return _receive(conn)
  except (OSError, EOFError, ValueError):
    return None


STAND_IN = '''#!{python} -S
import sys
sys.path.insert(0, {root!r})
from tests import warm_process
warm_process.exec_warm({module!r}, sys.argv[1:])
'''


def write_stand_in(path: str, module: str) -> None:
  """An executable at `path` that runs as `python -m MODULE`, forked from
  the zygote (`exec_warm`): a command on PATH for a shell."""
  with open(path, 'w') as f:
    f.write(STAND_IN.format(python=sys.executable, root=ROOT, module=module))
  os.chmod(path, 0o755)


def exec_warm(module: str, args) -> None:
  """Runs `python -m MODULE ARGS` forked from the zygote named in the
  environment, as this process: the same fds, signals passed on, its exit
  status. Without a zygote, or with other import-time settings than the
  zygote's (`same_imports`), `exec`s python as the command would.

  For a stand-in command on PATH (`tests/docs_blocks.py` puts one for
  `rlds-reverb`), run with `python -S`: it starts in ~20 ms.
  """
  path = os.environ.get(ZYGOTE_VARIABLE)
  zygote_env = _ask_env(path, IMPORT_TIME_VARIABLES) if path else None
  if zygote_env is None or not same_imports(dict(os.environ), zygote_env):
    os.execv(sys.executable, [sys.executable, '-m', module, *args])
  child = {'pid': None, 'pending': []}
  def pass_on(signum, _):
    if child['pid'] is None:
      child['pending'].append(signum)  # Before the child exists: sent after.
    else:
      os.kill(child['pid'], signum)
  for signum in _PASSED_ON:
    signal.signal(signum, pass_on)
  conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
  conn.connect(path)
  _send(conn, {
      'run': ['module', module, list(args)], 'env': dict(os.environ),
      'cwd': os.getcwd(), 'new_session': False, 'die_with': os.getpid()},
        [0, 1, 2])
  child['pid'] = _receive_int(conn)
  for signum in child['pending']:
    os.kill(child['pid'], signum)
  status = _receive_int(conn)
  if os.WIFSIGNALED(status):
    signum = os.WTERMSIG(status)
    signal.signal(signum, signal.SIG_DFL)
    os.kill(os.getpid(), signum)
  sys.exit(os.waitstatus_to_exitcode(status))


if __name__ == '__main__':
  _serve(sys.argv[1])
