"""Real Reverb servers and tables for tests, and reading tables back."""

from typing import Any, List, Sequence, Tuple

import numpy as np
import reverb
import tensorflow as tf
import tree

import rlds_reverb
from rlds_reverb import specs
from rlds_reverb import tables


def fifo_table(name: str, signature=None,
               max_size: int = 100_000) -> reverb.Table:
  """A table that gives each item once, oldest first: drainable exactly
  (`tables.fifo`)."""
  return tables.table(tables.fifo(name, max_size), signature)


def signature_for(data) -> Any:
  """The table signature of `data`'s trajectories: an RLDS tf.data dataset,
  or a source `rlds_reverb.load` reads (a directory, 'bundled:cartpole')."""
  if not isinstance(data, tf.data.Dataset):
    data = rlds_reverb.load(data)
  return specs.table_signature(rlds_reverb.create_trajectory_data_spec(data))


def float64_signature(signature):
  """`signature` with its float32 fields (observation, reward, discount) as
  float64: a table that differs from the data in three fields."""
  return tf.nest.map_structure(
      lambda spec: tf.TensorSpec(spec.shape, tf.float64, spec.name)
      if spec.dtype == tf.float32 else spec, signature)


def start_server(tables: Sequence[reverb.Table], port=None) -> reverb.Server:
  return reverb.Server(list(tables), port=port)


def address(server) -> str:
  """'localhost:PORT' of a `reverb.Server`; an address string as it is."""
  if isinstance(server, str):
    return server
  return f'localhost:{server.port}'


def client_of(server) -> reverb.Client:
  return reverb.Client(address(server))


def table_size(client: reverb.Client, table: str) -> int:
  return client.server_info(timeout=10)[table].current_size


def drain(server, table: str) -> List[Tuple[float, Any]]:
  """Every item of a fifo-sampled table, oldest first, each once:
  (priority, data), data a numpy nest of the table's signature (its flat
  leaves if it has none). The table ends empty.

  `server`: a `reverb.Server` or its address. Through `Client.sample` (a
  tf.data reader takes seconds to shut down on an emptied table). A table that
  removes an item once sampled (`max_times_sampled=1`, `fifo_table`) gives
  them all in one call; one that keeps them (`serve`'s) gives the oldest each
  time, deleted once read.
  """
  client = reverb.Client(address(server))
  info = client.server_info(timeout=10)[table]
  signed = info.signature is not None
  if info.max_times_sampled == 1:
    samples = list(client.sample(
        table, num_samples=info.current_size, emit_timesteps=False,
        unpack_as_table_signature=signed)) if info.current_size else []
    assert len(samples) == info.current_size
  else:
    samples = []
    for _ in range(info.current_size):
      samples.append(next(client.sample(table, emit_timesteps=False,
                                        unpack_as_table_signature=signed)))
      client.mutate_priorities(table, deletes=[samples[-1].info.key])
  if table_size(client, table) != 0:
    raise AssertionError(f'table {table} still has items after draining')
  return [(float(sample.info.priority),
           tree.map_structure(np.asarray, sample.data)) for sample in samples]


def drain_flat(server, table: str) -> List[List[np.ndarray]]:
  """`drain`'s items as their flat leaves, in order, without priorities."""
  return [tree.flatten(data) for _, data in drain(server, table)]


def empty(server) -> None:
  """Resets every table of `server`."""
  client = reverb.Client(address(server))
  for table in client.server_info(timeout=10):
    client.reset(table)


def assert_same_flat_items(got, want) -> None:
  """Items (flat leaf lists, as `drain_flat` gives them) equal one by one:
  same count, leaves, dtypes and values."""
  assert len(got) == len(want), (len(got), len(want))
  for index, (got_item, want_item) in enumerate(zip(got, want)):
    assert len(got_item) == len(want_item)
    for leaf, (got_leaf, want_leaf) in enumerate(zip(got_item, want_item)):
      assert got_leaf.dtype == want_leaf.dtype, (index, leaf)
      if not _same_leaf(got_leaf, want_leaf):
        np.testing.assert_array_equal(got_leaf, want_leaf,
                                      err_msg=f'item {index}, leaf {leaf}')


def _same_leaf(got: np.ndarray, want: np.ndarray) -> bool:
  """Equal shapes and values: what `assert_array_equal` passes, checked 10x
  faster (~2 us a leaf; tests compare ~100k leaves). False sends the leaf to
  `assert_array_equal`, which decides (NaNs equal, scalars broadcast) and
  says where."""
  return got.shape == want.shape and np.array_equal(got, want)


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


def same_items(expected, got) -> bool:
  """The same (priority, data) items, in any order."""
  return as_multiset(expected) == as_multiset(got)


def observation_pairs(episodes) -> List[bytes]:
  """Sorted observation bytes of every 2-step item of numpy episodes."""
  return sorted(np.stack([e['observation'][i], e['observation'][i + 1]]).tobytes()
                for e in episodes for i in range(len(e['reward']) - 1))


def drained_pairs(server, table: str) -> List[bytes]:
  """Sorted observation bytes of every item drained from a 2-step table."""
  return sorted(data.observation.tobytes() for _, data in drain(server, table))
