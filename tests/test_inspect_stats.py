"""`rlds-reverb inspect --stats FILE.json`, run as a user runs it: the file
holds what `statistics` finds, the table shows it, and a file that cannot be
written is refused in one line before the data is read."""

import json

import numpy as np
import pytest

import rlds_reverb
from tests import export_data
from tests.cli_data import CLEAN
from tests.cli_data import write_tfds
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli
from tests.cli_runs import run_cli_here
from tests.test_step_stats import NESTED_EPISODES


@pytest.fixture(scope='module')
def clean_dir(tmp_path_factory):
  return write_tfds(tmp_path_factory.mktemp('tfds'), 'clean_rlds', CLEAN)


@pytest.fixture(scope='module')
def nested_dir(tmp_path_factory):
  return export_data.write_source(tmp_path_factory.mktemp('nested'),
                                  NESTED_EPISODES)


def test_the_file_holds_the_statistics_and_the_table_shows_them(
    clean_dir, tmp_path):
  path = tmp_path / 'stats.json'
  result = run_cli('inspect', '--dataset', clean_dir, '--stats', path)
  assert result.returncode == 0, result.stderr
  assert result.stderr == ''  # No progress bar off a terminal.
  expected = rlds_reverb.statistics(rlds_reverb.load(clean_dir))
  assert json.loads(path.read_text()) == json.loads(
      json.dumps(expected.to_json()))
  lines = result.stdout.splitlines()
  start = lines.index(next(line for line in lines
                           if line.startswith('statistics')))
  assert lines[start] == (f'statistics       {path} (per element and pooled; '
                          'percentiles within 1% of |value|)')
  assert lines[start + 1].split() == ['field', 'shape', 'count', 'mean',
                                      'std', 'min', 'max', 'p1', 'p99']
  rows = {line.split()[0]: line.split() for line in lines[start + 2:]}
  observation = np.concatenate([e['observation'] for e in CLEAN]).astype(
      np.float64)
  assert rows['observation'][:3] == ['observation', '[3]',
                                     f'{observation.size:,}']
  assert rows['observation'][3:5] == [f'{observation.mean():.4g}',
                                      f'{observation.std():.4g}']
  assert [line.split()[:3] for line in lines if line.startswith('(')] == [
      ['(episode', 'length)', '3'], ['(episode', 'return)', '3']]
  assert rows['skipped'] == ['skipped', 'is_first,', 'is_last,',
                             'is_terminal:', 'not', 'a', 'number:', 'bool[]']


def test_the_length_and_return_lines_come_from_the_same_pass(clean_dir,
                                                             tmp_path):
  with_stats = run_cli_here('inspect', '--dataset', clean_dir, '--json',
                            '--stats', tmp_path / 'stats.json')
  without = run_cli_here('inspect', '--dataset', clean_dir, '--json')
  assert with_stats.returncode == 0, with_stats.stderr
  found, plain = json.loads(with_stats.stdout), json.loads(without.stdout)
  assert found.pop('stats') == str(tmp_path / 'stats.json')
  assert found == plain


def test_nested_fields_nest_in_the_file_and_images_are_named(nested_dir,
                                                             tmp_path):
  path = tmp_path / 'stats.json'
  result = run_cli_here('inspect', '--dataset', nested_dir, '--stats', path)
  assert result.returncode == 0, result.stderr
  saved = rlds_reverb.DatasetStatistics.load(path)
  assert saved['observation/position'].shape == (3,)
  assert saved.skipped['observation/pixels'] == 'an image'
  assert 'skipped          observation/pixels: an image' in (
      result.stdout.splitlines())


@pytest.mark.parametrize('name, reason', [
    ('missing/stats.json', 'No such file or directory: {path}'),
    ('.', 'it is a directory'),
])
def test_a_file_that_cannot_be_written_is_refused_before_reading(
    tmp_path, name, reason):
  """The dataset does not exist: had it been read, that would be the error."""
  path = tmp_path / name
  result = run_cli_here('inspect', '--dataset', tmp_path / 'no_dataset',
                        '--stats', path)
  assert result.returncode == 2
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: Cannot write the statistics to {path}: '
      f'{reason.format(path=path)}']
  assert result.stdout == ''
