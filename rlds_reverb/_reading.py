"""A `ReverbReplayBuffer` that reads tables which remove what they hand out.

TF-Agents' `ReverbReplayBuffer.as_dataset(sample_batch_size=B)` interleaves
min(B, 32) Reverb streams, each of which takes items from the table before
they are read (up to 3 * B / streams each). A table that removes an item once
sampled (`max_times_sampled` > 0: a FIFO queue, `Table.queue`) is shared out
among the streams; the interleave's threads then wait, without end, on
streams that got nothing, while the items a batch needs sit in the others:

    table: 128 items, max_times_sampled=1; as_dataset(sample_batch_size=64)
      -> 32 streams take them ahead: 6, 6, ..., 2, 0, 0
      -> a batch waits on an empty stream for an insert  (py-spy: IteratorGetNext;
         while the table is empty and the items it needs   gdb: Sampler::PopNextSample,
         are held by streams no thread reads              Table::SampleFlexibleBatch)

Measured: 8 reads of 2 batches of 64, 8 stopped for good with the table empty
and 0 or 1 batch delivered (7 with the server in this process, 1 with it in
another). This buffer reads such a
table through one stream (`max_cycle_length=1`), whose workers share one
queue: every item taken from the table reaches a batch. What is left is
Reverb's: a sampler waits without end for the table to hold an item
(`rate_limiter_timeout_ms=-1`). Here it waits `timeout` seconds, then the
dataset fails with one line naming the table. Tables that keep their items
are read as TF-Agents reads them.
"""

from typing import Any, Optional

import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer

from rlds_reverb._util import wording
from rlds_reverb.write import server as server_lib

DEFAULT_TIMEOUT_S = 30.0


def table_info(address: str, table: str, timeout: float):
  """The table's `TableInfo`, within `timeout` seconds (TF-Agents' buffer
  asks with no deadline)."""
  client, _ = server_lib.connect(address)
  return server_lib.table_infos(client, address, [table], timeout)[table]


def removes_items(info) -> bool:
  return info.max_times_sampled > 0


class ReplayBuffer(reverb_replay_buffer.ReverbReplayBuffer):
  """`ReverbReplayBuffer`; a table that removes sampled items is read through
  one stream, and waited for at most `timeout` seconds."""

  def __init__(self, data_spec: Any, table_name: str,
               sequence_length: Optional[int],
               server_address: Optional[str] = None,
               local_server: Any = None, *,
               timeout: float = DEFAULT_TIMEOUT_S, info: Any = None,
               **kwargs):
    """As `ReverbReplayBuffer`, plus:

    Args:
      timeout: seconds to wait for the server's table settings, and for an
        item of a table that removes what it hands out (then the dataset
        fails with `tf.errors.InvalidArgumentError` naming the table). Pass
        `rate_limiter_timeout_ms` to choose Reverb's own: -1 waits without
        end, N >= 0 ends the dataset after N ms without an item.
      info: the table's `TableInfo`, if the caller has it.

    Raises:
      ServerUnavailableError, TableNotFoundError: reading the table settings.
    """
    address = (server_address if local_server is None
               else f'localhost:{local_server.port}')
    self._info = (info if info is not None
                  else table_info(address, table_name, timeout))
    self._address = address
    self._timeout = timeout
    self._guarded = (removes_items(self._info)
                     and 'rate_limiter_timeout_ms' not in kwargs)
    if removes_items(self._info):
      kwargs.setdefault('max_cycle_length', 1)
    if self._guarded:
      kwargs['rate_limiter_timeout_ms'] = round(timeout * 1000)
    super().__init__(data_spec, table_name, sequence_length,
                     server_address=server_address,
                     local_server=local_server, **kwargs)

  def _as_dataset(self, sample_batch_size=None, num_steps=None,
                  sequence_preprocess_fn=None, num_parallel_calls=None):
    dataset = super()._as_dataset(sample_batch_size, num_steps,
                                  sequence_preprocess_fn, num_parallel_calls)
    if not self._guarded:
      return dataset
    return dataset.concatenate(tf.data.Dataset.range(1).map(
        lambda _: _failed(dataset.element_spec, self._timeout_message())))

  def _timeout_message(self) -> str:
    # No quotes: TensorFlow escapes them in an assertion's text.
    info = self._info
    return (f'Reverb table {info.name} at {self._address} gave no item for '
            f'{self._timeout:g} s: it removes each item once sampled '
            f'{wording.count(info.max_times_sampled, "time")} '
            f'(max_times_sampled), and it had none to give: it is empty, or '
            f'its rate limiter holds sampling back. Insert more, or pass '
            f'rate_limiter_timeout_ms=-1 to wait without end.')


def _failed(element_spec, message: str):
  """An element of `element_spec` that fails with `message` when computed."""
  check = tf.debugging.Assert(False, [message])
  with tf.control_dependencies([check]):
    return tf.nest.map_structure(_zeros, element_spec)


def _zeros(spec: tf.TensorSpec) -> tf.Tensor:
  return tf.zeros([0 if n is None else n for n in spec.shape.as_list()],
                  spec.dtype)
