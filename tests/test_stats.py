"""Episode statistics: lengths and returns read from RLDS data, and the bars
`inspect --plot` draws of them."""

import numpy as np
import pytest

from rlds_reverb import stats
from tests import rlds_data

SKEWED = [1, 2] * 50 + [27_000]  # One Atari-like episode among short ones.


def test_episode_stats_reads_lengths_and_returns():
  episodes = [rlds_data.flat_episode(n, seed) for seed, n in enumerate([3, 1])]
  result = stats.episode_stats(rlds_data.as_rlds(episodes))
  assert result.lengths.tolist() == [3, 1]
  assert result.returns == pytest.approx(
      [float(np.sum(e['reward'], dtype=np.float64)) for e in episodes])
  assert (result.episodes, result.steps) == (2, 4)


# (name, values, summary): of the finite values; floats count the others.
SUMMARY_CASES = [
    ('lengths', np.array([2, 4, 3], np.int64),
     {'min': 2, 'mean': 3.0, 'median': 3.0, 'max': 4}),
    ('returns', np.array([1.0, 2.0, 6.0]),
     {'min': 1.0, 'mean': 3.0, 'median': 2.0, 'max': 6.0, 'nonfinite': 0}),
    ('a -inf and a NaN return left out', np.array([1.0, -np.inf, 3.0, np.nan]),
     {'min': 1.0, 'mean': 2.0, 'median': 2.0, 'max': 3.0, 'nonfinite': 2}),
    ('no finite return', np.array([np.inf, np.nan]),
     {'min': None, 'mean': None, 'median': None, 'max': None,
      'nonfinite': 2}),
    ('no episodes', np.zeros([0], np.int64),
     {'min': None, 'mean': None, 'median': None, 'max': None}),
]


@pytest.mark.parametrize('name, values, summary', SUMMARY_CASES,
                         ids=[case[0] for case in SUMMARY_CASES])
def test_summary_is_of_the_finite_values(name, values, summary):
  del name
  found = stats.summary(values)
  assert found == summary
  assert [type(found[key]) for key in summary] == [type(summary[key])
                                                   for key in summary]


# (name, values, edges, counts): whole numbers on a linear axis.
WHOLE_CASES = [
    ('a bar per number', [1, 2, 2, 3], [0.5, 1.5, 2.5, 3.5], [1, 2, 1]),
    ('equal lengths', [1801] * 3, [1800.5, 1801.5], [3]),
    ('one- and two-step episodes', [1, 2] * 30, [0.5, 1.5, 2.5], [30, 30]),
    ('negative returns', [-2, 0], [-2.5, -1.5, -0.5, 0.5], [1, 0, 1]),
    ('100 numbers in 10 bars of 10', list(range(100)),
     np.arange(-0.5, 100, 10).tolist(), [10] * 10),
]


@pytest.mark.parametrize('name, values, edges, counts', WHOLE_CASES,
                         ids=[case[0] for case in WHOLE_CASES])
def test_whole_numbers_get_bars_centred_on_them(name, values, edges, counts):
  del name
  histogram = stats.histogram(np.array(values))
  assert histogram.edges.tolist() == edges
  assert histogram.counts.tolist() == counts
  assert histogram.whole
  assert histogram.linear_width is None


def test_fractions_get_even_bars_over_their_range():
  values = np.random.default_rng(0).normal(-200, 50, 1000)
  histogram = stats.histogram(values)
  assert not histogram.whole and histogram.linear_width is None
  assert len(histogram.counts) == 32  # ceil(sqrt(1000)).
  assert histogram.edges[[0, -1]].tolist() == [values.min(), values.max()]
  assert np.allclose(np.diff(histogram.edges), np.ptp(values) / 32)
  assert histogram.counts.sum() == 1000


def test_equal_fractions_get_one_bar():
  histogram = stats.histogram(np.array([0.25, 0.25]))
  assert histogram.edges.tolist() == [-0.25, 0.75]
  assert histogram.counts.tolist() == [2]


@pytest.mark.parametrize('values, linear_width', [
    (SKEWED, 2.6999),  # 1/10^4 of the range: more than the spread, 1.
    ([100] * 20 + [5000], 0.49),  # Spread 0: 1/10^4 of the range.
    ([0.0] * 95 + [1.0] * 5 + [1350.0], 0.135),
])
def test_skewed_values_get_even_bars_on_an_asinh_axis(values, linear_width):
  histogram = stats.histogram(np.array(values))
  assert histogram.linear_width == pytest.approx(linear_width)
  assert len(histogram.counts) == stats.MAX_BARS
  assert histogram.edges[[0, -1]].tolist() == [min(values), max(values)]
  coordinates = np.arcsinh(histogram.edges / linear_width)
  assert np.allclose(np.diff(coordinates), np.diff(coordinates)[0])
  assert histogram.counts.sum() == len(values)
  assert histogram.counts[-1] == 1  # The outlier has a bar of its own.


def test_skewed_lengths_keep_one_and_two_steps_apart():
  counts = stats.histogram(np.array(SKEWED)).counts
  assert counts[counts > 0].tolist() == [50, 50, 1]


def test_a_million_episodes_make_at_most_max_bars():
  lengths = np.random.default_rng(0).lognormal(5, 2, 1_000_000).astype(int)
  histogram = stats.histogram(lengths)
  assert len(histogram.counts) <= stats.MAX_BARS
  assert histogram.counts.sum() == 1_000_000


def test_non_finite_values_are_counted_not_drawn():
  histogram = stats.histogram(np.array([1.0, np.nan, np.inf, 2.5]))
  assert histogram.left_out == 2
  assert histogram.counts.sum() == 2


def test_no_values_no_bars():
  histogram = stats.histogram(np.zeros([0]))
  assert (len(histogram.edges), len(histogram.counts)) == (0, 0)
