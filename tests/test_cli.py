"""The `rlds-reverb` command, run as users run it: a subprocess per invocation.

Real TFDS directories written here, real Reverb servers in this process
(`rlds-reverb serve` as a subprocess: tests/test_serve.py). A subprocess
starts TensorFlow (~5 s), so each checks several things at once; commands
whose output and exit code are the check run here (`run_cli_here`).
"""

import json
import os
import pathlib
import signal
import subprocess
import sys
import threading

import numpy as np
import pytest
import reverb

import rlds_reverb
from rlds_reverb import cli
from rlds_reverb.cli import demo
from rlds_reverb.cli import output
from rlds_reverb import specs
from rlds_reverb import tables
from tests import reverb_tables
from tests import rlds_data
from tests import warm_process
from tests.cli_data import CLEAN
from tests.cli_data import MIXED
from tests.cli_data import dirs  # pylint: disable=unused-import
from tests.cli_data import served_tables  # pylint: disable=unused-import
from tests.cli_data import write_tfds
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli
from tests.cli_runs import run_cli_here

BUNDLED_DIR = pathlib.Path(rlds_reverb.__file__).parent / 'data' / 'cartpole'
_episode = rlds_data.flat_episode_with


class TestValidate:

  def test_json_lists_every_problem(self, dirs):
    result = run_cli_here('validate', '--dataset', dirs['mixed'], '--json')
    assert result.returncode == 1, result.stderr
    report = json.loads(result.stdout)
    assert report['episodes'] == 5
    assert report['steps'] == 17
    assert report['problems'] == [
        {'episode': 2, 'step': 1, 'kind': 'terminal_not_last',
         'message': 'Terminal step must be the last step of an episode.'},
        {'episode': 4, 'step': 0, 'kind': 'episode_not_first',
         'message': 'First step of an episode must have is_first set.'},
    ]
    assert report['flagged_invalid'] == [1]
    assert 'Traceback' not in result.stderr

  def test_clean_dataset_exits_0(self, dirs):
    result = run_cli_here('validate', '--dataset', dirs['clean'])
    assert result.returncode == 0, result.stderr
    assert result.stdout.splitlines()[-1] == '3 episodes, 9 steps: no problems'

  def test_text_names_each_problem_and_counts_in_words(self, dirs):
    result = run_cli_here('validate', '--dataset', dirs['mixed'])
    assert result.returncode == 1, result.stderr
    assert result.stdout.splitlines() == [
        'episode 2, step 1: terminal_not_last: Terminal step must be the last '
        'step of an episode.',
        'episode 4, step 0: episode_not_first: First step of an episode must '
        'have is_first set.',
        '1 episode flagged invalid in metadata, skipped when pushed: 1',
        '5 episodes, 17 steps: 2 problems in 2 episodes',
    ]

  def test_unknown_dataset_is_one_line_exit_2(self, tmp_path):
    result = run_cli_here('validate', '--dataset', tmp_path / 'nowhere')
    assert result.returncode == 2
    assert 'Traceback' not in result.stderr
    assert len(error_lines(result.stderr)) == 1
    assert result.stderr.splitlines()[-1].startswith('rlds-reverb: error:')
    assert 'nowhere' in result.stderr
    assert result.stdout == ''


