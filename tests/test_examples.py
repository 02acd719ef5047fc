"""The programs in examples/, run as users run them.

A run in a process of its own starts TensorFlow (~4 s of CPU), so each checks
several things at once, among them what only a process shows: a clean stderr
from import on (no gym notice, no TensorFlow or Reverb lines) and no
traceback at exit. Each example's default-tier tests run it so once; its
other runs, which check output and exit status only, run in the test's
process (`tests/script_runs.run_script_here`: the same script, as `__main__`,
with the same argv). The SAC example runs against a TFDS dataset written here with the feature
structure of `d4rl_mujoco_halfcheetah` (observation float32[17], action
float32[6]), found both as a directory and by name in a data dir.
"""

import importlib
import json
import math
import os
import pathlib
import re
import subprocess
import sys

import numpy as np
import pytest
import tensorflow_datasets as tfds

from tests import cli_data
from tests import warm_process
from tests.script_runs import run_script_here

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / 'examples'
HANG_GUARD_S = 150

# Bundled CartPole: 64 episodes, 9,932 steps, 2-step items within episodes.
BUNDLED_EPISODES, BUNDLED_STEPS = 64, 9932
BUNDLED_ITEMS = BUNDLED_STEPS - BUNDLED_EPISODES

HALFCHEETAH_NAME = 'halfcheetah_like'
# (length, terminal): D4RL MuJoCo episodes mostly end by time limit.
HALFCHEETAH_EPISODES = [(5, False), (4, True), (6, False)]
HALFCHEETAH_STEPS = sum(length for length, _ in HALFCHEETAH_EPISODES)
HALFCHEETAH_ITEMS = sum(length - 1 for length, _ in HALFCHEETAH_EPISODES)


def run_example(script, *args, cwd=None):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  result = warm_process.run(
      [sys.executable, str(EXAMPLES / script), *map(str, args)],
      capture_output=True, text=True, timeout=HANG_GUARD_S, cwd=cwd, env=env)
  # Every run, failed ones too, ends without a traceback at exit.
  assert 'Exception ignored' not in result.stderr, result.stderr
  return result


def run_example_here(script, *args, cwd=None):
  """`run_example` in this process, for checks of output and exit status."""
  result = run_script_here(EXAMPLES / script, *args, cwd=cwd)
  assert 'Exception ignored' not in result.stderr, result.stderr
  return result


def halfcheetah_features() -> tfds.features.FeaturesDict:
  """`d4rl_mujoco_halfcheetah`'s feature structure (TFDS catalog)."""
  return cli_data.features(
      False, observation_size=17,
      action=tfds.features.Tensor(shape=(6,), dtype=np.float32))


def halfcheetah_episode(length: int, terminal: bool, seed: int):
  rng = np.random.default_rng(seed)
  index = np.arange(length)
  return {
      'observation': rng.standard_normal((length, 17)).astype(np.float32),
      'action': rng.uniform(-1, 1, (length, 6)).astype(np.float32),
      'reward': rng.standard_normal(length).astype(np.float32),
      'discount': np.ones(length, np.float32),
      'is_first': index == 0,
      'is_last': index == length - 1,
      'is_terminal': (index == length - 1) & terminal,
  }


@pytest.fixture(scope='module')
def halfcheetah_data_dir(tmp_path_factory) -> pathlib.Path:
  data_dir = tmp_path_factory.mktemp('tfds')
  examples = [(i, {'steps': halfcheetah_episode(length, terminal, seed=i)})
              for i, (length, terminal) in enumerate(HALFCHEETAH_EPISODES)]
  tfds.dataset_builders.store_as_tfds_dataset(
      name=HALFCHEETAH_NAME, version='1.0.0', features=halfcheetah_features(),
      split_datasets={'train': examples}, data_dir=str(data_dir),
      disable_shuffling=True)
  return data_dir


