"""Real Reverb servers and tables for tests, and reading tables back."""

from typing import List, Sequence, Tuple

import numpy as np
import reverb
import tensorflow as tf
import tree


def fifo_table(name: str, signature=None, max_size: int = 100_000,
               **kwargs) -> reverb.Table:
  """A table that gives each item once, oldest first: drainable exactly."""
  return reverb.Table(
      name=name, sampler=reverb.selectors.Fifo(),
      remover=reverb.selectors.Fifo(), max_size=max_size,
      rate_limiter=reverb.rate_limiters.MinSize(1), max_times_sampled=1,
      signature=signature, **kwargs)


def start_server(tables: Sequence[reverb.Table], port=None) -> reverb.Server:
  return reverb.Server(list(tables), port=port)


def address(server: reverb.Server) -> str:
  return f'localhost:{server.port}'


def table_size(client: reverb.Client, table: str) -> int:
  return client.server_info(timeout=10)[table].current_size


def drain(server: reverb.Server, table: str) -> List[Tuple[float, object]]:
  """Every item of a signed fifo_table: (priority, data as numpy nest)."""
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


def item_key(item) -> Tuple:
  """A hashable, order-free key of an item: priority, then leaf bytes."""
  priority, data = item
  return (priority,) + tuple(
      (leaf.dtype.str, leaf.shape, leaf.tobytes()) for leaf in tree.flatten(data))


def as_multiset(items) -> List[Tuple]:
  return sorted(item_key(item) for item in items)