class TestPush:

  def test_two_tables_json(self, dirs, empty_server):
    result = run_cli_here('push', '--dataset', dirs['clean'],
                          '--server', reverb_tables.address(empty_server),
                          '--table', 'a', '--table', 'b', '--json')
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    assert set(counts) == {'episodes', 'trajectories', 'items',
                           'skipped_episodes', 'resumed_after_episodes',
                           'seconds', 'notes'}
    # 6 items in each of the two tables.
    assert (counts['episodes'], counts['trajectories'], counts['items'],
            counts['skipped_episodes']) == (3, 9, 12, 0)
    client = reverb.Client(reverb_tables.address(empty_server))
    assert client.server_info(timeout=10)['a'].current_size == 6
    assert (reverb_tables.drained_pairs(empty_server, 'a') ==
            reverb_tables.observation_pairs(CLEAN))
    assert (reverb_tables.drained_pairs(empty_server, 'b') ==
            reverb_tables.observation_pairs(CLEAN))

  def test_skip_drops_malformed_and_flagged_episodes(self, dirs, empty_server):
    result = run_cli_here('push', '--dataset', dirs['mixed'],
                          '--server', reverb_tables.address(empty_server),
                          '--table', 'a', '--on-invalid', 'skip', '--json')
    assert result.returncode == 0, result.stderr
    counts = json.loads(result.stdout)
    assert (counts['episodes'], counts['trajectories'], counts['items'],
            counts['skipped_episodes']) == (2, 8, 6, 3)
    assert ('skipping 2 malformed episodes: episode 2 step 1 '
            '(terminal_not_last); episode 4 step 0 (episode_not_first)'
            in result.stderr)
    assert (reverb_tables.drained_pairs(empty_server, 'a') ==
            reverb_tables.observation_pairs([MIXED[0], MIXED[3]]))

  def test_malformed_episode_fails_before_writing(self, dirs, empty_server):
    """The dataset is checked whole first: the error names episode 2."""
    result = run_cli_here('push', '--dataset', dirs['mixed'],
                          '--server', reverb_tables.address(empty_server),
                          '--table', 'a')
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    [line] = error_lines(result.stderr)
    assert line.startswith('rlds-reverb: error: Terminal step must be the '
                           'last step of an episode. (episode 2, step 1)')
    assert '2 malformed episodes in all, nothing was written' in line
    client = reverb.Client(reverb_tables.address(empty_server))
    assert client.server_info(timeout=10)['a'].current_size == 0

  def test_signature_mismatch_has_a_line_per_field(self, dirs, server):
    result = run_cli_here('push', '--dataset', dirs['clean'],
                          '--server', reverb_tables.address(server),
                          '--table', 'f64')
    assert result.returncode == 1
    first, *fields = result.stderr.splitlines()
    assert first == ('rlds-reverb: error: Replay buffer table signature spec '
                     'should match RLDS data spec.')
    assert [line.split(': ')[1] for line in fields] == [
        'discount', 'observation', 'reward']
    for line in fields:
      assert line.startswith("  table 'f64': "), line
      table, data = line.split(', data has ')
      assert 'has float64[' in table and data.startswith('float32['), line

  # Slow tier: three processes. The default tier checks a line per field in
  # test_signature_mismatch_has_a_line_per_field and each worker's failure in
  # its shard's part of the line in
  # test_shards.test_workers_report_each_failed_shard.
  @pytest.mark.slow
  def test_workers_keep_each_shards_field_lines(self, dirs, server):
    result = run_cli('push', '--dataset', dirs['clean'],
                     '--server', reverb_tables.address(server),
                     '--table', 'f64', '--workers', '2')
    assert result.returncode == 1
    first, *fields = result.stderr.splitlines()
    mismatch = 'Replay buffer table signature spec should match RLDS data spec.'
    assert first == (f'rlds-reverb: error: 2 of 2 workers failed: shard 0/2: '
                     f'{mismatch} | shard 1/2: {mismatch}')
    assert [line.split(': ')[:3] for line in fields] == [
        [f'  shard {shard}', "table 'f64'", field]
        for shard in ('0/2', '1/2')
        for field in ('discount', 'observation', 'reward')]

  def test_one_episode_reads_in_the_singular(self, tmp_path, empty_server):
    one = write_tfds(tmp_path, 'one_rlds', [_episode(2, 20)])
    validated = run_cli_here('validate', '--dataset', one)
    assert validated.stdout == '1 episode, 2 steps: no problems\n'
    pushed = run_cli_here('push', '--dataset', one, '--server',
                          reverb_tables.address(empty_server), '--table', 'a')
    assert pushed.returncode == 0, pushed.stderr
    assert pushed.stdout.startswith('pushed 1 episode, 2 steps, 1 item in ')
    assert pushed.stdout.endswith('; skipped 0 episodes\n')

  def test_dead_server_fails_in_one_line(self, dirs, silent_address):
    result = run_cli_here('push', '--dataset', dirs['clean'], '--server',
                          silent_address, '--table', 'a', '--timeout', '1')
    assert result.returncode == 1
    assert 'Traceback' not in result.stderr
    [line] = error_lines(result.stderr)
    assert f'No Reverb server answered at {silent_address} within 1 s' in line


