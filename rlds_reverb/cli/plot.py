"""`inspect --plot`: histograms of episode lengths and returns, as an image.

Drawn from the per-episode figures `inspect` has computed, binned by
`stats.histogram` into a few dozen bars at most: a second or so whatever the
dataset's size. Readable on skewed data: a long tail gets a log-scaled axis
(matplotlib's 'asinh': linear near 0, so 0 and negative returns show), counts
have whole-number ticks, and bars too low to see carry their count.
matplotlib (the 'plot' extra) is imported only here, only for `--plot`.
The file's extension chooses the format (.png, .svg, .pdf, ...: matplotlib's
own list); an extension matplotlib does not write is a usage error, before
anything is read, not a PNG under another name.
"""

import math
import os
from typing import List

from rlds_reverb import stats as stats_lib
from rlds_reverb._util import files
from rlds_reverb._util import wording
from rlds_reverb.cli import output

# Bars lower than 1/LOW_BAR of the tallest get their count written on them:
# one 27,000-step episode among thousands of short ones is not lost.
LOW_BAR = 20
# Ticks on a log-scaled axis, at most.
MAX_TICKS = 8

_PLOT_EXTRA = "--plot needs matplotlib: pip install 'rlds_reverb[plot]'"


def pyplot():
  """matplotlib's pyplot on a file backend, or a one-line install hint."""
  try:
    import matplotlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  except ImportError as e:
    raise output.CliError(_PLOT_EXTRA) from e
  matplotlib.use('Agg')
  from matplotlib import pyplot as pyplot_module  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return pyplot_module


def check_writable(path: str) -> None:
  """A plot that cannot be written fails before `inspect` reads the data."""
  reason = files.unwritable_reason(path)
  if reason:
    raise output.CliError(f'Cannot write the plot to {path}: {reason}',
                          output.EXIT_USAGE)


def file_format(path: str) -> str:
  """The format `path`'s extension names ('png' for 'episodes.PNG'), if
  matplotlib writes it; else a usage error listing those it writes. Call
  after `pyplot()`."""
  from matplotlib import backend_bases  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  known = backend_bases.FigureCanvasBase.get_supported_filetypes()
  extension = os.path.splitext(path)[1][1:].lower()
  if extension in known:
    return extension
  listed = ', '.join(f'.{name}' for name in sorted(known))
  found = f'.{extension}' if extension else 'no extension'
  raise output.CliError(
      f'--plot {path}: {found} names no format matplotlib writes; end the '
      f'file name with one of {listed} (e.g. episodes.png)',
      output.EXIT_USAGE)


def write(pyplot_module, stats: stats_lib.EpisodeStats, path: str) -> None:
  """The length and return histograms side by side, at `path` in the
  format its extension names (`file_format`)."""
  figure, (lengths, returns) = pyplot_module.subplots(1, 2, figsize=(10, 4))
  draw(lengths, stats_lib.histogram(stats.lengths), 'Episode length', 'steps')
  draw(returns, stats_lib.histogram(stats.returns), 'Episode return',
       'return')
  figure.tight_layout()
  try:
    figure.savefig(path, format=file_format(path))
  except OSError as e:
    raise output.CliError(f'Cannot write the plot to {path}: {e}') from e
  finally:
    pyplot_module.close(figure)


def draw(axes, histogram: stats_lib.Histogram, title: str, unit: str) -> None:
  """One histogram on `axes`: its bars, scale, ticks and title."""
  from matplotlib import ticker  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  shown = int(histogram.counts.sum())
  episodes = wording.count(shown + histogram.left_out, 'episode')
  left_out = (f'; {wording.number(histogram.left_out)} not finite, not shown'
              if histogram.left_out else '')
  axes.set(title=f'{title} ({episodes}{left_out})', xlabel=unit,
           ylabel='episodes')
  if not shown:
    axes.set(xticks=[], yticks=[])
    axes.text(0.5, 0.5, 'nothing to show', ha='center', va='center',
              transform=axes.transAxes)
    return
  axes.yaxis.set_major_locator(ticker.MaxNLocator(integer=True))
  if histogram.linear_width is None:
    axes.xaxis.set_major_locator(
        ticker.MaxNLocator(integer=histogram.whole, min_n_ticks=1))
    axes.ticklabel_format(axis='x', style='plain', useOffset=False)
  else:
    axes.set_xlabel(f'{unit} (log scale)')
    axes.set_xscale('asinh', linear_width=histogram.linear_width)
    axes.xaxis.set_major_locator(ticker.FixedLocator(log_ticks(histogram)))
    axes.xaxis.set_minor_locator(ticker.NullLocator())
    axes.xaxis.set_major_formatter(ticker.FuncFormatter(_tick_text))
  bars = axes.bar(histogram.edges[:-1], histogram.counts,
                  width=histogram.edges[1:] - histogram.edges[:-1],
                  align='edge', edgecolor='white', linewidth=0.5)
  axes.bar_label(bars, labels=low_bar_labels(histogram.counts),
                 fontsize='x-small')
  axes.margins(y=0.1)


def low_bar_labels(counts) -> List[str]:
  """The counts of bars lower than 1/LOW_BAR of the tallest; '' for others."""
  tallest = max(counts)
  return [str(c) if 0 < c < tallest / LOW_BAR else '' for c in counts]


def log_ticks(histogram: stats_lib.Histogram) -> List[float]:
  """0 and ± powers of ten within the bars, at least 1/MAX_TICKS apart.

  Apart as the asinh axis draws them, so that near 0, where it is linear,
  0 and 1 do not overlap.
  """
  low, high = float(histogram.edges[0]), float(histogram.edges[-1])
  width = histogram.linear_width
  exponents = range(math.floor(math.log10(width)),
                    math.ceil(math.log10(max(abs(low), abs(high)))) + 1)
  powers = [10.0**k for k in exponents]
  candidates = sorted(t for t in [0.0] + powers + [-p for p in powers]
                      if low <= t <= high)
  gap = (math.asinh(high / width) - math.asinh(low / width)) / MAX_TICKS
  ticks = []
  for tick in candidates:
    if not ticks or (math.asinh(tick / width) -
                     math.asinh(ticks[-1] / width)) >= gap:
      ticks.append(tick)
  return ticks


def _tick_text(value: float, _) -> str:
  return f'{value:,g}'
