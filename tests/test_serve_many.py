"""`rlds-reverb serve` of a build of many servers: one command, one server
process each, started, watched and stopped together (cli/serve_many.py).

Real processes throughout: the serve command, and the server processes it
starts, loading what `build --servers 2` wrote; the data is read back from
each server and compared with what the build's checkpoints hold. Refusals
(before anything starts) are in test_checkpoint_dirs.py.
"""

import json
import os
import pathlib
import shutil
import signal
import subprocess
import sys
import time

import pytest

from rlds_reverb.checkpoints import directories
from tests import reverb_tables
from tests import serve_command
from tests import warm_process
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import run_cli_here
from tests.serve_command import TABLE
from tests.serve_command import dataset  # pylint: disable=unused-import
from tests.serve_command import signature  # pylint: disable=unused-import

SERVERS = 2
DEADLINE_S = 60


@pytest.fixture(scope='module')
def built(dataset, tmp_path_factory):  # pylint: disable=redefined-outer-name
  """CLEAN built for 2 servers: episodes 0 and 2 (3 items) to server 0,
  episode 1 (3 items) to server 1."""
  out = tmp_path_factory.mktemp('built') / 'out'
  result = run_cli_here('build', '--dataset', dataset, '--out', out,
                        '--servers', SERVERS, '--table', TABLE, '--sampler',
                        'fifo')
  assert result.returncode == 0, result.stderr
  return out


@pytest.fixture(scope='module')
def built_items(built, signature):  # pylint: disable=redefined-outer-name
  """What a real server loading each server's part holds."""
  return [reverb_tables.as_multiset(_loaded(built / _root(k), signature))
          for k in range(SERVERS)]


