"""A build of many servers records the dataset it read (cli/build_record.py):
a serve of the build given the same dataset and options says what the
checker would say, without signing the dataset again; anything else (another
dataset, other options, a checkpoint signed otherwise, a damaged record)
leaves the check to the checker.

Real builds (`rlds-reverb build --servers 2` in this process) of real TFDS
directories; the checker's lines are computed from the dataset as the
checker process computes them (`serve_native.checked_lines`).
"""

import json
import shutil

import pytest

from rlds_reverb import cli
from rlds_reverb.checkpoints import directories
from rlds_reverb.cli import build_record
from rlds_reverb.cli import output
from rlds_reverb.cli import serve_checks
from rlds_reverb.cli import serve_many
from rlds_reverb.cli import serve_native
from tests import image_data
from tests.cli_runs import run_cli_here
from tests.serve_command import TABLE
from tests.serve_command import dataset  # pylint: disable=unused-import

SERVERS = 2


def _build(dataset_dir, out, *options):
  result = run_cli_here('build', '--dataset', dataset_dir, '--out', out,
                        '--servers', SERVERS, '--table', TABLE, *options)
  assert result.returncode == 0, result.stderr
  return out


@pytest.fixture(scope='module')
def built(dataset, tmp_path_factory):  # pylint: disable=redefined-outer-name
  return _build(dataset, tmp_path_factory.mktemp('built') / 'out')


@pytest.fixture(scope='module')
def images(tmp_path_factory):
  """A TFDS directory of PNG frames, and its build with --images encoded
  (the memory estimate counts the frames measured in the data)."""
  root = tmp_path_factory.mktemp('images')
  images_dir = image_data.write_image_dir(root / 'tfds')
  return images_dir, _build(images_dir, root / 'out', '--images', 'encoded')


def _serve_args(dataset_dir, built_dir, *options):  # pylint: disable=redefined-outer-name
  return cli.build_parser().parse_args(
      ['serve', '--dataset', str(dataset_dir), '--table', TABLE,
       '--from-checkpoint', str(built_dir), *map(str, options)])


def _loads(built_dir):
  return [str(root / directories.find(root).newest)
          for root in (built_dir / f'server-{k}-of-{SERVERS}'
                       for k in range(SERVERS))]


def _recorded(args):
  layout = serve_many.layout_of(args)
  return serve_native.recorded_check(args, layout,
                                     serve_native.native_loads(args, layout))


@pytest.mark.parametrize('case', ['raw', 'encoded_images'])
def test_the_record_says_what_the_checker_says(case, dataset, built, images):  # pylint: disable=redefined-outer-name
  """The same notes, memory estimates (with the frames measured), ignored
  options and signature as the checker's, after one line saying why."""
  if case == 'raw':
    args = _serve_args(dataset, built, '--max-size', 50)
    built_dir = built
  else:
    images_dir, built_dir = images
    args = _serve_args(images_dir, built_dir, '--images', 'encoded')
  recorded = _recorded(args)
  assert recorded is not None
  checked = serve_checks.dataset_signature(args)
  expected = list(serve_native.checked_lines(args, checked,
                                             _loads(built_dir)))
  assert recorded.lines == [
      f'the dataset and options are those {built_dir} was built with '
      '(dataset.json): the dataset is not signed again', *expected]
  assert any('memory estimate' in line for line in expected)
  assert recorded.fields == output.spec_fields(checked.signature)


def test_a_build_of_one_server_records_nothing(dataset, tmp_path):  # pylint: disable=redefined-outer-name
  """One server's serve signs the dataset in its own process anyway."""
  out = tmp_path / 'out'
  result = run_cli_here('build', '--dataset', dataset, '--out', out,
                        '--table', TABLE)
  assert result.returncode == 0, result.stderr
  assert not (out / build_record.RECORD).exists()


def _changed_features(dataset, built, tmp_path):  # pylint: disable=redefined-outer-name
  """The dataset copied, its action int32 in features.json (int64 built)."""
  copy = tmp_path / 'copy'
  shutil.copytree(dataset, copy)
  features = json.loads((copy / 'features.json').read_text())
  steps = features['featuresDict']['features']['steps']['sequence']['feature']
  action = steps['featuresDict']['features']['action']['tensor']
  assert action['dtype'] == 'int64'
  action['dtype'] = 'int32'
  (copy / 'features.json').write_text(json.dumps(features, indent=4))
  return _serve_args(copy, built)


def _damaged_record(dataset, built, tmp_path):  # pylint: disable=redefined-outer-name
  copy = tmp_path / 'built'
  shutil.copytree(built, copy)
  (copy / build_record.RECORD).write_text('{"key": ')
  return _serve_args(dataset, copy)


def _no_record(dataset, built, tmp_path):  # pylint: disable=redefined-outer-name
  copy = tmp_path / 'built'
  shutil.copytree(built, copy)
  (copy / build_record.RECORD).unlink()
  return _serve_args(dataset, copy)


def _signed_otherwise(dataset, built, tmp_path):  # pylint: disable=redefined-outer-name
  """Server 1's part swapped for a build of other data in a table of the
  same name: its checkpoint is not one the record signed."""
  copy = tmp_path / 'built'
  shutil.copytree(built, copy)
  other = _build(image_data.write_image_dir(tmp_path / 'tfds'),
                 tmp_path / 'other')
  shutil.rmtree(copy / f'server-1-of-{SERVERS}')
  shutil.copytree(other / f'server-1-of-{SERVERS}',
                  copy / f'server-1-of-{SERVERS}')
  return _serve_args(dataset, copy)


STALE = {
    'n_step': lambda dataset, built, _: _serve_args(dataset, built,
                                                    '--n-step'),
    'images_encoded': lambda dataset, built, _: _serve_args(
        dataset, built, '--images', 'encoded'),
    'strict': lambda dataset, built, _: _serve_args(dataset, built,
                                                    '--strict'),
    'other_split': lambda dataset, built, _: _serve_args(
        dataset, built, '--split', 'train[:2]'),
    'features_changed': _changed_features,
    'record_damaged': _damaged_record,
    'no_record': _no_record,
    'a_checkpoint_signed_otherwise': _signed_otherwise,
}


@pytest.mark.parametrize('case', STALE)
def test_anything_else_is_left_to_the_checker(case, dataset, built, tmp_path):  # pylint: disable=redefined-outer-name
  assert _recorded(STALE[case](dataset, built, tmp_path)) is None


def test_a_catalog_name_has_no_key():
  args = cli.build_parser().parse_args(
      ['serve', '--dataset', 'd4rl_mujoco_halfcheetah/v2-expert', '--table',
       TABLE])
  assert build_record.key(args) is None
