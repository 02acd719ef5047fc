"""`rlds-reverb build`, run as users run it.

A build served by a real `rlds-reverb serve --from-checkpoint` process holds
what a push of the same data into a real server holds, item by item, and
stays as it was; bad options are usage errors; a real SIGINT or SIGKILL in
the middle of a build leaves nothing a server loads (the refusals of --out
and of serve's directories: tests/test_checkpoint_dirs.py).
"""

import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest
import reverb

from rlds_reverb import checkpoints
from rlds_reverb._util import wording
from tests import export_data
from tests import reverb_tables
from tests import warm_process
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli
from tests.cli_runs import run_cli_here
from tests.serve_command import Serve
from tests.serve_command import TABLE
from tests.serve_command import dataset  # pylint: disable=unused-import
from tests.serve_command import pushed_items  # pylint: disable=unused-import
from tests.serve_command import signature  # pylint: disable=unused-import

# Long enough that a signal sent once the build writes lands before it ends.
BIG_EPISODES, BIG_LENGTH = 60, 1000


def item_keys(items):
  return [reverb_tables.item_key(item) for item in items]


def size_on_disk(path) -> int:
  return sum(file.stat().st_size for file in pathlib.Path(path).iterdir())


def without_seconds(line: str) -> str:
  """A summary line without its last part, the seconds the build took."""
  head, seconds = line.rsplit('; ', 1)
  assert seconds.endswith(' s'), line
  return head


def tree(path) -> list:
  """Every file under `path` with its bytes: what a server must not change."""
  return sorted((str(file), file.read_bytes())
                for file in pathlib.Path(path).rglob('*') if file.is_file())


