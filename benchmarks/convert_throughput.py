"""Conversion throughput: TF-Agents' module vs rlds_reverb, same data, one run.

Both datasets are consumed the way a training pipeline does: built once,
`.batch(1024)`, iterated epoch after epoch. Prints trajectories/s of each
(median of --repeats epochs after a warm-up epoch; the three take turns,
round after round, so that they share the machine's noise) and the ratio, also
per round; and, apart, the one-time cost of building the pipeline and its
first epoch.

A third row reads the RLDS steps only, converting nothing
(`flat_map(steps).batch(1024)`): every converter reads its input at least
once, so this rate over TF-Agents' is the highest ratio any converter can show
on this input and machine.

    python benchmarks/convert_throughput.py [--episodes 20] [--steps 1000]
"""

import argparse
import statistics

import common  # pylint: disable=g-bad-import-order
import tensorflow as tf
from tf_agents.replay_buffers import rlds_to_reverb

import rlds_reverb


def consume(dataset) -> int:
  count = 0
  for batch in dataset.batch(1024):
    count += int(tf.nest.flatten(batch)[0].shape[0])
  return count


def read_steps_only(rlds_data):
  return rlds_data.flat_map(_steps)


def _steps(episode):
  return episode['steps']


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--episodes', type=int, default=20)
  parser.add_argument('--steps', type=int, default=1000)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  data = common.in_memory_rlds(args.episodes, args.steps).cache()
  expected = args.episodes * args.steps
  for _ in data:  # Fill the cache.
    pass
  converters = (
      ('tf_agents.rlds_to_reverb', rlds_to_reverb.convert_rlds_to_trajectories),
      ('rlds_reverb', rlds_reverb.convert_rlds_to_trajectories),
      ('read steps only (ceiling)', read_steps_only))
  first_epoch, datasets = [], []
  for name, convert in converters:
    first_epoch.append(common.timed(lambda: consume(convert(data)), 1)[0])
    datasets.append(convert(data))
    consume(datasets[-1])  # Warm-up epoch.
  seconds = [[] for _ in converters]
  for _ in range(args.repeats):  # Rounds take turns, to share the noise.
    for (name, _), dataset, times in zip(converters, datasets, seconds):
      elapsed, count = common.timed(lambda: consume(dataset), 1)  # pylint: disable=cell-var-from-loop
      if count != expected:
        raise SystemExit(
            f'{name} gave {count} trajectories, expected {expected}')
      times.append(elapsed)
  rows = [(name, expected / statistics.median(times), first)
          for (name, _), times, first in zip(converters, seconds, first_epoch)]
  round_ratios = [tf_agents / ours for tf_agents, ours in zip(*seconds[:2])]
  print(f'machine: {common.machine()}')
  print(f'data: {args.episodes} episodes x {args.steps} steps, observation '
        f'float32[{common.OBSERVATION_SIZE}], action float32[{common.ACTION_SIZE}]'
        f', consumed as .batch(1024); median of {args.repeats} '
        'interleaved rounds')
  print(f'{"":28s} {"trajectories/s":>16s} {"build + 1st epoch":>18s}')
  for name, rate, first_seconds in rows:
    print(f'{name:28s} {rate:16,.0f} {first_seconds:17.2f}s')
  per_round = ', '.join(f'{ratio:.1f}' for ratio in round_ratios)
  print(f'ratio rlds_reverb / tf_agents: {rows[1][1] / rows[0][1]:.1f}x '
        f'(per round: {per_round}); build + 1st epoch: '
        f'{rows[0][2] / rows[1][2]:.1f}x')
  print(f'ceiling (read only / tf_agents): {rows[2][1] / rows[0][1]:.1f}x; '
        f'rlds_reverb / read only: {100 * rows[1][1] / rows[2][1]:.0f}%')


if __name__ == '__main__':
  main()
