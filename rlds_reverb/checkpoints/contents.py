"""What a checkpoint holds, summarized: the lengths of the chunks of each
item column (what `push`'s chunking left on the server), and the bytes its
chunks' data takes (what the server holds of them in memory).

Each file of a checkpoint is read as a stream (`records`): `chunks.tfrecord`
holds ChunkData records, `items.tfrecord` PrioritizedItem records.
"""

from collections import Counter
import os
from typing import Dict, List

from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import schema


def chunk_lengths(path: str) -> Dict[str, List[Counter]]:
  """Per table, per item column: a Counter of the lengths of its chunks.

  `path` is one checkpoint's directory, or the directory Reverb checkpoints
  into (`serve --checkpoint-dir`, `DefaultCheckpointer(path)`): then its
  newest complete checkpoint, the one Reverb would load, is read. A chunk's
  length is the number of steps it holds; each chunk counts once per table.

  Raises:
    FileNotFoundError: `path` is neither, naming what it holds instead.
    CheckpointReadError: a file of the checkpoint is cut short or damaged.
  """
  checkpoint = directories.checkpoint_path(path)
  lengths = {}
  for record in records.read_records(
      os.path.join(checkpoint, directories.CHUNKS)):
    chunk = schema.parse('ChunkData', record)
    lengths[chunk.chunk_key] = (chunk.sequence_range.end -
                                chunk.sequence_range.start + 1)
  result: Dict[str, List[Counter]] = {}
  seen = set()
  for record in records.read_records(
      os.path.join(checkpoint, directories.ITEMS)):
    item = schema.parse('PrioritizedItem', record)
    columns = item.flat_trajectory.columns
    counters = result.setdefault(item.table, [Counter() for _ in columns])
    for counter, column in zip(counters, columns):
      for chunk_slice in column.chunk_slices:
        if (item.table, chunk_slice.chunk_key) not in seen:
          seen.add((item.table, chunk_slice.chunk_key))
          counter[lengths[chunk_slice.chunk_key]] += 1
  return result


def chunk_bytes(path: str) -> int:
  """The bytes of the chunks' data: over the checkpoint's distinct chunks,
  the stored bytes of each tensor (`tensor_content`: snappy-compressed
  numbers, TensorFlow's encoding of strings).

  A server holds each chunk once, as stored (it decodes nothing until a
  client samples), so this is its memory for the data, less its fixed cost
  per chunk (~915 B measured). A chunk is counted once however many records hold
  it: Reverb's own checkpoints at times write a chunk twice. `path` as for
  `chunk_lengths`.

  Raises:
    FileNotFoundError: `path` is neither, naming what it holds instead.
    CheckpointReadError: the chunks file is cut short or damaged.
  """
  checkpoint = directories.checkpoint_path(path)
  seen, total = set(), 0
  for record in records.read_records(
      os.path.join(checkpoint, directories.CHUNKS)):
    chunk = schema.parse('ChunkData', record)
    if chunk.chunk_key in seen:
      continue
    seen.add(chunk.chunk_key)
    for tensor in schema.parse('ChunkTensors', chunk.data).tensors:
      total += len(tensor.tensor_content) + sum(map(len, tensor.string_val))
  return total
