"""`rlds-reverb serve --checkpoint-dir`: restore, SIGUSR1, and failures.

Servers are `rlds-reverb serve` subprocesses, killed as a user's would be;
their stderr goes to a file that the tests read with a deadline. Each starts
TensorFlow (~5 s), so one subprocess checks several things. Which checkpoint
Reverb loads is checked against in-process Reverb servers, which are cheap.
"""

import os
import pathlib
import shutil
import signal
import socket
import zlib

import numpy as np
import pytest
import reverb

import rlds_reverb
from rlds_reverb import checkpoints
from rlds_reverb._util import wording
from rlds_reverb.cli import serve_loop
from tests import reverb_tables
from tests import rlds_data
from tests.cli_data import CLEAN
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli_here
from tests.reverb_tables import float64_signature
from tests.serve_command import Serve
from tests.serve_command import TABLE
from tests.serve_command import dataset  # pylint: disable=unused-import
from tests.serve_command import pushed_items  # pylint: disable=unused-import
from tests.serve_command import signature  # pylint: disable=unused-import


def push(address: str) -> None:
  assert rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, TABLE).items == 6


def checkpoint_names(root) -> list:
  return sorted(entry.name for entry in pathlib.Path(root).iterdir())


def test_sigusr1_survives_sigkill_and_sigterm_checkpoints(
    dataset, pushed_items, signature, tmp_path):
  """SIGUSR1 checkpoint, SIGKILL, restore; push, SIGTERM, restore again. The
  root does not exist before: serve makes it."""
  root = tmp_path / 'ckpt'
  with Serve(dataset, tmp_path / 'first.err', root) as serve:
    assert 'starts empty' in serve.stderr()
    push(serve.address)
    serve.process.send_signal(signal.SIGUSR1)
    stderr = serve.wait_for_note('checkpoint written to ')
    [first] = checkpoint_names(root)
    assert f'checkpoint written to {root / first}' in stderr
    assert (root / first / checkpoints.DONE).exists()
    assert serve.size() == 6  # Still serving.
    assert serve.stop(signal.SIGKILL) == -signal.SIGKILL

  with Serve(dataset, tmp_path / 'second.err', root) as serve:
    assert (f"restored checkpoint {root / first}: 6 items in '{TABLE}'"
            in serve.stderr())
    push(serve.address)
    info = reverb.Client(serve.address).server_info(timeout=10)[TABLE]
    assert info.current_size == 12
    assert info.signature == signature  # The dataset's, as serve made it.
    assert serve.stop(signal.SIGTERM) == 0, serve.stderr()
    [second] = checkpoint_names(root)  # Reverb keeps the newest only.
    assert f'checkpoint written to {root / second}' in serve.stderr()
    assert (root / second / checkpoints.DONE).exists()

  # A newer checkpoint without DONE, as if a server died while writing it.
  broken = '9999-12-31T23:59:59+00:00'
  shutil.copytree(root / second, root / broken)
  (root / broken / checkpoints.DONE).unlink()
  with Serve(dataset, tmp_path / 'third.err', root) as serve:
    stderr = serve.stderr()
    assert f'1 incomplete checkpoint in {root} ' in stderr
    assert f': {broken}. Reverb ignores it, loads {second} instead' in stderr
    assert (f"restored checkpoint {root / second}: 12 items in '{TABLE}'"
            in stderr)
    assert (reverb_tables.as_multiset(reverb_tables.drain(serve.address, TABLE))
            == reverb_tables.as_multiset(pushed_items * 2))


def test_incomplete_checkpoint_starts_empty_and_write_failures_are_one_line(
    dataset, signature, tmp_path):
  """No DONE: reported, table empty. Failed writes: USR1 goes on, TERM fails."""
  root = tmp_path / 'ckpt'
  name = _reverb_checkpoint(root, signature)
  (root / name / checkpoints.DONE).unlink()
  with Serve(dataset, tmp_path / 'serve.err', root) as serve:
    stderr = serve.stderr()
    assert (f'1 incomplete checkpoint in {root} (no DONE file: a server '
            f'stopped while writing?): {name}. Reverb ignores it, starts '
            'without it' in stderr)
    assert (f"no complete checkpoint in {root}; table '{TABLE}' starts "
            'empty' in stderr)
    assert serve.size() == 0

    shutil.rmtree(root)
    root.write_text('a file where the checkpoints were')  # Even root fails.
    serve.process.send_signal(signal.SIGUSR1)
    stderr = serve.wait_for_note('still serving')
    assert f'Could not write a checkpoint to {root}: ' in stderr
    assert serve.size() == 0
    assert serve.stop(signal.SIGTERM) == 1
    stderr = serve.stderr()
  assert 'Traceback' not in stderr
  [line] = error_lines(stderr)
  assert line.startswith(
      f'rlds-reverb: error: Could not write a checkpoint to {root}: ')