def test_a_build_is_served_as_push_writes_it_and_stays_as_it_was(
    dataset, signature, pushed_items, tmp_path):
  """The printed command starts a real server from the build, whose own
  checkpoints go elsewhere: the build is a seed, left byte for byte as it
  was, for the next server (issue 39: the server's first checkpoint deleted
  it)."""
  out = tmp_path / 'built'
  built = run_cli_here('build', '--dataset', dataset, '--out', out,
                       '--table', TABLE, '--sampler', 'fifo')
  assert built.returncode == 0, built.stderr
  [name] = checkpoints.find(str(out)).complete
  path = out / name
  summary, serve_line = built.stdout.splitlines()
  assert without_seconds(summary) == (
      f"built {path}: 3 episodes; 6 items in '{TABLE}'; "
      f'{wording.size(size_on_disk(path))} on disk')
  assert serve_line == (f'serve it: rlds-reverb serve --dataset {dataset} '
                        f'--from-checkpoint {out} --table {TABLE}')
  assert built.stderr.splitlines() == [
      'rlds-reverb: (the build is a seed, never changed: add '
      "--checkpoint-dir with a new directory to keep the server's own "
      'checkpoints)',
      "rlds-reverb: (serve needs only the table names: the checkpoint's "
      'table settings replace its table options)']
  files = tree(out)

  own = tmp_path / 'own'
  with Serve(dataset, tmp_path / 'serve.err', checkpoint_dir=own,
             from_checkpoint=out,
             table_args=('--table', TABLE, '--max-size', '4')) as serve:
    stderr = serve.stderr()
    assert (f"rlds-reverb: table '{TABLE}': --max-size 4 is ignored: the "
            "checkpoint's settings replace the table options (max_size "
            '1,000,000, sampler fifo, remover fifo, min_size 1)') in stderr
    assert (f'rlds-reverb: loading checkpoint (--from-checkpoint, only read) '
            f'{path}: 6 items') in stderr
    assert (f"rlds-reverb: the server's own checkpoints go to {own} (at "
            'SIGUSR1, at stop and for export --server; Reverb keeps the '
            f'newest); the seed {path} is only read, never changed') in stderr
    assert item_keys(reverb_tables.drain(serve.address, TABLE)) == (
        item_keys(pushed_items))
    serve.process.send_signal(signal.SIGUSR1)
    serve.wait_for_note(f'checkpoint written to {own}')
    assert serve.stop(signal.SIGTERM) == 0, serve.stderr()

  assert tree(out) == files
  found = checkpoints.find(str(own))
  assert len(found.complete) == 1 and not found.built, found
  server = reverb.Server(  # The next server starts from the same build.
      [reverb_tables.fifo_table(TABLE, signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          str(tmp_path / 'next'), fallback_checkpoint_path=str(path)))
  try:
    assert item_keys(reverb_tables.drain(server, TABLE)) == (
        item_keys(pushed_items))
  finally:
    server.stop()


@pytest.mark.parametrize('arguments, message', [
    (['--gamma', '0.9'], 'rlds-reverb: error: --gamma goes with --n-step'),
    (['--n-step', '3'],
     'rlds-reverb: error: --n-step needs --gamma G (0 <= G <= 1)'),
    (['--n-step', '3', '--gamma', '0.9', '--stride', '2'],
     'rlds-reverb: error: --n-step builds transitions, not trajectories: drop '
     '--stride'),
    (['--n-step', '3', '--gamma', '0.9', '--servers', '2'],
     'rlds-reverb: error: --n-step builds in one process, one checkpoint, or '
     'with --runner: drop --workers and --servers, or add --runner'),
    (['--n-step', '3', '--gamma', '0.9', '--runner', 'dask',
      '--on-invalid', 'skip'],
     'rlds-reverb: error: --n-step builds transitions, not trajectories: drop '
     '--on-invalid skip'),
    (['--runner', 'DirectRunner', '--workers', '2'],
     'rlds-reverb: error: --runner DirectRunner runs its own workers; drop '
     '--workers (only --runner dask starts a local cluster of --workers '
     'processes)'),
    (['--dask-scheduler', 'tcp://h:8786'],
     'rlds-reverb: error: --dask-scheduler goes with --runner dask'),
    (['--parts-per-file', '2'],
     'rlds-reverb: error: --parts-per-file needs --runner'),
    (['--image-format', 'jpeg'],
     'rlds-reverb: error: --image-format goes with --images encoded'),
    (['--chunk-length', 'nowhere=4'],
     "rlds-reverb: error: --chunk-length: "),
    (['--sampler', 'random'],
     'rlds-reverb build: error: argument --sampler: must be one of uniform, '
     "prioritized, fifo, lifo, got 'random'"),
])
def test_bad_options_are_usage_errors_before_anything_is_written(
    dataset, tmp_path, arguments, message):
  result = run_cli_here('build', '--dataset', dataset, '--out',
                        tmp_path / 'ckpt', *arguments)
  assert (result.returncode, result.stdout) == (2, '')
  assert result.stderr.splitlines()[-1].startswith(message), result.stderr
  assert not any(checkpoints.find(str(tmp_path / 'ckpt')).complete)


@pytest.mark.slow
def test_workers_build_one_checkpoint_per_server(dataset, signature,
                                                 pushed_items, tmp_path):
  """Episode I to server I % 2: CLEAN's episodes 0 and 2 (3 and 2 steps:
  3 items) to server 0, episode 1 (4 steps: 3 items) to server 1."""
  out = tmp_path / 'ckpt'
  built = run_cli('build', '--dataset', dataset, '--out', out, '--workers',
                  2, '--servers', 2, '--table', TABLE, '--sampler', 'fifo')
  assert built.returncode == 0, built.stderr
  lines = built.stdout.splitlines()
  assert lines[2:] == [
      f'serve all 2 servers: rlds-reverb serve --dataset {dataset} '
      f'--from-checkpoint {out} --table {TABLE}']
  drained = []
  for k, summary in enumerate(lines[:2]):
    root = out / f'server-{k}-of-2'
    [name] = checkpoints.find(str(root)).complete
    episodes = 2 - k
    assert without_seconds(summary) == (
        f'built {root / name}: {wording.count(episodes, "episode")}; 3 items '
        f"in '{TABLE}'; {wording.size(size_on_disk(root / name))} on disk")
    server = reverb.Server(
        [reverb_tables.fifo_table(TABLE, signature)],
        checkpointer=reverb.checkpointers.DefaultCheckpointer(
            str(tmp_path / f'own-{k}'),
            fallback_checkpoint_path=str(root / name)))
    try:
      drained += reverb_tables.drain(server, TABLE)
    finally:
      server.stop()
  assert reverb_tables.same_items(pushed_items, drained)


# A build interrupted in the middle, by a real signal.


@pytest.fixture(scope='module')
def big_dataset(tmp_path_factory):
  return export_data.write_source(
      tmp_path_factory.mktemp('big'),
      [export_data.nested_episode(i, BIG_LENGTH)
       for i in range(BIG_EPISODES)])


# Builds tried before a signal lands mid-write (see `signalled_mid_build`).
SIGNAL_ATTEMPTS = 3


def signalled_mid_build(dataset_dir, out, signum, *options):
  """`rlds-reverb build` signalled once its checkpoint directory appears
  (the data was read ahead, and the writing began): (exit code, stdout,
  stderr). The write takes a second or two; on a loaded machine this
  process may look too late, after the build wrote (its 'built' line
  printed): that build is removed and another started, up to
  SIGNAL_ATTEMPTS (a build that ends first says nothing of a signal
  mid-write)."""
  for _ in range(SIGNAL_ATTEMPTS):
    process = warm_process.WarmPopen(
        [sys.executable, '-m', 'rlds_reverb', 'build', '--dataset',
         dataset_dir, '--out', str(out), *options],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + HANG_GUARD_S
    while not (out.is_dir() and any(entry.is_dir()
                                    for entry in out.iterdir())):
      assert process.poll() is None, process.communicate()
      assert time.monotonic() < deadline
      time.sleep(0.01)
    process.send_signal(signum)
    stdout, stderr = process.communicate(timeout=HANG_GUARD_S)
    if not stdout.startswith('built '):
      return process.returncode, stdout, stderr
    shutil.rmtree(out)
  pytest.fail(f'each of {SIGNAL_ATTEMPTS} builds ended before its signal')


@pytest.mark.slow
@pytest.mark.parametrize('options', [(), ('--servers', '2')],
                         ids=['one_server', 'two_servers_in_process'])
def test_ctrl_c_mid_build_writes_nothing_and_says_so(big_dataset, tmp_path,
                                                     options):
  """One checkpoint, or a part per server built in the command's own
  process (one worker: no pool) and then merged."""
  out = tmp_path / 'ckpt'
  code, stdout, stderr = signalled_mid_build(big_dataset, out, signal.SIGINT,
                                             *options)
  assert (code, stdout) == (130, ''), stderr
  assert error_lines(stderr) == [
      f'rlds-reverb: error: interrupted; nothing was written ({out} was not '
      'made)']
  assert 'Traceback' not in stderr
  assert not out.exists()  # The unfinished checkpoint, and --out, removed.


@pytest.mark.slow
def test_sigkill_mid_build_leaves_nothing_a_server_loads(
    big_dataset, tmp_path):
  out = tmp_path / 'ckpt'
  code, _, _ = signalled_mid_build(big_dataset, out, signal.SIGKILL)
  assert code == -signal.SIGKILL
  found = checkpoints.find(str(out))
  assert found.newest is None and len(found.unfinished) == 1, found
  server = reverb.Server(
      [reverb_tables.fifo_table(TABLE)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(out)))
  try:
    assert reverb_tables.table_size(reverb_tables.client_of(server),
                                    TABLE) == 0
  finally:
    server.stop()
