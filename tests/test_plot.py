"""`inspect --plot`'s charts, drawn by matplotlib and read back from the axes:
in proportion and readable on the shapes that made the old ones unreadable."""

import numpy as np
import pytest

from rlds_reverb import stats
from rlds_reverb.cli import plot
from tests.cli_runs import run_cli_here

pyplot = pytest.importorskip('matplotlib.pyplot')


@pytest.fixture
def axes():
  plot.pyplot()  # The file backend, as the command uses.
  figure, axes = pyplot.subplots()
  yield axes
  pyplot.close(figure)


def draw(axes, values, unit='steps'):
  plot.draw(axes, stats.histogram(np.array(values)), 'Episode length', unit)
  axes.figure.canvas.draw()
  return axes


def ticks_in_view(axis, limits):
  low, high = limits
  return [tick for tick in axis.get_majorticklocs() if low <= tick <= high]


def tick_texts_in_view(axes):
  low, high = axes.get_xlim()
  return [label.get_text() for tick, label in
          zip(axes.xaxis.get_majorticklocs(), axes.get_xticklabels())
          if low <= tick <= high]


def heights(axes):
  return [bar.get_height() for bar in axes.patches]


def labels(axes):
  return [text.get_text() for text in axes.texts if text.get_text()]


def test_one_long_episode_among_short_ones(axes):
  """27,000 steps among 100 of 1-2: a log axis, and the long one labelled."""
  draw(axes, [1, 2] * 50 + [27_000])
  assert axes.get_xscale() == 'asinh'
  assert axes.get_xlabel() == 'steps (log scale)'
  assert axes.get_title() == 'Episode length (101 episodes)'
  assert [h for h in heights(axes) if h] == [50, 50, 1]
  assert labels(axes) == ['1']  # Too low to see next to 50: written.
  assert ticks_in_view(axes.xaxis, axes.get_xlim()) == [1, 10, 100, 1e3, 1e4]
  assert tick_texts_in_view(axes) == ['1', '10', '100', '1,000', '10,000']


def test_one_and_two_step_episodes_get_wide_bars(axes):
  draw(axes, [1, 2] * 30)
  assert axes.get_xscale() == 'linear'
  assert [bar.get_width() for bar in axes.patches] == [1.0, 1.0]
  assert ticks_in_view(axes.xaxis, axes.get_xlim()) == [1, 2]


def test_equal_lengths_read_as_one_whole_number(axes):
  draw(axes, [1801] * 20)
  assert tick_texts_in_view(axes) == ['1801']
  counts = ticks_in_view(axes.yaxis, axes.get_ylim())
  assert counts and all(tick == int(tick) for tick in counts)


def test_returns_with_zeros_show_zero_on_the_log_axis(axes):
  draw(axes, [0.0] * 95 + [1.0] * 5 + [1350.0], unit='return')
  assert axes.get_xscale() == 'asinh'
  assert ticks_in_view(axes.xaxis, axes.get_xlim()) == [0, 1, 10, 100, 1000]
  assert [h for h in heights(axes) if h] == [95, 5, 1]


def test_counts_have_whole_number_ticks(axes):
  draw(axes, [3, 4, 5])
  assert ticks_in_view(axes.yaxis, axes.get_ylim()) == [0, 1]


def test_nothing_to_show(axes):
  draw(axes, [])
  assert axes.get_title() == 'Episode length (0 episodes)'
  assert labels(axes) == ['nothing to show']
  assert not axes.patches


def test_non_finite_returns_are_named_in_the_title(axes):
  draw(axes, [1.5, np.nan, 2.5], unit='return')
  assert axes.get_title() == (
      'Episode length (3 episodes; 1 not finite, not shown)')


@pytest.mark.parametrize('counts, texts', [
    ([50, 50, 0, 1], ['', '', '', '1']),
    ([19, 1], ['', '']),  # 1 is 1/19 of the tallest: visible.
    ([400, 25, 19], ['', '', '19']),
])
def test_low_bars_carry_their_count(counts, texts):
  assert plot.low_bar_labels(counts) == texts


# --- The file's format: its extension's, or a usage error. -------------------

WRITTEN = {  # extension -> how the file starts
    'png': b'\x89PNG\r\n\x1a\n',
    'svg': b'<?xml',
    'pdf': b'%PDF',
    'PNG': b'\x89PNG\r\n\x1a\n',
}


@pytest.mark.parametrize('extension', WRITTEN)
def test_the_extension_chooses_the_format(extension, tmp_path):
  path = tmp_path / f'episodes.{extension}'
  result = run_cli_here('inspect', '--dataset', 'bundled:cartpole', '--plot',
                        path)
  assert result.returncode == 0, result.stderr
  assert path.read_bytes().startswith(WRITTEN[extension])
  assert f'plot             {path}' in result.stdout.splitlines()


@pytest.mark.parametrize('name, found', [('out.txt', '.txt'),
                                         ('episodes', 'no extension')])
def test_an_extension_matplotlib_does_not_write_is_refused_first(
    name, found, tmp_path):
  """Before the dataset is opened: it does not exist, and that is not what
  the error says."""
  path = tmp_path / name
  result = run_cli_here('inspect', '--dataset', tmp_path / 'missing',
                        '--plot', path)
  assert result.returncode == 2
  assert result.stderr.splitlines() == [
      f'rlds-reverb: error: --plot {path}: {found} names no format '
      'matplotlib writes; end the file name with one of .eps, .jpeg, .jpg, '
      '.pdf, .pgf, .png, .ps, .raw, .rgba, .svg, .svgz, .tif, .tiff, .webp '
      '(e.g. episodes.png)']
  assert not path.exists()
