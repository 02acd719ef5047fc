"""Sampling a replay mixture against one table, per learner core.

One run. Halfcheetah-shaped episodes (D4RL's shapes, `common`) are pushed
twice: all of them to one server, and split over three servers holding
1:2:3 of them (each server in a child process, as on a real deployment). A
learner in this process then samples 2-step items in batches of 64 from the
same items, three ways:

  single      TF-Agents' `ReverbReplayBuffer.as_dataset` on the one server
  mixture     `rlds_reverb.replay_mixture` over the three, weights='size':
              every batch holds exactly 11, 21 and 32 rows of them (10, 22,
              32 every third batch), sizes re-read every 100 batches
  sample_from `tf.data.Dataset.sample_from_datasets` over one
              `as_dataset(64).unbatch()` per server, weighted by size,
              `.batch(64)`: the share of each server holds only on average

each with `num_parallel_calls` 2 and TF-Agents' default (AUTOTUNE). Rounds
take turns across the configurations, so that they share the machine's
noise. For each: items/s (wall) and items per CPU-second of this process
(the learner: its tf.data and gRPC threads; "per learner core"), medians
over rounds; then the ratios to `single`, per round, their median.

    python benchmarks/mixture_throughput.py [--episodes 60] [--steps 200]
        [--repeats 5] [--batches 150] [--quick]
"""

import argparse
import time

import common  # pylint: disable=g-bad-import-order
from rlds_reverb._util import quiet  # pylint: disable=g-bad-import-order
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.specs import tensor_spec

import rlds_reverb

TABLE = 'bench'
BATCH_SIZE = 64
PARTS = (1, 2, 3)  # Episodes per server, as fractions of 6.
# Label: num_parallel_calls (None: TF-Agents' default, AUTOTUNE).
PARALLEL = {'2 parallel': 2, 'default': None}
WAYS = ('single', 'mixture', 'sample_from')


def split(num_episodes: int):
  """Episode ranges per server, in the proportions of PARTS."""
  bounds, start = [], 0
  for part in PARTS:
    end = start + num_episodes * part // sum(PARTS)
    bounds.append((start, end))
    start = end
  return bounds


def filled_servers(num_episodes: int, num_steps: int):
  """(the server of every episode, the three servers of a part each, spec)."""
  data = common.in_memory_rlds(num_episodes, num_steps)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  signature = tensor_spec.add_outer_dim(spec)
  whole = common.ServerProcess(TABLE, signature)
  rlds_reverb.push(data, whole.client, TABLE)
  parts = []
  for start, end in split(num_episodes):
    server = common.ServerProcess(TABLE, signature)
    rlds_reverb.push(data.skip(start).take(end - start), server.client, TABLE)
    parts.append(server)
  return whole, parts, spec


def buffer(server, spec):
  return reverb_replay_buffer.ReverbReplayBuffer(
      spec, TABLE, sequence_length=2, server_address=server.address)


def datasets(whole, parts, spec, num_parallel_calls):
  """{way: a dataset of (Trajectory [64, 2, ...], SampleInfo)}."""
  sizes = [server.client.server_info(timeout=30)[TABLE].current_size
           for server in parts]
  per_server = [buffer(server, spec).as_dataset(
      sample_batch_size=BATCH_SIZE, num_steps=2,
      num_parallel_calls=num_parallel_calls).unbatch() for server in parts]
  return {
      'single': buffer(whole, spec).as_dataset(
          sample_batch_size=BATCH_SIZE, num_steps=2,
          num_parallel_calls=num_parallel_calls),
      'mixture': rlds_reverb.replay_mixture(
          [(server.address, TABLE) for server in parts], 'size', BATCH_SIZE,
          num_parallel_calls=num_parallel_calls),
      'sample_from': tf.data.Dataset.sample_from_datasets(
          per_server, [size / sum(sizes) for size in sizes]).batch(
              BATCH_SIZE),
  }


def sample_rate(dataset, batches: int, batch_size: int = BATCH_SIZE) -> dict:
  """Items/s and items per learner CPU-second over `batches` batches of
  `batch_size`, after 5 to warm up (tracing, connections)."""
  iterator = iter(dataset)
  for _ in range(5):
    next(iterator)
  cpu = common.cpu_seconds()
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  wall = time.perf_counter() - start
  cpu = common.cpu_seconds() - cpu
  del iterator  # Stops its prefetching threads.
  items = batches * batch_size
  return {'rate': items / wall, 'per_cpu': items / cpu}


def measure(num_episodes, num_steps, repeats, batches):
  whole, parts, spec = filled_servers(num_episodes, num_steps)
  results = {(way, label): [] for label in PARALLEL for way in WAYS}
  for _ in range(repeats):  # Configurations take turns.
    for label, num_parallel_calls in PARALLEL.items():
      built = datasets(whole, parts, spec, num_parallel_calls)
      for way in WAYS:
        results[way, label].append(sample_rate(built[way], batches))
  sizes = [server.client.server_info(timeout=30)[TABLE].current_size
           for server in parts]
  for server in [whole] + parts:
    server.stop()
  return sizes, results


def report(sizes, results, repeats, batches) -> None:
  print(f'{sum(sizes):,} 2-step items: one server, and three holding '
        f'{", ".join(f"{s:,}" for s in sizes)}; batches of {BATCH_SIZE}; '
        f'{batches} batches per measurement, median of {repeats} '
        f'interleaved rounds')
  print_rates(results, ('mixture', 'sample_from'))


def print_rates(results, compared) -> None:
  """Medians of items/s and items/CPU-s of each (way, num_parallel_calls
  label), then each way of `compared` against 'single', per label."""
  print(f'{"way":12s} {"num_parallel_calls":18s} {"items/s":>9s} '
        f'{"items/CPU-s":>11s}')
  for (way, label), runs in results.items():
    print(f'{way:12s} {label:18s} {common.median_of(runs, "rate"):9,.0f} '
          f'{common.median_of(runs, "per_cpu"):11,.0f}')
  for label in dict.fromkeys(label for _, label in results):
    single = results['single', label]
    for way in compared:
      runs = results[way, label]
      print(f'{way} / single, {label}: per learner core '
            f'{common.median_ratio(runs, single, "per_cpu"):.2f}x, items/s '
            f'{common.median_ratio(runs, single, "rate"):.2f}x')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--episodes', type=int, default=60)
  parser.add_argument('--steps', type=int, default=200,
                      help='steps per episode')
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--batches', type=int, default=150,
                      help='batches timed per measurement')
  parser.add_argument('--quick', action='store_true',
                      help='tiny sizes, to check that it runs')
  args = parser.parse_args()
  if args.quick:
    args.episodes, args.steps, args.repeats, args.batches = 6, 20, 1, 30
  print(f'machine: {common.machine()}')
  sizes, results = measure(args.episodes, args.steps, args.repeats,
                           args.batches)
  report(sizes, results, args.repeats, args.batches)


if __name__ == '__main__':
  with quiet.quieted():
    main()
