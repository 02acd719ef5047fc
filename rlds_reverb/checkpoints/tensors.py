"""A chunk's tensors as numpy arrays, and back: Reverb's compression, undone
(`decode`) and done (`encode_rows`, `string_content`).

Reverb stores each tensor of a chunk as a TensorFlow `TensorProto`
(`reverb/cc/tensor_compression.cc`):

    strings   TensorFlow's own encoding in `tensor_content`: a varint length
              per string, then the strings one after another
    others    `tensor_content` = raw snappy of the row-major bytes; if the
              chunk is `delta_encoded` and the tensor is an integer tensor of
              rank >= 2, each row holds its difference from the row before
              (in the unsigned type of the same width, wrapping)

Snappy is decoded by `cramjam` into the array's own memory, and encoded by
it a chunk at a time (~0.5 us a call; 1.7-4 GB/s here on noise and on
zeros): the bytes may differ from the C++ snappy's (the matches it picks),
the data they decode to does not, and their sizes agree within 0.01% on the
tests' data (`checkpoints.chunk_bytes`). `data_uncompressed_size` is the chunk's bytes before deltas and snappy
as TensorFlow counts them (`Tensor::TotalBytes`: a string costs 24 bytes
plus its length).
"""

from typing import Dict, List, Sequence, Tuple

import cramjam
import numpy as np

from rlds_reverb._util import wire
from rlds_reverb._util import wording
from rlds_reverb.errors import CheckpointReadError
from rlds_reverb.specs import paths

# TensorFlow's DataType numbers (tensorflow/core/framework/types.proto).
STRING = 7
DTYPES: Dict[int, np.dtype] = {
    1: np.dtype(np.float32), 2: np.dtype(np.float64), 3: np.dtype(np.int32),
    4: np.dtype(np.uint8), 5: np.dtype(np.int16), 6: np.dtype(np.int8),
    STRING: np.dtype(object), 9: np.dtype(np.int64), 10: np.dtype(np.bool_),
    17: np.dtype(np.uint16), 19: np.dtype(np.float16),
    22: np.dtype(np.uint32), 23: np.dtype(np.uint64),
}
NUMBERS: Dict[np.dtype, int] = {
    dtype: number for number, dtype in DTYPES.items() if number != STRING}
STRING_BYTES = 24  # sizeof(tensorflow::tstring), counted per string.


def decode(tensor, delta_encoded: bool, where: str) -> np.ndarray:
  """The values of `tensor` (a schema `TensorProto`) as a numpy array.

  `where` starts error messages ('chunk 123 of /ckpt/chunks.tfrecord').

  Raises:
    CheckpointReadError: an unknown dtype, or content that does not decode to
      the tensor's shape.
  """
  dtype = DTYPES.get(tensor.dtype)
  if dtype is None:
    raise CheckpointReadError(
        f'{where}: a tensor of TensorFlow dtype {tensor.dtype}, which this '
        f'reader does not know.')
  shape = tuple(dim.size for dim in tensor.tensor_shape.dim)
  if tensor.dtype == STRING:
    return _strings(tensor, shape, where)
  values = np.empty(shape, dtype)
  try:
    written = cramjam.snappy.decompress_raw_into(tensor.tensor_content,
                                                 values.reshape(-1).view(np.uint8))
  except cramjam.DecompressionError as e:
    raise CheckpointReadError(f'{where}: its snappy data does not decode ({e}).'
                          ) from e
  if written != values.nbytes:
    raise CheckpointReadError(
        f'{where}: its snappy data holds {wording.count(written, "byte")}; a '
        f'{paths.dtype_shape_text(dtype, shape)} tensor has '
        f'{wording.number(values.nbytes)}.')
  if delta_encoded and values.ndim >= 2 and dtype.kind in 'iu':
    _undo_deltas(values)
  return values


def _undo_deltas(values: np.ndarray) -> None:
  """Rows were stored as differences from the row before: sum them, in place,
  wrapping in the unsigned type as Reverb's encoder does."""
  unsigned = values.view(np.dtype(f'u{values.dtype.itemsize}'))
  np.cumsum(unsigned, axis=0, dtype=unsigned.dtype, out=unsigned)