def test_checkpoint_of_another_signature_fails_with_a_line_per_field(
    dataset, signature, tmp_path):
  """The checkpoint's table wins over serve's: one that does not fit fails."""
  root = tmp_path / 'ckpt'
  _reverb_checkpoint(root, float64_signature(signature), pushes=0)
  result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                        '--checkpoint-dir', root)
  assert result.returncode == 1
  first, *fields = result.stderr.splitlines()
  assert first == (f"rlds-reverb: error: The checkpoint's table '{TABLE}' "
                   'does not fit the dataset:')
  assert [line.split(': ')[0] for line in fields] == [
      '  discount', '  observation', '  reward']
  assert all('table has float64[' in line for line in fields), fields
  assert 'loading checkpoint' not in result.stderr  # Refused before Reverb.


def test_unwritable_checkpoint_dir_fails_at_start(dataset, tmp_path):
  (tmp_path / 'file').write_text('')
  result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                        '--checkpoint-dir', tmp_path / 'file' / 'ckpt')
  assert result.returncode == 2
  assert 'Traceback' not in result.stderr
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: --checkpoint-dir: {tmp_path}/file/ckpt is not '
      'writable: Not a directory']
  assert result.stdout == ''


# What serve says before Reverb loads a checkpoint (silent until it is done),
# and a checkpoint it refuses before Reverb starts.

OTHER = 'other'


def _two_table_checkpoint(root, signature) -> str:
  """A checkpoint Reverb writes of TABLE, max_size 4 (the oldest 2 of CLEAN's
  6 items evicted: 6 inserted, 2 deleted), and OTHER (6 items)."""
  server = reverb.Server(
      [reverb_tables.fifo_table(TABLE, signature, max_size=4),
       reverb_tables.fifo_table(OTHER, signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(root)))
  try:
    with pytest.warns(rlds_reverb.CapacityWarning, match='remove 2 of'):
      rlds_reverb.push(rlds_data.as_rlds(CLEAN),
                       reverb_tables.address(server), [TABLE, OTHER])
    return reverb.Client(reverb_tables.address(server)).checkpoint()
  finally:
    server.stop()


def size_on_disk(path) -> int:
  return sum(file.stat().st_size for file in pathlib.Path(path).iterdir())


def test_serve_says_what_it_loads_before_reverb_loads_it(
    dataset, signature, pushed_items, tmp_path):
  """Items per table (held: inserted - deleted), size on disk and about how
  long, from the tables file, before Reverb's own first line (--debug shows
  Reverb's lines). On --port 0, serve listens on a free port it prints
  (Reverb given port 0 would listen on a port it does not report): a push
  there comes back with the restored items."""
  root = tmp_path / 'ckpt'
  path = _two_table_checkpoint(root, signature)
  with Serve(dataset, tmp_path / 'serve.err', checkpoint_dir=root, port=0,
             table_args=('--debug', '--table', TABLE, '--table', OTHER),
             names=(TABLE, OTHER)) as serve:
    assert serve.port != 0
    lines = serve.wait_for_note('restored checkpoint').splitlines()
    loading = (f"rlds-reverb: loading checkpoint {path}: 6 items in "
               f"'{OTHER}', 4 items in '{TABLE}' "
               f'({wording.size(size_on_disk(path))} on disk); the server '
               'answers once it is loaded, in under a second (at about 135k '
               'items/s)')
    assert loading in lines, lines
    reverb_loads = [i for i, line in enumerate(lines)
                    if 'Loading checkpoint from' in line]
    assert reverb_loads and lines.index(loading) < reverb_loads[0], lines
    assert (f"rlds-reverb: restored checkpoint {path}: 6 items in '{OTHER}', "
            f"4 items in '{TABLE}'") in lines
    with pytest.warns(rlds_reverb.TableNotEmptyWarning):
      rlds_reverb.push(rlds_data.as_rlds(CLEAN), serve.address, OTHER)
    assert (reverb_tables.as_multiset(reverb_tables.drain(serve.address, OTHER))
            == reverb_tables.as_multiset(pushed_items * 2))
    assert serve.stop(signal.SIGTERM) == 0


def test_checkpoint_with_unserved_tables_is_refused_before_reverb_starts(
    dataset, signature, tmp_path):
  """Reverb would fail after it began loading (dm-reverb 0.14.0: ValueError
  "Trying to load table 'other' but table was not found")."""
  root = tmp_path / 'ckpt'
  path = _two_table_checkpoint(root, signature)
  result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                        '--checkpoint-dir', root)
  assert (result.returncode, result.stdout) == (2, '')
  assert result.stderr.splitlines() == [
      f"rlds-reverb: error: checkpoint {path} holds tables "
      f"'{OTHER}', '{TABLE}', but serve serves '{TABLE}', and Reverb fails to "
      'load a table it does not serve: serve every table it holds (--table '
      f"{OTHER} --table {TABLE}; the checkpoint's settings replace their "
      'options), or start from another checkpoint']
  # A tables file cut short: Reverb would not load it either.
  tables_file = pathlib.Path(path) / checkpoints.TABLES
  tables_file.write_bytes(tables_file.read_bytes()[:20])
  result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                        '--table', OTHER, '--checkpoint-dir', root)
  assert (result.returncode, result.stdout) == (2, '')
  assert error_lines(result.stderr) == result.stderr.splitlines()
  assert result.stderr.startswith(
      f'rlds-reverb: error: cannot read checkpoint {path}: '
  ), result.stderr


