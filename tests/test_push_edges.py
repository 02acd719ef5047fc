"""`rlds-reverb` at the edges a user reaches: refused before writing, or said.

Run as a user runs it (a subprocess per command) against real servers: a
`rlds-reverb serve` subprocess where the server restarts, in-process ones
elsewhere; real TFDS directories written here, some of them broken.
"""

import json
import pathlib

import numpy as np
import pytest
import reverb
import tensorflow_datasets as tfds

from tests import reverb_tables
from tests import rlds_data
from tests.cli_data import CLEAN
from tests.cli_data import MIXED
from tests.cli_data import dirs  # pylint: disable=unused-import
from tests.cli_data import served_tables  # pylint: disable=unused-import
from tests.cli_data import write_tfds
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli
from tests.cli_runs import run_cli_here
from tests.serve_command import Serve


def _size(server_or_address, table='a'):
  client = reverb.Client(reverb_tables.address(server_or_address))
  return reverb_tables.table_size(client, table)


# Slow tier: two `serve` processes and three pushes. The default tier checks
# the same refusal, word for word, and resume_anyway continuing, in Python:
# test_checked_push.test_resume_refuses_tables_that_lost_what_was_confirmed;
# the command's resume path and its 'is complete' note in
# test_faults.test_running_a_complete_push_again_writes_nothing.
@pytest.mark.slow
def test_resume_into_a_restarted_empty_server_is_refused(dirs, tmp_path):
  """The server restarted without a checkpoint: the confirmed items are gone,
  and resuming would leave them out. Refused; --resume-anyway continues."""
  state = tmp_path / 'state.json'
  with Serve(dirs['clean'], tmp_path / 'first.log') as first:
    address = first.address
    args = ['push', '--dataset', dirs['clean'], '--server', address,
            '--table', 'replay', '--resume', state]
    assert run_cli(*args).returncode == 0
    assert first.size() == 6
  port = int(address.rsplit(':', 1)[1])
  with Serve(dirs['clean'], tmp_path / 'second.log', port=port) as second:
    again = run_cli(*args)
    assert again.returncode == 2, again.stderr
    [line] = error_lines(again.stderr)
    assert line == (
        f'rlds-reverb: error: Resume file {state} says 6 items of this push '
        f"were confirmed into table 'replay' at {address}, but that table has "
        f'taken 0 inserts since it was made: they are gone (a server '
        f'restarted without a checkpoint that holds them, or the table was '
        f'reset). Nothing was written. Delete {state} to push everything '
        f'again, or continue after the episodes it names with '
        f'--resume-anyway (Python: resume_anyway=True).')
    assert second.size() == 0
    anyway = run_cli(*args, '--resume-anyway')
    assert anyway.returncode == 0, anyway.stderr
    assert 'says this push is complete; nothing to do' in anyway.stderr
    assert second.size() == 0


@pytest.mark.parametrize('args, message', [
    (['--resume', '/nonexistent/dir/state.json'],
     'Resume file /nonexistent/dir/state.json cannot be written (No such '
     'file or directory: /nonexistent/dir/state.json). Nothing was written.'),
    (['--table', 'a'],
     '--table a is given more than once: every item would be written that '
     'many times into it'),
    (['--priority', 'nan'], "argument --priority: must be finite and >= 0, "
                            "got 'nan'"),
    (['--priority', '-1'], "argument --priority: must be finite and >= 0, "
                           "got '-1'"),
    (['--priority', 'inf'], "argument --priority: must be finite and >= 0, "
                            "got 'inf'"),
    (['--resume-anyway'], '--resume-anyway goes with --resume'),
], ids=['resume_path', 'table_twice', 'nan', 'negative', 'inf',
        'anyway_alone'])
def test_what_cannot_be_right_is_refused_before_writing(dirs, empty_server,
                                                        args, message):
  result = run_cli_here('push', '--dataset', dirs['clean'], '--server',
                        reverb_tables.address(empty_server), '--table', 'a',
                        *args)
  assert result.returncode == 2, result.stderr
  assert result.stderr.strip().splitlines()[-1].endswith(message)
  assert 'Traceback' not in result.stderr
  assert _size(empty_server) == 0


def test_episodes_shorter_than_an_item_are_warned_of(dirs, empty_server):
  result = run_cli_here('push', '--dataset', dirs['clean'], '--server',
                        reverb_tables.address(empty_server), '--table', 'a',
                        '--sequence-length', '1000', '--json')
  assert result.returncode == 0, result.stderr
  assert result.stderr.splitlines() == [
      'rlds-reverb: warning: no episode gives an item: nothing will be '
      f'written; an item has {1000:,} steps and the longest episode 4 steps. '
      "Padding (end_of_episode='pad', --pad-end-of-episodes) gives each "
      'episode shorter than an item one item.']
  assert json.loads(result.stdout)['items'] == 0


