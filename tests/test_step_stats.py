"""`statistics`: per-field step statistics equal to numpy's on the same data.

Counts, means, stds, mins and maxes to float32 precision; percentiles within
the sketch's stated bound of `np.percentile(..., method='lower')`: on a TFDS
directory the test writes (nested fields, an image, a string, bools, episodes
of 1 to 6 steps), on the same episodes in memory (read step by step, not
whole), and on the bundled CartPole data. Edge cases from a named table.
"""

import json

import numpy as np
import pytest
import tensorflow as tf

import rlds_reverb
from rlds_reverb.step_stats import sketch as sketch_lib
from tests import export_data
from tests import rlds_data

# Float32 precision: what the stored values are.
RTOL = 1e-6
ACCURACY = sketch_lib.RELATIVE_ACCURACY
NESTED_NUMERIC = ('observation/position', 'action/move', 'reward', 'discount',
                  'policy_info/log_probability', 'policy_info/mode')
NESTED_SKIPPED = {
    'observation/pixels': 'an image',
    'observation/instruction': 'not a number: string[]',
    'action/grip': 'not a number: bool[]',
    'is_first': 'not a number: bool[]',
    'is_last': 'not a number: bool[]',
    'is_terminal': 'not a number: bool[]',
}


def steps_by_path(episodes):
  """{field path: all steps' values [steps, ...]} of numpy episodes."""
  leaves = {}
  for episode in episodes:
    steps = episode['steps'] if 'steps' in episode else episode
    for path, value in rlds_reverb.specs.paths.flatten_with_paths(steps):
      leaves.setdefault(path, []).append(np.asarray(value))
  return {path: np.concatenate(values) for path, values in leaves.items()}


def assert_within_sketch_bound(found, values, q):
  """`found` within ACCURACY * |x| of x, numpy's value of rank
  floor(q/100 * (n - 1)), per element (axis 0 of `values`)."""
  exact = np.percentile(values, q, axis=0, method='lower')
  bound = ACCURACY * np.abs(exact) * (1 + 1e-9) + 1e-300
  assert np.all(np.abs(np.asarray(found) - exact) <= bound), (q, found, exact)


def assert_matches_numpy(stats, path, values):
  """Per element of the field and pooled over it."""
  values = np.asarray(values, np.float64)
  field = stats[path]
  assert field.shape == values.shape[1:]
  np.testing.assert_array_equal(field.count, np.full(values.shape[1:],
                                                     len(values)))
  for name, reference in [('mean', np.mean), ('std', np.std),
                          ('min', np.min), ('max', np.max)]:
    np.testing.assert_allclose(getattr(field, name), reference(values, axis=0),
                               rtol=RTOL, atol=1e-12, err_msg=f'{path} {name}')
    np.testing.assert_allclose(getattr(field.whole, name), reference(values),
                               rtol=RTOL, atol=1e-12,
                               err_msg=f'{path} whole {name}')
  assert field.whole.count == values.size
  for q in (1.0, 99.0):
    assert_within_sketch_bound(field.percentiles[q], values, q)
    assert_within_sketch_bound(field.whole.percentiles[q], values.reshape(-1),
                               q)


def assert_episodes_match(stats, episodes):
  lengths = np.array([len(e['steps']['is_first']) for e in episodes])
  returns = np.array([np.sum(e['steps']['reward'], dtype=np.float64)
                      for e in episodes])
  assert (stats.episodes, stats.steps) == (len(episodes), lengths.sum())
  for summary, values in [(stats.length, lengths), (stats.returns, returns)]:
    np.testing.assert_allclose(
        [summary.mean, summary.std, summary.min, summary.max],
        [values.mean(), values.std(), values.min(), values.max()], rtol=RTOL)
    for q in (1.0, 99.0):
      assert_within_sketch_bound(summary.percentiles[q], values, q)


NESTED_EPISODES = export_data.nested_episodes()


@pytest.fixture(scope='module')
def nested_dir(tmp_path_factory):
  return export_data.write_source(tmp_path_factory.mktemp('nested'),
                                  NESTED_EPISODES)


