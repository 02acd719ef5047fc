"""A source of 14 episodes, the items a push of each server's share leaves,
and what a real server loading a built checkpoint holds: what the tests of
builds with one checkpoint per server compare (local workers, Beam's
DirectRunner, Dask).
"""

import os

import pytest
import reverb
import tensorflow as tf

import rlds_reverb
from rlds_reverb import specs
from rlds_reverb import tables
from tests import export_data
from tests import reverb_tables

# Steps per episode: short ones (no item) too, over several record files.
LENGTHS = [1, 7, 30, 2, 40, 3, 25, 11, 39, 15, 6, 35, 4, 28]
SERVERS = 2
TABLE = tables.fifo('replay', max_size=10_000)


def write_source(directory) -> str:
  return export_data.write_source(
      directory, [export_data.nested_episode(i, n)
                  for i, n in enumerate(LENGTHS)])


def signature_of(source):
  data = rlds_reverb.load(source)
  return specs.table_signature(specs.trajectory_spec(
      specs.step_format(data).spec))


# Module fixtures for the test files that import them: the source written
# once per module, and its table signature.
@pytest.fixture(scope='module')
def source(tmp_path_factory):
  return write_source(tmp_path_factory.mktemp('source'))


@pytest.fixture(scope='module')
def signature(source):  # pylint: disable=redefined-outer-name
  return signature_of(source)


def _keep(server, servers):
  return lambda index, episode: index % servers == server


def _episode(index, episode):
  del index
  return episode


def pushed_per_server(source, signature, servers: int = SERVERS,
                      **push_settings):
  """Per server k, the items a push of episodes I % S == k leaves."""
  items = []
  for server_index in range(servers):
    data = rlds_reverb.load(source).enumerate().filter(
        _keep(server_index, servers)).map(_episode)
    server = reverb_tables.start_server([tables.table(TABLE, signature)])
    rlds_reverb.push(data, reverb_tables.address(server), TABLE.name,
                     **push_settings)
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


def share(source, server: int, servers: int):
  """Episodes I % S == k of `source`, in order."""
  return rlds_reverb.load(source).enumerate().filter(
      _keep(server, servers)).map(_episode)


def signature_for(source, **kind):
  """The tables' signature of a build of `source` with `kind` (`n`,
  `discount`, `policy_info_fn`)."""
  from rlds_reverb import build  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  nstep = (kind['n'], kind['discount']) if 'n' in kind else None
  step_spec = specs.step_format(rlds_reverb.load(source)).spec
  return build.ItemKind(policy_info_fn=kind.get('policy_info_fn'),
                        nstep=nstep).signature(step_spec)


def built_share_items(source, directory, signature, servers: int = SERVERS,
                      **kind):
  """Per server k, what a real server holds after loading a one-process
  build of episodes I % S == k: `build_nstep_checkpoint` with `n` and
  `discount`, else `build_checkpoint` (with `policy_info_fn`)."""
  items = []
  for server in range(servers):
    root = os.path.join(directory, f'share-{server}')
    if 'n' in kind:
      rlds_reverb.build_nstep_checkpoint(share(source, server, servers),
                                         root, [TABLE], **kind)
    else:
      rlds_reverb.build_checkpoint(share(source, server, servers), root,
                                   [TABLE], **kind)
    items.append(loaded_items(root, signature))
  return items
