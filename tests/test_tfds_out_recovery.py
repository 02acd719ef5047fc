"""Recovery of RLDS directories whose writer died: killed, torn, corrupt.

A writer that is not closed leaves on disk what a killed one leaves: every
written episode flushed into an unregistered shard. Torn records are made by
cutting that shard at many offsets; real kills by
`benchmarks/rlds_write_crash.py` (SIGKILL at random points, a few rounds).
"""

import json
import os
import random
import shutil

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top

from benchmarks import rlds_write_crash  # pylint: disable=g-import-not-at-top
from rlds_reverb import errors  # pylint: disable=g-import-not-at-top
from rlds_reverb._util import wire  # pylint: disable=g-import-not-at-top
from rlds_reverb._util import wording  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import EpisodeWriter  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import LostEpisodesWarning  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import recover  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import records  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top

EPISODES = [rlds_dirs.episode(i) for i in range(5)]
SHARD = 'ours-train.tfrecord-00000'


@pytest.fixture(scope='module')
def crashed(tmp_path_factory):
  """(directory, record ends): 5 episodes written, the writer never closed."""
  directory = tmp_path_factory.mktemp('crashed')
  writer = EpisodeWriter(directory, rlds_dirs.features(), name='ours')
  ends = []
  for episode in EPISODES:
    writer.write(episode)
    ends.append(os.path.getsize(directory / SHARD))
  assert rlds_dirs.shard_lengths(directory) == []
  yield os.fspath(directory), ends
  writer.close()


def copy_of(crashed_dir, tmp_path):
  copy = os.fspath(tmp_path / 'copy')
  shutil.copytree(crashed_dir, copy)
  return copy


def cut_offsets(ends):
  """Record ends, one byte after each (a partial length), inside each
  length's CRC, just after it (no data), mid data, one byte short, and
  random offsets."""
  starts = [0] + ends[:-1]
  offsets = set(ends)
  for start, end in zip(starts, ends):
    offsets.update([start + 1, start + 10, start + 12, (start + end) // 2,
                    end - 1])
  rng = random.Random(0)
  offsets.update(rng.randrange(ends[-1]) for _ in range(10))
  return sorted(offsets)


def test_a_torn_record_is_cut_at_any_offset(crashed, tmp_path):
  """Every cut leaves the shard's whole records, byte for byte, registered;
  TFDS reads them back once per number of whole episodes (a read is a
  pipeline traced, ~0.4 s: the same bytes and metadata read the same)."""
  directory, ends = crashed
  with open(os.path.join(directory, SHARD), 'rb') as f:
    written = f.read()
  read_back = set()
  for offset in cut_offsets(ends):
    copy = copy_of(directory, tmp_path)
    with open(os.path.join(copy, SHARD), 'r+b') as f:
      f.truncate(offset)
    whole = len([end for end in ends if end <= offset])
    recovery = recover(copy)
    assert recovery.episodes == recovery.recovered_episodes == whole, offset
    assert recovery.cut_bytes == offset - ([0] + ends)[whole], offset
    if whole:
      with open(os.path.join(copy, SHARD), 'rb') as f:
        assert f.read() == written[:ends[whole - 1]], offset
      assert recovery.registered_shards == (SHARD,)
      assert rlds_dirs.shard_lengths(copy) == [whole]
      if whole not in read_back:
        rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(copy),
                                       EPISODES[:whole])
        read_back.add(whole)
    else:  # Nothing whole: the empty shard goes.
      assert recovery.removed_files == (SHARD,)
      assert rlds_dirs.record_files(copy) == []
    shutil.rmtree(copy)


def test_a_corrupt_last_record_is_cut(crashed, tmp_path):
  """Power lost after the file grew: zeros where the last record was."""
  directory, ends = crashed
  copy = copy_of(directory, tmp_path)
  with open(os.path.join(copy, SHARD), 'r+b') as f:
    f.seek(ends[-2] + 20)
    f.write(bytes(ends[-1] - ends[-2] - 20))
  recovery = recover(copy)
  assert recovery.episodes == 4
  assert recovery.cut_bytes == ends[-1] - ends[-2]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(copy), EPISODES[:4])


