"""Checkpoint items with edge values, and Reverb's own protos of them: the
reference our item records are compared with, record by record.

    random_items(rng, count, columns) -> messages.Items (keys, priorities,
      times, slices at varint and integer edges)
      -> reverb_item(items, i, table) -> schema_pb2.PrioritizedItem
"""

import numpy as np
from reverb.cc import schema_pb2

from rlds_reverb.checkpoints import messages

EDGES = [0, 1, 127, 128, 16_383, 16_384, 2**32 - 1, 2**63, 2**64 - 1]
EDGE_KEYS = np.array(EDGES, np.uint64)


def random_items(rng, count: int, columns: int) -> messages.Items:
  slice_counts = rng.integers(1, 4, count * columns)
  slices = int(slice_counts.sum())
  return messages.Items(
      keys=rng.choice(EDGE_KEYS, count),
      priorities=rng.choice([0.0, -0.0, 1.5, 1e300, 5e-324], count),
      times=np.sort(rng.choice([0, 1, 10**9, 10**9 + 1, 2**62], count)),
      num_columns=columns, slice_counts=slice_counts,
      chunk_keys=rng.choice(EDGE_KEYS, slices),
      offsets=rng.choice([0, 1, 200, 2**31 - 301], slices),
      lengths=rng.choice([1, 2, 300], slices),
      indexes=rng.choice([0, 1, 130], slices),
      squeeze=np.zeros(count * columns, bool),
      times_sampled=rng.choice([0, 1, 2**31 - 1], count).astype(np.int32))


def reverb_item(items: messages.Items, index: int, table: str):
  """Item `index` of `items` built with Reverb's own proto."""
  columns = items.num_columns
  first_slice = int(np.sum(items.slice_counts[:index * columns]))
  item = schema_pb2.PrioritizedItem(
      key=int(items.keys[index]), table=table,
      priority=float(items.priorities[index]),
      times_sampled=int(items.times_sampled[index]))
  item.inserted_at.seconds = int(items.times[index]) // 10**9
  item.inserted_at.nanos = int(items.times[index]) % 10**9
  item.flat_trajectory.SetInParent()
  at = first_slice
  for column in range(columns):
    entry = index * columns + column
    added = item.flat_trajectory.columns.add(
        squeeze=bool(items.squeeze[entry]))
    for _ in range(int(items.slice_counts[entry])):
      added.chunk_slices.add(
          chunk_key=int(items.chunk_keys[at]), offset=int(items.offsets[at]),
          length=int(items.lengths[at]), index=int(items.indexes[at]))
      at += 1
  return item
