"""Sharded pushes: `load(shard=...)`, `push --shard/--workers`, `push_shards`.

The N shards of a dataset must together be exactly the dataset: checked on
the episodes read back from the sources, and on the items read back from a
real table after pushing through N worker processes.
"""

import json
import signal
import subprocess
import sys
import time

import pytest
import reverb

import rlds_reverb
from rlds_reverb import specs
from rlds_reverb._util import wording
from tests import process_tree
from tests import reverb_tables
from tests import rlds_data
from tests import servers_files
from tests import warm_process
from tests.cli_data import write_tfds
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli_here
from tests.server_process import ServerProcess

# 7 episodes of 2..8 steps: shards of 2 and 3 are uneven.
EPISODES = [rlds_data.flat_episode(n, seed=200 + n) for n in range(2, 9)]


def _first_observations(rlds_data_set):
  """Each episode's first observation bytes, in read order."""
  return [next(iter(episode['steps']))['observation'].numpy().tobytes()
          for episode in rlds_data_set]


@pytest.fixture(scope='module')
def dataset_dir(tmp_path_factory):
  return write_tfds(tmp_path_factory.mktemp('tfds'), 'seven_rlds', EPISODES)


@pytest.fixture(scope='module')
def served_tables(dataset_dir):
  return [reverb_tables.fifo_table('a',
                                   reverb_tables.signature_for(dataset_dir))]


@pytest.mark.parametrize('count', [1, 2, 3, 7])
def test_shards_together_are_exactly_the_dataset(dataset_dir, count):
  whole = _first_observations(rlds_reverb.load(dataset_dir))
  shards = [_first_observations(rlds_reverb.load(dataset_dir, shard=(i, count)))
            for i in range(count)]
  assert [episode for shard in shards for episode in shard] == whole
  assert max(map(len, shards)) - min(map(len, shards)) <= 1


def test_shards_of_several_sources_and_a_sliced_split(dataset_dir):
  sources = [dataset_dir, dataset_dir]  # Read twice: two sources, one spec.
  whole = sorted(_first_observations(rlds_reverb.load(sources,
                                                      split='train[:5]')))
  shards = [_first_observations(rlds_reverb.load(sources, split='train[:5]',
                                                 shard=(i, 2)))
            for i in range(2)]
  assert sorted(shards[0] + shards[1]) == whole
  assert len(whole) == 5 + 5


def test_shard_outside_the_count_is_an_error(dataset_dir):
  with pytest.raises(rlds_reverb.SourceError,
                     match=r'Shard 2/2 does not exist: the index must '
                           r'be in 0..1'):
    rlds_reverb.load(dataset_dir, shard=(2, 2))
  result = run_cli_here('push', '--dataset', dataset_dir, '--server',
                        'localhost:1', '--table', 'a', '--shard', '2/2')
  assert result.returncode == 2
  assert "argument --shard: must have N >= 1 and 0 <= I < N, got '2/2'" in (
      result.stderr)


def test_one_shard_pushes_its_part_only(dataset_dir, server):
  result = run_cli_here('push', '--dataset', dataset_dir, '--server',
                        reverb_tables.address(server), '--table', 'a',
                        '--shard', '0/2', '--json')
  assert result.returncode == 0, result.stderr
  first_half = EPISODES[:4]  # even_splits gives the remainder to the first.
  assert json.loads(result.stdout)['episodes'] == 4
  assert (reverb_tables.drained_pairs(server, 'a') ==
          reverb_tables.observation_pairs(first_half))