def test_seed_replay_buffer_pushes_and_samples_the_bundled_data():
  result = run_example('seed_replay_buffer.py', '--batch-size', 8)
  assert result.returncode == 0, result.stderr
  assert (f'pushed {BUNDLED_EPISODES:,} episodes, {BUNDLED_STEPS:,} steps, '
          f'{BUNDLED_ITEMS:,} items') in result.stdout
  assert f'table size {BUNDLED_ITEMS:,}\n' in result.stdout
  for line in ('batch step_type: int32[8, 2]',
               'batch observation: float32[8, 2, 4]',
               'batch action: int64[8, 2]',
               'batch reward: float32[8, 2]',
               'batch discount: float32[8, 2]'):
    assert line in result.stdout.splitlines()
  assert result.stderr == ''  # No gym notice, no Reverb log lines.


# --quick budgets of offline_to_online_dqn.py: (offline, online, interval).
QUICK_OFFLINE_STEPS, QUICK_ONLINE_STEPS, QUICK_EVAL_INTERVAL = 100, 100, 50
DQN_VARIANTS = ['scratch', 'seeded', 'cql_mixed', 'cql_online']


# Slow tier (25 s): four variants trained. The default tier runs the same
# script's offline part (test_offline_to_online_dqn_offline_only_prints_one_
# json_line), and tests/test_record*.py the recording it does with --record.
@pytest.mark.slow
def test_offline_to_online_dqn_quick_compares_three_variants(tmp_path):
  curves = tmp_path / 'curves.json'
  result = run_example('offline_to_online_dqn.py', '--quick', '--json',
                       curves, '--record', 'recorded', cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert result.stderr == ''  # No gym notice, no Reverb or TF log lines.
  # --quick writes no plot into the working directory unless asked.
  assert sorted(p.name for p in tmp_path.iterdir()) == ['curves.json',
                                                       'recorded']
  report = json.loads(curves.read_text())
  assert_plot_is_written(report, tmp_path / 'curves.png')
  assert report['budget'] == {
      'offline_steps': QUICK_OFFLINE_STEPS,
      'online_steps': QUICK_ONLINE_STEPS,
      'eval_interval': QUICK_EVAL_INTERVAL, 'eval_episodes': 2}
  assert list(report['runs']) == DQN_VARIANTS
  assert list(report['summary']) == DQN_VARIANTS
  evaluated_at = list(range(0, QUICK_ONLINE_STEPS + 1, QUICK_EVAL_INTERVAL))
  for variant, runs in report['runs'].items():
    assert [run['seed'] for run in runs] == [0]
    run = runs[0]
    assert [steps for steps, _ in run['curve']] == evaluated_at
    assert all(math.isfinite(value) and 8 <= value <= 500
               for _, value in run['curve']), run['curve']
    if variant == 'scratch':
      assert run['offline_return'] is None
    else:
      assert run['offline_return'] == run['curve'][0][1]
    reached = [steps for steps, value in run['curve'] if value >= 475]
    assert run['steps_to_goal'] == (reached[0] if reached else None)
    line = re.search(rf'^{variant} +seed 0 done in \d+ s; items in the '
                     r'tables: offline ([\d,]+), online ([\d,]+)$',
                     result.stdout, re.MULTILINE)
    assert line, result.stdout
    assert run['table_sizes'] == {'offline': int(line[1].replace(',', '')),
                                  'online': int(line[2].replace(',', ''))}
  # The offline tables hold exactly the RLDS data, after training on it;
  # online tables got the collected steps (seeded: after the RLDS data).
  sizes = {variant: runs[0]['table_sizes']
           for variant, runs in report['runs'].items()}
  for variant in ('cql_mixed', 'cql_online'):
    assert sizes[variant]['offline'] == BUNDLED_ITEMS
    assert 0 < sizes[variant]['online'] < QUICK_ONLINE_STEPS
  assert sizes['scratch']['offline'] == sizes['seeded']['offline'] == 0
  assert QUICK_ONLINE_STEPS // 2 < sizes['scratch']['online'] < (
      QUICK_ONLINE_STEPS)
  assert sizes['seeded']['online'] > BUNDLED_ITEMS
  for variant in DQN_VARIANTS:
    collected_items = sizes[variant]['online'] - (
        BUNDLED_ITEMS if variant == 'seeded' else 0)
    assert_recording_holds_the_online_phase(
        tmp_path / 'recorded' / f'{variant}_seed0', collected_items,
        result.stdout, variant)
  # Every bundled step but each episode's last has reward 1.
  assert report['data_mean_return'] == pytest.approx(
      BUNDLED_ITEMS / BUNDLED_EPISODES)
  assert (f'RLDS data: mean return {BUNDLED_ITEMS / BUNDLED_EPISODES:.1f}'
          in result.stdout)
  for variant in DQN_VARIANTS:
    assert re.search(rf'^{variant} ', result.stdout.split('random policy')[1],
                     re.MULTILINE), result.stdout
  assert re.search(r'^goal 1, CQL offline phase alone >= 150: median '
                   r'\d+\.\d, (met|not met)$', result.stdout, re.MULTILINE)
  assert re.search(r'^goal 2, .* (met|not met)$', result.stdout,
                   re.MULTILINE)


