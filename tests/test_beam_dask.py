"""Beam on a real cluster engine: `beam.push` and `beam.build` on a Dask
`LocalCluster` of 2 worker processes (Beam's DaskRunner); the command line
on Dask is tests/test_beam_dask_commands.py.

Compared with one process: the tables a push fills hold the items one
`rlds_reverb.push` writes; each server's checkpoint, loaded by a real
`reverb.Server`, holds what a push of its episodes (I % S == k) writes. A
worker killed mid-build is rerun by Dask and the checkpoints stay whole.
The default tier checks the same pipelines on DirectRunner (test_beam.py,
test_build_servers.py), and the completeness guard there.
"""

import json
import os
import signal
import threading
import time

import pytest

pytest.importorskip('apache_beam')
distributed = pytest.importorskip('dask.distributed')

# pylint: disable=g-import-not-at-top,wrong-import-position
import rlds_reverb
from rlds_reverb import beam as rlds_beam
from rlds_reverb import checkpoints
from rlds_reverb import tables
from rlds_reverb import dask_worker
from rlds_reverb.checkpoints import parts
from tests import built_servers
from tests.built_servers import signature  # pylint: disable=unused-import
from tests.built_servers import source  # pylint: disable=unused-import
from tests import export_data
from tests import reverb_tables
from tests.cli_runs import run_cli_here

pytestmark = pytest.mark.slow
TABLE = built_servers.TABLE
LENGTHS = built_servers.LENGTHS


@pytest.fixture(scope='module')
def cluster():
  """A LocalCluster of 2 worker processes, one thread each."""
  with dask_worker.local_cluster(2) as address:
    yield address


def on_dask(address):
  return dict(runner='dask', options=[('dask_client_address', address)])


def test_push_on_dask_writes_what_one_push_writes(cluster, source,
                                                  signature):
  server = reverb_tables.start_server(
      [tables.table(tables.fifo(name, max_size=10_000), signature)
       for name in ('dask', 'push')])
  try:
    address = reverb_tables.address(server)
    result = rlds_beam.push(source, address, 'dask', parts_per_file=2,
                            **on_dask(cluster))
    pushed = rlds_reverb.push(rlds_reverb.load(source), address, 'push')
    assert (result.episodes, result.trajectories, result.items,
            result.skipped_episodes) == (pushed.episodes, pushed.trajectories,
                                         pushed.items, 0)
    from_dask = reverb_tables.drain(server, 'dask')
    from_push = reverb_tables.drain(server, 'push')
  finally:
    server.stop()
  assert len(from_push) == pushed.items > 0
  assert reverb_tables.as_multiset(from_dask) == reverb_tables.as_multiset(
      from_push)


def test_the_push_command_runs_on_a_scheduler_given(cluster, source,
                                                   signature):
  """`push --runner dask --dask-scheduler ADDRESS`: the pipeline runs on the
  cluster named (this module's), which the command leaves running; its one
  line of JSON, nothing on stderr. (The quiet workers of a cluster the
  command starts: test_beam_dask_commands.py, with `build`.)"""
  server = reverb_tables.start_server([tables.table(TABLE, signature)])
  try:
    pushed = run_cli_here(
        'push', '--dataset', source, '--server', reverb_tables.address(server),
        '--table', TABLE.name, '--runner', 'dask', '--dask-scheduler',
        cluster, '--json')
    held = reverb_tables.table_size(reverb_tables.client_of(server),
                                    TABLE.name)
  finally:
    server.stop()
  assert (pushed.returncode, pushed.stderr) == (0, '')
  assert held == sum(LENGTHS) - len(LENGTHS)
  assert json.loads(pushed.stdout)['items'] == held
  with distributed.Client(cluster, timeout=10) as client:
    assert len(client.scheduler_info()['workers']) == 2