def test_inspect_json_and_plot(dirs, tmp_path):
  plot = tmp_path / 'episodes.png'
  result = run_cli('inspect', '--dataset', dirs['clean'], '--json',
                   '--plot', plot,
                   env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  assert result.returncode == 0, result.stderr
  assert result.stderr == ''
  summary = json.loads(result.stdout)
  returns = [float(np.sum(e['reward'], dtype=np.float64)) for e in CLEAN]
  assert (summary['episodes'], summary['steps']) == (3, 9)
  assert summary['length'] == {'min': 2, 'mean': 3.0, 'median': 3, 'max': 4}
  assert summary['return']['min'] == pytest.approx(min(returns))
  assert summary['return']['median'] == pytest.approx(np.median(returns))
  assert {'field': 'observation', 'dtype': 'float32', 'shape': [3]} in (
      summary['trajectory_spec'])
  assert plot.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


@pytest.mark.skipif(not BUNDLED_DIR.is_dir(),
                    reason=f'the bundled dataset is not at {BUNDLED_DIR}')
def test_demo_on_the_bundled_dataset():
  """In this process: Reverb's native lines are silenced while the command
  runs (`quiet.quieted`), and fd 2 is captured here too."""
  result = run_cli_here('demo')
  assert result.returncode == 0, result.stderr
  lines = {line.split()[0]: line for line in result.stdout.splitlines()}
  assert set(lines) == {'dataset', 'spec', 'server', 'pushed', 'sampled'}
  assert 'valid' in lines['dataset']
  assert 'observation (4, 2, 4)' in lines['sampled']
  assert '[reverb/cc' not in result.stderr


# (episodes, flagged invalid, why no item): a push that writes nothing. The
# demo sampled such a table and waited without end. 'all_skipped' is slow
# tier: the same check after the same push, another reason.
DEMO_WITHOUT_ITEMS = {
    'too_short': ([_episode(1, 0), _episode(1, 1)], None,
                  '2 episodes pushed, none of 2 steps or more'),
    'all_skipped': ([_episode(3, 0), _episode(3, 1)], [True, True],
                    'every episode was skipped'),
}


@pytest.mark.parametrize('case', [
    'too_short', pytest.param('all_skipped', marks=pytest.mark.slow)])
def test_demo_of_data_that_gives_no_item_fails_instead_of_sampling(
    tmp_path, case):
  episodes, invalid, why = DEMO_WITHOUT_ITEMS[case]
  directory = write_tfds(tmp_path, case, episodes, invalid)
  result = run_cli_here('demo', '--dataset', directory)
  assert result.returncode == 1, result.stderr
  assert result.stdout.splitlines()[-1].startswith(
      'pushed    ' + ('2 episodes, 2 steps' if invalid is None
                      else '0 episodes, 0 steps') + ', 0 items')
  assert result.stderr.splitlines()[-1] == (
      'rlds-reverb: error: nothing to sample: the push wrote no item of 2 '
      f'steps ({why}).')


def test_demo_waits_a_bounded_time_for_its_batch(make_server):
  """The sample's own guard, on a table the rate limiter keeps closed."""
  spec = rlds_reverb.create_trajectory_data_spec(
      rlds_data.as_rlds([_episode(3, 0)]))
  server = make_server([tables.table(tables.uniform(demo.TABLE, max_size=10),
                                     specs.table_signature(spec))])
  with pytest.raises(output.CliError) as error:
    demo._sample_batch(spec, server, 4, timeout_s=1)  # pylint: disable=protected-access
  assert str(error.value) == ("table 'demo' of the in-process server gave no "
                              'batch of 4 within 1 s.')


# '2' is slow tier: None (unset) and '0' (TensorFlow's loudest) are the
# default tier's cases of the same check.
@pytest.mark.parametrize('log_level', [
    None, '0', pytest.param('2', marks=pytest.mark.slow)])
def test_failure_stderr_is_our_line_whatever_tf_log_level(tmp_path, log_level):
  """TensorFlow prints at import unless its level is 3; we set it, always."""
  env = {k: v for k, v in os.environ.items() if k != 'TF_CPP_MIN_LOG_LEVEL'}
  if log_level is not None:
    env['TF_CPP_MIN_LOG_LEVEL'] = log_level
  result = run_cli('validate', '--dataset', tmp_path / 'nowhere', env=env)
  assert result.returncode == 2
  assert result.stderr == (
      f'rlds-reverb: error: {tmp_path}/nowhere: no such directory.\n')


def test_debug_shows_tensorflow_logs_and_the_traceback(tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='0')
  result = run_cli('validate', '--dataset', tmp_path / 'nowhere', '--debug',
                   env=env)
  assert result.returncode == 2
  assert ' tensorflow/' in result.stderr  # TensorFlow's own log lines.
  assert 'Traceback (most recent call last)' in result.stderr
  assert result.stderr.splitlines()[-1] == (
      f'rlds-reverb: error: {tmp_path}/nowhere: no such directory.')


# The 'inspect' case is slow tier: a closed stdout ends every command in
# `cli.main` alike, checked in the default tier with 'validate'.
@pytest.mark.parametrize('args, closed', [
    (['validate', '--dataset', 'CLEAN'], 'stdout'),
    pytest.param(['inspect', '--dataset', 'CLEAN', '--json'], 'stdout',
                 marks=pytest.mark.slow),
    (['validate', '--dataset', 'NOWHERE'], 'stderr'),
])
def test_closed_pipe_ends_quietly_with_141(dirs, tmp_path, args, closed):
  """As `rlds-reverb ... | head` when head has gone: no error, no 'Exception
  ignored', exit status 128 + SIGPIPE."""
  places = {'CLEAN': dirs['clean'], 'NOWHERE': str(tmp_path / 'nowhere')}
  process = warm_process.WarmPopen(
      [sys.executable, '-m', 'rlds_reverb',
       *[places.get(arg, arg) for arg in args]],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  getattr(process, closed).close()  # Before the command has printed.
  other = process.stderr if closed == 'stdout' else process.stdout
  guard = threading.Timer(HANG_GUARD_S, process.kill)
  guard.start()
  try:
    left = other.read()
    process.wait()
  finally:
    guard.cancel()
  assert process.returncode == 128 + signal.SIGPIPE
  assert left == ''


@pytest.mark.parametrize('command', cli.COMMANDS)
def test_help_is_wrapped_to_the_terminal(command, capsys, monkeypatch):
  monkeypatch.setenv('COLUMNS', '60')
  with pytest.raises(SystemExit):
    cli.main([command, '--help'])
  description = capsys.readouterr().out.split('\n\n')[1]
  assert max(len(line) for line in description.splitlines()) <= 58, (
      description)


@pytest.mark.parametrize('command', cli.COMMANDS)
def test_help_has_examples(command, capsys):
  with pytest.raises(SystemExit) as exited:
    cli.main([command, '--help'])
  assert exited.value.code == 0
  help_text = capsys.readouterr().out
  assert 'examples:' in help_text
  assert f'rlds-reverb {command}' in help_text


def test_bad_usage_exits_2(capsys):
  with pytest.raises(SystemExit) as exited:
    cli.main(['push', '--dataset', 'x'])
  assert exited.value.code == 2
  assert 'the following arguments are required: --server' in (
      capsys.readouterr().err)


def test_bundled_name_is_the_sources_one():
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
  from rlds_reverb.cli import options  # pylint: disable=g-import-not-at-top
  assert options.BUNDLED == sources.BUNDLED
