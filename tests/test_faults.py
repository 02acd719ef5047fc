"""Faults during `rlds-reverb push`: servers in their own processes, killed.

A case that kills a server runs it in a process of its own
(`tests.server_process.ServerProcess`); a case that signals the command runs
the real command in a process of its own against a server in the test's
process (`ServerHere`: the signal goes to the command alone); the others (a
rerun, capacity warnings, timeouts) run the command in the test's process
(`run_cli_here`, which fails a hang after its guard). Each reads the table
back. What must hold:
  * the push never hangs, and a failure is one line naming what and where;
  * a success means every item is in the table;
  * with --resume, a push killed by SIGKILL and run again loses no episode
    and writes again at most what was in flight after the last confirmation;
  * Ctrl-C inside an episode says exactly what is in the table (whole
    episodes, and items of the next), and a --resume rerun continues inside
    that episode: every item once.
"""

import json
import pathlib
import re
import signal
import subprocess
import sys
import time

import numpy as np
import pytest
import reverb

import rlds_reverb
from rlds_reverb._util import wording
from rlds_reverb.write import writer as writer_lib
from tests import reverb_tables
from tests import rlds_data
from tests import warm_process
from tests.cli_data import CLEAN
from tests.cli_data import corrupt_second_record
from tests.cli_data import write_tfds
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli
from tests.cli_runs import run_cli_here
from tests.server_process import ServerHere
from tests.server_process import ServerProcess

# Long enough that a push is still writing when the test acts on it: 30,000
# steps, several confirmations (every CONFIRM_EVERY_ROWS rows).
LONG = [rlds_data.flat_episode(250, seed=100 + i, terminal=i % 2 == 0)
        for i in range(120)]
POLL_S = 0.01
# Ctrl-C inside the second episode. The first is just long enough that the
# push confirms at its end (CONFIRM_EVERY_ROWS rows), as a long push does
# before an interruption; the second is sent Ctrl-C 2,000 rows in and keeps
# 6,000 rows of margin after that (as when all three had 8,000 steps), so
# the signal lands inside it however loaded the machine; the third only has
# to be continued into by the rerun. 12,500 items instead of 24,000 drained
# twice and pushed twice.
INSIDE = [rlds_data.flat_episode(n, seed=300 + i) for i, n in
          enumerate((writer_lib.CONFIRM_EVERY_ROWS + 1, 8000, 500))]
INSIDE_SENT_AT = len(INSIDE[0]['reward']) - 1 + 2000  # Items in the table.
# 'Written and confirmed before the interruption: W whole episodes (I items)
# and P items of episode E' (the last part only when P > 0).
CONFIRMED = re.compile(
    r'Written and confirmed before the interruption: ([\d,]+) whole '
    r'episodes? \(([\d,]+) items?\)(?: and ([\d,]+) items? of episode '
    r'(\d+))?, in table replay at ')


# The slow tier's --workers rerun: two shards of 8,000-step episodes, each
# interrupted inside one.
INSIDE_WORKERS = [rlds_data.flat_episode(8000, seed=300 + i) for i in range(3)]
DATASETS = {'clean': CLEAN, 'long': LONG, 'inside': INSIDE,
            'inside_workers': INSIDE_WORKERS}


class _Dirs(dict):
  """name -> TFDS directory of DATASETS[name], written when a test first
  asks for it: a run of one tier writes only what its tests read."""

  def __init__(self, root: pathlib.Path):
    super().__init__()
    self._root = root

  def __missing__(self, name: str) -> str:
    self[name] = write_tfds(self._root, f'{name}_rlds', DATASETS[name])
    return self[name]


@pytest.fixture(scope='module')
def dirs(tmp_path_factory):
  return _Dirs(tmp_path_factory.mktemp('tfds'))


