"""What a table can take before it blocks or evicts, read from `server_info`.

Reverb says nothing in either case: a full table (`max_size`) removes old
items silently, and a rate limiter (`SampleToInsertRatio`, `Queue`) holds
inserts on the server until something samples. A limiter that blocks first
keeps the table from filling: a `Queue(N)` blocks at N items, its
`max_size`, and evicts nothing. From a table's `TableInfo` we can tell in
advance, and say so before writing.

Reverb's rate limiter lets an insert through while the table is below
`min_size_to_sample`, or while

    (inserts + 1) * samples_per_insert - samples <= max_diff

so without sampling it takes max(min_size_to_sample - size,
floor((max_diff + samples) / samples_per_insert) - inserts) more items.
"""

import math
from typing import List, Mapping, Optional

from rlds_reverb._util import wording

# Reverb's MinSize limiter sets max_diff to the largest double: no limit.
_UNLIMITED_DIFF = 1e300


def limiter_text(info) -> str:
  """The table's rate limiter, as the constructor call that would make it."""
  limiter = info.rate_limiter_info
  if (limiter.samples_per_insert == 1 and limiter.min_size_to_sample == 1 and
      limiter.min_diff == 0):
    return f'Queue({limiter.max_diff:g})'
  if limiter.max_diff >= _UNLIMITED_DIFF:
    return f'MinSize({limiter.min_size_to_sample})'
  return (f'SampleToInsertRatio(samples_per_insert='
          f'{limiter.samples_per_insert:g}, min_size_to_sample='
          f'{limiter.min_size_to_sample}, min_diff={limiter.min_diff:g}, '
          f'max_diff={limiter.max_diff:g})')


def insert_headroom(info) -> Optional[int]:
  """Items the table takes before its rate limiter blocks; None: no limit."""
  limiter = info.rate_limiter_info
  if limiter.max_diff >= _UNLIMITED_DIFF or limiter.samples_per_insert <= 0:
    return None
  inserts = limiter.insert_stats.completed
  samples = limiter.sample_stats.completed
  allowed = (limiter.max_diff + samples) / limiter.samples_per_insert
  by_ratio = math.floor(allowed + 1e-9) - inserts
  by_min_size = limiter.min_size_to_sample - info.current_size
  return max(0, by_ratio, by_min_size)


def blocking_limiters(infos: Mapping[str, object]) -> List[str]:
  """"table 'x' (Queue(5))" for each table whose limiter can block inserts."""
  return [f'table {table!r} ({limiter_text(info)})'
          for table, info in infos.items() if insert_headroom(info) is not None]


def warnings_for(infos: Mapping[str, object], items_per_table: int
                 ) -> List[str]:
  """Why writing `items_per_table` items into each table would lose or block.

  Per table, unless something samples meanwhile: that `max_size` evicts the
  oldest items (only those inserted before the rate limiter blocks: a Queue
  blocks at `max_size` and evicts nothing), and that the rate limiter blocks
  before the last item.
  """
  messages = []
  for table, info in infos.items():
    headroom = insert_headroom(info)
    inserted = (items_per_table if headroom is None
                else min(items_per_table, headroom))
    evicted = inserted - (info.max_size - info.current_size)
    if evicted > 0:
      messages.append(_eviction_text(table, info, items_per_table, evicted,
                                     blocks=inserted < items_per_table))
    if inserted < items_per_table:
      messages.append(
          f'table {table!r} has rate limiter {limiter_text(info)}, which '
          f'blocks inserts after {wording.count(headroom, "more item")} '
          f'until something samples; this push writes {items_per_table}, '
          f'and fails after the timeout if nothing samples.')
  return messages


def _eviction_text(table: str, info, items_per_table: int, evicted: int,
                   blocks: bool) -> str:
  before = ' before its rate limiter blocks' if blocks else ''
  return (f'table {table!r} holds at most '
          f'{wording.count(info.max_size, "item")} and has '
          f'{wording.number(info.current_size)}; this push writes '
          f'{wording.number(items_per_table)}, so Reverb will silently remove '
          f'{wording.number(evicted)} of the oldest{before}.')