def test_a_tfds_directory_with_nested_fields_matches_numpy(nested_dir):
  """Read whole (`load`), in blocks of 7 steps: episodes cut across blocks."""
  assert 1 in [len(e['steps']['reward']) for e in NESTED_EPISODES]
  stats = rlds_reverb.statistics(rlds_reverb.load(nested_dir), block_steps=7)
  values = steps_by_path(NESTED_EPISODES)
  assert list(stats.fields) == sorted(NESTED_NUMERIC, key=list(values).index)
  for path in NESTED_NUMERIC:
    assert_matches_numpy(stats, path, values[path])
  assert stats.skipped == NESTED_SKIPPED
  assert_episodes_match(stats, NESTED_EPISODES)


def test_episodes_read_step_by_step_give_the_same_statistics(nested_dir):
  """A dataset `load` did not make (steps a Dataset): the other reading."""
  in_memory = rlds_data.as_rlds([e['steps'] for e in NESTED_EPISODES])
  found = rlds_reverb.statistics(in_memory)
  whole = rlds_reverb.statistics(rlds_reverb.load(nested_dir))
  for path in NESTED_NUMERIC:
    for name in ('count', 'mean', 'std', 'min', 'max'):
      np.testing.assert_allclose(getattr(found[path], name),
                                 getattr(whole[path], name), rtol=1e-12)
  # From memory the image is plain uint8 [6, 5, 3]: still an image.
  assert found.skipped['observation/pixels'] == 'an image: uint8[6,5,3]'


def test_the_bundled_cartpole_data_matches_numpy():
  data = rlds_reverb.load('bundled:cartpole')
  episodes = [{'steps': steps} for steps in tf.data.Dataset.from_tensor_slices(
      [0]).flat_map(lambda _: data).map(
          lambda e: e['steps'].batch(2**31 - 1)).flat_map(
              lambda steps: steps).as_numpy_iterator()]
  stats = rlds_reverb.statistics(data)
  values = steps_by_path(episodes)
  for path in ('observation', 'action', 'reward', 'discount'):
    assert_matches_numpy(stats, path, values[path])
  assert_episodes_match(stats, episodes)


def test_the_json_file_loads_back_equal(nested_dir, tmp_path):
  stats = rlds_reverb.statistics(rlds_reverb.load(nested_dir))
  path = tmp_path / 'stats.json'
  stats.save(path)
  on_disk = json.loads(path.read_text())
  assert set(on_disk['fields']) == {'observation', 'action', 'reward',
                                    'discount', 'policy_info'}
  assert on_disk['fields']['observation']['position']['shape'] == [3]
  loaded = rlds_reverb.DatasetStatistics.load(path)
  assert loaded.to_json() == stats.to_json()
  np.testing.assert_array_equal(loaded['observation/position'].mean,
                                stats['observation/position'].mean)


def test_nest_gives_the_statistics_shaped_as_the_steps(nested_dir):
  stats = rlds_reverb.statistics(rlds_reverb.load(nested_dir))
  means = stats.nest('mean', 'observation')
  assert list(means) == ['position']
  np.testing.assert_array_equal(means['position'],
                                stats['observation/position'].mean)
  assert stats.nest('p99', 'reward') == stats['reward'].percentiles[99.0]
  assert set(stats.nest('std')) == {'observation', 'action', 'reward',
                                    'discount', 'policy_info'}


# name -> (episodes' steps, {path: {statistic: expected}}, episodes' lengths).
def _flat(observations, rewards=None):
  observations = np.asarray(observations, np.float32)
  length = len(observations)
  return {'observation': observations.reshape(length, observations.shape[-1]),
          'action': np.zeros(length, np.int64),
          'reward': np.asarray(rewards if rewards is not None
                               else np.ones(length), np.float32),
          **rlds_data.flags(length)}


