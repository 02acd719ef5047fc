"""The command line on Dask: `build --runner dask --workers 2` (a local
cluster of quiet worker processes), and the Ctrl-C of `build` and `push`.

Apart from tests/test_beam_dask.py (the library on a shared cluster) so that
the slow tier's two workers run the two files side by side: each is minutes
of processes.
"""

import os
import signal
import subprocess
import sys
import time

import pytest

pytest.importorskip('apache_beam')
pytest.importorskip('dask.distributed')

# pylint: disable=g-import-not-at-top,wrong-import-position
from rlds_reverb import tables
from rlds_reverb.checkpoints import parts
from tests import built_servers
from tests.built_servers import source  # pylint: disable=unused-import
from tests import reverb_tables
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli

pytestmark = pytest.mark.slow
TABLE = built_servers.TABLE


def _unquieted():
  """This environment without TensorFlow's log level: what a user has."""
  return {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}


def test_the_build_command_runs_on_a_local_dask_cluster_quietly(source,
                                                                tmp_path):
  """`build --runner dask --workers 2`: the summaries, and not a line from
  the workers it starts (TensorFlow's, gym's, Dask's). `push` starts its
  cluster the same way (`cli.runner.pipeline_options`); its run on Dask is
  test_beam_dask.py::test_the_push_command_runs_on_a_scheduler_given."""
  built = run_cli('build', '--dataset', source, '--out', tmp_path / 'built',
                  '--servers', '2', '--runner', 'dask', '--workers', '2',
                  env=_unquieted())
  assert built.returncode == 0, built.stderr
  assert built.stderr.splitlines() == [
      "rlds-reverb: (the build is a seed, never changed: add --checkpoint-dir "
      "with a new directory to keep the server's own checkpoints)"]
  for server in range(2):
    assert (f'built {tmp_path}/built/server-{server}-of-2/'
            in built.stdout), built.stdout


def _ctrl_c_once(command, ready):
  """Runs `command` in a session of its own and sends SIGINT to its whole
  process group, as a terminal's Ctrl-C does, once `ready()`; (exit code,
  stdout, stderr), after checking that none of its processes is left."""
  process = subprocess.Popen(command, stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, text=True,
                             start_new_session=True, env=_unquieted())
  deadline = time.monotonic() + HANG_GUARD_S
  while not ready():
    assert process.poll() is None, process.communicate()
    assert time.monotonic() < deadline
    time.sleep(0.02)
  os.killpg(process.pid, signal.SIGINT)
  stdout, stderr = process.communicate(timeout=HANG_GUARD_S)
  assert _group_gone(process.pid, timeout_s=30), 'workers were left running'
  return process.returncode, stdout, stderr


def _group_gone(group: int, timeout_s: float) -> bool:
  deadline = time.monotonic() + timeout_s
  while time.monotonic() < deadline:
    try:
      os.killpg(group, 0)
    except ProcessLookupError:
      return True
    time.sleep(0.1)
  os.killpg(group, signal.SIGKILL)
  return False


def test_ctrl_c_of_a_build_on_dask_leaves_nothing_and_says_so(tmp_path):
  out = tmp_path / 'built'
  code, stdout, stderr = _ctrl_c_once(
      [sys.executable, '-m', 'rlds_reverb', 'build', '--dataset',
       'bundled:cartpole', '--out', str(out), '--servers', '2', '--runner',
       'dask', '--workers', '2'],
      lambda: any(name.endswith(parts.SUFFIX) for _, _, names in
                  os.walk(out / parts.PARTS) for name in names))
  assert (code, stdout) == (130, ''), stderr
  assert error_lines(stderr) == [
      f'rlds-reverb: error: interrupted; nothing was written ({out} was not '
      f'made)']
  assert not out.exists()


def test_ctrl_c_of_a_push_on_dask_says_what_the_table_holds():
  signature = reverb_tables.signature_for('bundled:cartpole')
  server = reverb_tables.start_server([tables.table(TABLE, signature)])
  try:
    address = reverb_tables.address(server)
    client = reverb_tables.client_of(server)
    code, stdout, stderr = _ctrl_c_once(
        [sys.executable, '-m', 'rlds_reverb', 'push', '--dataset',
         'bundled:cartpole', '--server', address, '--table', TABLE.name,
         '--runner', 'dask', '--workers', '2', '--parts-per-file', '16'],
        lambda: reverb_tables.table_size(client, TABLE.name) > 0)
    held = reverb_tables.table_size(client, TABLE.name)
  finally:
    server.stop()
  assert (code, stdout) == (130, ''), stderr
  assert 0 < held < 9868
  assert error_lines(stderr) == [
      f"rlds-reverb: error: interrupted; the pipeline was stopped, and what "
      f"its parts confirmed stays: 'replay' on {address} holds {held:,} "
      f"items (a part is written at least once: run again into empty tables "
      f"for each item once)"]