def cut_short(version_dir: str) -> pathlib.Path:
  """Cuts the record file in the middle of a record, as a partial copy."""
  [records] = pathlib.Path(version_dir).glob('*.tfrecord*')
  data = records.read_bytes()
  records.write_bytes(data[:len(data) * 2 // 3])
  return records


@pytest.fixture(scope='module')
def cut_dir(tmp_path_factory):
  directory = write_tfds(tmp_path_factory.mktemp('cut'), 'cut_rlds', CLEAN)
  return directory, cut_short(directory)


# 'validate' and 'inspect' are slow tier: the three commands read through the
# same `load`, whose error the default tier checks through 'push'.
@pytest.mark.parametrize('command', [
    pytest.param('validate', marks=pytest.mark.slow),
    pytest.param('inspect', marks=pytest.mark.slow), 'push'])
def test_a_cut_record_file_is_named_with_its_offset(cut_dir, empty_server,
                                                    command):
  directory, records = cut_dir
  extra = (['--server', reverb_tables.address(empty_server), '--table', 'a']
           if command == 'push' else [])
  result = run_cli_here(command, '--dataset', directory, *extra)
  assert result.returncode == 2, result.stderr
  [line] = error_lines(result.stderr)
  size = records.stat().st_size
  assert f'cut_rlds:1.0.0 ({directory}): a truncated record at byte ' in line
  assert (f' of {records}, a file of {size:,} bytes (the file is cut short: '
          f'copied or written only in part?)') in line
  assert 'function_node' not in line and '[Op:' not in line
  assert _size(empty_server) == 0


def test_a_dataset_that_is_not_rlds_is_named_with_what_it_holds(tmp_path):
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name='plain', version='1.0.0', features=tfds.features.FeaturesDict(
          {'image': tfds.features.Image(shape=(4, 4, 3)), 'label': np.int64}),
      split_datasets={'train': [(0, {'image': np.zeros((4, 4, 3), np.uint8),
                                     'label': 1})]},
      data_dir=str(tmp_path), disable_shuffling=True)
  result = run_cli_here('inspect', '--dataset', builder.data_dir)
  assert result.returncode == 2
  [line] = error_lines(result.stderr)
  assert line == (
      f'rlds-reverb: error: plain:1.0.0 ({builder.data_dir}): No dataset '
      'representing RLDS steps exist in the data. Its elements hold image '
      'uint8[4,4,3], label int64[].')


def test_workers_say_it_in_the_commands_words(dirs, empty_server):
  result = run_cli_here('push', '--dataset', dirs['mixed'], '--server',
                        reverb_tables.address(empty_server), '--table', 'a',
                        '--workers', '2')
  assert result.returncode == 1
  [line] = error_lines(result.stderr)
  assert ("('rlds-reverb validate' lists them, '--on-invalid skip' leaves "
          'them out)') in line
  assert 'validation.validate' not in line and 'on_invalid=' not in line


def test_inspect_plot_to_an_unwritable_path_fails_before_reading(cut_dir):
  """The dataset is cut: had it been read, that would be the error."""
  directory, _ = cut_dir
  result = run_cli_here('inspect', '--dataset', directory, '--plot',
                        '/nonexistent/dir/plot.png')
  assert result.returncode == 2
  [line] = error_lines(result.stderr)
  assert line == ('rlds-reverb: error: Cannot write the plot to '
                  '/nonexistent/dir/plot.png: No such file or directory: '
                  '/nonexistent/dir/plot.png')


def test_demo_names_the_episodes_the_push_skips(tmp_path):
  episodes = MIXED[:2] + [rlds_data.flat_episode(0, 9)] + MIXED[3:4]
  directory = write_tfds(tmp_path, 'skips_rlds', episodes,
                         [False, True, False, False])
  result = run_cli_here('demo', '--dataset', directory)
  assert result.returncode == 0, result.stderr
  first = result.stdout.splitlines()[0]
  assert first.endswith(
      'valid; 1 empty and 1 flagged invalid episodes, which the push skips')
  pushed = [line for line in result.stdout.splitlines()
            if line.startswith('pushed')]
  assert pushed[0].startswith('pushed    2 episodes, 8 steps')
