"""A split cut into parts that readers read in parallel, each a range of
episodes inside one record file, with its position in the data as
`rlds_reverb.load` reads it (`rlds_reverb.beam.ReadEpisodes`, and the
workers of `rlds_reverb.parallel.build_shards`).

    SRC, split --dataset_info only--> [Part('train', 120, 180, position 120)]

Positions name episodes as every entry point does (errors, skipped lists),
and say which server an episode goes to (I % S).
"""

import dataclasses
from typing import Iterator, List, Optional, Sequence, Tuple

import numpy as np
import tensorflow_datasets as tfds

from rlds_reverb.sources import opening

# Parts a split is cut into at least, by default (files allowing).
MIN_PARTS = 8


@dataclasses.dataclass(frozen=True)
class Part:
  """Episodes `start`..`end` - 1 of one split, all in one record file."""
  source: str
  data_dir: Optional[str]
  split: str  # The split's name, without slicing.
  start: int
  end: int
  first_position: int  # Position of episode `start` in the data as read.

  def split_text(self) -> str:
    return f'{self.split}[{self.start}:{self.end}]'


def plan_parts(src, split: str = 'train', data_dir: Optional[str] = None,
               parts_per_file: Optional[int] = None,
               min_parts: int = MIN_PARTS) -> List[Part]:
  """The parts of `split` of each source, in read order; reads no records.
  `parts_per_file` None: enough for `min_parts` parts, files allowing."""
  ranges = _ranges(src, split, data_dir)
  if parts_per_file is None:
    files = sum(1 for _, _, first, last, lengths in ranges
                for _ in _pieces(first, last, lengths, 1))
    parts_per_file = -(-min_parts // max(files, 1))
  parts, position = [], 0
  for source, split_name, first, last, shard_lengths in ranges:
    for start, end in _pieces(first, last, shard_lengths, parts_per_file):
      parts.append(Part(source, data_dir, split_name, start, end, position))
      position += end - start
  return parts


def _ranges(src, split: str, data_dir: Optional[str]
            ) -> List[Tuple[str, str, int, int, Sequence[int]]]:
  """(source, split name, first, end, record files' lengths) of each range
  that `split` reads, in order; from the builders' dataset info alone."""
  ranges = []
  for source, builder in opening.builders(src, data_dir):
    instructions = tfds.core.ReadInstruction.from_spec(split).to_absolute(
        builder.info.splits)
    for instruction in instructions:
      shard_lengths = builder.info.splits[instruction.splitname].shard_lengths
      first = instruction.from_ or 0  # None: from the start, to the end.
      last = sum(shard_lengths) if instruction.to is None else instruction.to
      ranges.append((source, instruction.splitname, first, last,
                     shard_lengths))
  return ranges


def _pieces(start: int, end: int, shard_lengths: Sequence[int],
            per_file: int) -> Iterator[Tuple[int, int]]:
  """[start, end) cut at record-file boundaries, each file's range in
  `per_file` near-equal pieces; no empty piece."""
  bounds = np.cumsum([0, *shard_lengths])
  for file_start, file_end in zip(bounds[:-1], bounds[1:]):
    low, high = max(start, file_start), min(end, file_end)
    if low >= high:
      continue
    cuts = low + (np.arange(per_file + 1) * (high - low)) // per_file
    for piece_start, piece_end in zip(cuts[:-1], cuts[1:]):
      if piece_start < piece_end:
        yield int(piece_start), int(piece_end)
