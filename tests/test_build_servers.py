"""One checkpoint per server, built by many workers: episode I -> server
I % S; each server loads its own and holds what a push of its episodes
writes.

Built by local processes (`parallel.build_shards`) and by Beam's
DirectRunner (`rlds_reverb.beam.build`); each checkpoint is loaded by a
real `reverb.Server`, drained, and compared item by item with a push of
episodes I % S == k into a server. Parts (`checkpoints.parts`) that are
half-written or missing are never merged.
"""

import dataclasses
import os
import shutil
import subprocess
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top
from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top
from rlds_reverb.errors import CheckpointWriteError  # pylint: disable=g-import-not-at-top
from rlds_reverb.push_options import OnInvalid  # pylint: disable=g-import-not-at-top
from tests import extras  # pylint: disable=g-import-not-at-top
from tests import built_servers  # pylint: disable=g-import-not-at-top
from tests.built_servers import signature  # pylint: disable=unused-import,g-import-not-at-top
from tests.built_servers import source  # pylint: disable=unused-import,g-import-not-at-top
from tests import process_tree  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests import warm_process
from tests.cli_runs import HANG_GUARD_S  # pylint: disable=g-import-not-at-top
from tests import warned as warned_lib  # pylint: disable=g-import-not-at-top

LENGTHS = built_servers.LENGTHS
SERVERS = built_servers.SERVERS
TABLE = built_servers.TABLE
loaded_items = built_servers.loaded_items
assert_same_items = built_servers.assert_same_items


@pytest.fixture(scope='module')
def pushed(source, signature):
  return built_servers.pushed_per_server(source, signature)


@pytest.mark.parametrize('workers', [1, 2], ids=['in_process', 'workers'])
def test_local_workers_build_one_checkpoint_per_server(
    source, signature, pushed, tmp_path, workers):
  """Two workers write parts and merge them; one (this process) writes
  each server's checkpoint as its episodes come: the same items."""
  results = parallel.build_shards(source, tmp_path / 'built', [TABLE],
                                  workers=workers, servers=SERVERS)

  assert len(results) == SERVERS
  for server_index, result in enumerate(results):
    root = parts.server_root(tmp_path / 'built', server_index, SERVERS)
    found = checkpoints.find(root)
    assert result.path == found.path(found.newest)
    got = loaded_items(root, signature)
    assert_same_items(got, pushed[server_index])
    assert result.items == len(got)
    assert result.episodes == len(LENGTHS[server_index::SERVERS])
    assert result.trajectories == sum(LENGTHS[server_index::SERVERS])
  assert not os.path.exists(tmp_path / 'built' / parts.PARTS)


def test_servers_built_in_one_process_share_the_skips_as_the_episodes(
    tmp_path, monkeypatch):
  """Episode I and its skip go to server I % S; each server's checkpoint
  holds what a build of its kept episodes alone holds; a server whose
  episodes were all skipped gets an empty one. Episode 0 is longer than a
  push confirms at once (`cadence.CONFIRM_EVERY_ROWS`) and blocks are one
  row: server 0's blocks are written as its episodes come and at the end
  (as 64K-row blocks are on real data)."""
  from rlds_reverb import build  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.checkpoints import plan  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import cadence  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  monkeypatch.setattr(plan, 'BLOCK_ROWS', 1)
  episode = rlds_data.flat_episode_with
  long = cadence.CONFIRM_EVERY_ROWS + 5
  # 0 fine, 1 flagged invalid, 2 malformed, 3 empty, 4 fine.
  episodes = [episode(long, 0), episode(4, 1),
              episode(4, 2, is_terminal={1: True}), episode(0, 3),
              episode(5, 4)]
  data = rlds_data.as_rlds(
      episodes, [{'invalid': np.bool_(i == 1)} for i in range(5)])
  job = build.CheckedBuild(data, [TABLE], on_invalid=OnInvalid.SKIP)
  job.check()

  results = job.write_servers(os.fspath(tmp_path / 'built'), SERVERS)

  assert [[(e.position, e.kind) for e in result.skipped]
          for result in results] == [[(2, 'terminal_not_last')],
                                     [(1, 'flagged_invalid'), (3, 'empty')]]
  assert [(r.episodes, r.trajectories, r.items) for r in results] == [
      (2, long + 5, long - 1 + 4), (0, 0, 0)]
  signature = specs.table_signature(specs.trajectory_spec(
      specs.step_format(data).spec))
  rlds_reverb.build_checkpoint(
      rlds_data.as_rlds([episodes[0], episodes[4]]), tmp_path / 'alone',
      [TABLE])
  assert_same_items(
      loaded_items(parts.server_root(tmp_path / 'built', 0, SERVERS),
                   signature),
      loaded_items(tmp_path / 'alone', signature))
  assert loaded_items(parts.server_root(tmp_path / 'built', 1, SERVERS),
                      signature) == []


