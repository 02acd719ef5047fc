"""How messages read: counts ('1 episode', '19,362 items'), sizes ('1.8 KB'),
text on one line.

Every number a message or a command prints is grouped by thousands
(`number`), so the same count reads the same wherever it shows.
"""

from typing import Optional, Sequence


def count(number: int, singular: str, plural: Optional[str] = None) -> str:
  """`number` and its noun: '1 episode', '0 episodes', '19,362 items'."""
  return f'{number:,} {noun(number, singular, plural)}'


def number(value: int) -> str:
  """A count without its noun: '815', '124,881'."""
  return f'{value:,}'


def noun(number: int, singular: str, plural: Optional[str] = None) -> str:
  """`singular` for exactly 1, else `plural` (default: `singular` + 's')."""
  if number == 1:
    return singular
  return plural or f'{singular}s'


def one_line(text: str) -> str:
  """`text` with every run of whitespace, newlines too, as one space."""
  return ' '.join(text.split())


def size(num_bytes: float) -> str:
  """'915 B', '1.8 KB', '23 KB', '1.8 GB': decimal units, about 2 digits."""
  for unit, scale in (('TB', 1e12), ('GB', 1e9), ('MB', 1e6), ('KB', 1e3)):
    if num_bytes >= scale * 0.995:
      value = num_bytes / scale
      return f'{value:,.0f} {unit}' if value >= 9.95 else f'{value:.1f} {unit}'
  return f'{int(round(num_bytes))} B'


def listed(names: Sequence[str], most: int = 3) -> str:
  """'a, b, c and 2 more': at most `most` names, then how many others."""
  shown = ', '.join(names[:most])
  return shown + (f' and {len(names) - most} more' if len(names) > most
                  else '')
