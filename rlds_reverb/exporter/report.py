"""What an export brought back, and what it could not.

Losses are counted as the rows are cut into episodes; with `strict` the
first one raises instead, before anything is kept:

    missing start   rows that continue an episode whose first rows are gone
                    (evicted, or sampled away with their chunks)
    missing end     rows of an episode that stops before its last row (the
                    rows after it are gone, or it was still open)
    missing rows    steps absent between the rows kept of one Reverb episode
                    (each gap cuts an episode, never kept with a hole)
    rows before     steps absent before the first row kept of a Reverb
                    episode (a Reverb episode with no row left is not seen)
    items left out  items of the table with a row in no exported episode
"""

import dataclasses
from typing import Any, Dict, List

from rlds_reverb._util import wording
from rlds_reverb.errors import ExportError


@dataclasses.dataclass
class Fragments:
  """Pieces cut away, and the rows (steps) they held."""
  count: int = 0
  rows: int = 0


@dataclasses.dataclass
class ExportReport:
  """The counts of one export. `lost` is False when everything came back."""
  table: str
  checkpoint: str
  out: str = ''
  name: str = ''
  episodes: int = 0
  steps: int = 0
  items: int = 0  # The table's items in the checkpoint.
  items_removed: int = 0  # Removed before it (evicted, sampled away).
  items_left_out: int = 0
  missing_start: Fragments = dataclasses.field(default_factory=Fragments)
  missing_end: Fragments = dataclasses.field(default_factory=Fragments)
  missing_rows: Fragments = dataclasses.field(default_factory=Fragments)
  rows_before: int = 0
  padding_rows: int = 0  # Pad rows of PAD/TILE pushes: not data, skipped.
  seconds: float = 0.0
  checkpoint_written: bool = False  # By the server, for this export.
  checkpoint_removed: bool = False  # After it: in Reverb's temporary root.

  @property
  def lost(self) -> bool:
    return bool(self.missing_start.count or self.missing_end.count or
                self.missing_rows.count or self.rows_before or
                self.items_left_out)

  def as_dict(self) -> Dict[str, Any]:
    return dataclasses.asdict(self) | {'lost': self.lost}

  def loss_lines(self) -> List[str]:
    """One sentence per kind of loss; none when nothing was lost."""
    lines = []
    for fragments, what in ((self.missing_start, 'start'),
                            (self.missing_end, 'end')):
      if fragments.count:
        whose = 'its' if fragments.count == 1 else 'their'
        lines.append(
            f'{wording.count(fragments.count, "episode")} missing {whose} '
            f'{what}, left out '
            f'({wording.count(fragments.rows, "step")})')
    if self.missing_rows.count:
      lines.append(
          f'{wording.count(self.missing_rows.rows, "step")} missing in '
          f'{wording.count(self.missing_rows.count, "gap")} between the rows '
          f'kept')
    if self.rows_before:
      lines.append(
          f'{wording.count(self.rows_before, "step")} missing before the '
          f'first row kept of their Reverb episode')
    if self.items_left_out:
      lines.append(
          f'{wording.count(self.items_left_out, "item")} of '
          f'{self.items:,} with a step in no exported episode')
    return lines


class Losses:
  """Counts losses into a report; with `strict`, the first one raises."""

  def __init__(self, report: ExportReport, strict: bool):
    self.report = report
    self._strict = strict

  def missing_start(self, rows: int, where: str) -> None:
    self._check(f'an episode missing its start ({where})')
    self.report.missing_start.count += 1
    self.report.missing_start.rows += rows

  def more_missing_start(self, rows: int) -> None:
    """More rows of the fragment last counted by `missing_start`."""
    self.report.missing_start.rows += rows

  def missing_end(self, rows: int, where: str) -> None:
    self._check(f'an episode missing its end ({where})')
    self.report.missing_end.count += 1
    self.report.missing_end.rows += rows

  def gap(self, rows: int, where: str) -> None:
    self._check(f'{wording.count(rows, "step")} missing ({where})')
    self.report.missing_rows.count += 1
    self.report.missing_rows.rows += rows

  def before(self, rows: int, where: str) -> None:
    self._check(f'{wording.count(rows, "step")} missing ({where})')
    self.report.rows_before += rows

  def _check(self, what: str) -> None:
    if self._strict:
      raise ExportError(
          f"Table '{self.report.table}' did not come back whole: {what}; "
          f'strict export writes nothing then.')
