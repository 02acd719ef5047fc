"""Two checkpoints compared item by item: a server's after a push, and a
built one, each loaded by a real server and drained.

    item_slices(checkpoint)    per table, per item in insertion order: per
                               column its chunk slices (offset, rows, chunk
                               rows, chunk's first step)
    pushed_checkpoint(...)     a server filled by a push, checkpointed, drained
    assert_same(pushed, built) slices, chunk lengths, chunk bytes (within
                               CHUNK_BYTES_TOLERANCE), episode counts, items
"""

import os

import reverb

from rlds_reverb import checkpoints
from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import schema
from tests import export_data
from tests import reverb_tables

# Built chunks hold the bytes of a push's within 1% (`checkpoints.chunk_bytes`:
# the stored bytes of each distinct chunk's tensors, what the server holds in
# memory): both snappy-compress each chunk, with two implementations of it.
CHUNK_BYTES_TOLERANCE = 0.01


def item_slices(checkpoint: str):
  """Per table, per item (in insertion order): per column, its slices as
  (offset, rows, chunk rows, chunk's first step); and chunk counts."""
  chunks = {}
  for record in records.read_records(os.path.join(checkpoint,
                                                  directories.CHUNKS)):
    chunk = schema.parse('ChunkData', record)
    chunks[chunk.chunk_key] = (chunk.sequence_range.end -
                               chunk.sequence_range.start + 1,
                               chunk.sequence_range.start)
  tables = {}
  for record in records.read_records(os.path.join(checkpoint,
                                                  directories.ITEMS)):
    item = schema.parse('PrioritizedItem', record)
    time = item.inserted_at.seconds * 10**9 + item.inserted_at.nanos
    columns = tuple(
        (bool(column.squeeze),
         tuple((s.offset, s.length, s.index) + chunks[s.chunk_key]
               for s in column.chunk_slices))
        for column in item.flat_trajectory.columns)
    tables.setdefault(item.table, []).append((time, item.priority, columns))
  return {table: [entry[1:] for entry in sorted(items, key=lambda e: e[0])]
          for table, items in tables.items()}


def pushed_checkpoint(tables, root, push_fn):
  """The checkpoint of a server that `push_fn(address)` filled; its
  tables' episode counts; the items drained."""
  server = export_data.checkpointed_server(tables(), root)
  push_fn(f'localhost:{server.port}')
  checkpoint = export_data.checkpoint(server)
  return checkpoint, drained_tables(server, tables)


def drained_tables(server, tables):
  client = reverb.Client(f'localhost:{server.port}')
  info = client.server_info(timeout=10)
  result = {}
  for table in tables():
    name = table.name
    episodes = info[name].num_episodes
    result[name] = (episodes, reverb_tables.drain_flat(server, name))
  server.stop()
  return result


def assert_same(pushed, built):
  (pushed_path, pushed_tables), (built_path, built_tables) = pushed, built
  want, got = item_slices(pushed_path), item_slices(built_path)
  assert sorted(got) == sorted(want)
  for table in want:
    assert len(got[table]) == len(want[table])
    for index, (got_item, want_item) in enumerate(zip(got[table],
                                                      want[table])):
      assert got_item == want_item, (table, index)
  assert (checkpoints.chunk_lengths(built_path) ==
          checkpoints.chunk_lengths(pushed_path))
  want_bytes = checkpoints.chunk_bytes(pushed_path)
  got_bytes = checkpoints.chunk_bytes(built_path)
  assert abs(got_bytes - want_bytes) <= CHUNK_BYTES_TOLERANCE * want_bytes, (
      got_bytes, want_bytes)
  assert sorted(built_tables) == sorted(pushed_tables)
  for table, (episodes, items) in pushed_tables.items():
    built_episodes, built_items = built_tables[table]
    assert built_episodes == episodes
    assert items
    reverb_tables.assert_same_flat_items(built_items, items)