# --workers from the test's process (`run_cli_here`): the two workers are
# processes all the same; the parent's exit status through `python -m
# rlds_reverb` is checked elsewhere (test_faults' Ctrl-C tests of --workers).
def test_workers_push_every_shard_into_one_table(dataset_dir, server, tmp_path):
  """Into a table that already holds the data once: every shard's items are
  added, and the table's items are said once for both workers, from the
  look before either wrote, with what both add (test_held's case; one run
  of two workers checks both)."""
  address = reverb_tables.address(server)
  rlds_reverb.push(rlds_reverb.load(dataset_dir), address, 'a')
  state = tmp_path / 'state.json'
  result = run_cli_here('push', '--dataset', dataset_dir, '--server',
                        address, '--table', 'a',
                        '--workers', '2', '--resume', state, '--json')
  assert result.returncode == 0, result.stderr
  summary = json.loads(result.stdout)
  assert (summary['workers'], summary['episodes'], summary['trajectories'],
          summary['items']) == (2, 7, 35, 28)
  items = wording.count(28, 'item')
  assert [line for line in result.stderr.splitlines()
          if 'already holds' in line] == [
              f"rlds-reverb: warning: table 'a' already holds {items}; this "
              f"push adds {wording.count(28, 'more', 'more')}"]
  assert (reverb_tables.drained_pairs(server, 'a') ==
          sorted(2 * reverb_tables.observation_pairs(EPISODES)))
  for index in range(2):
    saved = json.loads((tmp_path / f'state.{index}-of-2.json').read_text())
    assert saved['complete'] and saved['key']['shard'] == f'{index}/2'


def test_workers_report_each_failed_shard(dataset_dir, server):
  result = run_cli_here('push', '--dataset', dataset_dir, '--server',
                   reverb_tables.address(server), '--table', 'missing',
                   '--workers', '2')
  assert result.returncode == 1
  [line] = error_lines(result.stderr)
  assert line.startswith('rlds-reverb: error: 2 of 2 workers failed: shard '
                         "0/2: Reverb server at")
  assert "no table 'missing'" in line and 'shard 1/2:' in line


# Slow tier: two runs of 2 worker processes. `push_shards` and `--workers`
# run the same `rlds_reverb.parallel`: the default tier checks it pushes every
# shard in test_workers_push_every_shard_into_one_table, reports each failed
# shard in test_workers_report_each_failed_shard, and `push_shards` from
# Python in test_push_shards_run_the_checked_push_into_each_server.
@pytest.mark.slow
def test_push_shards_from_python(dataset_dir, server):
  result = rlds_reverb.push_shards(
      dataset_dir, reverb_tables.address(server), 'a', workers=2,
      sequence_length=2, timeout=30)
  assert (result.episodes, result.trajectories, result.items) == (7, 35, 28)
  assert (reverb_tables.drained_pairs(server, 'a') ==
          reverb_tables.observation_pairs(EPISODES))
  with pytest.raises(rlds_reverb.ShardsFailedError,
                     match=r"2 of 2 shards failed: shard 0/2: "
                           r"TableNotFoundError: .*no table 'b'"):
    rlds_reverb.push_shards(dataset_dir, reverb_tables.address(server), 'b',
                            workers=2)
  client = reverb.Client(reverb_tables.address(server))
  assert client.server_info(timeout=10)['a'].current_size == 0


def test_push_shards_run_the_checked_push_into_each_server(tmp_path):
  """Shard i into server i % 2; each shard skips its own bad episodes."""
  from tests.cli_data import MIXED  # pylint: disable=g-import-not-at-top
  from tests.cli_data import MIXED_INVALID  # pylint: disable=g-import-not-at-top
  directory = write_tfds(tmp_path, 'mixed_rlds', MIXED, MIXED_INVALID)
  spec = rlds_reverb.create_trajectory_data_spec(rlds_reverb.load(directory))
  servers = [reverb_tables.start_server(
      [reverb_tables.fifo_table('a', specs.table_signature(spec))])
             for _ in range(2)]
  try:
    result = rlds_reverb.push_shards(
        directory, [reverb_tables.address(s) for s in servers], 'a',
        workers=2, on_invalid='skip', resume=str(tmp_path / 'state.json'))
    # Shard 0/2 holds episodes 0-2, shard 1/2 episodes 3-4 (as 0-1).
    assert [(e.shard, e.position, e.kind) for e in result.skipped] == [
        ('0/2', 1, 'flagged_invalid'), ('0/2', 2, 'terminal_not_last'),
        ('1/2', 1, 'episode_not_first')]
    assert (result.episodes, result.skipped_episodes) == (2, 3)
    assert [reverb_tables.drained_pairs(s, 'a') for s in servers] == [
        reverb_tables.observation_pairs([MIXED[0]]),
        reverb_tables.observation_pairs([MIXED[3]])]
    assert all(json.loads((tmp_path / f'state.{i}-of-2.json').read_text())[
        'complete'] for i in range(2))
  finally:
    for server in servers:
      server.stop()


