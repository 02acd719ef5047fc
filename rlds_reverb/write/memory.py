"""What a table's items cost a Reverb server in memory, from the item spec.

A server holds every item with a fixed cost, and every chunk with a cost per
column on top of the chunk's data (`benchmarks/server_memory.py` measures
both; GUIDE: ~1.6 KB per item, ~915 B per chunk per column). A push with
stride S adds S rows per item, each row to a chunk of c rows per column
(`chunks.rule`), so per item:

    ITEM_OVERHEAD_BYTES + S * sum over columns (CHUNK_OVERHEAD_BYTES / c + b)

with b the column's bytes per row, raw: Reverb compresses chunks with
snappy, so compressible data (frames) takes less, never much more. A string
column, or one with a dimension the spec leaves unknown, has no size in the
spec: it counts at `measured` bytes per row when given (encoded frames: their
mean size in the data), else it is left out and named (`ItemMemory.unsized`).

    2-step items of                     estimate   server RSS growth
    D4RL halfcheetah vectors (103 B)    1,880 B    1,847 B
    72x96x3 frames (20.7 KB, raw)       23,030 B   15,030 B (frames compressed)

(`benchmarks/server_memory.py`, which prints both).
"""

import dataclasses
import math
from typing import Any, Mapping, Optional, Tuple

from rlds_reverb.write import chunks
from rlds_reverb.write import columns as columns_lib

# A server's memory per item, whatever its data (item, key, priority, slices).
ITEM_OVERHEAD_BYTES = 1600
# A server's memory per chunk and column, besides the chunk's data.
CHUNK_OVERHEAD_BYTES = 915


@dataclasses.dataclass(frozen=True)
class ItemMemory:
  """A server's bytes per item; `unsized`: columns not counted in them."""
  bytes_per_item: float
  unsized: Tuple[str, ...] = ()


def item_memory(row_spec: Any, stride_length: int = 1,
                num_tables: int = 1,
                measured: Optional[Mapping[str, float]] = None
                ) -> ItemMemory:
  """The memory per item of items that `push` writes from rows of `row_spec`.

  Args:
    row_spec: one row (step, or n-step transition) as a nest of TensorSpecs.
    stride_length: rows between the starts of two items (1 for `push`'s
      trajectories and transitions).
    num_tables: tables one push writes to (they share the chunks, which are
      counted in full for each): caps the chunk length as `push` does.
    measured: bytes per row of columns the spec cannot size, by column path
      ('observation/pixels'): encoded frames' mean size in the data.
  """
  longest = chunks.max_chunk_length(num_tables, stride_length)
  per_row = 0.0
  unsized = []
  for column in columns_lib.columns_of(row_spec):
    row_bytes = _row_bytes(column)
    if row_bytes is None and measured and column.path in measured:
      row_bytes = measured[column.path]
    if row_bytes is None:
      unsized.append(column.path)
      row_bytes = 0
    per_row += (CHUNK_OVERHEAD_BYTES / chunks.rule(row_bytes, longest) +
                row_bytes)
  return ItemMemory(ITEM_OVERHEAD_BYTES + stride_length * per_row,
                    tuple(unsized))


def _row_bytes(column: columns_lib.Column):
  """A column's raw bytes per row; None for strings and unknown shapes."""
  if column.dtype == object or any(d is None for d in column.shape):
    return None
  return column.dtype.itemsize * math.prod(column.shape)
