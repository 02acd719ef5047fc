"""`rlds_reverb._util.wire` frames records as TensorFlow's writer does, and reads
them back as TensorFlow's reader does (what recovery and the checkpoint
reader rely on); its varints are the bytes protobuf writes."""

import io
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tensorflow_datasets.proto import tf_feature_pb2  # pylint: disable=g-import-not-at-top

from rlds_reverb._util import wire  # pylint: disable=g-import-not-at-top

RECORDS = [b'', b'x', bytes(range(256)) * 40, b'last record']


def tensorflow_file(path, records):
  with tf.io.TFRecordWriter(os.fspath(path)) as writer:
    for record in records:
      writer.write(record)
  with open(path, 'rb') as f:
    return f.read()


def tensorflow_reads(path):
  """The records TensorFlow's reader gives before its first error."""
  read = []
  iterator = iter(tf.data.TFRecordDataset(os.fspath(path)))
  while True:
    try:
      read.append(next(iterator).numpy())
    except (StopIteration, tf.errors.DataLossError):
      return read


def test_frames_are_the_bytes_tensorflow_writes(tmp_path):
  expected = tensorflow_file(tmp_path / 'tf.tfrecord', RECORDS)
  assert b''.join(wire.frame(record) for record in RECORDS) == expected


def test_frames_in_place_are_the_frames_of_each_record(tmp_path):
  expected = tensorflow_file(tmp_path / 'tf.tfrecord', RECORDS)
  sizes = [len(record) + wire.RECORD_OVERHEAD for record in RECORDS]
  ends = np.cumsum(sizes) - wire.RECORD_FOOTER
  starts = ends - [len(record) for record in RECORDS]
  buffer = np.zeros(sum(sizes), np.uint8)
  for start, record in zip(starts, RECORDS):
    buffer[start:start + len(record)] = np.frombuffer(record, np.uint8)
  wire.frame_in_place(buffer, starts, ends)
  assert buffer.tobytes() == expected
  assert wire.whole_records(expected) == (starts.tolist(), ends.tolist())


def damaged(data: bytes, offset: int, kind: str) -> bytes:
  """`data` cut at `offset`, or with the byte there flipped."""
  if kind == 'cut':
    return data[:offset]
  return data[:offset] + bytes([data[offset] ^ 0x01]) + data[offset + 1:]


def test_checked_lengths_stop_where_tensorflow_stops(tmp_path):
  """Cut or flipped at every byte of the file: the records read are those
  TensorFlow's reader reads before its DataLossError."""
  data = b''.join(wire.frame(record) for record in RECORDS[:2] + RECORDS[3:])
  path = tmp_path / 'damaged.tfrecord'
  for kind in ('cut', 'flipped'):
    for offset in range(len(data)):
      path.write_bytes(damaged(data, offset, kind))
      ours = list(wire.checked_lengths(io.BytesIO(path.read_bytes())))
      assert ours == [len(r) for r in tensorflow_reads(path)], (kind, offset)


@pytest.mark.parametrize('values', [
    np.array([0, 1, 127, 128, 16_383, 16_384, 2**35, -1, 2**63 - 1, -2**63]),
    np.arange(100_000, 100_300, dtype=np.int64),
    np.array([], np.int64),
])
def test_packed_varints_are_what_protobuf_packs(values):
  packed = wire.packed_varints(values)
  assert (wire.length_delimited(1, packed) if len(values) else b'') == (
      tf_feature_pb2.Int64List(value=values.tolist()).SerializeToString())
  buffer, _, _ = wire.buffer_of([packed])
  positions = np.cumsum([0] + [len(wire.varint(int(v) % 2**64))
                               for v in values])[:-1]
  read, _ = wire.read_varints(buffer, positions)
  assert read.view(np.int64).tolist() == values.tolist()


def test_length_at_reads_a_header_or_says_none(tmp_path):
  path = tmp_path / 'one.tfrecord'
  path.write_bytes(wire.frame(RECORDS[2]) + b'\x05\x00\x00')
  with open(path, 'rb', buffering=0) as f:
    assert wire.length_at(f.fileno(), 0) == len(RECORDS[2])
    assert wire.length_at(f.fileno(), len(RECORDS[2]) + 16) is None