@pytest.mark.slow
def test_push_shards_take_a_servers_file_among_addresses(
    tmp_path, dataset_dir, server, make_server):
  """[FILE of (second), first]: shard 0 into the file's server, shard 1
  into the address after it, as if the file's addresses were given."""
  second = make_server([reverb_tables.fifo_table(
      'a', reverb_tables.client_of(server).server_info(
          timeout=10)['a'].signature)])
  path = servers_files.write(tmp_path / 'servers.json',
                             [reverb_tables.address(second)])
  result = rlds_reverb.push_shards(
      dataset_dir, [path, reverb_tables.address(server)], 'a', workers=2)
  assert result.episodes == len(EPISODES)
  # Shard 0/2 holds episodes 0-3, shard 1/2 episodes 4-6.
  assert [reverb_tables.drained_pairs(s, 'a') for s in (second, server)] == [
      reverb_tables.observation_pairs(EPISODES[:4]),
      reverb_tables.observation_pairs(EPISODES[4:])]


def test_push_shards_refuse_a_missing_servers_file_before_spawning(
    tmp_path, dataset_dir, server):
  gone = tmp_path / 'servers.json'
  with pytest.raises(rlds_reverb.ServersFileError) as error:
    rlds_reverb.push_shards(dataset_dir, gone, 'a', workers=2)
  assert str(error.value).startswith(f'{gone}: no such servers file')
  assert reverb_tables.table_size(reverb_tables.client_of(server), 'a') == 0


def test_push_shards_checks_every_server_before_spawning(
    dataset_dir, server, refused_address):
  """A refused server fails the call at once; shard 0's server gets nothing."""
  good = reverb_tables.address(server)
  with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
    rlds_reverb.push_shards(dataset_dir, [good, refused_address], 'a',
                            workers=2, timeout=3600)
  assert str(error.value) == (
      f'No Reverb server at {refused_address}: the connection was refused '
      '(nothing listens on that port).')
  with pytest.raises(rlds_reverb.AddressError,
                     match="server address 'localhost' is not HOST:PORT"):
    rlds_reverb.push_shards(dataset_dir, [good, 'localhost'], 'a', workers=2)
  assert reverb_tables.table_size(reverb.Client(good), 'a') == 0


def test_default_timeout_is_the_push_one():
  """`parallel` keeps its own copy: its process imports no TensorFlow."""
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top
  from rlds_reverb.write import push  # pylint: disable=g-import-not-at-top
  assert parallel.DEFAULT_TIMEOUT_S == push.DEFAULT_TIMEOUT_S


# A script calling push_shards, as users write one (spawned workers need the
# main guard); prints what the KeyboardInterrupt of Ctrl-C carries.
INTERRUPTED_SCRIPT = """
import sys
import rlds_reverb

if __name__ == '__main__':
  try:
    rlds_reverb.push_shards(sys.argv[1], sys.argv[2], 'queue', workers=2,
                            timeout=600)
  except KeyboardInterrupt as interrupt:
    print('KeyboardInterrupt', *interrupt.__notes__, sep='\\n', flush=True)
"""


