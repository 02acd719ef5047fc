"""Workers forked from the forkserver that imported the package once, or
spawned where it would not start them as asked (`_util.worker_start`): a
real process runs `parallel`'s pools one after the other
(tests/worker_start_child.py) and its workers report how they started.

What the workers then do (push, build, Ctrl-C, a killed parent) is tested
through the pools' users: tests/test_shards.py, tests/test_build_servers.py,
tests/test_faults.py.
"""

import json
import subprocess
import sys

import pytest

HANG_GUARD_S = 300

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'),
                                reason='forkserver and /proc: Linux')


def test_workers_are_forked_with_the_package_loaded_unless_surroundings_changed(
    tmp_path):
  redirected = tmp_path / 'stderr.txt'
  done = subprocess.run(
      [sys.executable, '-m', 'tests.worker_start_child', str(redirected)],
      capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
  assert done.returncode == 0, done.stderr[-3000:]
  pools = {line['tag']: line for line in map(json.loads,
                                             done.stdout.splitlines())}
  forkserver = pools['first']['reports'][0]['parent']
  for tag in ('first', 'again', 'variable_set', 'variable_gone',
              'import_time_variable_back', 'stderr_back'):
    # Forked by one server, not by the process that made the pool, with
    # the workers' modules loaded before their task, and this process's
    # environment.
    assert forkserver != pools[tag]['me']
    variable = 'set' if tag == 'variable_set' else None
    assert pools[tag]['reports'] == [
        {'parent': forkserver, 'variable': variable, 'preloaded': True}] * 2, tag
  for tag in ('import_time_variable_set', 'stderr_redirected'):
    # A variable read at import, or stderr, is not the forkserver's:
    # spawned, and they see this process's.
    assert pools[tag]['reports'] == [
        {'parent': pools[tag]['me'], 'variable': None,
         'preloaded': False}] * 2, tag
  assert redirected.read_text().splitlines() == [
      'worker stderr stderr_redirected'] * 2
  # Every other pool's workers wrote to the stderr the process had.
  written = [line for line in done.stderr.splitlines()
             if line.startswith('worker stderr ')]
  assert sorted(written) == sorted(
      f'worker stderr {tag}' for tag in pools
      if tag != 'stderr_redirected' for _ in range(2))
