"""The records `CheckpointWriter` writes are Reverb's, byte for byte.

If dm-reverb changes its checkpoint format, these fail loudly:
  * items and tables: our records equal what Reverb's own protos
    (`reverb.cc.schema_pb2`, `checkpoint_pb2`) serialize for the same values,
    and what a server wrote itself;
  * chunks: equal to a server-written chunk (multi-tensor, delta-encoded,
    strings) field by field, snappy data by what it decodes to (the snappy
    encoder may pick other matches), string tensors byte for byte; dtypes
    and shapes as TensorFlow writes them, strings as it reads them;
  * files: TensorFlow's own reader (CRCs checked) reads ours, and a flipped
    bit is a DataLoss error to it.
"""

import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import cramjam  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from reverb.cc import schema_pb2  # pylint: disable=g-import-not-at-top
from reverb.cc.checkpointing import checkpoint_pb2  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tensorflow.core.framework import tensor_pb2  # pylint: disable=g-import-not-at-top

from rlds_reverb._util import wire  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import directories  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import messages  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import record_writer  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import records  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import serialize  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import table_settings  # pylint: disable=g-import-not-at-top
from rlds_reverb.errors import CheckpointWriteError  # pylint: disable=g-import-not-at-top
from tests import checkpoint_copy  # pylint: disable=g-import-not-at-top
from tests.item_messages import EDGES  # pylint: disable=g-import-not-at-top
from tests.item_messages import random_items  # pylint: disable=g-import-not-at-top
from tests.item_messages import reverb_item  # pylint: disable=g-import-not-at-top


def serialized(batch: serialize.Messages):
  buffer, starts, ends = serialize.serialize(batch)
  return [buffer[s:e].tobytes() for s, e in zip(starts, ends)]


@pytest.mark.parametrize('seed, count, columns', [(0, 300, 1), (1, 200, 3),
                                                  (2, 1, 7)])
def test_items_equal_reverbs_protos_byte_for_byte(seed, count, columns):
  items = random_items(np.random.default_rng(seed), count, columns)

  got = serialized(messages.item_messages('replay', items))

  want = [reverb_item(items, i, 'replay').SerializeToString()
          for i in range(count)]
  assert got == want


def test_squeezed_column_of_one_row_equals_reverbs_proto():
  items = random_items(np.random.default_rng(3), 4, 2)
  items = messages.Items(**{
      **items.__dict__, 'slice_counts': np.ones(8, np.int64),
      'chunk_keys': items.chunk_keys[:8], 'offsets': items.offsets[:8],
      'lengths': np.ones(8, np.int64), 'indexes': items.indexes[:8],
      'squeeze': np.array([True, False])})

  got = serialized(messages.item_messages('t', items))

  items = messages.Items(**{**items.__dict__,
                            'squeeze': np.tile([True, False], 4)})
  assert got == [reverb_item(items, i, 't').SerializeToString()
                 for i in range(4)]


def decompressed(tensor) -> bytes:
  return bytes(cramjam.snappy.decompress_raw(tensor.tensor_content))


def row_deltas(values: np.ndarray) -> np.ndarray:
  """Reverb's delta encoding, written out row by row."""
  unsigned = values.view(f'u{values.dtype.itemsize}')
  out = unsigned.copy()
  for row in range(1, len(values)):
    out[row] = unsigned[row] - unsigned[row - 1]
  return out


ARRAYS = {
    'float32': np.linspace(-1, 1, 5 * 17, dtype=np.float32).reshape(5, 17),
    'float64_scalar': np.array([0.5, -2.0, 1e300, 0.0, 3.0]),
    'float16': np.arange(10, dtype=np.float16).reshape(5, 2),
    'int32_steps': np.array([0, 1, 1, 1, 2], np.int32),
    'int64_rank2': np.array([[5, -3], [2**62, -2**62], [0, 0], [7, 7],
                             [-1, 1]], np.int64),
    'uint8_frames': np.random.default_rng(0).integers(
        0, 256, (5, 6, 4, 3), dtype=np.uint8),
    'int8': np.array([[-128, 127], [127, -128], [0, 1], [1, 0], [5, 5]],
                     np.int8),
    'uint16': np.arange(15, dtype=np.uint16).reshape(5, 3) * 5000,
    'uint64': np.array([[2**64 - 1], [0], [1], [2**63], [5]], np.uint64),
    'bool': np.array([[True, False], [False, False], [True, True],
                      [False, True], [True, False]]),
    'empty_rows': np.zeros((5, 0), np.float32),
}


