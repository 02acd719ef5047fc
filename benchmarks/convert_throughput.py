"""Conversion throughput: TF-Agents' module vs rlds_reverb, same data, one run.

Both datasets are consumed the way a training pipeline does: built once,
`.batch(1024)`, iterated epoch after epoch. Prints trajectories/s of each
(median of --repeats epochs after a warm-up epoch; the three take turns,
round after round, so that they share the machine's noise) and the ratio, also
per round; and, apart, the one-time cost of building the pipeline and its
first epoch.

The last rows read the RLDS steps only, converting nothing: every converter
reads its input at least once. `flat_map(steps).batch(1024)` gives the steps
one element each, as a converter's output is consumed: the ceiling of any
converter that yields one trajectory per element on this input and machine.
From a TFDS directory two more reads: the episodes read whole (`whole_reads`,
what `rlds_reverb.load` gives the conversion), unbatched into steps and
batched again; and the whole episodes themselves, blocks of steps that no
per-element dataset can match (what `rlds_reverb.push` writes from).

    python benchmarks/convert_throughput.py [--source memory|tfds]
        [--episodes 20] [--steps 1000]

`--source tfds` writes the episodes with TFDS's own writer (4 record files)
and converts `rlds_reverb.load(DIR)`.
"""

import argparse
import statistics
import tempfile

import common  # pylint: disable=g-bad-import-order
import tensorflow as tf
from tf_agents.replay_buffers import rlds_to_reverb

import rlds_reverb
from rlds_reverb.sources import whole_reads


def consume(dataset) -> int:
  """Trajectories (or steps) of `dataset`, read as a training pipeline reads
  them: `.batch(1024)`; blocks of steps (episodes read whole) as they come."""
  blocks = dataset if getattr(dataset, 'blocks', False) else dataset.batch(1024)
  count = 0
  for batch in blocks:
    count += int(tf.nest.flatten(batch)[0].shape[0])
  return count


def read_steps_only(rlds_data):
  return rlds_data.flat_map(_steps)


def _steps(episode):
  return episode['steps']


def read_whole(rlds_data):
  """Every episode's steps as [T, ...] tensors, straight from the records."""
  blocks = whole_reads.whole(rlds_data).map(_steps)
  blocks.blocks = True  # Already blocks of steps: `consume` reads them as is.
  return blocks


def read_whole_steps(rlds_data):
  """The whole episodes' steps, one element each."""
  return whole_reads.whole(rlds_data).map(_steps).unbatch()


def source_data(source: str, episodes: int, steps: int, data_dir: str):
  if source == 'memory':
    data = common.in_memory_rlds(episodes, steps).cache()
    for _ in data:  # Fill the cache.
      pass
    return data
  return rlds_reverb.load(common.tfds_dir('vector', episodes, steps, data_dir))


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--episodes', type=int, default=20)
  parser.add_argument('--steps', type=int, default=1000)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--source', choices=['memory', 'tfds'],
                      default='memory')
  args = parser.parse_args()
  with tempfile.TemporaryDirectory(prefix='convert_throughput_') as data_dir:
    run(args, source_data(args.source, args.episodes, args.steps, data_dir))


def run(args, data) -> None:
  expected = args.episodes * args.steps
  converters = [
      ('tf_agents.rlds_to_reverb', rlds_to_reverb.convert_rlds_to_trajectories),
      ('rlds_reverb', rlds_reverb.convert_rlds_to_trajectories),
      ('read steps only (ceiling)', read_steps_only)]
  if args.source == 'tfds':
    converters += [('read whole, unbatched', read_whole_steps),
                   ('read whole, blocks', read_whole)]
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
  source = {'memory': 'in memory', 'tfds': 'a TFDS directory'}[args.source]
  print(f'data ({source}): {args.episodes} episodes x {args.steps} steps, '
        'observation '
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
  ceiling = max(rate for _, rate, _ in rows[2:4])
  print(f'ceiling (fastest read of one step per element / tf_agents): '
        f'{ceiling / rows[0][1]:.1f}x; rlds_reverb / ceiling: '
        f'{100 * rows[1][1] / ceiling:.0f}%')
  if len(rows) > 4:
    print(f'rlds_reverb / whole blocks: {100 * rows[1][1] / rows[4][1]:.0f}%')


if __name__ == '__main__':
  main()