def _start_push(*args):
  return warm_process.WarmPopen(
      [sys.executable, '-m', 'rlds_reverb', 'push', *map(str, args)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)


def _wait_for_confirmed(state_path: pathlib.Path, push) -> dict:
  """The resume file's state once it shows confirmed, unfinished progress."""
  deadline = time.monotonic() + HANG_GUARD_S
  while time.monotonic() < deadline:
    if state_path.exists():
      state = json.loads(state_path.read_text())
      if state['confirmed_episodes'] > 0 and not state['complete']:
        return state
    if push.poll() is not None:
      raise AssertionError(f'push ended before the test could act: '
                           f'{push.communicate()}')
    time.sleep(POLL_S)
  raise AssertionError('no confirmed progress within the hang guard')


def test_unreachable_server_fails_within_timeout_naming_it(dirs,
                                                          silent_address):
  """A host that takes connections and never answers: fails after --timeout.

  (Not 10.255.255.1: some networks answer for every address, through a
  transparent proxy, which gRPC then hears as an HTTP 404.)
  """
  result = run_cli_here('push', '--dataset', dirs['clean'], '--server',
                        silent_address, '--table', 'replay', '--timeout', '2')
  assert result.returncode == 1
  [line] = error_lines(result.stderr)
  assert f'No Reverb server answered at {silent_address} within 2 s' in line


# Slow tier: a crash test. A push whose server stops confirming fails after
# --timeout, naming the table, in the default tier's
# test_blocking_rate_limiter_warns_then_fails_after_timeout[ratio] (the same
# flush deadline), and says what was confirmed and where progress is saved in
# test_ctrl_c_inside_an_episode_says_what_is_in_the_table_and_resumes.
@pytest.mark.slow
def test_server_killed_mid_push_fails_naming_confirmed_episodes(dirs, tmp_path):
  state_path = tmp_path / 'state.json'
  with ServerProcess([{'name': 'replay', 'kind': 'fifo',
                       'signed_for': dirs['long']}]) as server:
    push = _start_push('--dataset', dirs['long'], '--server', server.address,
                       '--table', 'replay', '--timeout', '3',
                       '--resume', state_path)
    _wait_for_confirmed(state_path, push)
    server.kill()
    _, stderr = push.communicate(timeout=HANG_GUARD_S)
  assert push.returncode == 1
  [line] = error_lines(stderr)
  state = json.loads(state_path.read_text())
  confirmed = state['confirmed_episodes']
  assert 0 < confirmed < len(LONG)
  assert 'did not confirm items for table \'replay\' within 3 s' in line
  assert (f'Confirmed before: {wording.count(confirmed, "whole episode")} '
          f'({wording.count(state["confirmed_items"], "item")}).') in line
  assert f'Progress is saved in {state_path}' in line


# Slow tier: a crash test (two pushes of 30,000 steps). The default tier
# resumes after an interruption mid-push without losing an episode in
# test_ctrl_c_inside_an_episode_says_what_is_in_the_table_and_resumes, and
# from the state a killed push leaves in test_checked_push's resume tests.
@pytest.mark.slow
def test_killed_push_resumes_without_losing_an_episode(dirs, tmp_path):
  """SIGKILL mid-push, run again: every item there, repeats bounded."""
  state_path = tmp_path / 'state.json'
  args = ['--dataset', dirs['long'], '--table', 'replay', '--timeout', '30',
          '--resume', state_path, '--json']
  with ServerProcess([{'name': 'replay', 'kind': 'fifo',
                       'signed_for': dirs['long']}]) as server:
    push = _start_push('--server', server.address, *args)
    killed_at = _wait_for_confirmed(state_path, push)
    push.send_signal(signal.SIGKILL)
    push.communicate(timeout=HANG_GUARD_S)
    state = json.loads(state_path.read_text())
    assert state['confirmed_episodes'] >= killed_at['confirmed_episodes']
    assert not state['complete']

    again = run_cli('push', '--server', server.address, *args)
    assert again.returncode == 0, again.stderr
    summary = json.loads(again.stdout)
    assert summary['resumed_after_episodes'] == state['confirmed_episodes']
    assert (summary['resumed_after_episodes'] + summary['episodes'] ==
            len(LONG))
    assert json.loads(state_path.read_text())['complete']
    drained = reverb_tables.drained_pairs(server.address, 'replay')

  expected = reverb_tables.observation_pairs(LONG)
  assert set(expected) <= set(drained)  # No episode lost.
  repeated = len(drained) - len(expected)
  # Only the episodes after the last confirmation can be written twice.
  assert set(drained) == set(expected)
  assert repeated < writer_lib.CONFIRM_EVERY_ROWS + 250


def test_running_a_complete_push_again_writes_nothing(dirs, tmp_path):
  state_path = tmp_path / 'state.json'
  with ServerHere([{'name': 'replay', 'kind': 'fifo',
                    'signed_for': dirs['clean']}]) as server:
    args = ['push', '--dataset', dirs['clean'], '--server', server.address,
            '--table', 'replay', '--resume', state_path, '--json']
    first = run_cli_here(*args)
    second = run_cli_here(*args)
    assert (first.returncode, second.returncode) == (0, 0), second.stderr
    assert json.loads(second.stdout)['items'] == 0
    assert 'says this push is complete' in second.stderr
    assert (reverb_tables.drained_pairs(server.address, 'replay') ==
            reverb_tables.observation_pairs(CLEAN))
    other = run_cli_here(*args, '--sequence-length', '3')
  assert other.returncode == 2
  [line] = error_lines(other.stderr)
  assert f'Resume file {state_path} records another push' in line
  assert 'sequence_length was 2, now 3' in line


@pytest.fixture(scope='module')
def limited_server(dirs):
  """'small' keeps 5 items, 'queue' takes 3, 'ratio' 4 without sampling."""
  with ServerHere([
      {'name': 'small', 'kind': 'fifo', 'max_size': 5},
      {'name': 'queue', 'kind': 'queue', 'size': 3},
      {'name': 'ratio', 'kind': 'ratio', 'samples_per_insert': 2.0,
       'min_size': 1, 'error_buffer': 6.0},
  ]) as server:
    yield server


# Slow tier: the same warning, word for word, with the table's size after the
# push, is the default tier's test_checked_push.test_capacity_problems_are_
# warnings; the command prints capacity warnings in test_capacity_warnings_say_
# what_the_table_does.
@pytest.mark.slow
def test_too_small_table_warns_before_writing(dirs, limited_server):
  result = run_cli_here('push', '--dataset', dirs['clean'], '--server',
                        limited_server.address, '--table', 'small', '--json')
  assert result.returncode == 0, result.stderr
  assert ("rlds-reverb: warning: table 'small' holds at most 5 items and has "
          "0; this push writes 6, so Reverb will silently remove 1 of the "
          "oldest." in result.stderr)
  assert json.loads(result.stdout)['items'] == 6
  info = reverb.Client(limited_server.address).server_info(timeout=10)
  assert info['small'].current_size == 5


@pytest.mark.parametrize('table, limiter, headroom', [
    # Slow tier: the Queue's warning, size and failure are checked in the
    # default tier by test_capacity_warnings_say_what_the_table_does[queue];
    # the error line naming the limiter by the 'ratio' case here.
    pytest.param('queue', 'Queue(3)', 3, marks=pytest.mark.slow),
    ('ratio', 'SampleToInsertRatio(samples_per_insert=2, min_size_to_sample=1, '
              'min_diff=-4, max_diff=8)', 4),
])
def test_blocking_rate_limiter_warns_then_fails_after_timeout(
    dirs, limited_server, table, limiter, headroom):
  result = run_cli_here('push', '--dataset', dirs['clean'], '--server',
                        limited_server.address, '--table', table,
                        '--timeout', '2')
  assert result.returncode == 1
  assert (f"rlds-reverb: warning: table '{table}' has rate limiter {limiter}, "
          f'which blocks inserts after {headroom} more items until something '
          f'samples; this push writes 6' in result.stderr)
  [line] = error_lines(result.stderr)
  assert f"did not confirm items for table '{table}' within 2 s" in line
  assert f"table '{table}' ({limiter})" in line
  info = reverb.Client(limited_server.address).server_info(timeout=10)
  assert info[table].current_size == headroom


# A limiter that blocks before `max_size` keeps the table from filling up:
# only the blocking warning (a Queue(3) of max_size 3 evicts nothing). One
# that blocks after it: both, and it evicts only what goes in before it blocks.
CAPACITY_CASES = {
    # table: (config, warnings, size after the push, first item held)
    'queue': ({'kind': 'queue', 'size': 3},
              ["table 'queue' has rate limiter Queue(3), which blocks inserts "
               'after 3 more items until something samples; this push writes '
               '6, and fails after the timeout if nothing samples.'], 3, 0),
    'ratio': ({'kind': 'ratio', 'samples_per_insert': 1.0, 'min_size': 1,
               'error_buffer': 3.0, 'max_size': 2},
              ["table 'ratio' holds at most 2 items and has 0; this push "
               'writes 6, so Reverb will silently remove 2 of the oldest '
               'before its rate limiter blocks.',
               "table 'ratio' has rate limiter SampleToInsertRatio("
               'samples_per_insert=1, min_size_to_sample=1, min_diff=-2, '
               'max_diff=4), which blocks inserts after 4 more items until '
               'something samples; this push writes 6, and fails after the '
               'timeout if nothing samples.'], 2, 2),
}


@pytest.mark.parametrize('table', CAPACITY_CASES)
def test_capacity_warnings_say_what_the_table_does(dirs, table):
  config, warnings, size, first = CAPACITY_CASES[table]
  with ServerHere([{'name': table, **config}]) as server:
    result = run_cli_here('push', '--dataset', dirs['clean'], '--server',
                          server.address, '--table', table, '--timeout', '2')
    client = reverb.Client(server.address)
    assert reverb_tables.table_size(client, table) == size
    sample = next(client.sample(table, emit_timesteps=False))
  assert result.returncode == 1
  assert [line[len('rlds-reverb: warning: '):]
          for line in result.stderr.splitlines()
          if line.startswith('rlds-reverb: warning: ')] == warnings
  pairs = [np.stack([e['observation'][i], e['observation'][i + 1]])
           for e in CLEAN for i in range(len(e['reward']) - 1)]
  np.testing.assert_array_equal(sample.data[1], pairs[first])  # The oldest.


def _wait_for_size(address: str, table: str, size: int, push) -> None:
  """Returns once `table` holds `size` items; fails if the push ends first."""
  client = reverb.Client(address)
  deadline = time.monotonic() + HANG_GUARD_S
  while reverb_tables.table_size(client, table) < size:
    assert push.poll() is None, push.communicate()
    assert time.monotonic() < deadline, 'the table never filled up'
    time.sleep(POLL_S)


def _interrupt_blocked_push(dataset: str, *args) -> str:
  """Ctrl-C (SIGINT to the command alone) of a push waiting for a full queue
  of 3 (a server in the test's process); its stderr. The push must end at
  once, not at --timeout."""
  with ServerHere([{'name': 'queue', 'kind': 'queue', 'size': 3}]) as server:
    push = _start_push('--dataset', dataset, '--server', server.address,
                       '--table', 'queue', '--timeout', str(3 * HANG_GUARD_S),
                       *args)
    _wait_for_size(server.address, 'queue', 3, push)  # Now it waits.
    push.send_signal(signal.SIGINT)
    try:
      _, stderr = push.communicate(timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
      push.kill()
      raise AssertionError(f'the push ignored SIGINT: {push.communicate()}')
  assert push.returncode == 130, stderr
  return stderr


# 'long' is slow tier: a push interrupted mid-episode while blocked is in the
# default tier in test_ctrl_c_with_workers_interrupts_each_and_says_what_it_
# confirmed (the same data, each worker blocked by the full queue).
@pytest.mark.parametrize('data', ['clean',
                                  pytest.param('long', marks=pytest.mark.slow)])
def test_ctrl_c_while_a_rate_limiter_blocks_ends_the_push(dirs, data):
  """At the push's end ('clean', confirming) or mid-episode ('long',
  flushing)."""
  stderr = _interrupt_blocked_push(dirs[data])
  [line] = error_lines(stderr)
  assert line.startswith('rlds-reverb: error: interrupted'), line
  assert 'Confirmed before: 0 whole episodes (0 items).' in line, line
  # Which episodes the items that may or may not be there belong to.
  assert re.search(r'The [\d,]+ items? written after those \(of episodes? '
                   r'0( to \d+)?\) (was|were) not confirmed and may or may '
                   r'not be in the table', line), line
  assert 'Traceback' not in stderr


def _write_stepless(root) -> str:
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name='stepless', version='1.0.0',
      features=tfds.features.FeaturesDict(
          {'x': tfds.features.Scalar(dtype=np.int64)}),
      split_datasets={'train': [(0, {'x': 1})]}, data_dir=str(root),
      disable_shuffling=True)
  return str(builder.data_dir)


# Slow tier: four command runs against a server process. The default tier
# has each error as one line: a cut record file (test_push_edges.test_a_cut_
# record_file_is_named_with_its_offset[push]), no steps (test_push_edges.
# test_a_dataset_that_is_not_rlds_is_named_with_what_it_holds), a signature
# mismatch (test_cli.TestPush.test_signature_mismatch_has_a_line_per_field), no
# directory (test_cli.TestValidate.test_unknown_dataset_is_one_line_exit_2);
# and a corrupt record writes nothing (test_checked_push.test_corrupt_record_
# is_a_read_error_and_writes_nothing).
@pytest.mark.slow
def test_bad_input_is_one_line_and_writes_nothing(dirs, tmp_path):
  corrupt = write_tfds(tmp_path / 'corrupt', 'clean_rlds', CLEAN)
  corrupt_second_record(corrupt)
  cases = [  # (dataset, table, exit code, text in the error line)
      (str(tmp_path), 'replay', 2, 'is not a TFDS dataset directory'),
      (corrupt, 'replay', 2, 'nothing was written'),
      (_write_stepless(tmp_path / 'stepless'), 'replay', 2, 'steps'),
      (dirs['clean'], 'cartpole', 1, 'table signature spec should match'),
  ]
  with ServerProcess([
      {'name': 'replay', 'kind': 'fifo', 'signed_for': dirs['clean']},
      {'name': 'cartpole', 'kind': 'fifo', 'signed_for': 'bundled:cartpole'},
  ]) as server:
    for dataset, table, exit_code, text in cases:
      result = run_cli('push', '--dataset', dataset, '--server',
                       server.address, '--table', table)
      assert result.returncode == exit_code, (dataset, result.stderr)
      [line] = error_lines(result.stderr)
      assert text in line, line
      assert 'Traceback' not in result.stderr
      info = reverb.Client(server.address).server_info(timeout=10)
      assert info[table].current_size == 0, (dataset, line)


def _inside_tables(dataset: str):
  """A server with fifo tables 'replay' and 'clean' for `dataset`, in the
  test's process: Ctrl-C goes to the push's process alone."""
  return ServerHere([{'name': name, 'kind': 'fifo', 'signed_for': dataset}
                     for name in ('replay', 'clean')])


def _number(text) -> int:
  return int((text or '0').replace(',', ''))


def _confirmed_counts(text: str):
  """(whole episodes, their items, items of the next, its position) that an
  interrupted push's line says it confirmed; None if it wrote nothing."""
  if 'Nothing was written.' in text:
    return None
  match = CONFIRMED.search(text)
  assert match, text
  episode = None if match[4] is None else int(match[4])
  return (_number(match[1]), _number(match[2]), _number(match[3]), episode)


def _items_in_whole_episodes(episodes, count: int) -> int:
  return sum(len(episode['reward']) - 1 for episode in episodes[:count])


def _flat_keys(items):
  """Each item (flat leaves, `drain_flat`) as bytes: for exact comparison."""
  return [tuple(leaf.tobytes() for leaf in item) for item in items]


def _clean_push_keys(address: str, dataset: str):
  """The items a push of `dataset` from the start leaves, in order."""
  rlds_reverb.push(rlds_reverb.load(dataset), address, 'clean')
  return _flat_keys(reverb_tables.drain_flat(address, 'clean'))


def test_ctrl_c_inside_an_episode_says_what_is_in_the_table_and_resumes(
    dirs, tmp_path):
  """Ctrl-C a quarter into the second episode, on a healthy server: the line
  names the whole episodes and the items of the next that the table holds,
  exactly; the --resume rerun continues inside that episode, and the table
  then holds a clean push's items, each once, in the same order."""
  state_path = tmp_path / 'state.json'
  args = ['--dataset', dirs['inside'], '--table', 'replay', '--resume',
          state_path]
  with _inside_tables(dirs['inside']) as server:
    push = _start_push('--server', server.address, *args)
    _wait_for_size(server.address, 'replay', INSIDE_SENT_AT, push)
    push.send_signal(signal.SIGINT)
    _, stderr = push.communicate(timeout=HANG_GUARD_S)
    assert push.returncode == 130, stderr
    [line] = error_lines(stderr)
    held = reverb_tables.table_size(reverb.Client(server.address), 'replay')
    whole = 1  # The first episode; the interruption came inside the second.
    whole_items = _items_in_whole_episodes(INSIDE, whole)
    partial = held - whole_items
    assert 0 < partial < len(INSIDE[1]['reward']) - 1, (held, line)
    contents = (f'{wording.count(whole, "whole episode")} '
                f'({wording.count(whole_items, "item")}) and '
                f'{wording.count(partial, "item")} of episode {whole}')
    assert line == (
        f'rlds-reverb: error: interrupted. Written and confirmed before the '
        f'interruption: {contents}, in table replay at {server.address}. '
        f'Progress is saved in {state_path}: {contents} confirmed in all; '
        f'run the same push again to continue.')
    state = json.loads(state_path.read_text())
    assert (state['confirmed_episodes'], state['confirmed_items'],
            state['partial_items'], state['complete']) == (
                whole, held, partial, False)

    # The rerun checks output and exit code only: in the test's process.
    again = run_cli_here('push', '--server', server.address, *args, '--json')
    assert again.returncode == 0, again.stderr
    assert (f'resuming from {state_path} after {contents} confirmed' in
            again.stderr)
    assert 'already holds' not in again.stderr  # Its own items: expected.
    assert json.loads(again.stdout)['resumed_after_episodes'] == whole
    pushed = _flat_keys(reverb_tables.drain_flat(server.address, 'replay'))
    clean = _clean_push_keys(server.address, dirs['inside'])
  assert len(pushed) == len(clean)
  assert pushed[:held] == clean[:held]  # What the line said was there.
  assert pushed == clean  # Every item once, in order: nothing written twice.


# Slow tier: three command runs with two worker processes each. The default
# tier has the line of an interrupted --workers push in test_ctrl_c_with_
# workers_interrupts_each_and_says_what_it_confirmed, and the rerun inside an
# episode in test_ctrl_c_inside_an_episode_says_what_is_in_the_table_and_
# resumes (one process: each worker runs the same push on its shard).
@pytest.mark.slow
def test_ctrl_c_with_workers_says_what_each_confirmed_and_resumes(
    dirs, tmp_path):
  """--workers 2 on a healthy server: each worker's counts add up to what
  the table holds; rerun with --resume, every item is there once."""
  state_path = tmp_path / 'state.json'
  args = ['--dataset', dirs['inside_workers'], '--table', 'replay',
          '--resume', state_path, '--workers', '2']
  with _inside_tables(dirs['inside_workers']) as server:
    push = _start_push('--server', server.address, *args)
    _wait_for_size(server.address, 'replay', 4000, push)
    push.send_signal(signal.SIGINT)
    _, stderr = push.communicate(timeout=HANG_GUARD_S)
    assert push.returncode == 130, stderr
    [line] = error_lines(stderr)
    assert line.startswith('rlds-reverb: error: interrupted. shard 0/2: '), line
    held = reverb_tables.table_size(reverb.Client(server.address), 'replay')
    shards = line.split('interrupted. ', 1)[1].split(' | ')
    assert [text.split(':')[0] for text in shards] == ['shard 0/2',
                                                       'shard 1/2'], line
    counts = [_confirmed_counts(text) for text in shards]
    assert held == sum(items + partial for _, items, partial, _ in
                       filter(None, counts)), line

    again = run_cli('push', '--server', server.address, *args)
    assert again.returncode == 0, again.stderr
    assert 'already holds' not in again.stderr
    pushed = _flat_keys(reverb_tables.drain_flat(server.address, 'replay'))
    clean = _clean_push_keys(server.address, dirs['inside_workers'])
  assert sorted(pushed) == sorted(clean)  # As multisets: every item once.


def _loading_workers(parent_pid: int) -> list:
  """Pids of the workers `parent_pid` spawned that are loading TensorFlow:
  their task has begun (the spawning, during which the parent holds
  SIGINT off, is over) and they have written nothing yet.

  A worker's command line runs multiprocessing's `spawn_main` (its resource
  tracker's does not); TensorFlow's library shows in its memory map.
  """
  pids = []
  for child in pathlib.Path(f'/proc/{parent_pid}/task').glob('*/children'):
    for pid in child.read_text().split():
      try:
        command = pathlib.Path(f'/proc/{pid}/cmdline').read_bytes()
        maps = pathlib.Path(f'/proc/{pid}/maps').read_text()
      except (FileNotFoundError, ProcessLookupError):
        continue
      if b'spawn_main' in command and 'tensorflow' in maps:
        pids.append(int(pid))
  return pids


def test_ctrl_c_while_workers_start_names_every_shard(dirs):
  """SIGINT to the parent while its workers still load TensorFlow: each
  shard says it wrote nothing (it was reported as a bare 'interrupted.',
  the workers' own KeyboardInterrupt re-raised in the parent)."""
  with ServerHere([{'name': 'replay', 'kind': 'fifo',
                    'signed_for': dirs['long']}]) as server:
    push = _start_push('--dataset', dirs['long'], '--server', server.address,
                       '--table', 'replay', '--workers', '2')
    deadline = time.monotonic() + HANG_GUARD_S
    while len(_loading_workers(push.pid)) < 2:
      assert push.poll() is None, push.communicate()
      assert time.monotonic() < deadline, 'the workers never started'
      time.sleep(POLL_S)
    push.send_signal(signal.SIGINT)
    _, stderr = push.communicate(timeout=HANG_GUARD_S)
    held = reverb_tables.table_size(reverb.Client(server.address), 'replay')
  assert push.returncode == 130, stderr
  [line] = error_lines(stderr)
  assert line.startswith('rlds-reverb: error: interrupted. shard 0/2: '), line
  shards = line.split('interrupted. ', 1)[1].split(' | ')[:2]
  assert [text.split(': ', 1)[0] for text in shards] == ['shard 0/2',
                                                         'shard 1/2'], line
  if held == 0:  # Interrupted before any worker wrote: each says so.
    assert all(text.endswith('Nothing was written.') for text in shards), line
  assert 'Traceback' not in stderr


def test_ctrl_c_with_workers_interrupts_each_and_says_what_it_confirmed(
    dirs):
  """SIGINT to the parent alone (`kill -INT`), not to the process group: it
  passes it on, and every worker says what it confirmed."""
  stderr = _interrupt_blocked_push(dirs['long'], '--workers', '2')
  [line] = error_lines(stderr)
  assert line.endswith(' | Without --resume, running this push again writes '
                       'it all again; with --resume FILE, progress is saved '
                       'at each confirmation and a rerun continues.'), line
  # An interruption, as one push reports it (exit 130, checked above), not
  # failed workers: what each shard wrote and confirmed.
  assert line.startswith('rlds-reverb: error: interrupted. shard 0/2: '), line
  assert 'workers failed' not in line, line
  shards = line.split('interrupted. ', 1)[1].split(' | ')[:2]
  for shard, text in zip(('0/2', '1/2'), shards):
    assert text.startswith(f'shard {shard}: '), line
    # Blocked (the queue is full), stopped before its first confirmation or
    # before it wrote anything.
    assert ('Confirmed before: 0 whole episodes (0 items).' in text or
            'Written and confirmed before the interruption: 0 whole '
            'episodes' in text or text.endswith('Nothing was written.')), text
  assert 'Traceback' not in stderr