@pytest.mark.slow
@extras.needs('beam')
def test_beam_builds_one_checkpoint_per_server(source, signature, pushed,
                                               tmp_path):
  from rlds_reverb import beam as rlds_beam  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  results = rlds_beam.build(source, tmp_path / 'built', [TABLE],
                            servers=SERVERS, parts_per_file=2)

  for server_index, result in enumerate(results):
    root = parts.server_root(tmp_path / 'built', server_index, SERVERS)
    found = checkpoints.find(root)
    assert result.path == found.path(found.newest)
    got = loaded_items(root, signature)
    assert_same_items(got, pushed[server_index])
    assert result.items == len(got)
    assert result.episodes == len(LENGTHS[server_index::SERVERS])
  assert not os.path.exists(tmp_path / 'built' / parts.PARTS)


def _built_by_hand(source, directory, mangle):
  """`beam.build`'s pipeline, with `mangle` on the (server, part record)
  pairs before the merge: a runner that loses or repeats a part."""
  import apache_beam as beam  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.beam import build_checkpoints  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.beam import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.beam import read  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  episodes = read.ReadEpisodes(source, parts_per_file=2)
  builder = build_checkpoints.BuildCheckpoints(
      directory, [TABLE], episodes.step_spec, servers=SERVERS,
      episodes=episodes.episodes)
  pipeline = beam.Pipeline('DirectRunner')
  _ = builder.merged(
      pipeline | beam.Create(episodes.parts)
      | beam.ParDo(builder.parts_dofn())
      | beam.FlatMap(mangle))
  pipeline_lib.run(pipeline, 'DirectRunner')


@extras.needs('beam')
@pytest.mark.parametrize('copies, problem', [
    (0, 'missing episodes 3'), (2, 'episodes repeated 3')])
def test_a_server_missing_or_repeating_a_part_gets_no_checkpoint(
    source, tmp_path, copies, problem):
  """Server 1's record of the part of episodes 2-3 dropped (or doubled)
  between the workers and the merge: no DONE, no checkpoint, no parts."""
  from rlds_reverb.errors import PipelineFailedError  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  def mangle(pair):
    server, record = pair
    return [pair] * (copies if server == 1 and 3 in record['positions']
                     else 1)

  with pytest.raises(PipelineFailedError) as error:
    _built_by_hand(source, tmp_path / 'built', mangle)
  assert str(error.value) == (
      f'The Beam pipeline failed on DirectRunner: PipelineFailedError: '
      f'Server 1 of 2: {problem} (of 7 expected): the runner lost or '
      f'repeated a part; its checkpoint was not written.')
  root = parts.server_root(tmp_path / 'built', 1, SERVERS)
  assert not checkpoints.find(root).complete
  assert not os.path.exists(root) or not os.listdir(root)
  # The merge removed the parts it was handed; the lost one, named by no
  # record, is left to `beam.build`'s clean-up after the pipeline.
  assert len(parts.find(tmp_path / 'built', 1, SERVERS)) == (copies == 0)