def test_append_recovers_and_continues_the_ids(crashed, tmp_path):
  directory, ends = crashed
  copy = copy_of(directory, tmp_path)
  with open(os.path.join(copy, SHARD), 'r+b') as f:
    f.truncate(ends[2] + 7)
  with EpisodeWriter(copy, rlds_dirs.features(), name='ours',
                     append=True) as writer:
    assert writer.recovery.cut_bytes == 7
    assert writer.num_episodes == 3
    assert writer.write(EPISODES[3]) == 3
  assert rlds_dirs.shard_lengths(copy) == [3, 1]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(copy), EPISODES[:4])


def test_recovering_twice_changes_nothing_the_second_time(crashed, tmp_path):
  directory, ends = crashed
  copy = copy_of(directory, tmp_path)
  with open(os.path.join(copy, SHARD), 'r+b') as f:
    f.truncate(ends[-1] - 3)
  first = recover(copy)
  after_first = rlds_dirs.files_bytes(copy)
  second = recover(copy)
  assert first.changed and not second.changed
  assert rlds_dirs.files_bytes(copy) == after_first
  assert str(second) == (
      f"{copy}: nothing to recover; split 'train' has 4 episodes.")
  torn = wording.count(ends[-1] - 3 - ends[-2], 'byte')
  assert str(first) == (
      f'{copy}: registered 1 shard holding 4 episodes; cut {torn} of torn '
      f"records; split 'train' has 4 episodes.")


def test_a_closed_dataset_needs_nothing(tmp_path):
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours',
                     shard_episodes=2) as writer:
    for episode in EPISODES:
      writer.write(episode)
  before = rlds_dirs.files_bytes(tmp_path)
  recovery = recover(tmp_path)
  assert (recovery.episodes, recovery.changed) == (5, False)
  assert rlds_dirs.files_bytes(tmp_path) == before


def test_shards_closed_but_not_registered_are_registered(tmp_path):
  """Killed between closing shards and writing dataset_info.json."""
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours',
                     shard_episodes=2) as writer:
    for episode in EPISODES:
      writer.write(episode)
  info_path = tmp_path / 'dataset_info.json'
  info = json.loads(info_path.read_text())
  info['splits'][0]['shardLengths'] = ['2']
  info_path.write_text(json.dumps(info))
  recovery = recover(tmp_path)
  assert recovery.registered_shards == ('ours-train.tfrecord-00001',
                                        'ours-train.tfrecord-00002')
  assert rlds_dirs.shard_lengths(tmp_path) == [2, 2, 1]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path), EPISODES)


def closed_in_shards_of_two(directory):
  """EPISODES closed in shards of 2, 2 and 1; (directory, each shard's path
  and record ends)."""
  with EpisodeWriter(directory, rlds_dirs.features(), name='ours',
                     shard_episodes=2) as writer:
    for episode in EPISODES:
      writer.write(episode)
  shards = [os.path.join(directory, name)
            for name in rlds_dirs.record_files(directory)]
  ends = [[records.records_end(path, n) for n in range(1, length + 1)]
          for path, length in zip(shards, [2, 2, 1])]
  return os.fspath(directory), shards, ends


# A registered shard cut short (copied in part, a disk that lost its end):
# (shard, where it is cut: 'start', 'mid_record' or a record's end,
#  episodes lost, shard lengths after, bytes cut).
SHORTENED = {
    'last_shard_inside_its_record': (2, 'mid_record', [4], [2, 2, 0]),
    'middle_shard_inside_its_second_record': (1, 'mid_record', [3],
                                              [2, 1, 1]),
    'first_shard_to_nothing': (0, 'start', [0, 1], [0, 2, 1]),
    'middle_shard_at_its_first_records_end': (1, 'first_end', [3], [2, 1, 1]),
}