def _strings(tensor, shape, where: str) -> np.ndarray:
  """A string tensor from `string_val`, or from TensorFlow's encoding."""
  count = int(np.prod(shape, dtype=np.int64))
  if tensor.string_val:
    items = list(tensor.string_val)
  else:
    items = _decoded_strings(tensor.tensor_content, count, where)
  if len(items) != count:
    raise CheckpointReadError(
        f'{where}: a string tensor of shape {paths.shape_text(shape)} holds '
        f'{wording.count(len(items), "string")}.')
  values = np.empty(count, dtype=object)
  values[:] = items
  return values.reshape(shape)


def _decoded_strings(content: bytes, count: int, where: str):
  """`count` varint lengths, then the strings, one after another."""
  lengths, position = [], 0
  try:
    for _ in range(count):
      length, position = wire.varint_at(content, position)
      lengths.append(length)
  except IndexError:
    raise CheckpointReadError(
        f'{where}: its string tensor ends inside the lengths of its '
        f'{wording.count(count, "string")}.') from None
  if position + sum(lengths) != len(content):
    raise CheckpointReadError(
        f'{where}: its string tensor holds '
        f'{wording.count(len(content) - position, "byte")} of strings; its '
        f'lengths add up to {wording.number(sum(lengths))}.')
  items = []
  for length in lengths:
    items.append(content[position:position + length])
    position += length
  return items


def dtype_number(values: np.ndarray) -> int:
  """TensorFlow's DataType number for the array's dtype (strings: object,
  bytes_ or str_ arrays), or 0 if Reverb cannot hold it."""
  if values.dtype.kind in 'OSU':
    return STRING
  return NUMBERS.get(values.dtype, 0)


def encode_rows(values: np.ndarray, starts: Sequence[int],
                lengths: Sequence[int], delta_encoded: bool) -> List[bytes]:
  """Per chunk c, rows [starts[c], starts[c] + lengths[c]) of `values` (not
  strings) as Reverb stores them: in rows' differences if `delta_encoded`
  and the values are integers of rank >= 2 (the rows' own rank >= 1), then
  raw snappy of the chunk alone, as Reverb's writer compresses each chunk it
  makes; or, where that is shorter, one literal (`stored_rows`: a chunk
  snappy cannot shrink, past 64 KB, by a few bytes). Each chunk's rows must
  lie together in `values`.

  Every chunk is compressed, whatever the others hold: a chunk shrinks
  where the rows before it did not (data that goes still after noise), and
  snappy gives up quickly on bytes it cannot shrink (1.7-3.6 GB/s on float
  noise here, 4.4-6.5 GB/s to copy them into literals).
  """
  pieces, sizes = _chunk_pieces(values, starts, lengths, delta_encoded)
  # No Python frame per chunk: the slices and calls are made by map, in C.
  contents = list(map(cramjam.snappy.compress_raw, pieces))
  header_sizes = {size: len(_literal_header(size))
                  for size in set(sizes.tolist())}
  literal_sizes = sizes + np.fromiter(
      map(header_sizes.__getitem__, sizes.tolist()), np.int64, len(sizes))
  longer = np.fromiter(map(len, contents), np.int64,
                       len(contents)) > literal_sizes
  for chunk in np.flatnonzero(longer).tolist():
    contents[chunk] = _literal_header(int(sizes[chunk])) + pieces[chunk]
  return contents


def stored_rows(values: np.ndarray, starts: Sequence[int],
                lengths: Sequence[int], delta_encoded: bool) -> List[bytes]:
  """As `encode_rows`, without compressing: each chunk's bytes as raw
  snappy of one literal (its length, a literal tag, the bytes), which any
  snappy decoder reads: the form `encode_rows` keeps for a chunk snappy
  does not shrink."""
  pieces, sizes = _chunk_pieces(values, starts, lengths, delta_encoded)
  headers = {size: _literal_header(size) for size in set(sizes.tolist())}
  # No Python frame per chunk: header + bytes joined by map, in C.
  return list(map(bytes.__add__, map(headers.__getitem__, sizes.tolist()),
                  pieces))


def _chunk_pieces(values, starts, lengths, delta_encoded):
  """(each chunk's bytes, deltas taken, as a memoryview; their sizes)."""
  data, firsts, sizes = _chunk_bytes(values, starts, lengths, delta_encoded)
  return (list(map(data.__getitem__, map(slice, firsts.tolist(),
                                         (firsts + sizes).tolist()))),
          sizes)


