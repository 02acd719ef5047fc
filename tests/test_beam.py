"""Apache Beam: ReadEpisodes, WriteToReverb and `push --runner`, on real runners.

The data is a TFDS directory written here in 4 record files (TFDS's own
writer, `DownloadConfig(num_shards=4)`). Servers are real Reverb servers: in
another process for the run on two worker processes, in this one for the
in-process runners. Tables are read back and compared as multisets of items
with what one `rlds_reverb.push` of the same data writes.
"""

import collections
import dataclasses
import json
import pathlib

import numpy as np
import pytest
import reverb
import tensorflow_datasets as tfds

beam = pytest.importorskip('apache_beam')

# pylint: disable=g-import-not-at-top,wrong-import-position
from apache_beam.testing import util as beam_testing
import rlds_reverb
from rlds_reverb import beam as rlds_beam
from rlds_reverb.beam import pipeline as pipeline_lib
from rlds_reverb.beam import read
from rlds_reverb.checkpoints import parts
from tests import built_servers
from tests import reverb_tables
from tests import rlds_data
from tests import servers_files
from tests.cli_data import features as _features
from tests.cli_runs import run_cli
from tests.cli_runs import run_cli_here
from tests.server_process import ServerProcess

NUM_FILES = 4
# 16 episodes of 3..9 steps, terminal and truncated.
EPISODES = [rlds_data.flat_episode(3 + (i * 5) % 7, seed=300 + i,
                                   terminal=i % 3 == 0) for i in range(16)]
# 0 fine, 1 flagged invalid, 2 malformed, 3 fine, 4 empty, 5 malformed.
MIXED = [rlds_data.flat_episode_with(3, 400),
         rlds_data.flat_episode_with(4, 401),
         rlds_data.flat_episode_with(4, 402, is_terminal={1: True}),
         rlds_data.flat_episode_with(5, 403),
         rlds_data.flat_episode_with(0, 404),
         rlds_data.flat_episode_with(2, 405, is_first={0: False})]
MIXED_INVALID = [False, True, False, False, False, False]
SKIPPED = (
    rlds_reverb.SkippedEpisode(1, 'flagged_invalid',
                               'flagged invalid in its metadata'),
    rlds_reverb.SkippedEpisode(
        2, 'terminal_not_last',
        'Terminal step must be the last step of an episode.', 1),
    rlds_reverb.SkippedEpisode(4, 'empty', 'no steps'),
    rlds_reverb.SkippedEpisode(
        5, 'episode_not_first',
        'First step of an episode must have is_first set.', 0),
)


def write_files(root, name, episodes, invalid=None) -> str:
  """A TFDS directory of `episodes`, in order, in NUM_FILES record files."""
  tfds.disable_progress_bar()
  examples = [(i, {'steps': steps, **({} if invalid is None
                                      else {'invalid': invalid[i]})})
              for i, steps in enumerate(episodes)]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name=name, version='1.0.0', features=_features(invalid is not None),
      split_datasets={'train': examples}, data_dir=str(root),
      disable_shuffling=True,
      download_config=tfds.download.DownloadConfig(num_shards=NUM_FILES))
  return str(builder.data_dir)


@pytest.fixture(scope='module')
def dirs(tmp_path_factory):
  root = tmp_path_factory.mktemp('tfds')
  found = {'data': write_files(root, 'sixteen_rlds', EPISODES),
           'mixed': write_files(root, 'mixed_rlds', MIXED, MIXED_INVALID)}
  for directory in found.values():
    assert len(list(pathlib.Path(directory).glob('*.tfrecord*'))) == NUM_FILES
  return found


@pytest.fixture(scope='module')
def served_tables(dirs):
  """Table 'a' signed for the data, 'm' for the mixed data, 'cartpole'."""
  return [
      reverb_tables.fifo_table('a', reverb_tables.signature_for(dirs['data'])),
      reverb_tables.fifo_table('m', reverb_tables.signature_for(dirs['mixed'])),
      reverb_tables.fifo_table('cartpole',
                               reverb_tables.signature_for('bundled:cartpole')),
  ]


def _key(element):
  """(position, bytes of every step field) of a `ReadEpisodes` element."""
  position, episode = element
  return (position,) + tuple(np.asarray(episode['steps'][name]).tobytes()
                             for name in sorted(episode['steps']))