@pytest.mark.parametrize('case', list(SHORTENED))
def test_a_registered_shard_cut_short_is_cut_to_whole_records(tmp_path, case):
  shard, where, lost, lengths = SHORTENED[case]
  directory, shards, ends = closed_in_shards_of_two(tmp_path / 'd')
  start = ends[shard][-2] if len(ends[shard]) > 1 else 0
  offset = {'start': 0, 'first_end': ends[shard][0],
            'mid_record': (start + ends[shard][-1]) // 2}[where]
  with open(shards[shard], 'r+b') as f:
    f.truncate(offset)
  recovery = recover(directory)
  assert recovery.lost_episodes == tuple(lost)
  assert recovery.shortened_shards == (os.path.basename(shards[shard]),)
  whole = ([0] + ends[shard])[len(ends[shard]) - len(lost)]
  assert recovery.cut_bytes == offset - whole
  assert os.path.getsize(shards[shard]) == whole
  assert rlds_dirs.shard_lengths(directory) == lengths
  assert recovery.episodes == sum(lengths) == len(EPISODES) - len(lost)
  kept = [e for i, e in enumerate(EPISODES) if i not in lost]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(directory), kept)
  with open(os.path.join(directory, 'dataset_info.json')) as f:
    num_bytes = int(json.load(f)['splits'][0]['numBytes'])
  assert num_bytes == sum(os.path.getsize(path) for path in shards) - (
      wire.RECORD_OVERHEAD * sum(lengths))
  before = rlds_dirs.files_bytes(directory)
  assert not recover(directory).changed  # Once is enough.
  assert rlds_dirs.files_bytes(directory) == before


def test_what_a_shortened_shard_lost_is_said(tmp_path):
  directory, shards, ends = closed_in_shards_of_two(tmp_path / 'd')
  with open(shards[0], 'r+b') as f:
    f.truncate(ends[0][0] + 5)
  with open(shards[1], 'r+b') as f:
    f.truncate(3)
  recovery = recover(directory)
  assert recovery.lost_episodes == (1, 2, 3)
  assert str(recovery) == (
      f'{directory}: ours-train.tfrecord-00000 and ours-train.tfrecord-00001 '
      f'ended before their registered episodes: lost 3 finished episodes '
      f"(ids 1-3); cut {wording.count(8, 'byte')} of torn records; split "
      f"'train' has 2 episodes.")


def test_append_after_a_shortened_shard_continues_after_what_is_left(
    tmp_path):
  directory, shards, ends = closed_in_shards_of_two(tmp_path / 'd')
  with open(shards[2], 'r+b') as f:
    f.truncate(ends[2][0] - 1)
  with pytest.warns(LostEpisodesWarning, match=r'lost 1 finished episode '
                    r'\(id 4\)'):
    writer = EpisodeWriter(directory, rlds_dirs.features(), name='ours',
                           append=True)
  with writer:
    assert writer.recovery.lost_episodes == (4,)
    assert writer.write(EPISODES[4]) == 4
  assert rlds_dirs.shard_lengths(directory) == [2, 2, 0, 1]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(directory), EPISODES)


def test_records_end_walks_the_length_fields(crashed):
  directory, ends = crashed
  path = os.path.join(directory, SHARD)
  assert [records.records_end(path, n) for n in range(6)] == [0] + ends
  assert records.records_end(path, 6) is None


def test_temporary_files_of_an_interrupted_replace_are_removed(crashed,
                                                              tmp_path):
  directory, _ = crashed
  copy = copy_of(directory, tmp_path)
  with open(os.path.join(copy, 'dataset_info.json.tmp'), 'w') as f:
    f.write('{"name": "ou')
  recovery = recover(copy)
  assert recovery.removed_files == ('dataset_info.json.tmp',)
  assert 'dataset_info.json.tmp' not in os.listdir(copy)


@pytest.mark.parametrize('append', [False, True])
def test_an_interrupted_creation_is_created_again(tmp_path, append):
  """Killed after features.json, before dataset_info.json."""
  (tmp_path / 'features.json').write_text('{"half": ')
  (tmp_path / 'features.json.tmp').write_text('{')
  with EpisodeWriter(tmp_path, rlds_dirs.features(), name='ours',
                     append=append) as writer:
    writer.write(EPISODES[0])
  assert sorted(os.listdir(tmp_path)) == [
      'dataset_info.json', 'features.json', SHARD]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path),
                                 EPISODES[:1])


def test_scan_counts_records_and_data_as_tfds(crashed):
  directory, ends = crashed
  scan = records.scan(os.path.join(directory, SHARD))
  assert (scan.records, scan.end, scan.size) == (5, ends[-1], ends[-1])
  assert scan.data_bytes == ends[-1] - 5 * wire.RECORD_OVERHEAD


def write_closed(directory):
  with EpisodeWriter(directory, rlds_dirs.features(), name='ours',
                     shard_episodes=2) as writer:
    for episode in EPISODES[:3]:
      writer.write(episode)
  return os.fspath(directory)


def edit_info(directory, change):
  path = os.path.join(directory, 'dataset_info.json')
  with open(path) as f:
    info = json.load(f)
  change(info)
  with open(path, 'w') as f:
    json.dump(info, f)


