"""`wire` and `checkpoints.parse` read what protobuf reads: items built with the
checkpoint schema's classes, serialized by protobuf, read back both ways."""

import numpy as np
import pytest

from rlds_reverb._util import wire
from rlds_reverb.checkpoints import schema
from rlds_reverb.checkpoints import tensors
from rlds_reverb.errors import CheckpointError
from rlds_reverb.exporter import items as items_lib

EDGES = [0, 1, 127, 128, 16_383, 16_384, 2**32 - 1, 2**63, 2**64 - 1]


def item(rng: np.random.Generator, key: int, table: str, columns: int):
  """A PrioritizedItem with 1-3 slices per column, keys at varint edges."""
  classes = schema.classes()
  message = classes['PrioritizedItem'](key=key, table=table)
  message.inserted_at.seconds = int(rng.integers(0, 2**33))  # Till 2242.
  message.inserted_at.nanos = int(rng.integers(0, 10**9))
  for _ in range(columns):
    column = message.flat_trajectory.columns.add()
    for _ in range(int(rng.integers(1, 4))):
      column.chunk_slices.add(
          chunk_key=(EDGES[rng.integers(len(EDGES))] if rng.random() < 0.5
                     else int(rng.integers(0, 2**63))),
          offset=int(rng.integers(0, 300)), length=int(rng.integers(1, 200)),
          index=[0, 0, 1, 130][rng.integers(4)])
  return message


def test_slices_and_times_equal_protobufs():
  rng = np.random.default_rng(0)
  messages = [item(rng, key, 'replay' if key % 3 else 'other', 4)
              for key in EDGES + list(range(200))]
  records = [m.SerializeToString() for m in messages]

  got = items_lib.slices_of_batch(records, 'replay', 4, 'items.tfrecord')

  want = [(s.chunk_key, s.index, c, m.inserted_at.seconds * 10**9 +
           m.inserted_at.nanos)
          for m in messages if m.table == 'replay'
          for c, column in enumerate(m.flat_trajectory.columns)
          for s in column.chunk_slices]
  assert got.items == sum(m.table == 'replay' for m in messages)
  assert sorted(zip(got.keys.tolist(), got.tensors.tolist(),
                    got.columns.tolist(), got.times.tolist())) == sorted(want)


def protobuf_varint(value: int) -> bytes:
  """The varint protobuf writes for `value` (a uint64 field, its tag cut)."""
  if not value:
    return b'\x00'
  return schema.classes()['ChunkSlice'](chunk_key=value).SerializeToString()[1:]


def test_varint_is_what_protobuf_writes():
  assert [wire.varint(v) for v in EDGES] == [protobuf_varint(v) for v in EDGES]


def test_varints_at_their_edges():
  encoded = [protobuf_varint(v) for v in EDGES]
  buffer, starts, _ = wire.buffer_of(encoded)
  values, lengths = wire.read_varints(buffer, starts)
  assert values.tolist() == EDGES
  assert lengths.tolist() == [len(e) for e in encoded]
  assert lengths.tolist()[-1] == 10


def test_varints_read_one_at_a_time_at_their_edges():
  encoded = b''.join(protobuf_varint(v) for v in EDGES)
  values, position = [], 0
  while position < len(encoded):
    value, position = wire.varint_at(encoded, position)
    values.append(value)
  assert values == EDGES
  with pytest.raises(IndexError):
    wire.varint_at(encoded[:-1], len(encoded) - 10)


def test_varint_longer_than_ten_bytes_has_length_0():
  buffer, starts, _ = wire.buffer_of([b'\xff' * 11 + b'\x01'])
  assert wire.read_varints(buffer, starts)[1].tolist() == [0]


def test_field_past_its_message_is_one_line_naming_the_file():
  record = item(np.random.default_rng(1), 5, 'replay', 2).SerializeToString()
  cut = record[:len(record) - 3]
  with pytest.raises(CheckpointError) as raised:
    items_lib.slices_of_batch([record, cut], 'replay', 2, '/c/items.tfrecord')
  assert str(raised.value).startswith(
      '/c/items.tfrecord: record 1 of the batch read is not a valid message '
      '(a field at byte ')


def test_wrong_column_count_names_the_item():
  record = item(np.random.default_rng(2), 77, 'replay', 3).SerializeToString()
  with pytest.raises(Exception) as raised:
    items_lib.slices_of_batch([record], 'replay', 2, 'items.tfrecord')
  assert str(raised.value) == (
      "Item 77 of table 'replay' has 3 columns; its signature has 2 fields: "
      'the items are not trajectories of the signature.')


def test_squeezed_column_names_the_item_and_column():
  message = item(np.random.default_rng(3), 78, 'replay', 3)
  message.flat_trajectory.columns[1].squeeze = True
  with pytest.raises(Exception) as raised:
    items_lib.slices_of_batch([message.SerializeToString()], 'replay', 3,
                            'items.tfrecord')
  assert str(raised.value) == (
      "Item 78 of table 'replay' squeezes column 1 (no time axis): its items "
      'are single steps, not sequences of trajectories.')


def string_tensor(content: bytes, count: int):
  """A TensorProto of `count` strings in TensorFlow's encoding."""
  tensor = schema.classes()['TensorProto'](dtype=tensors.STRING,
                                           tensor_content=content)
  tensor.tensor_shape.dim.add(size=count)
  return tensor


def test_string_tensors_round_trip_at_varint_edges():
  values = np.array([b'', b'a' * 127, b'b' * 128, b'c' * 16_384], object)
  content = tensors.string_content(values)
  assert content.startswith(b'\x00\x7f\x80\x01\x80\x80\x01')
  got = tensors.decode(string_tensor(content, 4), False, 'chunk 7')
  assert got.tolist() == values.tolist()


STRING_ERRORS = {
    'cut_in_the_lengths': (
        b'\x02\x80', 2,
        'chunk 7: its string tensor ends inside the lengths of its 2 '
        'strings.'),
    'bytes_left_over': (
        b'\x01\x01abc', 2,
        'chunk 7: its string tensor holds 3 bytes of strings; its lengths '
        'add up to 2.'),
}


@pytest.mark.parametrize('case', list(STRING_ERRORS))
def test_string_tensors_that_do_not_decode(case):
  content, count, message = STRING_ERRORS[case]
  with pytest.raises(CheckpointError) as raised:
    tensors.decode(string_tensor(content, count), False, 'chunk 7')
  assert str(raised.value) == message
