"""Sampling a table sharded over S servers against one table, per learner core.

One run. Halfcheetah-shaped episodes (D4RL's shapes, `common`) are pushed
to one server whole, and spread over 2 and over 4 servers, episode I to
server I % S (as `build --servers S` and the sharded buffer's observer
spread them); every server in a child process of its own, as deployed. A
learner in this process then samples 2-step items in batches of B from the
same items:

  single     TF-Agents' `ReverbReplayBuffer.as_dataset` on the one server
  sharded S  `rlds_reverb.ShardedReplayBuffer(S servers).as_dataset`: each
             batch holds every server's share of B by its table's size
             (`replay_mixture(..., 'size')`)

each with `num_parallel_calls` 2 and TF-Agents' default (AUTOTUNE). Rounds
take turns across the configurations, so that they share the machine's
noise. For each: items/s (wall) and items per CPU-second of this process
(the learner's tf.data and gRPC threads: "per learner core"), medians over
rounds; then the ratios to `single`, per round, their median.

    python benchmarks/sharded_throughput.py [--episodes 60] [--steps 200]
        [--batch-size 64] [--repeats 5] [--batches 150] [--quick]
"""

import argparse

import common  # pylint: disable=g-bad-import-order
import mixture_throughput  # pylint: disable=g-bad-import-order
from rlds_reverb._util import quiet  # pylint: disable=g-bad-import-order
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.specs import tensor_spec

import rlds_reverb

TABLE = 'bench'
SHARDS = (2, 4)
# Label: num_parallel_calls (None: TF-Agents' default, AUTOTUNE).
PARALLEL = {'2 parallel': 2, 'default': None}


def filled_servers(num_episodes: int, num_steps: int):
  """(the server of every episode, {S: S servers, episode I on I % S},
  spec)."""
  data = common.in_memory_rlds(num_episodes, num_steps)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  signature = tensor_spec.add_outer_dim(spec)
  whole = common.ServerProcess(TABLE, signature)
  rlds_reverb.push(data, whole.client, TABLE)
  shards = {}
  for count in SHARDS:
    shards[count] = [common.ServerProcess(TABLE, signature)
                     for _ in range(count)]
    for index, server in enumerate(shards[count]):
      rlds_reverb.push(data.shard(count, index), server.client, TABLE)
  return whole, shards, spec


def ways() -> list:
  return ['single'] + [f'sharded {count}' for count in SHARDS]


def datasets(whole, shards, spec, batch_size: int, num_parallel_calls):
  """{way: a dataset of (Trajectory [B, 2, ...], SampleInfo)}."""
  built = {'single': reverb_replay_buffer.ReverbReplayBuffer(
      spec, TABLE, sequence_length=2, server_address=whole.address
  ).as_dataset(sample_batch_size=batch_size, num_steps=2,
               num_parallel_calls=num_parallel_calls)}
  for count, servers in shards.items():
    buffer = rlds_reverb.ShardedReplayBuffer(
        [(server.address, TABLE) for server in servers])
    built[f'sharded {count}'] = buffer.as_dataset(
        sample_batch_size=batch_size, num_steps=2,
        num_parallel_calls=num_parallel_calls)
  return built


def measure(args):
  whole, shards, spec = filled_servers(args.episodes, args.steps)
  try:
    results = {(way, label): [] for label in PARALLEL for way in ways()}
    for _ in range(args.repeats):  # Configurations take turns.
      for label, num_parallel_calls in PARALLEL.items():
        built = datasets(whole, shards, spec, args.batch_size,
                         num_parallel_calls)
        for way in ways():
          results[way, label].append(
              mixture_throughput.sample_rate(built[way], args.batches,
                                             args.batch_size))
        del built  # Its datasets' iterators are gone: sampling stopped.
    items = whole.client.server_info(timeout=30)[TABLE].current_size
  finally:  # Else the exit waits for the server processes without end.
    for server in [whole, *(s for servers in shards.values() for s in servers)]:
      server.stop()
  return items, results


def report(items, results, args) -> None:
  print(f'{items:,} 2-step items: on one server, and spread over '
        f'{" and over ".join(str(count) for count in SHARDS)} (episode I on '
        f'server I % S); batches of {args.batch_size}; {args.batches} '
        f'batches per measurement, median of {args.repeats} interleaved '
        f'rounds')
  mixture_throughput.print_rates(results, ways()[1:])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--episodes', type=int, default=60)
  parser.add_argument('--steps', type=int, default=200,
                      help='steps per episode')
  parser.add_argument('--batch-size', type=int, default=64)
  parser.add_argument('--repeats', type=int, default=5)
  parser.add_argument('--batches', type=int, default=150,
                      help='batches timed per measurement')
  parser.add_argument('--quick', action='store_true',
                      help='tiny sizes, to check that it runs')
  args = parser.parse_args()
  if args.quick:
    args.episodes, args.steps, args.repeats, args.batches = 8, 20, 1, 30
  print(f'machine: {common.machine()}')
  items, results = measure(args)
  report(items, results, args)


if __name__ == '__main__':
  with quiet.quieted():
    main()
