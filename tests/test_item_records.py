"""Items' records filled in as rows of fixed layouts (`item_records`) are,
record by record, the messages Reverb's own protos make of the same items,
framed as TensorFlow frames records (both CRCs right); and a server loads
them (tests/test_checkpoint_writer.py and test_checkpoint_plan.py write
every item through them)."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import google_crc32c  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
from reverb.cc import schema_pb2  # pylint: disable=g-import-not-at-top

from rlds_reverb.checkpoints import item_records  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import messages  # pylint: disable=g-import-not-at-top
from rlds_reverb._util import wire  # pylint: disable=g-import-not-at-top
from rlds_reverb.errors import CheckpointWriteError  # pylint: disable=g-import-not-at-top
from tests import item_messages as reference  # pylint: disable=g-import-not-at-top


def unframed(buffer: np.ndarray, count: int):
  """The records of a framed buffer, each CRC checked as TensorFlow does."""
  data, at, found = buffer.tobytes(), 0, []
  while at < len(data):
    length = int.from_bytes(data[at:at + 8], 'little')
    masked = lambda b: int(wire.mask(np.array(  # pylint: disable=g-long-lambda
        [google_crc32c.value(b)], np.uint32))[0])
    assert int.from_bytes(data[at + 8:at + 12], 'little') == masked(
        data[at:at + 8])
    record = data[at + 12:at + 12 + length]
    assert int.from_bytes(data[at + 12 + length:at + 16 + length],
                          'little') == masked(record)
    found.append(record)
    at += 16 + length
  assert len(found) == count
  return found


def squeezed_items(rng, count: int) -> messages.Items:
  """Two columns, the first squeezed (one row), in some items only."""
  items = reference.random_items(rng, count, 2)
  slice_counts = np.tile([1, 2], count)
  slices = int(slice_counts.sum())
  lengths = np.ones(slices, np.int64)
  return messages.Items(**{
      **items.__dict__, 'slice_counts': slice_counts,
      'chunk_keys': items.chunk_keys[:slices] if len(items.chunk_keys) >=
                    slices else np.arange(slices, dtype=np.uint64),
      'offsets': rng.integers(0, 40, slices), 'lengths': lengths,
      'indexes': np.zeros(slices, np.int64),
      'squeeze': np.stack([rng.random(count) < 0.5,
                           np.zeros(count, bool)], axis=1).ravel(),
      'times_sampled': None})


CASES = {
    'edges_one_column': lambda rng: reference.random_items(rng, 300, 1),
    'edges_three_columns': lambda rng: reference.random_items(rng, 200, 3),
    'one_item_seven_columns': lambda rng: reference.random_items(rng, 1, 7),
    'squeezed_some': lambda rng: squeezed_items(rng, 50),
}


@pytest.mark.parametrize('case', sorted(CASES))
def test_records_are_reverbs_items(case):
  items = CASES[case](np.random.default_rng(7))
  if items.times_sampled is None:
    items = messages.Items(**{**items.__dict__, 'times_sampled': np.zeros(
        len(items), np.int32)})

  buffer, count = item_records.framed('replay', items)

  got = [schema_pb2.PrioritizedItem.FromString(r)
         for r in unframed(buffer, count)]
  want = [reference.reverb_item(items, i, 'replay') for i in range(count)]
  assert got == want


def test_items_a_server_refuses_are_refused_first():
  items = reference.random_items(np.random.default_rng(1), 3, 1)
  items = messages.Items(**{**items.__dict__,
                            'priorities': np.array([1.0, -1.0, 2.0])})
  with pytest.raises(CheckpointWriteError, match='priority -1.0'):
    item_records.framed('replay', items)
