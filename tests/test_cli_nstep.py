"""n-step transitions from the command line: `serve --n-step`, `push --n-step`.

A real `rlds-reverb serve` process signs its table for transitions; `push
--n-step N --gamma G` fills it; every item is taken back and compared with
Acme's arithmetic written out step by step (`nstep_data.expected_transitions`).
"""

import subprocess
import sys

import numpy as np
import pytest
from rlds_reverb import cli
from tests import nstep_data
from tests import reverb_tables
from tests import warm_process
from tests.cli_data import write_tfds
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli_here

TABLE = 'nstep'
EPISODES = nstep_data.episodes_with_both_endings(5)


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  return write_tfds(tmp_path_factory.mktemp('tfds'), 'nstep_rlds', EPISODES)


@pytest.fixture(scope='module')
def served(dataset):
  """`rlds-reverb serve --n-step` on a free port; its address."""
  process = warm_process.WarmPopen(
      [sys.executable, '-m', 'rlds_reverb', 'serve', '--dataset', dataset,
       '--table', TABLE, '--n-step', '--port', '0'],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  try:
    line = process.stdout.readline()
    assert line.startswith(f'serving {TABLE} on port '), (
        line, process.stderr.read() if process.poll() is not None else '')
    yield f'localhost:{line.split(" on port ")[1].split()[0]}'
  finally:
    process.terminate()
    process.wait(timeout=HANG_GUARD_S)


def take_all(address: str):
  """Every item of the served table, its data as numpy; the table emptied."""
  return [data for _, data in reverb_tables.drain(address, TABLE)]


def test_push_n_step_writes_the_transitions(dataset, served):
  pushed = run_cli_here('push', '--dataset', dataset, '--server', served,
                        '--table', TABLE, '--n-step', '3', '--gamma', '0.9')
  assert pushed.returncode == 0, pushed.stderr
  want = nstep_data.expected_transitions(EPISODES, 3, 0.9)
  assert pushed.stdout.startswith(
      f'pushed 6 episodes, {len(want)} transitions of 3 steps (gamma 0.9), '
      f'{len(want)} items in '), pushed.stdout
  got = take_all(served)
  assert len(got) == len(want)
  got = sorted(got, key=lambda item: item.observation.tobytes())
  want = sorted(want, key=lambda w: w['observation'].tobytes())
  for g, w in zip(got, want, strict=True):
    np.testing.assert_array_equal(g.observation, w['observation'])
    np.testing.assert_array_equal(g.action, w['action'])
    np.testing.assert_array_equal(g.next_observation, w['next_observation'])
    np.testing.assert_allclose(g.reward, w['reward'], rtol=1e-5)
    np.testing.assert_allclose(g.discount, w['discount'], rtol=1e-5)


def test_trajectories_into_an_n_step_table_are_refused(dataset, served):
  pushed = run_cli_here('push', '--dataset', dataset, '--server', served,
                        '--table', TABLE)
  assert pushed.returncode == 1
  [line] = error_lines(pushed.stderr)
  assert 'signature' in line
  assert take_all(served) == []


@pytest.mark.parametrize('extra, message', [
    ([], '--n-step needs --gamma G (0 <= G <= 1)'),
    (['--gamma', '0.9', '--workers', '2'],
     '--n-step writes transitions, not trajectories, in one process without '
     'resuming: drop --workers'),
    (['--gamma', '0.9', '--sequence-length', '3'],
     '--n-step writes transitions, not trajectories, in one process without '
     'resuming: drop --sequence-length'),
    (['--gamma', '0.9', '--resume', 'state.json'],
     '--n-step writes transitions, not trajectories, in one process without '
     'resuming: drop --resume'),
], ids=['no_gamma', 'workers', 'sequence_length', 'resume'])
def test_what_n_step_cannot_do_is_a_usage_error(extra, message, capsys):
  code = cli.main(['push', '--dataset', 'unused', '--server',
                   'localhost:1', '--table', TABLE, '--n-step', '3', *extra])
  assert code == 2
  assert capsys.readouterr().err.strip() == f'rlds-reverb: error: {message}'


@pytest.mark.parametrize('argv, message', [
    (['--gamma', '0.9'], '--gamma goes with --n-step'),
], ids=['gamma_alone'])
def test_gamma_alone_is_a_usage_error(argv, message, capsys):
  code = cli.main(['push', '--dataset', 'unused', '--server', 'localhost:1',
                   '--table', TABLE, *argv])
  assert code == 2
  assert capsys.readouterr().err.strip() == f'rlds-reverb: error: {message}'


@pytest.mark.parametrize('gamma', ['1.5', '-0.1', 'x'])
def test_gamma_outside_0_1_is_refused_by_argparse(gamma, capsys):
  with pytest.raises(SystemExit) as exited:
    cli.main(['push', '--dataset', 'unused', '--server', 'localhost:1',
              '--table', TABLE, '--n-step', '2', '--gamma', gamma])
  assert exited.value.code == 2
  assert 'argument --gamma:' in capsys.readouterr().err