# Ports: a served port is refused; what serve prints is where it listens.


def free_port() -> int:
  with socket.socket(socket.AF_INET6) as probe:
    probe.bind(('::', 0))
    return probe.getsockname()[1]


def test_second_serve_on_a_served_port_is_refused(dataset, pushed_items,
                                                  tmp_path):
  """One `serve` process (a TensorFlow start) without --checkpoint-dir: a
  second serve on its port is refused (gRPC would let it listen there too,
  and pushes would land on either); SIGUSR1 writes nothing and it serves
  on; Ctrl-C says what is discarded."""
  port = free_port()
  with Serve(dataset, tmp_path / 'first.err', port=port) as first:
    assert first.address == f'localhost:{port}'
    second = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                          '--port', port)
    assert second.returncode == 2, second.stderr
    assert second.stdout == ''
    assert error_lines(second.stderr) == [
        f'rlds-reverb: error: --port: port {port} is already in use: another '
        'server listens there; choose another port, or stop that server '
        'first']
    with pytest.raises(rlds_reverb.AddressError, match='already in use'):
      rlds_reverb.check_port_free(port)  # The Python API, the same check.
    # Every interface: both loopbacks reach the one server.
    push(f'127.0.0.1:{port}')
    push(f'[::1]:{port}')
    assert (reverb_tables.as_multiset(reverb_tables.drain(first.address, TABLE))
            == reverb_tables.as_multiset(pushed_items * 2))

    push(first.address)
    first.process.send_signal(signal.SIGUSR1)
    first.wait_for_note('SIGUSR1: no checkpoint written, serve has no '
                        '--checkpoint-dir; still serving')
    assert first.size() == 6
    # Ctrl-C; SIGTERM takes the same path (serve's `_on_stop`), and is
    # sent in `test_sigusr1_survives_sigkill_and_sigterm_checkpoints`.
    assert first.stop(signal.SIGINT) == 0, first.stderr()
  stderr = first.stderr()
  assert 'Traceback' not in stderr
  assert 'checkpoint written to' not in stderr
  assert stderr.splitlines()[-1] == (
      "rlds-reverb: stopped without --checkpoint-dir: the 6 items of table "
      "'replay' are discarded (serve --checkpoint-dir DIR writes a "
      "checkpoint at stop and reloads it)")
  rlds_reverb.check_port_free(port)


def test_port_held_by_another_program_is_refused(dataset):
  with socket.socket(socket.AF_INET6) as listener:
    listener.bind(('::', 0))
    listener.listen()
    port = listener.getsockname()[1]
    result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                          '--port', port)
  assert result.returncode == 2
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: --port: port {port} is already in use: another '
      'server listens there; choose another port, or stop that server first']