def assert_recording_holds_the_online_phase(directory, collected_items,
                                            stdout, variant):
  """--record: the online phase's episodes (the last one cut and written as
  truncated, unless it ended at the budget's last step), in steps as many as
  the observer's 2-step items show."""
  line = re.search(rf'^{variant} +seed 0 \S*/{variant}_seed0: '
                   r'recorded ([\d,]+) episodes?, ([\d,]+) steps \((\d) '
                   r'truncated at close\); the split has \1 episodes?\.$',
                   stdout, re.MULTILINE)
  assert line, stdout
  episodes = list(tfds.builder_from_directory(str(directory)).as_dataset(
      split='train'))
  lengths = [int(e['episode_length']) for e in episodes]
  assert [int(e['episode_id']) for e in episodes] == list(range(len(lengths)))
  assert (len(lengths), sum(lengths)) == (int(line[1].replace(',', '')),
                                          int(line[2].replace(',', '')))
  # PyDriver's step budget does not count boundary trajectories: one per
  # episode more (the one cut at close gets its final observation's step).
  # Each episode of T RLDS steps gave T - 1 items, but the last: T - 2. The
  # observer writes a step's item once the next trajectory comes, and the
  # last one collected has none, whether its episode was cut at close or
  # ended at the budget's last step, its boundary never collected (.ci/run
  # of 2026-12-08 00:11: 0 cut, 105 steps in 5 episodes, 99 items).
  cut = int(line[3])
  assert cut in (0, 1)
  assert sum(lengths) == QUICK_ONLINE_STEPS + len(lengths)
  assert sum(lengths) - len(lengths) == collected_items + 1
  assert not episodes[-1]['terminated'] or not cut


def assert_plot_is_written(report, path):
  """The example's `write_plot` on the runs of its --json report: a PNG."""
  sys.path.insert(0, str(EXAMPLES))
  try:
    example = importlib.import_module('offline_to_online_dqn')
  finally:
    sys.path.remove(str(EXAMPLES))
  runs = {variant: [example.Run(variant, run['seed'], run['offline_return'],
                                [tuple(point) for point in run['curve']],
                                run['table_sizes'], 0.0) for run in runs]
          for variant, runs in report['runs'].items()}
  example.write_plot(str(path), runs, report['random_return'],
                     report['data_mean_return'],
                     example.Budget(**report['budget']))
  assert path.read_bytes()[:8] == b'\x89PNG\r\n\x1a\n'


def cartpole_recording(directory) -> int:
  """A random policy's CartPole-v1 steps recorded by RldsRecorder; its
  episode count."""
  from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tf_agents.environments import suite_gym  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tf_agents.policies import random_py_policy  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  env = suite_gym.load('CartPole-v1')
  env.seed(0)
  policy = random_py_policy.RandomPyPolicy(env.time_step_spec(),
                                           env.action_spec(), seed=0)
  recorder = rlds_reverb.RldsRecorder(str(directory), policy.trajectory_spec,
                                      name='cartpole_online', env=env)
  final, _ = py_driver.PyDriver(env, policy, [recorder],
                                max_steps=60).run(env.reset())
  return recorder.close(final_time_step=final).total_episodes


