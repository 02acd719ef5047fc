"""What a table held before a push wrote: items a push adds to, said once.

Reverb takes items into a table that already holds some without a word, so
two identical pushes leave every item twice. Seeding several datasets into
one table is legitimate, so this is a warning, not an error:

    table 'replay' already holds 9,868 items; this push adds 9,868 more

    one push        its check, before it writes (`checked_push`)
    --resume rerun  the items earlier runs of it confirmed are expected: only
                    the others are named
    --workers       every worker looks before it writes; the look that saw
                    the fewest inserts came before any worker wrote, so the
                    parent warns once, from it (`earliest`), per server
    Beam            the launcher looks before the pipeline starts

Plain values only: the `--workers` parent imports no TensorFlow.
"""

import dataclasses
from typing import Iterable, Mapping, Optional, Sequence, Tuple

from rlds_reverb._util import wording


@dataclasses.dataclass(frozen=True)
class Held:
  """A table as a push found it before writing.

  `size` items in it; `inserts` since it was made (a later look sees at
  least as many); `ours` of them confirmed by earlier runs of the same push
  (its resume file); `adds`: items the push writes into it (None: not
  known before writing).
  """
  table: str
  size: int
  inserts: int
  ours: int = 0
  adds: Optional[int] = None

  @property
  def others(self) -> int:
    """Items not from earlier runs of this push (0 if some were removed)."""
    return max(self.size - self.ours, 0)


def look(infos: Mapping[str, object], ours: int = 0,
         adds: Optional[int] = None) -> Tuple[Held, ...]:
  """What each table (a reverb `TableInfo` by name) holds now."""
  return tuple(
      Held(table, int(info.current_size),
           int(info.rate_limiter_info.insert_stats.completed), ours, adds)
      for table, info in infos.items())


def warning_text(held: Held, address: Optional[str] = None
                 ) -> Optional[str]:
  """The warning for a table holding items not from this push, or None.

  None too when the push writes nothing more into it.
  """
  if not held.others or held.adds == 0:
    return None
  where = f'table {held.table!r}' + (f' at {address}' if address else '')
  holds = f'{where} already holds {wording.count(held.size, "item")}'
  if held.ours:
    holds += (f': {wording.count(held.ours, "item")} confirmed by earlier '
              f'runs of this push and {wording.count(held.others, "other")}')
  adds = ('this push adds to them' if held.adds is None else
          f'this push adds {wording.count(held.adds, "more", "more")}')
  return f'{holds}; {adds}'


def warnings_for(helds: Iterable[Held], address: Optional[str] = None
                 ) -> Tuple[str, ...]:
  return tuple(text for text in (warning_text(h, address) for h in helds)
               if text)


def earliest(looks: Sequence[Held]) -> Held:
  """One table's looks by several writers, as one: the table before any of
  them wrote (the look with the fewest inserts: each writer looked before it
  wrote), with their own earlier items and what they add summed."""
  first = min(looks, key=lambda held: held.inserts)
  adds = [held.adds for held in looks]
  return dataclasses.replace(
      first, ours=sum(held.ours for held in looks),
      adds=None if None in adds else sum(adds))