def _chunk_bytes(values, starts, lengths, delta_encoded):
  """(the bytes of `values`, deltas taken; each chunk's first byte and
  size in them)."""
  values = np.ascontiguousarray(values)
  if delta_encoded and values.ndim >= 2 and values.dtype.kind in 'iu':
    values = _deltas(values, starts)
  row_bytes = values.nbytes // len(values) if len(values) else 0
  data = memoryview(values.reshape(-1).view(np.uint8))
  return (data, np.asarray(starts, np.int64) * row_bytes,
          np.asarray(lengths, np.int64) * row_bytes)


def _literal_header(size: int) -> bytes:
  """Raw snappy's preamble (the length, a varint) and a literal's tag: the
  length less one in the tag if < 60, else in the next 1 to 4 bytes."""
  preamble = bytearray()
  value = size
  while value >= 0x80:
    preamble.append(value & 0x7F | 0x80)
    value >>= 7
  preamble.append(value)
  if not size:
    return bytes(preamble)
  if size <= 60:
    return bytes(preamble) + bytes([(size - 1) << 2])
  extra = (size - 1).to_bytes(4, 'little').rstrip(b'\0') or b'\0'
  return bytes(preamble) + bytes([(59 + len(extra)) << 2]) + extra


def _deltas(values: np.ndarray, starts: Sequence[int]) -> np.ndarray:
  """Each row less the row before, wrapping in the unsigned type of the same
  width; a chunk's first row as it is (`_undo_deltas` inverted)."""
  unsigned = values.view(np.dtype(f'u{values.dtype.itemsize}'))
  deltas = unsigned.copy()
  deltas[1:] -= unsigned[:-1]
  starts = np.asarray(starts, np.int64)
  deltas[starts] = unsigned[starts]
  return deltas.view(values.dtype)


def string_rows(values: np.ndarray, starts: Sequence[int],
                lengths: Sequence[int]) -> Tuple[List[bytes], np.ndarray]:
  """Per chunk c, rows [starts[c], starts[c] + lengths[c]) of a string
  array: its `tensor_content` (as `string_content`) and its
  `Tensor::TotalBytes` (as `string_bytes`).

  Every chunk at once: the strings' lengths and their varints are found in
  one pass over the chunks' rows (only theirs: a writer gives a block's
  whole column with each batch of its chunks), and each chunk's content is
  one join of its varints and strings (`string_content` per chunk: ~90 us
  for two encoded frames, most of it the varints of two lengths).
  """
  starts = np.asarray(starts, np.int64)
  lengths = np.asarray(lengths, np.int64)
  if len(starts):  # Only the rows of these chunks (a part of a block's).
    first_row = int(starts.min())
    values = values[first_row:int((starts + lengths).max())]
    starts = starts - first_row
  per_row = int(np.prod(values.shape[1:], dtype=np.int64))
  items = list(map(_as_bytes, values.reshape(-1).tolist()))
  sizes = np.fromiter(map(len, items), np.int64, len(items))
  varint_sizes = wire.varint_lengths(sizes.astype(np.uint64))
  varint_ends = np.cumsum(varint_sizes)
  varints = np.empty(int(varint_ends[-1]) if len(items) else 0, np.uint8)
  wire.put_varints(varints, varint_ends - varint_sizes,
                   sizes.astype(np.uint64), varint_sizes)
  varints = memoryview(varints)
  varint_starts = (varint_ends - varint_sizes).tolist()
  varint_ends_list = varint_ends.tolist()
  firsts = starts * per_row
  lasts = firsts + lengths * per_row  # Exclusive.
  contents = [
      b''.join([varints[varint_starts[first]:varint_ends_list[last - 1]]] +
               items[first:last]) if last > first else b''
      for first, last in zip(firsts.tolist(), lasts.tolist())]
  string_ends = np.concatenate([[0], np.cumsum(sizes)])
  totals = (STRING_BYTES * (lasts - firsts) + string_ends[lasts] -
            string_ends[firsts])
  return contents, totals


def string_content(values: np.ndarray) -> bytes:
  """A string tensor's `tensor_content` (TensorFlow's encoding): a varint
  length per string, then the strings."""
  items = [_as_bytes(item) for item in values.reshape(-1).tolist()]
  lengths = np.fromiter(map(len, items), np.int64, len(items))
  return wire.packed_varints(lengths) + b''.join(items)


def string_bytes(values: np.ndarray) -> int:
  """`Tensor::TotalBytes` of a string tensor."""
  items = values.reshape(-1).tolist()
  return STRING_BYTES * len(items) + sum(len(_as_bytes(i)) for i in items)


def _as_bytes(item) -> bytes:
  return item.encode() if isinstance(item, str) else bytes(item)
