"""A shard of a split: the index-th of `count` disjoint parts, exact to the
episode (`tfds.even_splits`), so that the `count` shards together are the
split. TFDS reads a shard from the record files that hold it: N shards cost
about one read of the data in all, not N.
"""

from typing import Optional, Tuple

import tensorflow_datasets as tfds

from rlds_reverb import errors


Shard = Tuple[int, int]  # (index, count): the index-th of count parts.


def shard_split(split: str, shard: Optional[Shard]):
  """The TFDS split argument for `shard` of `split` (`split` if None)."""
  if shard is None:
    return split
  index, count = shard
  if not 0 <= index < count:
    raise errors.SourceError(
        f'Shard {index}/{count} does not exist: the index must be in '
        f'0..{count - 1}.')
  return tfds.even_splits(split, count)[index]
