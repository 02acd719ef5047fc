"""How messages read: counts ('1 episode', '2 episodes'), text on one line."""

from typing import Optional


def count(number: int, singular: str, plural: Optional[str] = None) -> str:
  """`number` and its noun: '1 episode', '3 episodes', '0 episodes'."""
  return f'{number} {noun(number, singular, plural)}'


def noun(number: int, singular: str, plural: Optional[str] = None) -> str:
  """`singular` for exactly 1, else `plural` (default: `singular` + 's')."""
  if number == 1:
    return singular
  return plural or f'{singular}s'


def one_line(text: str) -> str:
  """`text` with every run of whitespace, newlines too, as one space."""
  return ' '.join(text.split())
