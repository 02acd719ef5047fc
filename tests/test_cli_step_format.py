"""The command line on catalog-shaped data: notes for defaults, --strict refuses.

Real TFDS directories shaped as Open X-Embodiment's discount-less sets and
RL Unplugged's RWRL (discount and reward of shape (1,)), a real Reverb server.
"""

import json

import numpy as np
import pytest
import reverb
import tensorflow_datasets as tfds

import rlds_reverb
from rlds_reverb import specs
from tests import reverb_tables
from tests import rlds_data
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli_here

NO_DISCOUNT_NOTE = ('steps/discount is missing: every discount is 1.0 (0 on a '
                    'terminal last step).')
RWRL_NOTE = 'steps/discount has shape [1]: read as the scalar it holds.'
MISSING_DISCOUNT = (
    "Invalid RLDS step spec. Features expected are ['observation', 'action', "
    "'reward', 'discount', 'is_first', 'is_last', 'is_terminal'], but found "
    "['action', 'is_first', 'is_last', 'is_terminal', 'observation', "
    "'reward'] Missing step fields: discount.")

LENGTHS = (3, 4, 2)


def _steps(num_steps, seed, rwrl):
  steps = rlds_data.flat_episode(num_steps, seed)
  if rwrl:
    steps['discount'] = steps['discount'][:, None]
    steps['reward'] = steps['reward'][:, None]
  else:
    del steps['discount']
  return steps


def _features(rwrl):
  tensor = tfds.features.Tensor
  steps = {
      'observation': tensor(shape=(3,), dtype=np.float32),
      'action': tensor(shape=(), dtype=np.int64),
      'reward': tensor(shape=(1,) if rwrl else (), dtype=np.float32),
      'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_,
  }
  if rwrl:
    steps['discount'] = tensor(shape=(1,), dtype=np.float32)
  return tfds.features.FeaturesDict({'steps': tfds.features.Dataset(steps)})


@pytest.fixture(scope='module')
def dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp('catalog_shapes')
  made = {}
  for name, rwrl in (('no_discount', False), ('rwrl', True)):
    episodes = [(i, {'steps': _steps(n, i, rwrl)})
                for i, n in enumerate(LENGTHS)]
    builder = tfds.dataset_builders.store_as_tfds_dataset(
        name=name, version='1.0.0', features=_features(rwrl),
        split_datasets={'train': episodes}, data_dir=str(root),
        disable_shuffling=True)
    made[name] = str(builder.data_dir)
  return made


def test_validate_notes_the_default_and_strict_refuses_it(dirs):
  result = run_cli_here('validate', '--dataset', dirs['no_discount'])
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines() == [
      f'note: {NO_DISCOUNT_NOTE}', '3 episodes, 9 steps: no problems']
  strict = run_cli_here('validate', '--dataset', dirs['no_discount'],
                        '--strict')
  assert strict.returncode == 2
  [line] = error_lines(strict.stderr)
  assert line == (f'rlds-reverb: error: no_discount:1.0.0 '
                  f"({dirs['no_discount']}): {MISSING_DISCOUNT}")


def test_inspect_json_has_the_stored_spec_and_the_notes(dirs):
  result = run_cli_here('inspect', '--dataset', dirs['rwrl'], '--json')
  assert result.returncode == 0, result.stderr
  report = json.loads(result.stdout)
  assert report['notes'] == [RWRL_NOTE]
  stored = {f['field']: f['shape'] for f in report['step_spec']}
  converted = {f['field']: f['shape'] for f in report['trajectory_spec']}
  assert (stored['discount'], stored['reward']) == ([1], [1])
  assert (converted['discount'], converted['reward']) == ([], [1])


@pytest.fixture(scope='module')
def served_tables(dirs):
  return [reverb_tables.fifo_table(
      'a', reverb_tables.signature_for(dirs['no_discount']))]


def test_push_notes_the_default_and_strict_writes_nothing(dirs, server):
  address = reverb_tables.address(server)
  strict = run_cli_here('push', '--dataset', dirs['no_discount'], '--server',
                        address, '--table', 'a', '--strict')
  assert strict.returncode == 2
  assert MISSING_DISCOUNT in strict.stderr
  client = reverb.Client(address)
  assert reverb_tables.table_size(client, 'a') == 0
  result = run_cli_here('push', '--dataset', dirs['no_discount'], '--server',
                        address, '--table', 'a', '--json')
  assert result.returncode == 0, result.stderr
  assert f'rlds-reverb: note: {NO_DISCOUNT_NOTE}' in result.stderr.splitlines()
  summary = json.loads(result.stdout)
  assert (summary['items'], summary['notes']) == (6, [NO_DISCOUNT_NOTE])
  discounts = sorted(float(d) for _, item in reverb_tables.drain(server, 'a')
                     for d in np.asarray(item.discount))
  # 6 items of 2 steps: 3 last steps, each terminal (0) or not (1); the rest 1.
  terminal_lasts = sum(bool(rlds_data.flat_episode(n, i)['is_terminal'][-1])
                       for i, n in enumerate(LENGTHS))
  assert discounts == [0.0] * terminal_lasts + [1.0] * (12 - terminal_lasts)