def _file_format(info):
  info['fileFormat'] = 'array_record'


def _template(info):
  info['splits'][0]['filepathTemplate'] = (
      '{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_X_OF_Y}')


def _no_template(info):
  del info['splits'][0]['filepathTemplate']


RECOVERY_ERRORS = {
    'no_dataset_info': (
        lambda d: os.remove(os.path.join(d, 'dataset_info.json')),
        '{d} is not a TFDS dataset directory: it has no dataset_info.json.'),
    'unparseable_dataset_info': (
        lambda d: open(os.path.join(d, 'dataset_info.json'), 'w').write('{"na'),
        '{d}/dataset_info.json cannot be parsed: '),
    'another_file_format': (
        lambda d: edit_info(d, _file_format),
        '{d} stores array_record files; only tfrecord datasets can be written '
        'to or recovered.'),
    'another_file_template': (
        lambda d: edit_info(d, _template),
        "{d}: split 'train' names its files {DATASET}-{SPLIT}.{FILEFORMAT}-"
        '{SHARD_X_OF_Y}; only {DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_INDEX} '
        '(TFDS SequentialWriter, EnvLogger) can be written to or recovered.'),
    'tfds_default_template': (
        lambda d: edit_info(d, _no_template),
        "{d}: split 'train' names its files as TFDS does by default; only "
        '{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_INDEX} (TFDS SequentialWriter, '
        'EnvLogger) can be written to or recovered.'),
    'registered_shard_missing': (
        lambda d: os.remove(os.path.join(d, SHARD)),
        '{d}: ours-train.tfrecord-00000 is registered in dataset_info.json '
        'but missing; its episodes are lost and TFDS cannot read the split.'),
    'gap_after_the_registered_shards': (
        lambda d: shutil.copy(os.path.join(d, SHARD),
                              os.path.join(d, 'ours-train.tfrecord-00003')),
        "{d}: shard files 3 do not follow the 2 registered shards of split "
        "'train' without a gap; they are not what a writer left."),
}


@pytest.mark.parametrize('case', list(RECOVERY_ERRORS))
def test_directories_that_cannot_be_recovered(tmp_path, case):
  change, message = RECOVERY_ERRORS[case]
  directory = write_closed(tmp_path / 'd')
  change(directory)
  before = rlds_dirs.files_bytes(directory)
  with pytest.raises(errors.DatasetDirectoryError) as error:
    recover(directory)
  assert str(error.value).startswith(message.replace('{d}', directory))
  assert rlds_dirs.files_bytes(directory) == before
  with pytest.raises(errors.DatasetDirectoryError):
    EpisodeWriter(directory, rlds_dirs.features(), name='ours', append=True)
  assert rlds_dirs.files_bytes(directory) == before


def test_append_needs_readable_features(tmp_path):
  directory = write_closed(tmp_path / 'd')
  os.remove(os.path.join(directory, 'features.json'))
  with pytest.raises(errors.DatasetDirectoryError) as error:
    EpisodeWriter(directory, rlds_dirs.features(), name='ours', append=True)
  assert str(error.value) == (
      f'{directory}/features.json cannot be read: FileNotFoundError: [Errno '
      f"2] No such file or directory: '{directory}/features.json'")


# Slow tier: a crash test (writers killed at random points). The default tier
# recovers the state a crash leaves (the `crashed` fixture) in
# test_a_torn_record_is_cut_at_any_offset, test_append_recovers_and_continues_
# the_ids and test_shards_closed_but_not_registered_are_registered.
@pytest.mark.slow
def test_sigkilled_writers_lose_no_finished_episode(tmp_path):
  """A few rounds of `benchmarks/rlds_write_crash.py` (it runs 20 and more):
  killed at random points, recovered, equal to an uninterrupted run."""
  summary = rlds_write_crash.run(rounds=3, seed=7, directory=tmp_path)
  rounds = summary['per_round']
  assert [r['lost'] for r in rounds] == [0, 0, 0]
  assert all(r['exact'] and r['ids_continue'] and r['readable_by_tfds']
             for r in rounds), rounds
  assert all(r['kept_in_flight'] in (0, 1) for r in rounds), rounds
  assert summary['episodes_recovered'] >= summary['episodes_finished'] > 0
  assert summary['values_equal_uninterrupted_run']