@extras.needs('beam')
def test_beam_builds_nstep_transitions_as_one_process_does(source, tmp_path):
  """n=3 transitions: each server holds a one-process n-step build of its
  share (the Dask run of this and of policy_info_fn: test_beam_dask.py)."""
  from rlds_reverb import beam as rlds_beam  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  kind = dict(n=3, discount=0.9)
  signature = built_servers.signature_for(source, **kind)
  results = rlds_beam.build(source, tmp_path / 'built', [TABLE],
                            servers=SERVERS, **kind)
  want = built_servers.built_share_items(source, tmp_path / 'one', signature,
                                         **kind)
  for server_index, result in enumerate(results):
    got = loaded_items(parts.server_root(tmp_path / 'built', server_index,
                                         SERVERS), signature)
    assert_same_items(got, want[server_index])
    assert result.items == len(got) == sum(
        n - 1 for n in LENGTHS[server_index::SERVERS])


@extras.needs('beam')
@pytest.mark.parametrize('kind', [dict(n=3), dict(discount=0.9)])
def test_beam_build_takes_n_and_discount_together(source, tmp_path, kind):
  from rlds_reverb import beam as rlds_beam  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with pytest.raises(ValueError) as error:
    rlds_beam.build(source, tmp_path / 'built', [TABLE], servers=SERVERS,
                    **kind)
  assert str(error.value) == 'n-step transitions need both n and discount.'
  assert not os.path.exists(tmp_path / 'built')


@extras.needs('beam')
def test_a_build_whose_runner_lost_a_merge_fails_naming_the_server():
  """The merges' records without server 1's (a runner that never ran it):
  no results, and which server's checkpoint is not complete."""
  from rlds_reverb.beam import pipeline as pipeline_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import PipelineFailedError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with pytest.raises(PipelineFailedError) as error:
    pipeline_lib._built_of([{'server': 0}], 3, 1.0, (), 'DirectRunner')  # pylint: disable=protected-access
  assert str(error.value) == (
      'The Beam build on DirectRunner ended without the merge of server(s) '
      '1, 2 of 3: the runner lost it; no checkpoint of theirs is complete.')


@pytest.fixture(scope='module')
def built_shares(source, tmp_path_factory):
  """Two workers' shares, each a part per server (built in this process),
  and where: built once for the tests that take copies (`written_parts`)."""
  from rlds_reverb import build_parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  directory = tmp_path_factory.mktemp('shares')
  shares = [build_parts.build_share(
      build_parts.share_ranges(source, 'train', None, index, 2),
      directory, [TABLE], SERVERS) for index in range(2)]
  return shares, directory


def written_parts(built_shares, directory):
  """A copy of `built_shares`' parts in `directory`, and its shares naming
  the copies: a test may damage, rename or merge them."""
  shares, built = built_shares
  shutil.copytree(built, directory, dirs_exist_ok=True)
  return [dataclasses.replace(share, parts={
      server: os.path.join(directory, os.path.relpath(path, built))
      for server, path in share.parts.items()}) for share in shares]


@extras.needs('beam')
def test_a_merge_run_again_after_its_worker_died_leaves_one_checkpoint(
    built_shares, signature, pushed, tmp_path):
  """Dask reruns a merge whose worker died, before its DONE (an unfinished
  checkpoint left in the server's root) or after (its record written):
  either way one checkpoint, holding what a push of the share writes."""
  from rlds_reverb.beam import build_checkpoints  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.checkpoints import directories  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  shares = written_parts(built_shares, tmp_path)
  element = (1, [dict(path=share.parts[1], positions=share.positions[1],
                      skipped=[]) for share in shares])
  root = parts.server_root(tmp_path, 1, SERVERS)
  killed = os.path.join(root, '2026-11-28T00:00:00.000000000+00:00')
  os.makedirs(killed)
  with open(os.path.join(killed, directories.BUILD_MARK), 'w') as f:
    f.write('{}')
  assert checkpoints.find(root).unfinished

  first = build_checkpoints.merge_records(element, str(tmp_path), SERVERS,
                                          shares[0].settings, len(LENGTHS))
  again = build_checkpoints.merge_records(element, str(tmp_path), SERVERS,
                                          shares[0].settings, len(LENGTHS))

  assert again == first
  found = checkpoints.find(root)
  assert (len(found.complete), found.unfinished) == (1, ())
  assert found.path(found.newest) == first['path']
  assert_same_items(loaded_items(root, signature), pushed[1])


