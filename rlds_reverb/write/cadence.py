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


def kept_items(rows_in_chunks, chunk_lengths: Sequence[int],
               num_tables: int, stride: int) -> np.ndarray:
  """Items a flush leaves pending after `rows_in_chunks` rows (since the
  chunks last started; one count or an array of them): as many as can end
  in the longest open chunk, so that no chunk is cut short by the flush
  (unless more end there: a stride longer than an item, across episodes)."""
  rows = np.asarray(rows_in_chunks, np.int64)
  open_rows = (rows[..., None] % np.asarray(chunk_lengths, np.int64)).max(
      axis=-1)
  return num_tables * -(-open_rows // stride)
