"""`statistics` in one pass against numpy over the same data held in memory.

    python benchmarks/statistics_throughput.py [--episodes 200]
        [--episode-steps 1000] [--repeats 3]

The data: a TFDS directory of halfcheetah-shaped vector episodes written here
(`common.tfds_dir('vector', ...)`: observation float32[17], action
float32[6], reward, discount). Each round times

    statistics   rlds_reverb.statistics(load(DIR)): read from disk, one pass,
                 moments and sketches per element and pooled, episode
                 lengths and returns
    numpy        the same fields already concatenated in memory (the load
                 not timed): mean, std, min, max and np.percentile (1, 99)
                 per element and pooled, in float64, as the tests compare

and prints steps/s of each (median over rounds), their ratio, and how far
numpy's figures are from ours (the largest relative difference of the means
and stds; the largest percentile error relative to |x|).
"""

import argparse
import os
import statistics as py_statistics
import tempfile
import time

import common  # pylint: disable=g-bad-import-order
import numpy as np
import rlds_reverb
from rlds_reverb.sources import whole_reads

FIELDS = ('observation', 'action', 'reward', 'discount')


def in_memory(directory: str) -> dict:
  """{field: [steps, ...] float64}, read whole (untimed)."""
  episodes = whole_reads.whole(rlds_reverb.load(directory))
  parts = {name: [] for name in FIELDS}
  for episode in episodes.as_numpy_iterator():
    for name in FIELDS:
      parts[name].append(episode['steps'][name])
  return {name: np.concatenate(values).astype(np.float64)
          for name, values in parts.items()}


def numpy_statistics(values: dict) -> dict:
  found = {}
  for name, array in values.items():
    flat = array.reshape(-1)
    found[name] = {
        'mean': array.mean(0), 'std': array.std(0), 'min': array.min(0),
        'max': array.max(0),
        'p': np.percentile(array, [1, 99], axis=0, method='lower'),
        'whole': (flat.mean(), flat.std(), flat.min(), flat.max(),
                  np.percentile(flat, [1, 99], method='lower'))}
  return found


def median_seconds(fn, repeats: int):
  seconds, result = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    result = fn()
    seconds.append(time.perf_counter() - start)
  return py_statistics.median(seconds), result


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--episodes', type=int, default=200)
  parser.add_argument('--episode-steps', type=int, default=1000)
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args()
  steps = args.episodes * args.episode_steps
  print(common.machine())
  with tempfile.TemporaryDirectory() as data_dir:
    directory = common.tfds_dir('vector', args.episodes, args.episode_steps,
                                data_dir)
    ours_s, ours = median_seconds(
        lambda: rlds_reverb.statistics(rlds_reverb.load(directory)),
        args.repeats)
    values = in_memory(directory)
    numpy_s, reference = median_seconds(lambda: numpy_statistics(values),
                                        args.repeats)
  mean_error = max(float(np.max(np.abs(ours[name].mean - reference[name]['mean'])
                                / np.maximum(np.abs(reference[name]['mean']),
                                             1e-300)))
                   for name in FIELDS)
  std_error = max(float(np.max(np.abs(ours[name].std - reference[name]['std'])
                               / reference[name]['std'].clip(1e-300)))
                  for name in FIELDS)
  percentile_error = max(
      float(np.max(np.abs(ours[name].percentiles[q] - reference[name]['p'][i])
                   / np.abs(reference[name]['p'][i]).clip(1e-300)))
      for name in FIELDS for i, q in enumerate((1.0, 99.0)))
  print(f'{steps:,} steps in {args.episodes:,} episodes of '
        f'{args.episode_steps:,}; {os.path.basename(directory)}')
  print(f'statistics (one pass, from disk)  {steps / ours_s:12,.0f} steps/s  '
        f'({ours_s:.2f} s)')
  print(f'numpy (in memory, not loaded)     {steps / numpy_s:12,.0f} steps/s  '
        f'({numpy_s:.2f} s)')
  print(f'ratio statistics / numpy          {numpy_s / ours_s:12.2f}x')
  print(f'largest relative difference: means {mean_error:.1e}, stds '
        f'{std_error:.1e}; percentiles {percentile_error:.4f} of |x| '
        f'(bound {ours.relative_accuracy})')


if __name__ == '__main__':
  main()