def test_offline_to_online_dqn_offline_only_prints_one_json_line(
    tmp_path, tmp_path_factory):
  """Seeded from the bundled data plus a recording, as the example's
  docstring shows (--dataset twice: read as one dataset)."""
  recording = tmp_path_factory.mktemp('recording')
  assert cartpole_recording(recording) > 1
  result = run_example('offline_to_online_dqn.py', '--offline-only',
                       '--quick', '--seed', 3, '--dataset', 'bundled:cartpole',
                       '--dataset', recording, cwd=tmp_path)
  assert result.returncode == 0, result.stderr
  assert result.stderr == ''
  lines = result.stdout.splitlines()
  assert len(lines) == 1, result.stdout
  report = json.loads(lines[0])
  assert list(report) == ['seed', 'offline_steps', 'offline_return']
  assert report['seed'] == 3
  assert report['offline_steps'] == QUICK_OFFLINE_STEPS
  assert 8 <= report['offline_return'] <= 500
  assert list(tmp_path.iterdir()) == []  # No plot without a comparison.


def test_seed_sac_table_from_a_halfcheetah_shaped_directory(
    halfcheetah_data_dir):
  version_dir = halfcheetah_data_dir / HALFCHEETAH_NAME / '1.0.0'
  result = run_example('seed_sac_table.py', '--dataset', version_dir,
                       '--batch-size', 4, '--train-steps', 2)
  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert ('pushed 3 episodes, '
          f'{HALFCHEETAH_STEPS:,} steps, {HALFCHEETAH_ITEMS:,} items') in (
              result.stdout)
  assert f'table sac_experience size {HALFCHEETAH_ITEMS:,}' in lines
  assert ('batch observation [4, 2, 17], action [4, 2, 6], reward [4, 2], '
          'discount [4, 2]') in lines
  losses = [float(m[1]) for m in re.finditer(
      r'^sac train step \d+: loss (\S+)', result.stdout, re.MULTILINE)]
  assert len(losses) == 2 and all(math.isfinite(x) for x in losses)
  assert result.stderr == ''


def test_seed_sac_table_by_name_in_data_dir_and_not_prepared(
    halfcheetah_data_dir, tmp_path):
  """In this process: the run in a process of its own, with its clean stderr
  and exit, is test_seed_sac_table_from_a_halfcheetah_shaped_directory."""
  result = run_example_here('seed_sac_table.py', '--dataset', HALFCHEETAH_NAME,
                       '--data-dir', halfcheetah_data_dir, '--split',
                       'train[:2]', '--batch-size', 2, '--train-steps', 0)
  assert result.returncode == 0, result.stderr
  assert 'pushed 2 episodes, 9 steps, 7 items' in result.stdout
  assert 'sac train step' not in result.stdout

  empty = tmp_path / 'empty_data_dir'
  empty.mkdir()
  result = run_example_here('seed_sac_table.py', '--data-dir', empty)
  assert result.returncode == 2
  error_lines = result.stderr.splitlines()
  assert len(error_lines) == 1, result.stderr
  assert error_lines[0].startswith('seed_sac_table: error:')
  assert "'d4rl_mujoco_halfcheetah/v2-expert' is not prepared" in (
      error_lines[0])
  assert list(empty.iterdir()) == []  # Nothing downloaded.


def test_seed_sac_table_refuses_a_bad_max_size_before_loading(tmp_path):
  """The table's options are checked first: one line, exit 2, no traceback
  (in this process, as the test above)."""
  result = run_example_here('seed_sac_table.py', '--data-dir', tmp_path,
                       '--max-size', 0)
  assert result.returncode == 2
  assert result.stderr == (
      "seed_sac_table: error: Table 'sac_experience': max_size must be an "
      'integer from 1 to 2147483647, got 0.\n')


