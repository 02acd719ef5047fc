"""Chunks snappy cannot shrink are stored as one snappy literal
(`tensors.stored_rows`): any snappy decoder gives back the rows, deltas
too; `messages.chunk_messages` stores floats so and compresses rows that
shrink. Real servers load and sample both (test_checkpoint_writer.py)."""

import cramjam
import numpy as np
import pytest

from rlds_reverb.checkpoints import messages
from rlds_reverb.checkpoints import tensors
from rlds_reverb.checkpoints import schema

# Literal tags hold lengths up to 60, then 1, 2, 3 bytes of length.
SIZES = [1, 59, 60, 61, 256, 257, 65536, 65537, 2**24 + 1]


@pytest.mark.parametrize('size', SIZES)
def test_stored_rows_decode_to_the_rows(size):
  rows = np.random.default_rng(size).integers(0, 256, (size, 1), np.uint8)

  [content] = tensors.stored_rows(rows, [0], [size], False)

  decoded = np.empty(size, np.uint8)
  assert cramjam.snappy.decompress_raw_into(content, decoded) == size
  np.testing.assert_array_equal(decoded, rows.ravel())


def test_stored_delta_rows_decode_as_reverb_encodes_them():
  rows = np.random.default_rng(0).integers(-2**40, 2**40, (10, 3))
  starts, lengths = [0, 4, 7], [4, 3, 3]

  stored = tensors.stored_rows(rows, starts, lengths, True)

  assert [bytes(cramjam.snappy.decompress_raw(c)) for c in stored] == [
      bytes(cramjam.snappy.decompress_raw(c))
      for c in tensors.encode_rows(rows, starts, lengths, True)]


def chunk_content(values: np.ndarray) -> bytes:
  chunks = messages.Chunks(
      keys=np.array([1], np.uint64), episodes=np.array([2], np.uint64),
      steps=np.array([0]), row_starts=np.array([0]),
      lengths=np.array([len(values)]), tensors=(values,))
  from rlds_reverb.checkpoints import serialize  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  buffer, starts, ends = serialize.serialize(messages.chunk_messages(chunks))
  chunk = schema.parse('ChunkData', buffer[starts[0]:ends[0]].tobytes())
  tensor = schema.parse('ChunkTensors', chunk.data).tensors[0]
  return tensor.tensor_content


def test_chunks_are_compressed_only_where_snappy_shrinks_them():
  floats = np.random.default_rng(1).standard_normal((32, 17)).astype(
      np.float32)
  zeros = np.zeros((32, 17), np.float32)

  # The preamble (2,176 as a varint: 2 bytes), a tag and 2 bytes of length.
  assert len(chunk_content(floats)) == floats.nbytes + 2 + 3
  assert len(chunk_content(zeros)) < zeros.nbytes // 10
  for values in (floats, zeros):
    assert bytes(cramjam.snappy.decompress_raw(
        chunk_content(values))) == values.tobytes()