@pytest.mark.parametrize('port', ['99999', '65536', '-1', 'http'])
def test_port_out_of_range_is_a_usage_error(dataset, port):
  """Reverb would listen on 99999 % 65536 while saying 99999."""
  result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                        '--port', port)
  assert result.returncode == 2
  assert result.stderr.splitlines()[-1] == (
      'rlds-reverb serve: error: argument --port: must be a port from 1 to '
      f"65535 (or 0 for a free one), got '{port}'")


# Which checkpoint Reverb loads, against what `checkpoints.find` says.


def _reverb_checkpoint(root, signature, pushes: int = 1) -> str:
  """The name of a checkpoint Reverb writes in `root` after `pushes` pushes.

  The in-process server first loads what `root` has, as `serve` would.
  """
  table = reverb_tables.fifo_table(TABLE, signature)
  server = reverb.Server(
      [table], checkpointer=reverb.checkpointers.DefaultCheckpointer(str(root)))
  try:
    for _ in range(pushes):
      push(reverb_tables.address(server))
    path = reverb.Client(reverb_tables.address(server)).checkpoint()
  finally:
    server.stop()
  return os.path.basename(path)


def _loaded_size(root, signature) -> int:
  table = reverb_tables.fifo_table(TABLE, signature)
  server = reverb.Server(
      [table], checkpointer=reverb.checkpointers.DefaultCheckpointer(str(root)))
  try:
    return reverb_tables.table_size(
        reverb.Client(reverb_tables.address(server)), TABLE)
  finally:
    server.stop()


def _missing(root, signature):
  del root, signature
  return {'complete': (), 'incomplete': (), 'size': 0}


def _one_complete(root, signature):
  name = _reverb_checkpoint(root, signature)
  return {'complete': (name,), 'incomplete': (), 'size': 6}


def _one_incomplete(root, signature):
  name = _reverb_checkpoint(root, signature)
  (root / name / checkpoints.DONE).unlink()
  return {'complete': (), 'incomplete': (name,), 'size': 0}


def _complete_then_newer_incomplete(root, signature):
  older = _reverb_checkpoint(root, signature)
  shutil.copytree(root / older, root.parent / 'older')
  newer = _reverb_checkpoint(root, signature)  # Deletes `older` from root.
  shutil.copytree(root.parent / 'older', root / older)
  (root / newer / checkpoints.DONE).unlink()
  (root / 'notes.txt').write_text('not a checkpoint')
  return {'complete': (older,), 'incomplete': (newer,), 'size': 6}


CHECKPOINT_DIRS = {
    'missing': _missing,
    'one_complete': _one_complete,
    'one_incomplete': _one_incomplete,
    'complete_then_newer_incomplete': _complete_then_newer_incomplete,
}


@pytest.mark.parametrize('case', CHECKPOINT_DIRS)
def test_find_names_what_reverb_loads(case, signature, tmp_path):
  root = tmp_path / 'ckpt'
  expected = CHECKPOINT_DIRS[case](root, signature)
  found = checkpoints.find(str(root))
  assert (found.complete, found.incomplete) == (
      expected['complete'], expected['incomplete'])
  assert found.newest == (expected['complete'] or (None,))[-1]
  assert _loaded_size(root, signature) == expected['size']
  if root.exists():  # Reverb's next checkpoint deletes the incomplete ones.
    _reverb_checkpoint(root, signature, pushes=0)
    assert checkpoints.find(str(root)).incomplete == ()


