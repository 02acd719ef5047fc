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
from tests.cli_runs import run_cli_here
from tests.rlds_data import flat_episode_with as _episode


NESTED_EPISODES = export_data.nested_episodes()


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
  result = run_cli_here('inspect', '--dataset', clean_dir, '--stats', path)
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
  assert lines[start + 1].split() == ['field', 'shape', 'count', 'nonfinite',
                                      'mean', 'std', 'min', 'max', 'p1',
                                      'p99']
  rows = {line.split()[0]: line.split() for line in lines[start + 2:]}
  observation = np.concatenate([e['observation'] for e in CLEAN]).astype(
      np.float64)
  assert rows['observation'][:3] == ['observation', '[3]',
                                     f'{observation.size:,}']
  assert rows['observation'][3:6] == ['0', f'{observation.mean():.4g}',
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


# (path under the test's directory, or absolute; why it cannot be written).
UNWRITABLE_CASES = [
    ('missing/stats.json', 'its directory {tmp}/missing does not exist'),
    ('.', 'it is a directory'),
    ('a_file/stats.json', '{tmp}/a_file is not a directory'),
    # /proc exists but takes no file, and says "No such file or directory".
    ('/proc/x.json',
     'the directory /proc takes no new file (No such file or directory)'),
]


@pytest.mark.parametrize('name, reason', UNWRITABLE_CASES)
def test_a_file_that_cannot_be_written_is_refused_before_reading(
    tmp_path, name, reason):
  """The dataset does not exist: had it been read, that would be the error."""
  (tmp_path / 'a_file').write_text('')
  path = tmp_path / name
  result = run_cli_here('inspect', '--dataset', tmp_path / 'no_dataset',
                        '--stats', path)
  assert result.returncode == 2
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: Cannot write the statistics to {path}: '
      f'{reason.format(tmp=tmp_path)}']
  assert result.stdout == ''


def _nonfinite_episodes():
  """5 flat episodes: NaN and +inf observations, a -inf and a NaN return."""
  episodes = [_episode(3, 0), _episode(4, 1), _episode(2, 2), _episode(3, 3),
              _episode(3, 4)]
  episodes[1]['observation'][1, 0] = np.nan
  episodes[1]['observation'][2, 2] = np.inf
  episodes[3]['reward'][1] = -np.inf
  episodes[4]['reward'][0] = np.nan
  return episodes


@pytest.fixture(scope='module')
def nonfinite_dir(tmp_path_factory):
  return write_tfds(tmp_path_factory.mktemp('nonfinite'), 'nonfinite_rlds',
                    _nonfinite_episodes())


# (table row, count, nonfinite) of 15 steps in 5 episodes: each value
# counted once, as finite or not.
NONFINITE_ROWS = [
    ('observation', '43', '2'),
    ('reward', '13', '2'),
    ('action', '15', '0'),
    ('(episode length)', '5', '0'),
    ('(episode return)', '3', '2'),
]


def test_nonfinite_values_are_counted_apart_in_the_line_table_and_json(
    nonfinite_dir, tmp_path):
  """The figures of returns are those of the finite ones, wherever shown."""
  path = tmp_path / 'stats.json'
  text = run_cli_here('inspect', '--dataset', nonfinite_dir, '--stats', path)
  as_json = run_cli_here('inspect', '--dataset', nonfinite_dir, '--json')
  assert (text.returncode, as_json.returncode) == (0, 0), text.stderr
  returns = np.array([np.sum(e['reward'], dtype=np.float64)
                      for e in _nonfinite_episodes()])
  finite = returns[np.isfinite(returns)]
  summary = {'min': finite.min(), 'mean': finite.mean(),
             'median': np.median(finite), 'max': finite.max()}
  assert json.loads(as_json.stdout)['return'] == pytest.approx(
      {**summary, 'nonfinite': 2})
  saved = json.loads(path.read_text())['return']
  assert (saved['count'], saved['nonfinite']) == (3, 2)
  assert [saved[name] for name in ('min', 'mean', 'max')] == pytest.approx(
      [summary[name] for name in ('min', 'mean', 'max')])
  lines = text.stdout.splitlines()
  assert 'return           ' + '  '.join(
      f'{name} {value:.4g}' for name, value in summary.items()) + (
          '  nonfinite 2') in lines
  # A field's row: name, shape, count, nonfinite, ...; an episode row's
  # name is two words and its shape empty.
  rows = {(' '.join(cells[:2]) if cells[0] == '(episode' else cells[0]):
          cells[2:] for cells in map(str.split, lines) if len(cells) > 2}
  assert [(row, *rows[row][:2]) for row, _, _ in NONFINITE_ROWS] == (
      NONFINITE_ROWS)
  assert rows['(episode return)'][2] == f'{finite.mean():.4g}'