@pytest.mark.parametrize('servers', [2, 3])
def test_build_on_dask_holds_what_a_push_of_each_share_writes(
    cluster, source, signature, tmp_path, servers):
  results = rlds_beam.build(source, tmp_path / 'built', [TABLE],
                            servers=servers, parts_per_file=2,
                            **on_dask(cluster))
  assert_built(results, tmp_path / 'built', source, signature, servers)


@pytest.mark.parametrize('kind', [
    dict(n=3, discount=0.9),
    dict(policy_info_fn=export_data.policy_info)], ids=['nstep', 'policy_info'])
def test_build_on_dask_of_transitions_and_policy_info_is_one_process_s(
    cluster, source, tmp_path, kind):
  """Each server holds a one-process build of its share
  (`build_nstep_checkpoint`, `build_checkpoint(policy_info_fn=...)`)."""
  signature = built_servers.signature_for(source, **kind)
  results = rlds_beam.build(source, tmp_path / 'built', [TABLE], servers=2,
                            parts_per_file=2, **kind, **on_dask(cluster))
  want = built_servers.built_share_items(source, tmp_path / 'one', signature,
                                         **kind)
  for server, result in enumerate(results):
    got = built_servers.loaded_items(
        parts.server_root(tmp_path / 'built', server, 2), signature)
    built_servers.assert_same_items(got, want[server])
    assert result.items == len(got) > 0


def assert_built(results, directory, source, signature, servers):
  """Each server's checkpoint holds a push of its share; counts exact."""
  pushed = built_servers.pushed_per_server(source, signature, servers)
  assert len(results) == servers
  for server, result in enumerate(results):
    root = parts.server_root(directory, server, servers)
    found = checkpoints.find(root)
    assert result.path == found.path(found.newest)
    got = built_servers.loaded_items(root, signature)
    built_servers.assert_same_items(got, pushed[server])
    assert result.items == len(got)
    assert result.episodes == len(LENGTHS[server::servers])
    assert result.trajectories == sum(LENGTHS[server::servers])
  assert not os.path.exists(os.path.join(directory, parts.PARTS))


def test_a_worker_killed_mid_build_is_rerun_and_nothing_repeats(
    source, signature, tmp_path):
  """SIGKILL of a worker running a task once the first part is whole: Dask
  reruns its task elsewhere; each server's merge finds every episode once."""
  directory = tmp_path / 'built'
  with dask_worker.local_cluster(2) as address:
    client = distributed.Client(address)
    pids = client.run(os.getpid)
    done = {}
    thread = threading.Thread(target=lambda: done.update(results=(
        rlds_beam.build(source, directory, [TABLE], servers=2,
                        parts_per_file=4, **on_dask(address)))))
    thread.start()
    killed = _kill_a_busy_worker_once_a_part_is_whole(directory, client,
                                                      pids, thread)
    thread.join(timeout=120)
    client.close()
  assert killed, 'the build ended before a worker was killed'
  assert not thread.is_alive() and 'results' in done
  assert_built(done['results'], directory, source, signature, 2)


def _kill_a_busy_worker_once_a_part_is_whole(directory, client, pids,
                                             thread) -> bool:
  """SIGKILLs a worker that runs a task while the pipeline runs; whether
  it did."""
  deadline = time.monotonic() + 60
  while thread.is_alive() and time.monotonic() < deadline:
    whole = [name for _, _, names in os.walk(directory / parts.PARTS)
             for name in names if name.endswith(parts.SUFFIX)]
    busy = [worker for worker, tasks in client.processing().items()
            if tasks and worker in pids]
    if whole and busy:
      os.kill(pids[busy[0]], signal.SIGKILL)
      return thread.is_alive()
    time.sleep(0.02)
  return False


def test_direct_runner_on_two_processes_names_every_checkpoint(
    source, signature, tmp_path):
  """DirectRunner's multi_processing mode lost a path carried by metrics."""
  results = rlds_beam.build(
      source, tmp_path / 'built', [TABLE], servers=2, parts_per_file=2,
      options=[('direct_num_workers', '2'),
               ('direct_running_mode', 'multi_processing')])
  assert_built(results, tmp_path / 'built', source, signature, 2)