@pytest.mark.parametrize('split, per_file, parts, episodes', [
    ('train', 1, NUM_FILES, slice(None)),
    ('train', None, read.MIN_PARTS, slice(None)),
    # Slow tier: pieces of files are read in the default tier by the
    # 'train[2:14]' case (2 a file).
    pytest.param('train', 3, 3 * NUM_FILES, slice(None),
                 marks=pytest.mark.slow),
    ('train[2:14]', 2, 2 * NUM_FILES, slice(2, 14)),
])
def test_read_episodes_gives_the_episodes_and_positions_of_load(
    dirs, split, per_file, parts, episodes):
  """Parts: whole files, or pieces of them; positions as `load` orders."""
  expected = [_key((i, {'steps': e}))
              for i, e in enumerate(EPISODES[episodes])]
  episodes = read.ReadEpisodes(dirs['data'], split, parts_per_file=per_file)
  assert len(episodes.parts) == parts
  assert [p.first_position for p in episodes.parts] == list(np.cumsum(
      [0] + [p.end - p.start for p in episodes.parts[:-1]]))
  with beam.Pipeline('DirectRunner') as pipeline:
    keys = pipeline | episodes | beam.Map(_key)
    beam_testing.assert_that(keys, beam_testing.equal_to(expected))


# Slow tier: a scale-out run (Beam's DirectRunner starting 2 worker
# processes). The default tier runs the same pipeline in-process in
# test_episode_i_goes_to_server_i_mod_s and
# test_retried_bundle_loses_nothing_and_repeats_only_that_bundle, and the
# command's Beam path in test_runner_failures_are_one_line_on_the_command_line.
@pytest.mark.slow
def test_two_worker_processes_write_what_one_push_writes(dirs):
  """`push --runner DirectRunner` on 2 processes vs one `rlds_reverb.push`."""
  with ServerProcess([{'name': name, 'kind': 'fifo',
                       'signed_for': dirs['data']}
                      for name in ('beam', 'push')]) as server:
    result = run_cli(
        'push', '--dataset', dirs['data'], '--server', server.address,
        '--table', 'beam', '--runner', 'DirectRunner',
        '--beam-option', 'direct_num_workers=2',
        '--beam-option', 'direct_running_mode=multi_processing',
        '--parts-per-file', '3', '--json')
    assert result.returncode == 0, result.stderr
    assert result.stderr == ''
    pushed = rlds_reverb.push(rlds_reverb.load(dirs['data']), server.address,
                              'push')
    summary = json.loads(result.stdout)
    assert (summary['episodes'], summary['trajectories'], summary['items'],
            summary['skipped_episodes']) == (
                pushed.episodes, pushed.trajectories, pushed.items, 0)
    from_beam = reverb_tables.drain(server.address, 'beam')
    from_push = reverb_tables.drain(server.address, 'push')
  assert len(from_push) == pushed.items > 0
  assert reverb_tables.as_multiset(from_beam) == reverb_tables.as_multiset(
      from_push)


class FlakySteps(dict):
  """Steps whose first read in this process fails: a worker crashing
  mid-bundle. Pickled with the element; the flag stays in the process."""
  failed = False

  def __getitem__(self, key):
    if not FlakySteps.failed:
      FlakySteps.failed = True
      raise RuntimeError('injected failure')
    return super().__getitem__(key)


def test_retried_bundle_loses_nothing_and_repeats_only_that_bundle(address):
  """BundleBasedDirectRunner retries a failed bundle; 3 bundles of 5."""
  episodes = [rlds_data.flat_episode(40, seed=500 + i) for i in range(15)]
  flaky = 7  # The third episode of the second bundle.
  elements = [(i, {'steps': FlakySteps(e) if i == flaky else e})
              for i, e in enumerate(episodes)]
  FlakySteps.failed = False
  pipeline = beam.Pipeline('BundleBasedDirectRunner')
  bundles = [pipeline | f'Bundle{b}' >> beam.Create(
      elements[5 * b:5 * b + 5], reshuffle=False) for b in range(3)]
  _ = (bundles | beam.Flatten()
       | rlds_beam.WriteToReverb(address, 'a', batch_steps=1))
  pipeline.run().wait_until_finish()
  assert FlakySteps.failed

  drained = collections.Counter(reverb_tables.drained_pairs(address, 'a'))
  expected = collections.Counter(reverb_tables.observation_pairs(episodes))
  assert not expected - drained  # Nothing lost.
  repeated = drained - expected
  failed_bundle = collections.Counter(
      reverb_tables.observation_pairs(episodes[5:10]))
  assert 0 < sum(repeated.values()) <= sum(failed_bundle.values())
  assert not repeated - failed_bundle  # Only the failed bundle's items.


