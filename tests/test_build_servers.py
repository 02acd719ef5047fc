"""One checkpoint per server, built by many workers: episode I -> server
I % S; each server loads its own and holds what a push of its episodes
writes.

Built by local processes (`parallel.build_shards`) and by Beam's
DirectRunner (`rlds_reverb.beam.build`); each checkpoint is loaded by a
real `reverb.Server`, drained, and compared item by item with a push of
episodes I % S == k into a server. Parts (`checkpoints.parts`) that are
half-written or missing are never merged.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top
from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top
from rlds_reverb.errors import CheckpointWriteError  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top

# Steps per episode: short ones (no item) too, over several record files.
LENGTHS = [1, 7, 30, 2, 40, 3, 25, 11, 39, 15, 6, 35, 4, 28]
SERVERS = 2
TABLE = tables.fifo('replay', max_size=10_000)


@pytest.fixture(scope='module')
def source(tmp_path_factory):
  return export_data.write_source(
      tmp_path_factory.mktemp('source'),
      [export_data.nested_episode(i, n) for i, n in enumerate(LENGTHS)])


@pytest.fixture(scope='module')
def signature(source):
  data = rlds_reverb.load(source)
  return specs.table_signature(specs.trajectory_spec(
      specs.step_format(data).spec))


def _keep(server, servers):
  return lambda index, episode: index % servers == server


def _episode(index, episode):
  del index
  return episode


@pytest.fixture(scope='module')
def pushed(source, signature):
  """Per server k, the items a push of episodes I % S == k leaves."""
  items = []
  for server_index in range(SERVERS):
    data = rlds_reverb.load(source).enumerate().filter(
        _keep(server_index, SERVERS)).map(_episode)
    server = reverb_tables.start_server([tables.table(TABLE, signature)])
    rlds_reverb.push(data, reverb_tables.address(server), TABLE.name)
    items.append(reverb_tables.drain(server, TABLE.name))
    server.stop()
  return items


def loaded_items(root, signature):
  """What a real server loading `root`'s newest checkpoint holds."""
  server = reverb.Server(
      [tables.table(TABLE, signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(os.fspath(root)))
  try:
    return reverb_tables.drain(server, TABLE.name)
  finally:
    server.stop()


def assert_same_items(got, want):
  assert [p for p, _ in got] == [p for p, _ in want]
  reverb_tables.assert_same_flat_items(
      [tf.nest.flatten(d) for _, d in got], [tf.nest.flatten(d)
                                             for _, d in want])


def test_local_workers_build_one_checkpoint_per_server(
    source, signature, pushed, tmp_path):
  results = parallel.build_shards(source, tmp_path / 'built', [TABLE],
                                  workers=2, servers=SERVERS)

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