# Slow tier: a script with two worker processes. The default tier has the
# same notes (`parallel.interrupted_notes`) on the command line in
# test_faults.test_ctrl_c_with_workers_interrupts_each_and_says_what_it_
# confirmed.
@pytest.mark.slow
def test_ctrl_c_of_push_shards_raises_keyboard_interrupt_per_shard(
    dataset_dir, tmp_path):
  """Ctrl-C is an interruption from Python too: KeyboardInterrupt, a note
  per shard saying what it confirmed, not ShardsFailedError."""
  script = tmp_path / 'push_script.py'
  script.write_text(INTERRUPTED_SCRIPT)
  with ServerProcess([{'name': 'queue', 'kind': 'queue', 'size': 3}]) as server:
    child = subprocess.Popen(
        [sys.executable, str(script), dataset_dir, server.address],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    client = reverb.Client(server.address)
    deadline = time.monotonic() + HANG_GUARD_S
    while reverb_tables.table_size(client, 'queue') < 3:  # Now it waits.
      assert child.poll() is None, child.communicate()
      assert time.monotonic() < deadline, 'the queue never filled up'
      time.sleep(0.01)
    child.send_signal(signal.SIGINT)
    stdout, stderr = child.communicate(timeout=HANG_GUARD_S)
  lines = stdout.splitlines()
  assert lines[:1] == ['KeyboardInterrupt'], (stdout, stderr)
  assert [line.split(':')[0] for line in lines[1:]] == ['shard 0/2',
                                                        'shard 1/2'], stdout
  assert any('may or may not be in the table' in line or
             'Written and confirmed before the interruption' in line
             for line in lines[1:]), stdout


# Scripts that call push_shards or build_shards at import, as a first script
# often does; each worker process imports the script again.
UNGUARDED_SCRIPTS = {
    'push_shards': (
        "import sys\nimport rlds_reverb\n\nprint('the script runs')\n"
        "rlds_reverb.push_shards(sys.argv[1], sys.argv[2], 'a', workers=2)\n"),
    'build_shards': (
        "import sys\nimport rlds_reverb\n\nprint('the script runs')\n"
        "rlds_reverb.build_shards(sys.argv[1], sys.argv[3], ['a'], "
        "workers=2)\n"),
}


@pytest.mark.parametrize('caller', list(UNGUARDED_SCRIPTS))
def test_a_script_without_the_main_guard_is_told_what_to_do(
    caller, dataset_dir, server, tmp_path):
  """One line (not BrokenProcessPool, nor a traceback per worker); the
  workers end at the call, before they push or build anything."""
  script = tmp_path / 'load.py'
  script.write_text(UNGUARDED_SCRIPTS[caller])
  result = warm_process.run(
      [sys.executable, str(script), dataset_dir, reverb_tables.address(server),
       str(tmp_path / 'built')],
      capture_output=True, text=True, timeout=HANG_GUARD_S)
  assert result.returncode == 1
  assert result.stderr.count('Traceback') == 1, result.stderr
  assert result.stderr.splitlines()[-1] == (
      f'rlds_reverb.errors.ShardsFailedError: {caller} was called again in '
      f'its worker processes, which import {script} anew: put the call '
      f"under `if __name__ == '__main__':` in {script}.")
  assert reverb_tables.table_size(reverb.Client(reverb_tables.address(server)),
                                  'a') == 0
  assert not (tmp_path / 'built').exists()


# Slow tier: two workers pushing, then killed. The default tier kills a
# build's workers (the same pool, `parallel._spawned_pool`) as they start in
# test_build_servers.test_killed_build_leaves_no_worker_running, and each way
# a worker ends with its parent in tests/test_lifeline.py.
@pytest.mark.slow
def test_killed_push_leaves_no_worker_running(dataset_dir):
  """`kill -9` of `push --workers 2` while both workers push (the queue is
  full: they wait on it): they and multiprocessing's resource tracker end."""
  with ServerProcess([{'name': 'queue', 'kind': 'queue', 'size': 3}]) as server:
    push = warm_process.WarmPopen(
        [sys.executable, '-m', 'rlds_reverb', 'push', '--dataset',
         dataset_dir, '--server', server.address, '--table', 'queue',
         '--workers', '2'],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    client = reverb.Client(server.address)
    deadline = time.monotonic() + HANG_GUARD_S
    while reverb_tables.table_size(client, 'queue') < 3:  # Now they wait.
      assert push.poll() is None, push.communicate()
      assert time.monotonic() < deadline, 'the queue never filled up'
      time.sleep(0.01)
    procs = process_tree.children(push.pid)
    assert sum('spawn_main' in proc.cmd for proc in procs) == 2, procs
    _, stderr, left = process_tree.kill_parent(push, procs, HANG_GUARD_S)
  assert left == [], stderr


@pytest.mark.parametrize('arguments, message', [
    (dict(workers=0), 'workers and servers must be >= 1, got 0 and 1.'),
    (dict(servers=0), 'workers and servers must be >= 1, got 2 and 0.'),
    (dict(on_invalid='stop'),
     "on_invalid: 'raise' or 'skip' (a build is all or nothing), got "
     "'stop'."),
])
def test_build_shards_refuses_bad_arguments_before_any_process(
    arguments, message, dataset_dir, tmp_path):
  settings = {'workers': 2, 'servers': 1, **arguments}
  with pytest.raises(ValueError) as error:
    rlds_reverb.build_shards(dataset_dir, str(tmp_path / 'built'), ['a'],
                             **settings)
  assert str(error.value) == message
  assert not (tmp_path / 'built').exists()