def test_skipped_episodes_go_to_the_tagged_output(dirs, address):
  episodes = read.ReadEpisodes(dirs['mixed'])
  with beam.Pipeline('DirectRunner') as pipeline:
    outputs = pipeline | episodes | rlds_beam.WriteToReverb(
        address, 'm', on_invalid='skip', step_spec=episodes.step_spec)
    beam_testing.assert_that(outputs.skipped,
                             beam_testing.equal_to(list(SKIPPED)))
  assert (reverb_tables.drained_pairs(address, 'm') ==
          reverb_tables.observation_pairs([MIXED[0], MIXED[3]]))

  result = rlds_beam.push(dirs['mixed'], address, 'm', on_invalid='skip')
  assert result.skipped == SKIPPED
  assert (result.episodes, result.trajectories, result.items,
          result.skipped_episodes) == (2, 8, 6, 4)


def test_build_checkpoints_in_a_pipeline_of_ones_own(dirs, tmp_path):
  """`ReadEpisodes | BuildCheckpoints`, composed by hand (not `beam.build`),
  skipping as a push skips, 4 steps converted at once: server k's
  checkpoint holds what a push of its share writes; 'skipped' names the
  episodes left out, 'built' each server's counts."""
  episodes = read.ReadEpisodes(dirs['mixed'])
  with beam.Pipeline('DirectRunner') as pipeline:
    built = pipeline | episodes | rlds_beam.BuildCheckpoints(
        tmp_path / 'built', [built_servers.TABLE], episodes.step_spec,
        servers=2, on_invalid='skip', batch_steps=4,
        episodes=episodes.episodes)
    beam_testing.assert_that(built['skipped'],
                             beam_testing.equal_to(list(SKIPPED)),
                             label='Skipped')
    beam_testing.assert_that(
        built['built'] | beam.Map(lambda r: (r['server'], r['items'])),
        beam_testing.equal_to([(0, 2), (1, 4)]), label='Built')

  signature = reverb_tables.signature_for(dirs['mixed'])
  pushed = built_servers.pushed_per_server(dirs['mixed'], signature,
                                           on_invalid='skip')
  for server in range(2):
    root = parts.server_root(tmp_path / 'built', server, 2)
    built_servers.assert_same_items(
        built_servers.loaded_items(root, signature), pushed[server])
  assert [len(items) for items in pushed] == [2, 4]


def test_build_checkpoints_is_refused_on_dask(dirs):
  """DaskRunner drops `finish_bundle` outputs: the parts would never reach
  the merge, and each server would get an empty checkpoint marked done."""
  from apache_beam.runners.dask import dask_runner  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  episodes = read.ReadEpisodes(dirs['data'])
  pipeline = beam.Pipeline(runner=dask_runner.DaskRunner())
  with pytest.raises(rlds_reverb.OptionsError) as error:
    _ = pipeline | episodes | rlds_beam.BuildCheckpoints(
        '/nonexistent/built', ['replay'], episodes.step_spec, servers=2)
  assert str(error.value) == (
      'BuildCheckpoints cannot run on DaskRunner: DaskRunner drops the parts '
      'each bundle writes, and every server would get an empty checkpoint. '
      'rlds_reverb.beam.build builds on DaskRunner.')


def _pushed_by_hand(dirs, address, directory):
  """`beam.push`'s pipeline, by hand; the parts' records it leaves."""
  from rlds_reverb.beam import results  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  episodes = read.ReadEpisodes(dirs['data'], parts_per_file=2)
  writer = rlds_beam.WriteToReverb(address, 'a', step_spec=episodes.step_spec)
  pipeline = beam.Pipeline('DirectRunner')
  _ = (pipeline | beam.Create(episodes.parts)
       | beam.ParDo(writer.parts_dofn(episodes.image_storage))
       | beam.Map(pipeline_lib.recorded, str(directory)))
  result, _ = pipeline_lib.run(pipeline, 'DirectRunner')
  return episodes, results.read(str(directory)), result.metrics()