@pytest.mark.parametrize('delta_encoded', [False, True])
@pytest.mark.parametrize('name', sorted(ARRAYS))
def test_chunk_tensors_are_reverbs_encoding(name, delta_encoded):
  values = ARRAYS[name]
  chunks = messages.Chunks(
      keys=np.array([2**64 - 1, 7], np.uint64),
      episodes=np.array([0, 2**63], np.uint64), steps=np.array([0, 130]),
      row_starts=np.array([0, 2]), lengths=np.array([2, 3]),
      tensors=(values,), delta_encoded=delta_encoded)

  got = [schema_pb2.ChunkData.FromString(r)
         for r in serialized(messages.chunk_messages(chunks))]

  for chunk, (start, length, step) in zip(got, [(0, 2, 0), (2, 3, 130)]):
    rows = values[start:start + length]
    assert (chunk.sequence_range.start, chunk.sequence_range.end) == (
        step, step + length - 1)
    assert chunk.delta_encoded == delta_encoded
    assert (chunk.data_tensors_len, chunk.data_uncompressed_size) == (
        1, rows.nbytes)
    (tensor,) = chunk.data.tensors
    tensorflow_own = tensor_pb2.TensorProto.FromString(
        tf.io.serialize_tensor(rows).numpy())
    assert tensor.dtype == tensorflow_own.dtype
    assert tensor.tensor_shape == tensorflow_own.tensor_shape
    deltas = delta_encoded and rows.ndim >= 2 and rows.dtype.kind in 'iu'
    assert decompressed(tensor) == (row_deltas(rows) if deltas
                                    else rows).tobytes()


def test_string_tensors_are_tensorflows_encoding_and_counted_as_reverb_does():
  values = np.array([[b'', b'x'], [b'ab' * 100, b'\x00'], [b'q', b'']],
                    dtype=object)
  chunks = messages.Chunks(
      keys=np.array([1], np.uint64), episodes=np.array([3], np.uint64),
      steps=np.array([0]), row_starts=np.array([0]), lengths=np.array([3]),
      tensors=(values, np.ones((3, 2), np.float32)))

  (record,) = serialized(messages.chunk_messages(chunks))

  chunk = schema_pb2.ChunkData.FromString(record)
  # Reverb decodes strings with TensorFlow's Tensor::FromProto, as this does.
  assert tf.io.parse_tensor(chunk.data.tensors[0].SerializeToString(),
                            tf.string).numpy().tolist() == values.tolist()
  assert chunk.data_tensors_len == 2
  # Tensor::TotalBytes: 24 bytes per string plus its length; then floats.
  assert chunk.data_uncompressed_size == 6 * 24 + 203 + 24


def test_string_tensors_of_many_chunks_hold_their_own_rows():
  values = np.array([[f'{row}-{column}' * row, b'x' * column * 200]
                     for row in range(7) for column in (1, 0)],
                    dtype=object).reshape(7, 2, 2)
  chunks = messages.Chunks(
      keys=np.array([1, 2, 3], np.uint64),
      episodes=np.array([3, 3, 4], np.uint64), steps=np.array([0, 1, 0]),
      row_starts=np.array([1, 2, 5]), lengths=np.array([1, 3, 2]),
      tensors=(values,))  # Rows 0 and 6 in no chunk.

  parsed = [schema_pb2.ChunkData.FromString(record) for record in
            serialized(messages.chunk_messages(chunks))]

  for chunk, start, length in zip(parsed, [1, 2, 5], [1, 3, 2]):
    rows = values[start:start + length]
    assert tf.io.parse_tensor(
        chunk.data.tensors[0].SerializeToString(),
        tf.string).numpy().tolist() == np.vectorize(
            lambda v: v.encode() if isinstance(v, str) else v,
            otypes=[object])(rows).tolist()
    assert chunk.data_uncompressed_size == 24 * rows.size + sum(
        len(v) for v in rows.ravel())


