"""A recorder killed mid-run: SIGKILL rounds, and `rlds-reverb recover DIR`.

A few rounds of `benchmarks/record_crash.py` (which runs 20 and more): a
PyDriver recording into one directory killed at random points, recovered,
equal to an uninterrupted recording. Then the command line on a directory a
recorder left unclosed with a torn record, run as users run it.
"""

import json
import os
import shutil

import pytest

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from benchmarks import record_crash  # pylint: disable=g-import-not-at-top
from rlds_reverb import cli  # pylint: disable=g-import-not-at-top
from rlds_reverb._util import wording  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import records  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top
from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top

CI_ROUNDS = int(os.environ.get('RLDS_REVERB_RECORD_CRASH_ROUNDS', '3'))


# Slow tier: a crash test (recorders killed at random points, several
# rounds). The default tier recovers a crashed recording's open shards and torn
# records in test_recover_command_registers_open_shards_and_cuts_torn_records,
# and test_tfds_out_recovery's tests cut a torn record at any offset.
@pytest.mark.slow
def test_sigkilled_recorders_lose_no_finished_episode(tmp_path):
  summary = record_crash.run(rounds=CI_ROUNDS, seed=3, directory=tmp_path)
  rounds = summary['per_round']
  assert [r['lost'] for r in rounds] == [0] * CI_ROUNDS
  assert all(r['exact'] and r['ids_continue'] and r['readable_by_tfds']
             for r in rounds), rounds
  assert all(r['kept_in_flight'] in (0, 1) for r in rounds), rounds
  assert summary['episodes_recovered'] >= summary['episodes_finished'] > 0
  assert summary['values_equal_uninterrupted_run']


def unclosed_recording(directory, episodes: int) -> bytes:
  """A recording of `episodes` never closed (its last shard unregistered),
  then a torn record appended: what SIGKILL mid-write leaves. Returns the
  torn bytes."""
  record_crash.record(str(directory), episodes=episodes, close=False)
  last = rlds_dirs.record_files(directory)[-1]
  with open(os.path.join(directory, last), 'rb') as f:
    torn = f.read()[:40]
  with open(os.path.join(directory, last), 'ab') as f:
    f.write(torn)
  return torn


def test_recover_command_registers_open_shards_and_cuts_torn_records(
    tmp_path):
  killed, clean = tmp_path / 'killed', tmp_path / 'clean'
  torn = unclosed_recording(killed, episodes=4)
  record_crash.record(str(clean), episodes=2)
  before = rlds_dirs.files_bytes(clean)
  result = run_cli_here('recover', killed, clean, '--json')
  assert result.returncode == 0, result.stderr
  killed_result, clean_result = json.loads(result.stdout)
  assert killed_result == {
      'directory': str(killed), 'split': 'train', 'episodes': 4,
      'recovered_episodes': 1,
      'registered_shards': ['recording-train.tfrecord-00001'],
      'cut_bytes': len(torn), 'removed_files': [], 'shortened_shards': [],
      'lost_episodes': [], 'changed': True}
  assert clean_result['changed'] is False and clean_result['episodes'] == 2
  assert rlds_dirs.files_bytes(clean) == before  # Nothing needed, nothing done.
  got = rlds_dirs.read_episodes(killed)
  assert [int(e['episode_id']) for e in got] == [0, 1, 2, 3]
  record_crash.record(str(tmp_path / 'whole'), episodes=4)
  rlds_dirs.assert_same_episodes(got, rlds_dirs.read_episodes(
      tmp_path / 'whole'))


def test_recover_command_refuses_what_is_no_dataset_in_one_line(tmp_path,
                                                                capsys):
  (tmp_path / 'notes.txt').write_text('mine')
  assert cli.main(['recover', str(tmp_path)]) == 2
  [line] = capsys.readouterr().err.splitlines()
  assert line == (f'rlds-reverb: error: {tmp_path} is not a TFDS dataset '
                  f'directory: it has no dataset_info.json.')


def test_recover_command_cuts_a_copy_cut_short_and_names_what_it_lost(
    tmp_path):
  """`cp -r recording cut; truncate -s N cut/...-00000`: the registered
  shard ends inside its second episode. Before `recover`, no command reads
  it; after, every command does, and the lost episodes are named (exit 1)."""
  whole, cut = tmp_path / 'recording', tmp_path / 'cut'
  record_crash.record(str(whole), episodes=4)  # Shards of 3 and 1 episodes.
  shutil.copytree(whole, cut)
  shard = os.path.join(cut, rlds_dirs.record_files(cut)[0])
  first, second = (records.records_end(shard, n) for n in (1, 2))
  size = (first + second) // 2
  with open(shard, 'r+b') as f:
    f.truncate(size)
  assert run_cli_here('validate', '--dataset', cut).returncode == 2
  result = run_cli_here('recover', cut)
  assert (result.returncode, result.stderr) == (1, '')
  assert result.stdout == (
      f'{cut}: recording-train.tfrecord-00000 ended before its registered '
      f'episodes: lost 2 finished episodes (ids 1-2); cut '
      f"{wording.count(size - first, 'byte')} of torn records; split 'train' "
      f'has 2 episodes.\n')
  assert os.path.getsize(shard) == first
  validated = run_cli_here('validate', '--dataset', cut)
  assert validated.returncode == 0, validated.stderr
  got = rlds_dirs.read_episodes(cut)
  assert [int(e['episode_id']) for e in got] == [0, 3]
  want = rlds_dirs.read_episodes(whole)
  rlds_dirs.assert_same_episodes(got, [want[0], want[3]])
  again = run_cli_here('recover', cut, '--json')
  assert again.returncode == 0, again.stderr
  [again_result] = json.loads(again.stdout)
  assert again_result['changed'] is False
  assert again_result['lost_episodes'] == []


def test_recover_json_names_the_lost_episodes(tmp_path):
  record_crash.record(str(tmp_path), episodes=4)
  shard = os.path.join(tmp_path, rlds_dirs.record_files(tmp_path)[1])
  with open(shard, 'r+b') as f:
    f.truncate(10)
  result = run_cli_here('recover', tmp_path, '--json')
  assert result.returncode == 1, result.stderr
  assert json.loads(result.stdout) == [{
      'directory': str(tmp_path), 'split': 'train', 'episodes': 3,
      'recovered_episodes': 0, 'registered_shards': [], 'cut_bytes': 10,
      'removed_files': [],
      'shortened_shards': ['recording-train.tfrecord-00001'],
      'lost_episodes': [3], 'changed': True}]
