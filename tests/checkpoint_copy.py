"""A server's checkpoint read with `checkpoints`' readers and written again by
`CheckpointWriter`, for tests: every chunk, item and table setting as the
server wrote it (keys, episode ids, times, counters), through the writer's
own inputs (`Chunks`, `Items`, `TableSettings`, `TableCounts`).

    server's checkpoint --read_records, schema, tensors.decode--> values
      --Chunks / Items / table_settings.read_record--> CheckpointWriter(root)
"""

import os
from typing import Dict, List

import numpy as np

from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import schema
from rlds_reverb.checkpoints import table_settings
from rlds_reverb.checkpoints import tensors
from rlds_reverb.checkpoints import writer as writer_lib
from rlds_reverb.checkpoints.messages import Chunks
from rlds_reverb.checkpoints.messages import Items

NANOS = 1_000_000_000


def tables_of(checkpoint: str):
  """[(TableSettings, TableCounts)] of a checkpoint directory."""
  return [table_settings.read_record(record) for record in
          records.read_records(os.path.join(checkpoint,
                                            directories.TABLES))]


def chunks_of(checkpoint: str) -> List[Chunks]:
  """Each chunk of a checkpoint as a one-chunk `Chunks`, once: a server's
  checkpoint may hold a chunk twice (82 of 391 chunks after a push to two
  tables, the records identical), which its loader reads as one."""
  result, seen = [], set()
  for record in records.read_records(
      os.path.join(checkpoint, directories.CHUNKS)):
    chunk = schema.parse('ChunkData', record)
    if chunk.chunk_key in seen:
      continue
    seen.add(chunk.chunk_key)
    span = chunk.sequence_range
    stored = schema.parse('ChunkTensors', chunk.data).tensors
    values = tuple(tensors.decode(t, chunk.delta_encoded, 'chunk')
                   for t in stored)
    result.append(Chunks(
        keys=np.array([chunk.chunk_key], np.uint64),
        episodes=np.array([span.episode_id], np.uint64),
        steps=np.array([span.start]), row_starts=np.array([0]),
        lengths=np.array([span.end - span.start + 1]), tensors=values,
        delta_encoded=chunk.delta_encoded))
  return result


def items_of(checkpoint: str) -> Dict[str, Items]:
  """Per table, its items of a checkpoint, in the file's order."""
  rows: Dict[str, list] = {}
  for record in records.read_records(
      os.path.join(checkpoint, directories.ITEMS)):
    item = schema.parse('PrioritizedItem', record)
    rows.setdefault(item.table, []).append(item)
  return {table: _items(found) for table, found in rows.items()}


def _items(found) -> Items:
  columns = len(found[0].flat_trajectory.columns)
  slices = [s for item in found for column in item.flat_trajectory.columns
            for s in column.chunk_slices]
  return Items(
      keys=np.array([i.key for i in found], np.uint64),
      priorities=np.array([i.priority for i in found]),
      times=np.array([i.inserted_at.seconds * NANOS + i.inserted_at.nanos
                      for i in found], np.int64),
      num_columns=columns,
      slice_counts=np.array([len(c.chunk_slices) for i in found
                             for c in i.flat_trajectory.columns]),
      chunk_keys=np.array([s.chunk_key for s in slices], np.uint64),
      offsets=np.array([s.offset for s in slices], np.int64),
      lengths=np.array([s.length for s in slices], np.int64),
      indexes=np.array([s.index for s in slices], np.int64),
      squeeze=np.array([c.squeeze for i in found
                        for c in i.flat_trajectory.columns]),
      times_sampled=np.array([i.times_sampled for i in found], np.int32))


def copy(checkpoint: str, root: str, **writer_options) -> str:
  """The checkpoint `checkpoint` written again as a new one under `root`."""
  tables = tables_of(checkpoint)
  with writer_lib.CheckpointWriter(root, [s for s, _ in tables],
                                   **writer_options) as writer:
    for chunks in chunks_of(checkpoint):
      writer.add_chunks(chunks)
    for table, items in items_of(checkpoint).items():
      writer.add_items(table, items)
    return writer.close({s.name: counts for s, counts in tables})