@pytest.fixture(scope='module')
def server_checkpoint(tmp_path_factory):
  """A checkpoint a server wrote: multi-tensor, delta-encoded chunks holding
  ints of rank 2, floats, strings, frames and bools (Reverb's legacy writer,
  the only Python one that delta-encodes), in tables of every selector and
  rate limiter."""
  tables = [
      reverb.Table('fifo', reverb.selectors.Fifo(), reverb.selectors.Fifo(),
                   max_size=100, rate_limiter=reverb.rate_limiters.MinSize(1),
                   max_times_sampled=3),
      reverb.Table('prioritized', reverb.selectors.Prioritized(0.8),
                   reverb.selectors.Lifo(), max_size=50,
                   rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
                       2.0, 3, 100.0),
                   signature=(tf.TensorSpec([3, 5], tf.int32),
                              tf.TensorSpec([3], tf.float64),
                              tf.TensorSpec([3, 2], tf.string),
                              tf.TensorSpec([3, 4, 3], tf.uint8),
                              tf.TensorSpec([3], tf.bool))),
      reverb.Table('heaps', reverb.selectors.MinHeap(),
                   reverb.selectors.MaxHeap(), max_size=10,
                   rate_limiter=reverb.rate_limiters.MinSize(2)),
      reverb.Table('uniform', reverb.selectors.Uniform(),
                   reverb.selectors.Fifo(), max_size=1000,
                   rate_limiter=reverb.rate_limiters.Queue(1000)),
  ]
  root = tmp_path_factory.mktemp('server')
  server = reverb.Server(tables, checkpointer=(
      reverb.checkpointers.DefaultCheckpointer(os.fspath(root))))
  client = reverb.Client(f'localhost:{server.port}')
  rng = np.random.default_rng(0)
  with client.writer(max_sequence_length=3, delta_encoded=True,
                     chunk_length=3) as writer:
    for step in range(10):
      writer.append([np.arange(5, dtype=np.int32) * step + 1000,
                     np.float64(step) / 3,
                     np.array([b'ab' * step, b''], dtype=object),
                     rng.integers(0, 256, (4, 3), dtype=np.uint8),
                     np.bool_(step % 2)])
      if step >= 2:
        for table in ('fifo', 'prioritized', 'heaps', 'uniform'):
          if table != 'heaps' or step < 5:
            writer.create_item(table, 3, step / 2)
    writer.flush()
  # The legacy writer's close does not wait for the server to take the last
  # items: a checkpoint made at once missed two of them, once, in CI.
  _wait_for_items(client, 8 + 8 + 3 + 8)
  path = client.checkpoint()
  server.stop()
  return path


def _wait_for_items(client, count: int, deadline_s: float = 30) -> None:
  deadline = time.monotonic() + deadline_s
  while sum(info.current_size
            for info in client.server_info(timeout=10).values()) < count:
    assert time.monotonic() < deadline, client.server_info(timeout=10)
    time.sleep(0.01)


def test_server_written_tables_equal_ours_from_reverb_table_objects(
    server_checkpoint):
  written = list(records.read_records(
      os.path.join(server_checkpoint, directories.TABLES)))
  for record in written:
    message = checkpoint_pb2.PriorityTableCheckpoint.FromString(record)
    assert message.rate_limiter.insert_count > 0
    settings, counts = table_settings.read_record(record)

    assert table_settings.table_record(settings, counts) == record, (
        message.table_name)


def test_tables_from_reverb_tables_equal_reverbs_protos():
  table = reverb.Table(
      'x', reverb.selectors.Prioritized(0.6), reverb.selectors.MaxHeap(),
      max_size=77, rate_limiter=reverb.rate_limiters.SampleToInsertRatio(
          1.5, 4, (2.0, 6.0)), max_times_sampled=5,
      signature={'o': tf.TensorSpec([2], tf.float32, 'o')})
  counts = table_settings.TableCounts(inserted=9, sampled=4, deleted=2,
                                      deleted_episodes=1, unique_samples=3)

  got = table_settings.table_record(table_settings.TableSettings.of(table),
                                    counts)

  info = schema_pb2.TableInfo.FromString(table.internal_table.info())
  want = checkpoint_pb2.PriorityTableCheckpoint(
      table_name='x', max_size=77, max_times_sampled=5,
      num_deleted_episodes=1, num_unique_samples=3,
      sampler=info.sampler_options, remover=info.remover_options,
      signature=info.signature)
  limits = info.rate_limiter_info
  want.rate_limiter.CopyFrom(checkpoint_pb2.RateLimiterCheckpoint(
      samples_per_insert=limits.samples_per_insert, min_diff=limits.min_diff,
      max_diff=limits.max_diff, min_size_to_sample=limits.min_size_to_sample,
      sample_count=4, insert_count=9, delete_count=2))
  assert got == want.SerializeToString()
  assert table_settings.TableSettings.of(table).signature == (
      table_settings.encode_signature({'o': tf.TensorSpec([2], tf.float32,
                                                          'o')}))