NAN, INF = float('nan'), float('inf')
EDGE_CASES = {
    'one_step_episodes': (
        [_flat([[1.0]]), _flat([[3.0]]), _flat([[-2.0]])],
        # p99: the value of rank floor(0.99 * 2) = 1 of [-2, 1, 3].
        {'observation': {'count': [3], 'mean': [2 / 3], 'min': [-2.0],
                         'max': [3.0], 'p1': [-2.0], 'p99': [1.0]}},
        [1, 1, 1]),
    'a_constant_field_has_std_0': (
        [_flat([[2.5], [2.5]]), _flat([[2.5]] * 3)],
        {'observation': {'std': [0.0], 'mean': [2.5], 'p1': [2.5],
                         'p99': [2.5]}},
        [2, 3]),
    'nan_and_infinities_are_counted_apart': (
        [_flat([[1.0, NAN], [NAN, 5.0], [3.0, INF], [-INF, 7.0]])],
        {'observation': {'count': [2, 2], 'nonfinite': [2, 2],
                         'mean': [2.0, 6.0], 'min': [1.0, 5.0],
                         'max': [3.0, 7.0]}},
        [4]),
    'an_element_with_no_finite_value_has_nan_statistics': (
        [_flat([[NAN, 1.0], [NAN, 1.0]])],
        {'observation': {'count': [0, 2], 'mean': [NAN, 1.0],
                         'std': [NAN, 0.0], 'p1': [NAN, 1.0]}},
        [2]),
    'an_empty_episode_has_length_and_return_0': (
        [_flat([[1.0]], [4.0]), _flat(np.zeros([0, 1]), []),
         _flat([[2.0]], [6.0])],
        {'observation': {'count': [2], 'mean': [1.5]},
         '(length)': {'min': 0, 'max': 1, 'count': 3},
         '(return)': {'min': 0.0, 'max': 6.0, 'mean': 10 / 3}},
        [1, 0, 1]),
    'zeros_and_negatives_sort_around_0': (
        [_flat([[-4.0], [0.0], [0.0], [0.0], [9.0]])],
        {'observation': {'p1': [-4.0], 'p99': [0.0]}},
        [5]),
}


def _statistic(stats, path, name):
  summary = {'(length)': stats.length, '(return)': stats.returns}.get(path)
  if summary is None:
    return stats.nest(name, path)
  return summary.percentiles[float(name[1:])] if name.startswith('p') else (
      getattr(summary, name))


@pytest.mark.parametrize('case', EDGE_CASES)
def test_edge_cases(case):
  episodes, expected, lengths = EDGE_CASES[case]
  stats = rlds_reverb.statistics(rlds_data.as_rlds(episodes))
  for path, statistics in expected.items():
    for name, value in statistics.items():
      np.testing.assert_allclose(_statistic(stats, path, name), value,
                                 rtol=RTOL, err_msg=f'{path} {name}')
  assert stats.episodes == len(lengths) and stats.steps == sum(lengths)


def test_nan_statistics_are_null_in_the_file_and_nan_again(tmp_path):
  episodes, _, _ = EDGE_CASES[
      'an_element_with_no_finite_value_has_nan_statistics']
  stats = rlds_reverb.statistics(rlds_data.as_rlds(episodes))
  stats.save(tmp_path / 'stats.json')
  on_disk = json.loads((tmp_path / 'stats.json').read_text())
  assert on_disk['fields']['observation']['mean'] == [None, 1.0]
  loaded = rlds_reverb.DatasetStatistics.load(tmp_path / 'stats.json')
  np.testing.assert_array_equal(loaded['observation'].mean, [NAN, 1.0])


LOOKUP_ERRORS = {
    'a_skipped_field': (lambda stats: stats['is_first'],
                        "'is_first' has no statistics: skipped (not a "
                        'number: bool[])'),
    'an_unknown_field': (lambda stats: stats['nothing'],
                         "'nothing' has no statistics: the fields with some "
                         'are action, observation, reward'),
    'nothing_under_a_prefix': (lambda stats: stats.nest('mean', 'policy'),
                               "no step field with statistics under 'policy'; "
                               'those with some are action, observation, '
                               'reward'),
    'an_unknown_statistic': (lambda stats: stats.nest('median'),
                             "no statistic 'median' of a field; there are "
                             'mean, std, min, max, count, nonfinite, p1, p99'),
}


