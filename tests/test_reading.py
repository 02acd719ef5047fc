"""Reading a table that removes what it hands out, through our buffers.

TF-Agents' `ReverbReplayBuffer.as_dataset` shares such a table's items out
among up to 32 streams and then waits, without end, on one that got none
(`rlds_reverb/_reading.py` draws it). Our buffers (`EncodedReplayBuffer`, and
those `mixed_replay` makes for `(address, table)`) read it through one
stream: every full batch arrives, each item once; then, with the table empty,
the dataset fails after `timeout` naming the table. Real in-process servers
(where the hang was first seen); each read runs in a thread so that a hang
fails the test instead of stopping the run.
"""

import os
import threading

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import encoded as encoded_spec  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top

HANG_GUARD_S = 120  # Not a speed check: the read came back at all.
# Waited out in full once per test, when the table is empty at the end. Every
# item is in the table before the read starts, so no stream waits for one
# before then: any timeout shows the failure; a short one.
TIMEOUT_S = 0.5
EPISODES, LENGTH = 7, 11  # 70 two-step items.
ITEMS = EPISODES * (LENGTH - 1)


def frame_episode(seed: int):
  """An episode whose observations are random 8x8x3 frames (each item's
  frame pair is unique)."""
  episode = rlds_data.flat_episode(LENGTH, seed)
  rng = np.random.default_rng(seed)
  episode['observation'] = rng.integers(0, 256, (LENGTH, 8, 8, 3), np.uint8)
  return episode


def item_pairs(episodes):
  """Observation bytes of every 2-step item of the episodes."""
  return [np.stack(e['observation'][i:i + 2]).tobytes()
          for e in episodes for i in range(LENGTH - 1)]


def removing_table(name: str, signature) -> reverb.Table:
  return reverb_tables.fifo_table(name, signature=signature)  # Sampled once.


def read_until_error(dataset):
  """(elements, error) of iterating `dataset` in a thread until it fails;
  fails the test if it neither ends nor fails within the guard."""
  out = {'elements': [], 'error': None}

  def read():
    try:
      for element in dataset:
        out['elements'].append(tf.nest.map_structure(np.asarray, element))
    except tf.errors.OpError as e:
      out['error'] = e

  reader = threading.Thread(target=read, daemon=True)
  reader.start()
  reader.join(HANG_GUARD_S)
  assert not reader.is_alive(), (
      f'the read hung after {len(out["elements"])} batches')
  return out['elements'], out['error']


def timeout_message(table: str, address: str) -> str:
  return (f'Reverb table {table} at {address} gave no item for {TIMEOUT_S} '
          's: it removes each item once sampled 1 time (max_times_sampled), '
          'and it had none to give: it is empty, or its rate limiter holds '
          'sampling back. Insert more, or pass rate_limiter_timeout_ms=-1 to '
          'wait without end.')


def test_encoded_buffer_reads_every_batch_then_fails_naming_the_table(
    make_server):
  episodes = [frame_episode(seed) for seed in range(EPISODES)]
  data = rlds_data.as_rlds(episodes)
  raw = rlds_reverb.specs.table_signature(
      rlds_reverb.create_trajectory_data_spec(data))
  signature = encoded_spec.encoded_spec(raw, ['observation'], 'png')
  server = make_server([removing_table('frames', signature)])
  address = reverb_tables.address(server)
  assert rlds_reverb.push(data, address, 'frames',
                          images='encoded').items == ITEMS
  buffer = rlds_reverb.EncodedReplayBuffer(
      table_name='frames', sequence_length=2, local_server=server,
      timeout=TIMEOUT_S)

  batches, error = read_until_error(
      buffer.as_dataset(sample_batch_size=16, num_steps=2))

  got = [pair.tobytes() for trajectory, _ in batches
         for pair in trajectory.observation]
  # Every full batch (4 x 16), each item once, decoded; the table is empty
  # (the 6 left were taken for a fifth batch that never filled).
  assert len(got) == ITEMS // 16 * 16
  assert len(set(got)) == len(got)
  assert set(got) <= set(item_pairs(episodes))
  assert reverb_tables.table_size(reverb.Client(address), 'frames') == 0
  assert isinstance(error, tf.errors.InvalidArgumentError)
  assert timeout_message('frames', address) in error.message


def test_mixed_replay_reads_an_online_table_that_removes_items(make_server):
  offline = [rlds_data.flat_episode(LENGTH, seed) for seed in range(3)]
  online = [rlds_data.flat_episode(LENGTH, seed) for seed in range(3, 7)]
  spec = rlds_reverb.create_trajectory_data_spec(rlds_data.as_rlds(offline))
  signature = rlds_reverb.specs.table_signature(spec)
  server = make_server(rlds_reverb.mixed_replay_tables(signature, 1000)[:1]
                       + [removing_table('online', signature)])
  address = reverb_tables.address(server)
  rlds_reverb.push(rlds_data.as_rlds(offline), address, 'offline')
  online_items = rlds_reverb.push(rlds_data.as_rlds(online), address,
                                  'online').items  # 40
  mixed = rlds_reverb.mixed_replay((address, 'offline'), (address, 'online'),
                                   0.5, sample_batch_size=8,
                                   timeout=TIMEOUT_S)

  batches, error = read_until_error(mixed)

  # Rows 4-7 of each batch are online: all 40 online items, each once.
  got = [pair.tobytes() for trajectory, _ in batches
         for pair in trajectory.observation[4:]]
  want = [np.stack(e['observation'][i:i + 2]).tobytes()
          for e in online for i in range(LENGTH - 1)]
  assert len(batches) == online_items // 4
  assert sorted(got) == sorted(want)
  assert isinstance(error, tf.errors.InvalidArgumentError)
  assert timeout_message('online', address) in error.message