def test_server_written_items_equal_ours_byte_for_byte(server_checkpoint):
  written = list(records.read_records(
      os.path.join(server_checkpoint, directories.ITEMS)))
  ours = []
  for table, items in checkpoint_copy.items_of(server_checkpoint).items():
    ours += serialized(messages.item_messages(table, items))
  assert sorted(ours) == sorted(written)
  assert len(written) == 8 + 8 + 3 + 8


def test_server_written_chunks_equal_ours(server_checkpoint):
  written = list(records.read_records(
      os.path.join(server_checkpoint, directories.CHUNKS)))
  chunks = checkpoint_copy.chunks_of(server_checkpoint)
  assert len(written) == len(chunks) == 4
  assert {c.tensors[0].ndim for c in chunks} == {2}  # Ints of rank 2.
  for record, chunk in zip(written, chunks):
    (ours,) = serialized(messages.chunk_messages(chunk))
    theirs = schema_pb2.ChunkData.FromString(record)
    got = schema_pb2.ChunkData.FromString(ours)
    assert theirs.delta_encoded
    for message in (theirs, got):
      for tensor in message.data.tensors:
        if tensor.dtype != tf.string.as_datatype_enum:
          tensor.tensor_content = decompressed(tensor)
    assert got == theirs


def test_record_files_are_read_by_tensorflow_which_checks_every_crc(
    tmp_path):
  path = os.fspath(tmp_path / 'x.tfrecord')
  payloads = [os.urandom(n) for n in (0, 1, 5, 300, 70_000)]
  file = record_writer.RecordWriter(path, level=1)
  file.write_records(payloads)
  file.write_records([b'more'])
  file.close()

  read = [r.numpy() for r in tf.data.TFRecordDataset(
      path, compression_type='ZLIB')]

  assert read == payloads + [b'more'] == list(records.read_records(path))
  import zlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with open(path, 'rb') as f:
    data = bytearray(zlib.decompress(f.read()))
  data[12 + 0 + 4 + 12 + 1] ^= 1  # A bit of the second record's data.
  with open(path, 'wb') as f:
    f.write(zlib.compress(bytes(data)))
  with pytest.raises(tf.errors.DataLossError, match='corrupted record'):
    list(tf.data.TFRecordDataset(path, compression_type='ZLIB'))


@pytest.mark.parametrize('sizes', [[], [0], [1, 5, 300], [70_000, 3],
                                   [65_535 - 16, 65_536, 200_000]])
def test_stored_files_are_zlib_streams_tensorflow_reads(tmp_path, sizes):
  # The default level writes its own stored deflate blocks (64 KB at most):
  # records across block edges, and none at all.
  path = os.fspath(tmp_path / 'x.tfrecord')
  payloads = [os.urandom(n) for n in sizes]
  file = record_writer.RecordWriter(path)
  file.write_records(payloads)
  file.write_records(payloads[:1])
  file.close()

  read = [r.numpy() for r in tf.data.TFRecordDataset(
      path, compression_type='ZLIB')]

  assert read == payloads + payloads[:1] == list(records.read_records(path))
  import zlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with open(path, 'rb') as f:
    stored = f.read()
  framed = b''.join(
      record_writer.framed(serialize.Messages(len(p)).serialized(p))[0]
      .tobytes() for p in (payloads, payloads[:1]))
  assert zlib.decompress(stored) == framed
  assert file.bytes == len(stored)


def test_lengths_crcs_equal_the_records_crc32c():
  import google_crc32c  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  values = np.array(EDGES + [123_456_789], np.uint64)
  assert wire.crc32c_of_uint64(values).tolist() == [
      google_crc32c.value(int(v).to_bytes(8, 'little')) for v in values]


def two_chunks(**changes) -> messages.Chunks:
  values = dict(keys=np.array([5, 6], np.uint64),
                episodes=np.array([1, 1], np.uint64), steps=np.array([0, 2]),
                row_starts=np.array([0, 2]), lengths=np.array([2, 2]),
                tensors=(np.zeros((4, 3), np.float32),))
  values.update(changes)
  return messages.Chunks(**values)