@pytest.mark.parametrize('case', LOOKUP_ERRORS)
def test_lookups_of_what_is_not_there_say_what_is(case):
  lookup, message = LOOKUP_ERRORS[case]
  stats = rlds_reverb.statistics(rlds_data.as_rlds([_flat([[1.0]])]))
  with pytest.raises(KeyError) as raised:
    lookup(stats)
  assert raised.value.args == (message,)


def test_a_json_file_of_another_kind_is_refused(tmp_path):
  path = tmp_path / 'other.json'
  path.write_text('{"format": "something else"}')
  with pytest.raises(ValueError) as raised:
    rlds_reverb.DatasetStatistics.load(path)
  assert str(raised.value) == (
      "not a statistics file of format 'rlds_reverb.statistics/1' "
      "(format: 'something else')")


def test_data_that_is_not_rlds_is_refused_with_the_step_spec_error():
  not_rlds = tf.data.Dataset.from_tensors({'observation': [1.0]})
  with pytest.raises(rlds_reverb.StepSpecError):
    rlds_reverb.statistics(not_rlds)


@pytest.mark.parametrize('arguments, message', [
    ({'percentiles': (1, 101)}, 'percentiles must be in [0, 100], got 101'),
    ({'relative_accuracy': 0}, 'relative_accuracy must be in (0, 1), got 0'),
    ({'block_steps': 0}, 'block_steps must be >= 1, got 0'),
])
def test_arguments_out_of_range_are_refused(arguments, message):
  with pytest.raises(ValueError) as raised:
    rlds_reverb.statistics(rlds_data.as_rlds([_flat([[1.0]])]), **arguments)
  assert str(raised.value) == message


# --- The sketch: bounded size, stated accuracy. --------------------------------

def wide_values(count: int, seed: int) -> np.ndarray:
  """[count, 2]: magnitudes over 8 decades, both signs, some exact zeros."""
  rng = np.random.default_rng(seed)
  values = 10 ** rng.uniform(-4, 4, (count, 2)) * rng.choice([-1, 1],
                                                              (count, 2))
  values[rng.random((count, 2)) < 0.05] = 0.0
  return values


def test_the_sketch_keeps_its_size_as_the_data_grows():
  sketch = sketch_lib.QuantileSketch(2)
  sizes, seen = [], []
  for block in range(30):  # 3,000 values, then 30 times as many.
    values = wide_values(100 if block == 0 else 3_000 * (block > 0), block)
    sketch.add(values, np.isfinite(values))
    seen.append(values)
    sizes.append(sketch.nbytes)
  assert len(set(sizes)) == 1
  every = np.concatenate(seen)
  assert len(every) > 80_000
  found = sketch.percentiles((1.0, 25.0, 50.0, 99.0))
  for q, row in zip((1.0, 25.0, 50.0, 99.0), found):
    assert_within_sketch_bound(row, every, q)


def test_magnitudes_below_the_window_keep_an_absolute_bound():
  """Values 20 decades below the largest fall into its lowest bucket."""
  values = np.concatenate([np.full(60, 1e-20), np.full(40, 1e10)])[:, None]
  sketch = sketch_lib.QuantileSketch(1)
  sketch.add(values, np.isfinite(values))
  [[low], [high]] = sketch.percentiles((10.0, 90.0))
  gamma = (1 + ACCURACY) / (1 - ACCURACY)
  assert 0 <= low <= 1e10 * gamma ** -(sketch_lib.BUCKETS - 2)
  assert high == 1e10


def test_fields_of_many_elements_get_pooled_percentiles_only(nested_dir):
  """`max_sketched_elements=1`: observation/position [3] keeps no sketch
  per element; its pooled percentiles are kept apart, still within bound."""
  stats = rlds_reverb.statistics(rlds_reverb.load(nested_dir),
                                 max_sketched_elements=1)
  position = steps_by_path(NESTED_EPISODES)['observation/position']
  assert stats['observation/position'].percentiles == {1.0: None, 99.0: None}
  for q in (1.0, 99.0):
    assert_within_sketch_bound(
        stats['observation/position'].whole.percentiles[q],
        position.reshape(-1).astype(np.float64), q)
  assert stats['reward'].percentiles[1.0] is not None
  saved = stats.to_json()['fields']['observation']['position']
  assert saved['percentiles'] == {'1': None, '99': None}