def test_a_part_lost_or_repeated_fails_the_push(dirs, address, tmp_path):
  """The records of a push, less the third part's (episodes 4-5 of 16), or
  with it twice, as DaskRunner's gathered results would hold a part a
  runner repeated (the files of local runners are per part: a retry
  rewrites its own). The build's guard is tested with a runner that drops
  a part: test_build_servers.py. Where the runner has counters (local
  runners), counts that the records and counters disagree on fail too."""
  episodes, records, metrics = _pushed_by_hand(dirs, address, tmp_path)
  third = [r for r in records if r['first'] == 4]
  lost = [r for r in records if r['first'] != 4]
  assert len(third) == 1 and len(lost) == len(records) - 1
  pushed = pipeline_lib.pushed_of(records, episodes.episodes, 'DirectRunner',
                                  1.0)
  pipeline_lib._check_counters(metrics, pushed, 'DirectRunner')  # pylint: disable=protected-access
  with pytest.raises(rlds_reverb.PipelineFailedError) as error:
    pipeline_lib._check_counters(  # pylint: disable=protected-access
        metrics, dataclasses.replace(pushed, items=pushed.items + 1),
        'DirectRunner')
  counts = (f'{pushed.episodes} episodes, {pushed.trajectories} '
            f'trajectories, {{}} items, 0 skipped_episodes')
  assert str(error.value) == (
      f'The Beam push on DirectRunner: its counters say '
      f'{counts.format(pushed.items)}, its parts\' records '
      f'{counts.format(pushed.items + 1)}.')
  for problem, given in (('missing episodes 4-5', lost),
                         ('episodes repeated 4-5', records + third)):
    with pytest.raises(rlds_reverb.PipelineFailedError) as error:
      pipeline_lib.pushed_of(given, episodes.episodes, 'DirectRunner', 1.0)
    assert str(error.value) == (
        f'The Beam push on DirectRunner: {problem} (of 16 expected): the '
        f'runner lost or repeated a part; the tables hold what its parts '
        f'confirmed ({sum(r["items"] for r in given):,} items, '
        f'{sum(r["episodes"] for r in given)} episodes).')


def test_push_counts_come_from_the_records_and_match_the_counters(
    dirs, address):
  """Every record once: the counts of one `rlds_reverb.push`; on
  DirectRunner its counters agree (`push` checks them)."""
  result = rlds_beam.push(dirs['data'], address, 'a', parts_per_file=2)
  pushed = rlds_reverb.push(rlds_reverb.load(dirs['data']), address, 'a')
  assert (result.episodes, result.trajectories, result.items) == (
      pushed.episodes, pushed.trajectories, pushed.items)


def _composed_push(source, address, table):
  """`ReadEpisodes | WriteToReverb`, composed by hand."""
  episodes = read.ReadEpisodes(source)
  pipeline = beam.Pipeline('DirectRunner')
  _ = pipeline | episodes | rlds_beam.WriteToReverb(
      address, table, step_spec=episodes.step_spec)
  pipeline_lib.run(pipeline, 'DirectRunner')


@pytest.mark.parametrize('push', [rlds_beam.push, _composed_push],
                         ids=['push', 'composed'])
def test_malformed_episode_fails_the_pipeline_naming_it(dirs, address, push):
  with pytest.raises(rlds_reverb.PipelineFailedError) as error:
    push(dirs['mixed'], address, 'm')
  assert str(error.value).startswith(
      'The Beam pipeline failed on DirectRunner: MalformedEpisodeError: '
      'Terminal step must be the last step of an episode. (episode 2, '
      'step 1)')
  assert '\n' not in str(error.value)


def test_episode_i_goes_to_server_i_mod_s(dirs, server):
  """The first server's table already holds an episode: the launcher warns
  of it once, before the pipeline writes (`TableNotEmptyWarning`)."""
  second = reverb_tables.start_server([reverb_tables.fifo_table(
      'a', reverb.Client(reverb_tables.address(server)).server_info(
          timeout=10)['a'].signature)])
  try:
    reverb.Client(reverb_tables.address(server)).reset('a')
    servers = [reverb_tables.address(server), reverb_tables.address(second)]
    seed = EPISODES[:1]
    rlds_reverb.push(rlds_data.as_rlds(seed), servers[0], 'a')
    held = (f"table 'a' at {servers[0]} already holds "
            f'{len(seed[0]["reward"]) - 1} items; this push adds to them')
    with pytest.warns(rlds_reverb.TableNotEmptyWarning, match=held):
      result = rlds_beam.push(dirs['data'], servers, 'a', parts_per_file=2)
    assert result.episodes == len(EPISODES)
    assert result.warnings == (held,)
    assert [reverb_tables.drained_pairs(s, 'a') for s in servers] == [
        reverb_tables.observation_pairs(EPISODES[0::2] + seed),
        reverb_tables.observation_pairs(EPISODES[1::2])]
  finally:
    second.stop()


