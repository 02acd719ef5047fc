"""Real Reverb servers and tables for tests, and reading tables back."""

from typing import List, Sequence, Tuple

import numpy as np
import reverb
import tensorflow as tf
import tree

from rlds_reverb import tables


def fifo_table(name: str, signature=None,
               max_size: int = 100_000) -> reverb.Table:
  """A table that gives each item once, oldest first: drainable exactly
  (`tables.fifo`)."""
  return tables.table(tables.fifo(name, max_size), signature)


def start_server(tables: Sequence[reverb.Table], port=None) -> reverb.Server:
  return reverb.Server(list(tables), port=port)


def address(server) -> str:
  """'localhost:PORT' of a `reverb.Server`; an address string as it is."""
  if isinstance(server, str):
    return server
  return f'localhost:{server.port}'


def table_size(client: reverb.Client, table: str) -> int:
  return client.server_info(timeout=10)[table].current_size


def drain(server, table: str) -> List[Tuple[float, object]]:
  """Every item of a signed fifo_table: (priority, data as numpy nest).

  `server`: a `reverb.Server` or its address.
  """
  client = reverb.Client(address(server))
  count = table_size(client, table)
  if count == 0:
    return []
  dataset = reverb.TrajectoryDataset.from_table_signature(
      address(server), table, max_in_flight_samples_per_worker=1)
  items = []
  for sample in dataset.take(count):
    items.append((float(sample.info.priority),
                  tree.map_structure(np.asarray, sample.data)))
  if table_size(client, table) != 0:
    raise AssertionError(f'table {table} still has items after draining')
  return items


def drain_flat(server, table: str) -> List[List[np.ndarray]]:
  """Every item of a fifo table, signed or not, in order: its flat leaves."""
  client = reverb.Client(address(server))
  count = table_size(client, table)
  samples = list(client.sample(table, num_samples=count,
                               emit_timesteps=False))
  if table_size(client, table) != 0:
    raise AssertionError(f'table {table} still has items after draining')
  return [[np.asarray(leaf) for leaf in sample.data] for sample in samples]


def assert_same_flat_items(got, want) -> None:
  """Items (flat leaf lists, as `drain_flat` gives them) equal one by one:
  same count, leaves, dtypes and values."""
  assert len(got) == len(want), (len(got), len(want))
  for index, (got_item, want_item) in enumerate(zip(got, want)):
    assert len(got_item) == len(want_item)
    for leaf, (got_leaf, want_leaf) in enumerate(zip(got_item, want_item)):
      assert got_leaf.dtype == want_leaf.dtype, (index, leaf)
      np.testing.assert_array_equal(got_leaf, want_leaf,
                                    err_msg=f'item {index}, leaf {leaf}')


def item_key(item) -> Tuple:
  """A hashable, order-free key of an item: priority, then leaf bytes.

  String leaves (numpy object arrays) by their values: their `tobytes` would
  be pointers.
  """
  priority, data = item
  return (priority,) + tuple(
      (leaf.dtype.str, leaf.shape,
       tuple(leaf.ravel().tolist()) if leaf.dtype == object else leaf.tobytes())
      for leaf in tree.flatten(data))


def as_multiset(items) -> List[Tuple]:
  return sorted(item_key(item) for item in items)



def observation_pairs(episodes) -> List[bytes]:
  """Sorted observation bytes of every 2-step item of numpy episodes."""
  return sorted(np.stack([e['observation'][i], e['observation'][i + 1]]).tobytes()
                for e in episodes for i in range(len(e['reward']) - 1))


def drained_pairs(server, table: str) -> List[bytes]:
  """Sorted observation bytes of every item drained from a 2-step table."""
  return sorted(data.observation.tobytes() for _, data in drain(server, table))