def _loaded(root, signature):  # pylint: disable=redefined-outer-name
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  server = reverb.Server(
      [reverb_tables.fifo_table(TABLE, signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          os.fspath(pathlib.Path(root).parent / f'{root.name}-loaded'),
          fallback_checkpoint_path=os.fspath(
              root / directories.find(root).newest)))
  try:
    return reverb_tables.drain(server, TABLE)
  finally:
    server.stop()


def _root(server: int) -> str:
  return f'server-{server}-of-{SERVERS}'


def tree(root):
  return sorted((os.path.relpath(os.path.join(parent, name), root),
                 os.path.getsize(os.path.join(parent, name)))
                for parent, _, names in os.walk(root) for name in names)


class ServeMany:
  """The serve command as a process, its stderr in a file."""

  def __init__(self, dataset, stderr_path, *options):  # pylint: disable=redefined-outer-name
    command = [sys.executable, '-m', 'rlds_reverb', 'serve', '--dataset',
               dataset, '--table', TABLE, *map(str, options)]
    self.stderr_path = pathlib.Path(stderr_path)
    with open(self.stderr_path, 'w') as stderr:
      self.process = warm_process.WarmPopen(command, stdout=subprocess.PIPE,
                                            stderr=stderr, text=True)

  def wait_until_serving(self):
    """The addresses on its one stdout line, once every server answers."""
    line = serve_command.first_line(self.process)
    prefix = f'serving {TABLE} on {SERVERS} servers of every interface: '
    assert line.startswith(prefix), (line, self.stderr())
    return line[len(prefix):].split()

  def stderr(self) -> str:
    return self.stderr_path.read_text()

  def each_ready(self, addresses, items: int) -> str:
    """Its stderr, once checked for each server's ready line: its port and
    the items it holds."""
    stderr = self.stderr()
    for k, address in enumerate(addresses):
      assert (f'rlds-reverb: server {k} of 2 ready on port '
              f'{address.split(":")[1]}: {items} items in {TABLE!r} ('
              ) in stderr, stderr
    return stderr

  def wait_for(self, text: str, count: int = 1) -> str:
    deadline = time.monotonic() + DEADLINE_S
    while self.stderr().count(text) < count:
      assert self.process.poll() is None, (text, self.stderr())
      assert time.monotonic() < deadline, (text, self.stderr())
      time.sleep(0.05)
    return self.stderr()

  def servers(self):
    """Its server processes' pids (its children started as servers, not
    the checker of the dataset), in start order."""
    pids = []
    for task in os.listdir(f'/proc/{self.process.pid}/task'):
      with open(f'/proc/{self.process.pid}/task/{task}/children') as file:
        pids += [int(pid) for pid in file.read().split()]
    return sorted(pid for pid in pids if '--as-server' in _command_line(pid))

  def finish(self) -> int:
    self.process.communicate(timeout=HANG_GUARD_S)
    return self.process.returncode

  def kill(self):
    if self.process.poll() is None:
      self.process.kill()
      self.process.communicate(timeout=HANG_GUARD_S)


def test_one_serve_starts_every_server_of_a_build_and_stops_them(
    dataset, built, built_items, tmp_path):  # pylint: disable=redefined-outer-name
  """Each server serves its part; servers.json says where; SIGUSR1
  checkpoints each into its own root; SIGINT (to the command alone) stops
  them all, checkpointed; the build is never changed."""
  before = tree(built)
  own = tmp_path / 'own'
  serve = ServeMany(dataset, tmp_path / 'stderr', '--from-checkpoint', built,
                    '--checkpoint-dir', own)
  try:
    addresses = serve.wait_until_serving()
    stderr = serve.each_ready(addresses, 3)
    assert 'rlds-reverb: all 2 servers ready in ' in stderr
    # The build's record of the dataset spares the checker process
    # (tests/test_build_record.py; test_a_dataset_the_build_does_not_fit_...
    # runs the checker).
    assert (f'rlds-reverb: the dataset and options are those {built} was '
            'built with (dataset.json): the dataset is not signed '
            'again') in stderr
    assert f': 6 items; addresses, tables and signature in {own}/servers.json' in stderr
    listed = json.loads((own / 'servers.json').read_text())
    assert [server['address'] for server in listed['servers']] == addresses
    assert [server['tables'][TABLE]['items']
            for server in listed['servers']] == [3, 3]
    assert listed['tables'] == [TABLE]
    assert {field['field'] for field in listed['signature']} >= {
        'step_type', 'observation', 'action', 'reward', 'discount'}
    assert len(serve.servers()) == SERVERS
    for pid in serve.servers():  # Loaded without TensorFlow's Python.
      assert '--parent-checks' in _command_line(pid)
      assert _PYWRAP_TENSORFLOW not in pathlib.Path(
          f'/proc/{pid}/maps').read_text()

    os.kill(serve.process.pid, signal.SIGUSR1)
    serve.wait_for('checkpoint written to', SERVERS)
    for k in range(SERVERS):
      assert len(directories.find(own / _root(k)).complete) == 1
    for k, address in enumerate(addresses):
      assert reverb_tables.as_multiset(
          reverb_tables.drain(address, TABLE)) == built_items[k]

    os.kill(serve.process.pid, signal.SIGINT)
    assert serve.finish() == 0, serve.stderr()
  finally:
    serve.kill()
  stderr = serve.stderr()
  for k in range(SERVERS):
    assert stderr.count(f'rlds-reverb: server {k} of 2: checkpoint written '
                        f'to {own}/{_root(k)}/') == 2, stderr
  assert stderr.endswith('rlds-reverb: all 2 servers stopped\n'), stderr
  assert not (own / 'servers.json').exists()
  assert tree(built) == before


@pytest.mark.slow
def test_servers_with_nothing_to_load_each_sign_the_dataset(dataset,
                                                            tmp_path):  # pylint: disable=redefined-outer-name
  """Own roots of 2 servers, made but empty (no build, no checkpoint yet):
  no server can start without TensorFlow, so each child runs the whole
  serve (signs the dataset, starts empty) and reports ready to the parent;
  SIGINT checkpoints each into its own root. (Slow tier: two TensorFlow
  starts; the default tier serves a build, whose servers load natively.)"""
  own = tmp_path / 'own'
  for k in range(SERVERS):
    (own / _root(k)).mkdir(parents=True)
  serve = ServeMany(dataset, tmp_path / 'stderr', '--checkpoint-dir', own)
  try:
    addresses = serve.wait_until_serving()
    stderr = serve.each_ready(addresses, 0)
    assert 'dataset.json' not in stderr
    for pid in serve.servers():
      assert '--parent-checks' not in _command_line(pid)
    listed = json.loads((own / 'servers.json').read_text())
    assert [server['address'] for server in listed['servers']] == addresses
    os.kill(serve.process.pid, signal.SIGINT)
    assert serve.finish() == 0, serve.stderr()
  finally:
    serve.kill()
  for k in range(SERVERS):
    assert len(directories.find(own / _root(k)).complete) == 1


# The library `import tensorflow` loads; `reverb_native` loads only its C++.
_PYWRAP_TENSORFLOW = '_pywrap_tensorflow_internal'


def _command_line(pid: int) -> list:
  return pathlib.Path(f'/proc/{pid}/cmdline').read_text().split('\0')


def test_a_dataset_the_build_does_not_fit_stops_every_server_unwritten(
    dataset, built, tmp_path):  # pylint: disable=redefined-outer-name
  """The parent checks the dataset while the servers load: served as n-step
  transitions, the build's trajectories are refused, naming the server and
  the option; every server is stopped, exit 2, and none checkpoints into
  --checkpoint-dir what the dataset does not fit."""
  own = tmp_path / 'own'
  serve = ServeMany(dataset, tmp_path / 'stderr', '--from-checkpoint', built,
                    '--checkpoint-dir', own, '--n-step')
  try:
    assert serve.finish() == 2, serve.stderr()
  finally:
    serve.kill()
  stderr = serve.stderr()
  assert ("rlds-reverb: error: server 0 of 2: The checkpoint's table "
          f"{TABLE!r} does not fit the dataset (its items are trajectories: "
          'serve without --n-step):') in stderr, stderr
  assert 'checkpoint written to' not in stderr
  for k in range(SERVERS):
    assert not directories.find(own / _root(k)).complete
  assert not (own / 'servers.json').exists()


def _newest(built, server: int) -> pathlib.Path:  # pylint: disable=redefined-outer-name
  return built / _root(server) / directories.find(built / _root(server)).newest


def _own_process(*options) -> subprocess.CompletedProcess:
  """A serve process started by this one (not forked by the warm zygote):
  a checker's or a server's lifeline needs its parent's pid."""
  return subprocess.run(
      [sys.executable, '-m', 'rlds_reverb', 'serve', *map(str, options)],
      capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)


@pytest.mark.slow
def test_the_checker_checks_the_checkpoints_it_is_given(dataset, built,
                                                         tmp_path):  # pylint: disable=redefined-outer-name
  """The checker (`--check-servers`) checks the checkpoints the parent
  found, without looking at the servers' roots again: the servers are
  making them meanwhile. Once, it saw a server's write test there and
  refused with 'the servers changed since the serve started'."""
  own = tmp_path / 'own'
  loads = []
  for k in range(SERVERS):
    (own / _root(k) / '.write-test-probe').mkdir(parents=True)
    loads += ['--check-load', _newest(built, k)]
  result = _own_process('--dataset', dataset, '--table', TABLE,
                        '--from-checkpoint', built, '--checkpoint-dir', own,
                        '--check-servers', os.getpid(), *loads)
  assert result.returncode == 0, result.stderr
  assert {field['field'] for field in json.loads(result.stdout)} >= {
      'step_type', 'observation', 'action', 'reward', 'discount'}


@pytest.mark.slow
def test_a_server_whose_checkpoint_changed_since_the_check_refuses(
    dataset, built, tmp_path):  # pylint: disable=redefined-outer-name
  """A server loads only the checkpoint the checker checks: one that finds
  another (its root written to since the parent looked) says so, exit 1,
  and serves nothing."""
  checked = _newest(built, 0)
  own = tmp_path / 'own'
  _as_own_checkpoints(built, own)
  result = _own_process('--dataset', dataset, '--table', TABLE,
                        '--from-checkpoint', built, '--checkpoint-dir', own,
                        '--as-server', f'0:{SERVERS}:{os.getpid()}',
                        '--parent-checks', checked)
  assert result.returncode == 1, result.stderr
  assert (f'rlds-reverb: error: the checkpoint to load changed since the '
          f'serve started: it was {checked}, checked against the dataset, '
          f'and is now {own / _root(0) / checked.name}') in result.stderr


def _as_own_checkpoints(built, own):  # pylint: disable=redefined-outer-name
  """`own` as if the servers had checkpointed there: each part's files,
  without the build's mark."""
  for k in range(SERVERS):
    part = _newest(built, k)
    copy = own / _root(k) / part.name
    shutil.copytree(part, copy)
    (copy / directories.BUILD_MARK).unlink()


@pytest.mark.slow
@pytest.mark.parametrize('keep_going', [False, True],
                         ids=['stops_the_others', 'keep_going'])
def test_a_server_killed_is_named_at_once(dataset, built, built_items,
                                          tmp_path, keep_going):  # pylint: disable=redefined-outer-name
  """A restart from the servers' own checkpoints (no --from-checkpoint);
  then server 0 is SIGKILLed: named by number, and the others stopped
  (exit 1), or kept serving with --keep-going (exit 1 at the end)."""
  own = tmp_path / 'own'
  _as_own_checkpoints(built, own)
  options = ['--checkpoint-dir', own] + (['--keep-going'] if keep_going
                                         else [])
  serve = ServeMany(dataset, tmp_path / 'stderr', *options)
  try:
    addresses = serve.wait_until_serving()
    assert 'from their own checkpoints in' in serve.stderr()
    first, _ = serve.servers()
    os.kill(first, signal.SIGKILL)
    said = (f'rlds-reverb: server 0 of 2 ({addresses[0]}) ended after ')
    stderr = serve.wait_for(said) if keep_going else None
    if keep_going:
      assert 'killed by SIGKILL; --keep-going: the others go on' in stderr
      assert reverb_tables.as_multiset(
          reverb_tables.drain(addresses[1], TABLE)) == built_items[1]
      os.kill(serve.process.pid, signal.SIGTERM)
    assert serve.finish() == 1, serve.stderr()
  finally:
    serve.kill()
  stderr = serve.stderr()
  assert said in stderr
  if not keep_going:
    assert 'killed by SIGKILL; stopping the others' in stderr
  assert (f'rlds-reverb: server 1 of 2: checkpoint written to '
          f'{own}/{_root(1)}/') in stderr


@pytest.mark.slow
def test_ctrl_c_while_the_servers_start_stops_them_all(dataset, built,
                                                        tmp_path):  # pylint: disable=redefined-outer-name
  """SIGINT as soon as the command has started its servers, before any is
  ready: each is stopped (one still importing ends by the SIGTERM itself),
  exit 0, the last line names those not ready, and nothing is left."""
  before = tree(built)
  own = tmp_path / 'own'
  serve = ServeMany(dataset, tmp_path / 'stderr', '--from-checkpoint', built,
                    '--checkpoint-dir', own)
  try:
    serve.wait_for('rlds-reverb: starting 2 servers from ')
    os.kill(serve.process.pid, signal.SIGINT)
    assert serve.finish() == 0, serve.stderr()
  finally:
    serve.kill()
  last = serve.stderr().splitlines()[-1]
  assert last in ('rlds-reverb: all 2 servers stopped (server 0 of 2, '
                  'server 1 of 2 before they were ready)',
                  'rlds-reverb: all 2 servers stopped (server 0 of 2 before '
                  'it was ready)',
                  'rlds-reverb: all 2 servers stopped (server 1 of 2 before '
                  'it was ready)'), serve.stderr()
  assert not (own / 'servers.json').exists()
  assert tree(built) == before