def test_a_part_is_merged_only_whole(built_shares, signature, pushed,
                                     tmp_path):
  shares = written_parts(built_shares, tmp_path)
  settings = shares[0].settings
  whole = shares[0].parts[0]
  # Server 0's part of the second share, as its worker left it when killed
  # before the rename: chunks, and the items file under its temporary name.
  half = shares[1].parts[0]
  os.replace(half, half + '.tmp')

  assert parts.find(tmp_path, 0, SERVERS) == [whole]
  with pytest.raises(CheckpointWriteError, match='Cannot read the part'):
    parts.merge([whole, half], tmp_path / 'merged', settings)
  assert not checkpoints.find(os.fspath(tmp_path / 'merged')).complete

  os.replace(half + '.tmp', half)
  merged = parts.merge(parts.find(tmp_path, 0, SERVERS),
                       tmp_path / 'merged', settings)
  assert_same_items(loaded_items(tmp_path / 'merged', signature), pushed[0])
  assert merged.parts == 2

  with pytest.raises(CheckpointWriteError, match=r'Episodes \d+ to \d+ are '
                     r'in two parts'):
    parts.merge([whole, whole], tmp_path / 'twice', settings)


def test_a_part_whose_chunks_are_cut_short_is_refused(built_shares, tmp_path):
  shares = written_parts(built_shares, tmp_path)
  path = shares[0].parts[1]
  chunks = path[:-len(parts.SUFFIX)] + parts.CHUNKS_SUFFIX
  size = os.path.getsize(chunks)
  with open(chunks, 'r+b') as f:
    f.truncate(size - 1)

  with pytest.raises(CheckpointWriteError, match=(
      f'The part {path} has {size:,} bytes of chunks; {chunks} holds '
      f'{size - 1:,}: the part is damaged.')):
    parts.merge([path], tmp_path / 'merged', shares[0].settings)
  assert not os.path.exists(tmp_path / 'merged') or not checkpoints.find(
      os.fspath(tmp_path / 'merged')).complete


@pytest.mark.slow
def test_a_server_too_small_keeps_its_newest_items_and_warns(
    source, signature, pushed, tmp_path):
  small = tables.fifo('replay', max_size=40)

  with pytest.warns(rlds_reverb.CapacityWarning) as warned:
    results = parallel.build_shards(source, tmp_path / 'built', [small],
                                    workers=1, servers=SERVERS)

  texts = warned_lib.ours(warned)
  for server_index, result in enumerate(results):
    made = len(pushed[server_index])
    assert result.evicted == (('replay', made - 40),)
    assert texts[server_index].startswith(
        f"server {server_index} of {SERVERS}: table 'replay' holds at most "
        f'40 items; this build makes {made:,}, so the checkpoint keeps the '
        f'newest 40')
    root = parts.server_root(tmp_path / 'built', server_index, SERVERS)
    got = loaded_items(root, signature)
    assert_same_items(got, pushed[server_index][-40:])


def test_killed_build_leaves_no_worker_running(source, tmp_path):
  """`kill -9` of `build --workers 2 --servers 2` as soon as its workers
  exist: they (still starting, or tied already) and multiprocessing's
  resource tracker end too, instead of waiting forever for work."""
  build = warm_process.WarmPopen(
      [sys.executable, '-m', 'rlds_reverb', 'build', '--dataset', source,
       '--out', tmp_path / 'built', '--table', TABLE.name, '--workers', '2',
       '--servers', str(SERVERS)],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  procs = process_tree.wait_children(build.pid, 2, HANG_GUARD_S,
                                     like='spawn_main')
  _, stderr, left = process_tree.kill_parent(build, procs, HANG_GUARD_S)
  assert left == [], stderr