def _final_loss(stdout: str, steps: int) -> float:
  match = re.search(rf'^train step {steps}: loss (\S+)$', stdout, re.M)
  assert match, stdout
  return float(match.group(1))


@pytest.mark.slow
def test_train_from_servers_trains_from_three_built_checkpoints():
  result = run_example('train_from_servers.py', '--train-steps', 50)

  assert result.returncode == 0, result.stderr
  served = [(int(items.replace(',', '')), int(episodes)) for items, episodes
            in re.findall(r'^server \d: ([\d,]+) items from (\d+) episodes',
                          result.stdout, re.M)]
  # Episode I on server I % 3: every item of the bundled set, once.
  assert len(served) == 3
  assert sum(items for items, _ in served) == BUNDLED_ITEMS
  assert [episodes for _, episodes in served] == [22, 21, 21]
  assert 'rows per batch of 64 by server:' in result.stdout
  assert math.isfinite(_final_loss(result.stdout, 50))


@pytest.mark.slow
def test_mix_datasets_trains_from_two_datasets_in_fixed_shares():
  result = run_example('mix_datasets.py', '--train-steps', 50)

  assert result.returncode == 0, result.stderr
  assert f"table 'a': {BUNDLED_ITEMS:,} items of bundled:cartpole" in (
      result.stdout)
  assert re.search(r"^table 'b': [\d,]+ items of ", result.stdout, re.M)
  assert "rows per batch of 64: 48.0 of 'a', then 16.0 of 'b'" in (
      result.stdout)
  assert math.isfinite(_final_loss(result.stdout, 50))
  assert 'SyntaxWarning' not in result.stderr


@pytest.mark.slow
def test_sharded_replay_dqn_trains_offline_then_collects_into_each_server(
    tmp_path):
  """The bundled set on 2 servers (episode I on server I % 2, as a build
  spreads them) listed in a servers file: the script trains from both and
  its observer sends collected episodes to both."""
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import specs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import tables  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  data = rlds_reverb.load('bundled:cartpole')
  signature = specs.table_signature(rlds_reverb.create_trajectory_data_spec(
      data))
  servers = [reverb.Server([tables.table(tables.uniform('replay'), signature)])
             for _ in range(2)]
  try:
    for k, server in enumerate(servers):
      share = data.enumerate().filter(
          lambda index, _, k=k: index % 2 == k).map(lambda _, episode: episode)
      rlds_reverb.push(share, f'localhost:{server.port}', 'replay')
    before = [_size(server) for server in servers]
    path = tmp_path / 'servers.json'
    path.write_text(json.dumps({
        'servers': [{'server': k, 'address': f'localhost:{server.port}'}
                    for k, server in enumerate(servers)],
        'tables': ['replay'], 'signature': []}))
    result = run_example('sharded_replay_dqn.py', '--servers-file', path,
                         '--offline-steps', 20, '--online-iterations', 2,
                         '--collect-steps', 501, '--train-steps', 10)
    assert result.returncode == 0, result.stderr
    assert result.stderr == ''
    summary = json.loads(result.stdout)
    after = [_size(server) for server in servers]
  finally:
    for server in servers:
      server.stop()
  assert sum(before) == BUNDLED_ITEMS
  assert summary['frames_before'] == sum(before)
  assert summary['frames_after'] == sum(after)
  assert summary['servers'] == 2 and summary['train_steps'] == 40
  # CartPole-v1 ends an episode within 500 steps: 1,002 steps end at
  # least 2, the first sent to server 0, the second to server 1.
  assert summary['episodes_collected'] >= 2
  assert all(now > then for now, then in zip(after, before)), (before, after)
  assert math.isfinite(summary['offline_loss'])
  assert math.isfinite(summary['online_loss'])


def _size(server) -> int:
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return reverb.Client(f'localhost:{server.port}').server_info(
      timeout=10)['replay'].current_size
