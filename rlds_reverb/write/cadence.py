"""When a `SequenceWriter` flushes and confirms: the rules that decide where
its chunks end, shared with the checkpoint plan (`checkpoints.plan`), which
must cut chunks exactly where a push does.

    rows     one stream across episodes into Reverb's writer; column i's
             chunks end every chunk_lengths[i] rows, counted from the
             writer's start or the last confirmation
    flush    after the row at which the items made since the last
             confirmation pass a multiple of `flush_every`: all but
             `kept_items` are sent (Reverb finalizes, cut short, any open
             chunk one of those references)
    confirm  at the end of an episode that brings the rows appended since
             the last confirmation to CONFIRM_EVERY_ROWS: every item is sent,
             open chunks are finalized, Reverb's episode and step restart
"""

import math
from typing import Sequence, Tuple

import numpy as np

CONFIRM_EVERY_ROWS = 4000


def confirms(unconfirmed_rows: int) -> bool:
  """Whether a writer confirms after an episode, given the rows (pad rows
  too; rows of episodes without items too) since its last confirmation."""
  return unconfirmed_rows >= CONFIRM_EVERY_ROWS


def flush_points(unflushed: int, made: np.ndarray,
                 flush_every: int) -> Tuple[np.ndarray, int]:
  """(flush after each row?, items unflushed after the last row).

  Args:
    unflushed: items made since the last flush, before these rows.
    made: per row, the items made by its end (cumulative, from these rows'
      first).
    flush_every: `chunks.flush_every` for the writer's chunk lengths.
  """
  totals = unflushed + made
  crossings = totals // flush_every
  left = int(totals[-1] - crossings[-1] * flush_every)
  return np.diff(crossings, prepend=0) > 0, left


def kept_items(rows_in_chunks: int, chunk_lengths: Sequence[int],
               num_tables: int, stride: int) -> int:
  """Items a flush leaves pending after `rows_in_chunks` rows (since the
  chunks last started): as many as can end in the longest open chunk, so
  that no chunk is cut short by the flush."""
  open_rows = max(rows_in_chunks % length for length in chunk_lengths)
  return num_tables * math.ceil(open_rows / stride)