# Chunks Reverb cannot hold or would mis-read: (changes, message).
BAD_CHUNKS = {
    'lengths of other count': (
        dict(lengths=np.array([2])), 'Chunks: 1 lengths for 2 keys.'),
    'no tensors': (
        dict(tensors=()), 'Chunks: no tensors (a chunk holds at least one).'),
    'empty chunk': (
        dict(lengths=np.array([2, 0])),
        'Chunk 6: 0 rows from row 2, step 2; a chunk holds at least one row, '
        'from row and step 0 on.'),
    'step past int32': (
        dict(steps=np.array([0, 2**31 - 1])),
        'Chunk 6 ends at step 2147483648 of its episode; Reverb counts steps '
        'in int32.'),
    'rows past the array': (
        dict(row_starts=np.array([0, 3])),
        'Chunk 6: rows 3 to 4 of tensor 0, which has 4.'),
    'not an array of rows': (
        dict(tensors=(np.float32(1),)),
        'Chunks: tensor 0 is not an array of rows.'),
    'complex numbers': (
        dict(tensors=(np.zeros((4, 3), np.complex64),)),
        'Chunks: tensor 0 is complex64, which a Reverb chunk cannot hold '
        '(TensorFlow dtypes: bool, float16, float32, float64, int16, int32, '
        'int64, int8, uint16, uint32, uint64, uint8, strings).'),
}


@pytest.mark.parametrize('case', sorted(BAD_CHUNKS))
def test_chunks_reverb_cannot_hold_are_refused(case):
  changes, message = BAD_CHUNKS[case]
  with pytest.raises(CheckpointWriteError) as raised:
    messages.chunk_messages(two_chunks(**changes))
  assert str(raised.value) == message


def two_items(**changes) -> messages.Items:
  values = dict(keys=np.array([7, 8], np.uint64), priorities=np.ones(2),
                times=np.array([10, 20]), num_columns=2,
                slice_counts=np.array([1, 1, 1, 2]),
                chunk_keys=np.array([5, 5, 5, 5, 6], np.uint64),
                offsets=np.array([0, 0, 1, 1, 0]),
                lengths=np.array([2, 2, 2, 1, 1]),
                indexes=np.zeros(5, np.int64), squeeze=np.zeros(2, bool))
  values.update(changes)
  return messages.Items(**values)


# Items Reverb would refuse or mis-read: (changes, message).
BAD_ITEMS = {
    'priorities of other count': (
        dict(priorities=np.ones(3)),
        "Table 't': 3 priorities for 2 items of 2 columns."),
    'times_sampled of other count': (
        dict(times_sampled=np.zeros(1, np.int32)),
        "Table 't': 1 times_sampled for 2 items."),
    'slices of other count': (
        dict(offsets=np.zeros(4, np.int64)),
        "Table 't': 4 offsets for 5 chunk slices (the sum of slice_counts)."),
    'NaN priority': (
        dict(priorities=np.array([1.0, np.nan])),
        "Table 't': item 8 has priority nan; Reverb refuses negative and NaN "
        'priorities (the server would not start).'),
    'times going back': (
        dict(times=np.array([20, 10])),
        "Table 't': item 8 is inserted at 10 ns, before the item ahead of it "
        '(20 ns): items go in insertion order, oldest first.'),
    'column without slices': (
        dict(slice_counts=np.array([2, 0, 1, 2])),
        "Table 't': every item column needs at least one chunk slice."),
    'slice of no rows': (
        dict(lengths=np.array([2, 2, 0, 1, 1])),
        "Table 't': a chunk slice of chunk 5 takes 0 rows from row 1 of "
        'tensor 0; a slice takes at least one row, from row 0 on, and ends '
        'before row 2^31.'),
    'squeezed column of two rows': (
        dict(squeeze=np.array([False, True])),
        "Table 't': item 7 squeezes column 1, which holds 2 rows; only a "
        'column of one row can be squeezed.'),
}


@pytest.mark.parametrize('case', sorted(BAD_ITEMS))
def test_items_reverb_would_refuse_are_refused(case):
  changes, message = BAD_ITEMS[case]
  with pytest.raises(CheckpointWriteError) as raised:
    messages.item_messages('t', two_items(**changes))
  assert str(raised.value) == message
