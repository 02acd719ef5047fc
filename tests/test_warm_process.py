"""`tests/warm_process.py`: forked children behave as `python ...` would."""

import os
import select
import signal
import subprocess
import sys

from tests import warm_process

SHOW = ('import json, os, sys, tempfile\n'
        'print(json.dumps([sys.argv, os.getcwd(), os.environ.get("MARK"), '
        'tempfile.gettempdir(), __name__]))\n')


def _run(*args, **kwargs):
  return warm_process.run([sys.executable, *map(str, args)],
                          capture_output=True, text=True, timeout=120,
                          **kwargs)


def test_code_module_and_script_get_argv_cwd_env_and_tmpdir(tmp_path):
  script = tmp_path / 'show.py'
  script.write_text(SHOW)
  (tmp_path / 'tmp').mkdir()
  env = dict(os.environ, MARK='here', TMPDIR=str(tmp_path / 'tmp'))
  runs = {
      'code': _run('-c', SHOW, 'a', cwd=tmp_path, env=env),
      'script': _run(script, 'a', cwd=tmp_path, env=env),
  }
  for run in runs.values():
    assert run.returncode == 0, run.stderr
  assert [eval(run.stdout) for run in runs.values()] == [  # pylint: disable=eval-used
      [['-c', 'a'], str(tmp_path), 'here', str(tmp_path / 'tmp'), '__main__'],
      [[str(script), 'a'], str(tmp_path), 'here', str(tmp_path / 'tmp'),
       '__main__']]
  module = _run('-m', 'rlds_reverb', 'validate', '--dataset', tmp_path)
  assert module.returncode == 2  # A usage error: not a dataset.
  assert module.stderr.startswith('rlds-reverb: error: ')


def test_exit_status_signals_and_uncaught_ctrl_c_are_a_processes():
  assert _run('-c', 'raise SystemExit(3)').returncode == 3
  failed = _run('-c', 'raise ValueError("x")')
  assert (failed.returncode, failed.stderr.splitlines()[-1]) == (
      1, 'ValueError: x')
  waiting = warm_process.WarmPopen(
      [sys.executable, '-c', 'import time\nprint(1, flush=True)\n'
       'time.sleep(60)'], stdout=subprocess.PIPE, text=True,
      start_new_session=True)
  assert waiting.stdout.readline() == '1\n'
  assert os.getpgid(waiting.pid) == waiting.pid  # A session of its own.
  assert waiting.poll() is None
  waiting.send_signal(signal.SIGINT)
  assert waiting.wait(timeout=60) == -signal.SIGINT  # As Python dies of it.
  waiting.stdout.close()


def test_other_import_time_settings_start_a_new_process():
  """TensorFlow reads its log level as it imports: a child that asks for
  another one than the zygote's is a fresh `python`."""
  code = 'import sys; print("tensorflow" in sys.modules)'
  warm = _run('-c', code)
  fresh = _run('-c', code, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='1'))
  assert (warm.stdout, fresh.stdout) == ('True\n', 'False\n')


def test_a_setting_this_process_changed_starts_a_new_zygote(monkeypatch):
  """An import-time variable set in the test process itself (Dask's
  LocalCluster sets PYTHONHASHSEED where it starts) does not leave every
  later child cold: the next child comes from a zygote started with it. Set
  back (a monkeypatch undone), the first zygote serves again."""
  code = 'import os, sys; print("tensorflow" in sys.modules, ' \
         'os.environ.get("PYTHONHASHSEED"))'
  monkeypatch.delenv('PYTHONHASHSEED', raising=False)
  assert _run('-c', code).stdout == 'True None\n'
  first = warm_process.zygote_socket()
  monkeypatch.setenv('PYTHONHASHSEED', '6640')
  assert _run('-c', code).stdout == 'True 6640\n'
  assert warm_process.zygote_socket() != first
  monkeypatch.delenv('PYTHONHASHSEED')
  assert _run('-c', code).stdout == 'True None\n'
  assert warm_process.zygote_socket() == first


def test_a_stand_in_is_the_command_for_a_shell(tmp_path):
  """`exec_warm` behind a command on PATH, as the docs' pages run
  `rlds-reverb`: its output and exit status are the child's, a Ctrl-C of
  its process group reaches the child, and a SIGKILL of the group ends it."""
  stand_in = tmp_path / 'waiter'
  warm_process.write_stand_in(str(stand_in), 'tests.warm_waiter')
  env = dict(os.environ, **{
      warm_process.ZYGOTE_VARIABLE: warm_process.zygote_socket()})
  done = subprocess.run([str(stand_in), 'exit', '4'], env=env,
                        capture_output=True, text=True, timeout=60)
  assert (done.returncode, done.stdout) == (4, 'warm\n')
  for signum, code in ((signal.SIGINT, 130), (signal.SIGKILL, -9)):
    shell = subprocess.Popen(['bash', '-c', f'{stand_in} wait'], env=env,
                             stdout=subprocess.PIPE, text=True,
                             start_new_session=True)
    assert shell.stdout.readline() == 'warm\n'
    child = int(shell.stdout.readline())
    os.killpg(shell.pid, signum)
    assert shell.wait(timeout=60) == code
    shell.stdout.close()
    _wait_until_gone(child)


def _wait_until_gone(pid: int) -> None:
  """Waits for `pid` to end (the zygote reaps it), failing after 60 s."""
  try:
    pidfd = os.pidfd_open(pid)
  except ProcessLookupError:
    return  # Gone and reaped already.
  try:
    assert select.select([pidfd], [], [], 60)[0], f'{pid} still runs'
  finally:
    os.close(pidfd)