def test_chunk_lengths_of_a_checkpoint_dir_read_what_reverb_loads(
    signature, tmp_path):
  """serve's --checkpoint-dir gives its newest complete checkpoint's."""
  root = tmp_path / 'ckpt'
  name = _reverb_checkpoint(root, signature)
  broken = '9999-12-31T23:59:59+00:00'  # Newer, without DONE or chunks.
  (root / broken).mkdir()
  (root / broken / 'tables.tfrecord').write_text('')
  lengths = checkpoints.chunk_lengths(str(root))
  assert lengths == checkpoints.chunk_lengths(str(root / name))
  # Every column of the 6 items stores CLEAN's 9 steps.
  assert [sum(length * count for length, count in column.items())
          for column in lengths[TABLE]] == [9] * len(lengths[TABLE])
  with pytest.raises(FileNotFoundError) as missing:
    checkpoints.chunk_lengths(str(tmp_path / 'missing'))
  assert str(missing.value) == (
      f'No Reverb checkpoint at {tmp_path}/missing: no such directory')
  chunks_file = root / name / 'chunks.tfrecord'
  whole = chunks_file.read_bytes()
  chunks_file.write_bytes(whole[:len(whole) // 2])
  with pytest.raises(ValueError) as cut:
    checkpoints.chunk_lengths(str(root))
  assert str(cut.value).startswith(
      f'{chunks_file} ends before its zlib stream does: the file is cut '
      'short')
  chunks_file.write_bytes(zlib.compress(zlib.decompress(whole)[:-5]))
  with pytest.raises(ValueError) as short:
    checkpoints.chunk_lengths(str(root))
  assert str(short.value).startswith(
      f'{chunks_file} ends inside a record: the one at byte ')
  shutil.rmtree(root / name)
  with pytest.raises(FileNotFoundError) as incomplete:
    checkpoints.chunk_lengths(str(root))
  assert str(incomplete.value) == (
      f'No Reverb checkpoint at {root}: it holds no chunks.tfrecord, and no '
      f'checkpoint directory with a DONE file (among {broken})')


def test_writable_error(tmp_path):
  (tmp_path / 'file').write_text('')
  assert checkpoints.writable_error(str(tmp_path / 'new' / 'ckpt')) is None
  assert (tmp_path / 'new' / 'ckpt').is_dir()
  assert os.listdir(tmp_path / 'new' / 'ckpt') == []
  assert checkpoints.writable_error(str(tmp_path / 'file')) == (
      f'{tmp_path}/file is not a directory')
  assert checkpoints.writable_error(str(tmp_path / 'file' / 'ckpt')) == (
      f'{tmp_path}/file/ckpt is not writable: Not a directory')


@pytest.mark.skipif(os.geteuid() == 0,
                    reason='root writes into read-only directories')
def test_writable_error_read_only(tmp_path):
  read_only = tmp_path / 'read_only'
  read_only.mkdir(mode=0o500)
  assert checkpoints.writable_error(str(read_only)) == (
      f'{read_only} is not writable: Permission denied')


def test_the_stop_line_names_tables_in_the_order_given():
  """Reverb's server_info lists tables in an order that changes from run to
  run (test_serve_tables' stop line once came out reversed): the line
  follows --table's order."""
  assert serve_loop.discarded_text(
      lambda: {'ratio': 4, 'fifo': 0, 'uniform': 29_976}, ['uniform', 'fifo',
                                                          'ratio']) == (
      "stopped without --checkpoint-dir: the 29,976 items of table "
      "'uniform', 4 items of table 'ratio' are discarded (serve "
      "--checkpoint-dir DIR writes a checkpoint at stop and reloads it)")


@pytest.mark.parametrize('sizes, text', [
    ({'replay': 0}, 'stopped without --checkpoint-dir; the table was empty, '
     'nothing is discarded'),
    ({'replay': 0, 'other': 0}, 'stopped without --checkpoint-dir; every '
     'table was empty, nothing is discarded'),
    ({'replay': 1, 'other': 0}, "stopped without --checkpoint-dir: the 1 item "
     "of table 'replay' is discarded (serve --checkpoint-dir DIR writes a "
     "checkpoint at stop and reloads it)"),
])
def test_the_stop_line_says_what_is_discarded(sizes, text):
  """serve's last line at a stop without --checkpoint-dir (a served process
  says it in test_second_serve_on_a_served_port_is_refused), worded from
  the tables as they are; here on a server in the test's process."""
  server = reverb_tables.start_server(
      [reverb_tables.fifo_table(name) for name in sizes])
  try:
    client = reverb.Client(reverb_tables.address(server))
    for name, size in sizes.items():
      with client.trajectory_writer(num_keep_alive_refs=1) as writer:
        for _ in range(size):
          writer.append({'x': np.float32(1)})
          writer.create_item(name, 1.0, {'x': writer.history['x'][-1]})
        writer.flush(timeout_ms=10_000)
    assert serve_loop.discarded_text(
        lambda: {name: info.current_size
                 for name, info in client.server_info(timeout=5).items()},
        list(sizes)) == text
  finally:
    server.stop()
