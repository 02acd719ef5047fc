"""The records of a checkpoint file, read as a stream.

Each file of a Reverb checkpoint is one zlib stream of TFRecords (Reverb's
`TFRecordCheckpointer` writes them with TensorFlow's `RecordWriter`, zlib
options):

    file = zlib( record record ... )
    record = length | its CRC | data | its CRC     (`rlds_reverb._util.wire`)

The file is decompressed a block at a time, and only the records not yet
handed out are held: memory is a block plus the largest record, whatever the
file's size. The CRCs are not checked: zlib's own checksum, at the end of the
stream, covers every byte, and a stream that ends early or does not inflate
is an error naming the file.
"""

from typing import Iterator, Tuple
import zlib

import numpy as np

from rlds_reverb._util import wire
from rlds_reverb.errors import CheckpointReadError

# Compressed bytes read at once, and most bytes one step inflates them to.
READ_BYTES = 1 << 20
INFLATED_BYTES = 1 << 20


def read_records(path: str) -> Iterator[bytes]:
  """The data of each record of the zlib-compressed TFRecord file `path`.

  Raises:
    CheckpointReadError: the file is missing, is not zlib, ends early (a
      checkpoint cut short or being written) or inside a record, naming it.
  """
  for data, starts, ends in read_record_batches(path):
    for start, end in zip(starts.tolist(), ends.tolist()):
      yield data[start:end]


def read_record_batches(path: str
                        ) -> Iterator[Tuple[bytes, np.ndarray, np.ndarray]]:
  """(data, starts, ends) per decompressed block: the records the block
  completes, record i being data[starts[i]:ends[i]]. For readers that take
  many records at once (numpy), without a bytes object per record.

  Raises:
    CheckpointReadError: as `read_records`.
  """
  inflater = _Inflater(path)
  pending = bytearray()
  consumed = 0  # Decompressed bytes before `pending`.
  for block in inflater.blocks():
    pending += block
    starts, ends = wire.whole_records(pending)
    if starts:
      position = ends[-1] + wire.RECORD_FOOTER
      yield (bytes(pending[:position]), np.array(starts, np.int64),
             np.array(ends, np.int64))
      consumed += position
      del pending[:position]
  if pending:
    raise CheckpointReadError(
        f'{path} ends inside a record: the one at byte {consumed:,} of '
        f'{consumed + len(pending):,} (decompressed); the file is cut short '
        f'or damaged.')


def check_whole(path: str) -> None:
  """Inflates the zlib file `path` to its end, keeping nothing: its checksum
  covers every byte, so a file cut short or damaged anywhere raises.

  Raises:
    CheckpointReadError: as `read_records`, naming the file.
  """
  for _ in _Inflater(path).blocks():
    pass


class _Inflater:
  """The decompressed bytes of a zlib file, in blocks of bounded size."""

  def __init__(self, path: str):
    self._path = path

  def blocks(self) -> Iterator[bytes]:
    decompressor = zlib.decompressobj()
    try:
      with open(self._path, 'rb') as f:
        while not decompressor.eof:
          compressed = decompressor.unconsumed_tail or f.read(READ_BYTES)
          if not compressed:
            break
          yield self._inflate(decompressor, compressed)
        self._check_end(decompressor, decompressor.unused_data or f.read(1))
    except OSError as e:
      raise CheckpointReadError(
          f'{self._path} cannot be read: {e.strerror or e}') from e

  def _inflate(self, decompressor, compressed: bytes) -> bytes:
    try:
      return decompressor.decompress(compressed, INFLATED_BYTES)
    except zlib.error as e:
      raise CheckpointReadError(
          f'{self._path} is not a readable zlib-compressed TFRecord file '
          f'({e}): the checkpoint is damaged.') from e

  def _check_end(self, decompressor, after_end: bytes) -> None:
    if not decompressor.eof:
      raise CheckpointReadError(
          f'{self._path} ends before its zlib stream does: the file is cut '
          f'short (a checkpoint being written, or a copy that stopped).')
    if after_end:
      raise CheckpointReadError(
          f'{self._path} has bytes after its zlib stream ends: the file is '
          f'damaged.')