@pytest.mark.slow
def test_a_servers_file_stands_for_its_servers(tmp_path, dirs, server,
                                               make_server):
  """Episode I into the file's server I % 2, as for the addresses given."""
  second = make_server([reverb_tables.fifo_table(
      'a', reverb_tables.signature_for(dirs['data']))])
  servers = [server, second]
  path = servers_files.write(tmp_path / 'servers.json',
                             [reverb_tables.address(s) for s in servers],
                             shuffled=True)
  result = rlds_beam.push(dirs['data'], path, 'a', parts_per_file=2)
  assert result.episodes == len(EPISODES)
  assert [reverb_tables.drained_pairs(s, 'a') for s in servers] == [
      reverb_tables.observation_pairs(EPISODES[0::2]),
      reverb_tables.observation_pairs(EPISODES[1::2])]


def test_a_missing_servers_file_fails_before_the_pipeline(tmp_path, dirs):
  gone = tmp_path / 'servers.json'
  for call in (lambda: rlds_beam.push(dirs['data'], gone, 'a'),
               lambda: rlds_beam.WriteToReverb([str(gone)], 'a')):
    with pytest.raises(rlds_reverb.ServersFileError,
                       match=f'^{gone}: no such servers file'):
      call()


@pytest.mark.parametrize('table, error', [
    ('missing', "TableNotFoundError: Reverb server at {address} has no "
                "table 'missing'"),
    ('cartpole', 'SignatureMismatchError: Replay buffer table signature '
                 'spec should match RLDS data spec.'),
])
def test_setup_checks_server_tables_and_signatures(dirs, address, table,
                                                   error):
  with pytest.raises(rlds_reverb.PipelineFailedError) as raised:
    rlds_beam.push(dirs['data'], address, table, timeout=1)
  assert error.format(address=address) in str(raised.value)
  assert reverb_tables.table_size(reverb.Client(address), 'a') == 0


def test_servers_are_checked_before_the_pipeline(dirs, address,
                                                 refused_address,
                                                 silent_address):
  """Malformed: on any runner. Refused: on a local runner, at once; silent
  (not a byte back to gRPC's preface): after the timeout."""
  with pytest.raises(rlds_reverb.AddressError,
                     match="server address 'localhost' is not HOST:PORT"):
    rlds_beam.push(dirs['data'], [address, 'localhost'], 'a',
                   runner='DataflowRunner')
  with pytest.raises(rlds_reverb.AddressError,
                     match="server address '18231' is not HOST:PORT"):
    rlds_beam.WriteToReverb('18231', 'a')
  with pytest.raises(rlds_reverb.ServerUnavailableError) as refused:
    rlds_beam.push(dirs['data'], [address, refused_address], 'a',
                   timeout=3600)
  assert str(refused.value) == (
      f'No Reverb server at {refused_address}: the connection was refused '
      '(nothing listens on that port).')
  with pytest.raises(rlds_reverb.ServerUnavailableError) as silent:
    rlds_beam.push(dirs['data'], [address, silent_address], 'a', timeout=1)
  assert str(silent.value) == (
      f'No Reverb server answered at {silent_address} within 1 s.')
  assert reverb_tables.table_size(reverb.Client(address), 'a') == 0


def test_bad_arguments():
  with pytest.raises(ValueError, match="WriteToReverb takes on_invalid="
                                       "'raise' or 'skip'"):
    rlds_beam.WriteToReverb('localhost:1', 'a', on_invalid='stop')
  with pytest.raises(ValueError, match='parts_per_file must be >= 1, got 0'):
    read.ReadEpisodes('bundled:cartpole', parts_per_file=0)
  with pytest.raises(rlds_reverb.PipelineFailedError,
                     match='ended on DataflowRunner in state CANCELLED, not '
                           'DONE'):
    pipeline_lib.check_finished(
        beam.runners.runner.PipelineState.CANCELLED, 'DataflowRunner')


def test_runner_failures_are_one_line_on_the_command_line(dirs, address):
  """Beam logs a failed bundle with its traceback before the pipeline's
  error reaches us: without --debug, only our line is on stderr."""
  malformed = run_cli('push', '--dataset', dirs['mixed'], '--server', address,
                      '--table', 'm', '--runner', 'DirectRunner')
  assert malformed.returncode == 1
  assert malformed.stderr.splitlines() == [
      'rlds-reverb: error: The Beam pipeline failed on DirectRunner: '
      'MalformedEpisodeError: Terminal step must be the last step of an '
      'episode. (episode 2, step 1)']
  unknown = run_cli_here('push', '--dataset', dirs['mixed'], '--server',
                         address, '--table', 'm', '--runner', 'NoSuchRunner')
  assert unknown.returncode == 2
  [line] = unknown.stderr.splitlines()
  assert line.startswith('rlds-reverb: error: --runner: Unexpected pipeline '
                         'runner: NoSuchRunner. Valid values are ')
