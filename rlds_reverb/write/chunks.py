"""How many steps each column's chunks hold: long for small, short for large.

A Reverb server keeps every chunk with ~915 B of overhead per column, so a
column of 4-byte rewards in chunks of 2 costs far more than its data; but a
sampled item ships every chunk it touches whole, so frames in chunks of 32
ship 32 frames for a 2-step sample. Per column, from its bytes per step b:

    chunk_length = clamp(CHUNK_BYTES // b, MIN_CHUNK_LENGTH, MAX_CHUNK_LENGTH)

    column                       b          chunk_length
    reward, discount, step types 1-8 B      32
    halfcheetah observation      68 B       32
    a 512-float embedding        2 KB       4
    72x96x3 frames               20.7 KB    2

`benchmarks/server_memory.py --sweep` measures server memory and sampling
rates over chunk lengths and column sizes; the constants come from it:
  * 32: small columns' memory per item falls with the chunk length until the
    per-chunk overhead is gone (vector items: 4.4 KB at 2, 2.4 at 8, 2.0 at
    16, 1.8 at 32), with sampling as fast as Reverb's default or faster;
  * 8 KB per chunk: a 2 KB column sampled fastest in chunks of 4, 10%
    slower in chunks of 8 (16 KB) for 3-4% less memory, 1.3-1.6x slower in
    chunks of 32; 72x96x3 frames 0.76-0.82x as fast in chunks of 4 as of 2;
  * at least 2: a 2-step item then touches 1.5 chunks of a large column on
    average, as with Reverb's own writers (whose chunks hold at most 2
    steps), and the server holds half the chunks of length 1 (72x96x3
    frames: 1.4-1.7 KB less per item, for sampling 0.9x as fast).

Chunks are finalized when full, so a writer holds, unconfirmed, the items
that reference a column's open chunk: up to `tables * ceil((c - 1) / S)` for
chunks of c rows and stride S (`held_items`). A flush leaves those pending
(flushing them would cut their chunks short), and Reverb warns from 50
pending items: so held + tables - 1 + F <= 49 for a flush every F items, and
`max_chunk_length` caps c so that F >= 16 (for many tables, c = 1).
A user's `chunk_length` (one int, or lengths by field path or path prefix:
{'observation/pixels': 2, 'observation': 16}, the longest matching key
winning, '' matching every field) overrides the rule.
"""

import math
from typing import List, Mapping, Optional, Sequence

import numpy as np

from rlds_reverb import push_options
from rlds_reverb._util import wording
from rlds_reverb.push_options import ChunkLength
from rlds_reverb.write import columns as columns_lib

CHUNK_BYTES = 8192
MIN_CHUNK_LENGTH = 2
MAX_CHUNK_LENGTH = 32
# Reverb warns from 50 unconfirmed items on: never more than this many.
MAX_PENDING_ITEMS = 49
# Items written between two flushes, at least (when chunks are longer than 1).
MIN_FLUSH_ITEMS = 16


def max_chunk_length(num_tables: int, stride_length: int) -> int:
  """The longest chunks that leave `MIN_FLUSH_ITEMS` between flushes, >= 1."""
  length = 1
  while (length < MAX_CHUNK_LENGTH and
         flush_every(length + 1, num_tables, stride_length) >= MIN_FLUSH_ITEMS):
    length += 1
  return length


def flush_every(chunk_length: int, num_tables: int, stride_length: int) -> int:
  """Items between flushes that keep every count <= `MAX_PENDING_ITEMS`.

  After a flush at most `held_items` are pending; until the next one, rows
  add up to F + num_tables - 1 items.
  """
  return (MAX_PENDING_ITEMS + 1 - num_tables -
          held_items(chunk_length, num_tables, stride_length))


def held_items(chunk_length: int, num_tables: int, stride_length: int) -> int:
  """Items that can wait for one open chunk of `chunk_length` rows."""
  return num_tables * math.ceil((chunk_length - 1) / stride_length)


def check_option(chunk_length: ChunkLength,
                 columns: Sequence[columns_lib.Column],
                 longest: int) -> None:
  """Raises ValueError for a bad `chunk_length`, before anything is written.

  `PushOptions` checked its values when made; this checks them against the
  items: the fields it names, and how long chunks may be.

  Args:
    chunk_length: the user's option.
    columns: the item's columns, whose paths the option's keys must match.
    longest: `max_chunk_length` for the push's tables and stride.
  """
  if chunk_length is None:
    return
  if isinstance(chunk_length, Mapping):
    for key, value in chunk_length.items():
      _check_length(value, f'chunk_length[{key!r}]', longest)
      if not any(_covers(key, column.path) for column in columns):
        fields = ', '.join(column.path for column in columns)
        raise ValueError(
            f'chunk_length names {key!r}, which is no field of the items; '
            f'the fields are {fields}.')
    return
  _check_length(chunk_length, 'chunk_length', longest)


def lengths(columns: Sequence[columns_lib.Column],
            first_rows: Sequence[np.ndarray], chunk_length: ChunkLength,
            longest: int) -> List[int]:
  """Each column's chunk length: the option's, else the rule's.

  Args:
    columns: the item's columns.
    first_rows: the first rows written, one [T, ...] array per column; their
      bytes per step decide (strings: their mean length).
    chunk_length: the user's option, already checked.
    longest: `max_chunk_length` for the push's tables and stride.
  """
  result = []
  for column, rows in zip(columns, first_rows):
    chosen = _chosen(chunk_length, column.path)
    result.append(chosen if chosen is not None
                  else rule(_bytes_per_step(rows), longest))
  return result


def rule(bytes_per_step: float, longest: int = MAX_CHUNK_LENGTH) -> int:
  """`CHUNK_BYTES // b`, between `MIN_CHUNK_LENGTH` and `longest`.

  `longest` (the flush bound's cap) wins over the minimum.
  """
  if bytes_per_step <= 0:
    return longest
  length = max(CHUNK_BYTES // bytes_per_step, MIN_CHUNK_LENGTH)
  return int(min(length, longest))


def _chosen(chunk_length: ChunkLength, path: str) -> Optional[int]:
  """The option's length for `path`: the longest matching key wins."""
  if not isinstance(chunk_length, Mapping):  # None, or one checked int.
    return None if chunk_length is None else int(chunk_length)
  matching = [key for key in chunk_length if _covers(key, path)]
  if not matching:
    return None
  return chunk_length[max(matching, key=len)]


def _covers(key: str, path: str) -> bool:
  """'observation' covers 'observation/pixels', 'obs' does not, '' all."""
  key = key.strip('/')
  return not key or path == key or path.startswith(f'{key}/')


def _check_length(value, name: str, longest: int) -> None:
  push_options.check_chunk_steps(value, name)
  if value > longest:
    raise ValueError(
        f'{name} is {value}, more than {wording.number(longest)}: with these '
        f'tables and stride, chunks longer than '
        f'{wording.count(longest, "step")} hold more items '
        f'unconfirmed than Reverb takes without warning.')


def _bytes_per_step(rows: np.ndarray) -> float:
  if not len(rows):  # pylint: disable=g-explicit-length-test
    return 0.0
  if rows.dtype == object:
    return float(sum(len(value) for value in rows.ravel())) / len(rows)
  return float(rows.nbytes) / len(rows)
