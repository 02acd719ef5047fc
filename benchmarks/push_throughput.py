"""Push throughput and memory: TF-Agents, Reverb's raw writer, rlds_reverb.

One run, the same data (20 episodes x 1000 steps, halfcheetah shapes), items
of 2 steps with stride 1 (TF-Agents' `ReverbAddTrajectoryObserver(2)`):

  tf_agents   `rlds_to_reverb.push_rlds_to_reverb` + the observer's flush.
  raw writer  Reverb's structured writer appending pre-made numpy rows of the
              same trajectory structure (made before timing) through its
              public `append`, creating the same items, flushed in the same
              bounded batches (24 pending) so that it is as safe as ours, and
              fully at the end.
  rlds_reverb `rlds_reverb.push` (conversion included; it hands flat rows to
              the C++ writer's `Append`, skipping `append`'s flattening).

Each writes into an empty table on one in-process server, the three taking
turns round after round so that they share the machine's noise; the item count
is checked after every run. Then the time of a push of 1 episode of 10 steps:
what every push costs whatever its size (building the pipeline, checking the
server, confirming). Then peak RSS of `rlds_reverb.push` over a streamed
dataset of 10 and of 100 episodes, each in a fresh process.

    python benchmarks/push_throughput.py [--repeats 3] [--skip-rss]
"""

import argparse
import json
import resource
import statistics
import subprocess
import sys

import common  # pylint: disable=g-bad-import-order
from rlds_reverb import quiet  # pylint: disable=g-bad-import-order
import numpy as np
import reverb
from reverb import structured_writer as structured
from tf_agents.replay_buffers import reverb_utils
from tf_agents.replay_buffers import rlds_to_reverb
from tf_agents.specs import tensor_spec
import tree

import rlds_reverb

TABLE = 'bench'
FLUSH_EVERY = 24


def make_server(spec, max_size: int = 10**7) -> reverb.Server:
  table = reverb.Table(
      TABLE, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
      max_size=max_size, rate_limiter=reverb.rate_limiters.MinSize(1),
      signature=tensor_spec.add_outer_dim(spec))
  return reverb.Server([table])


def push_tf_agents(data, client) -> None:
  observer = reverb_utils.ReverbAddTrajectoryObserver(client, TABLE, 2)
  rlds_to_reverb.push_rlds_to_reverb(data, observer)
  observer.flush()


def push_rlds_reverb(data, client) -> None:
  rlds_reverb.push(data, client, TABLE, sequence_length=2)


def numpy_rows(data):
  """Per episode: the flat trajectory rows, made before any timing."""
  episodes = []
  for block in rlds_reverb.convert.trajectory_blocks(data).as_numpy_iterator():
    leaves = [np.asarray(leaf) for leaf in tree.flatten(block.trajectory)]
    episodes.append([list(row) for row in zip(*leaves)])
  return episodes


def push_raw_writer(episodes, client, structure) -> None:
  """Reverb's structured writer on ready rows: 2-step items within episodes."""
  pattern = structured.pattern_from_transform(
      list(range(len(tree.flatten(structure)))),
      lambda ref: tree.unflatten_as(structure, [c[-2:] for c in ref]))
  config = structured.create_config(
      pattern, TABLE, [structured.Condition.step_index() >= 1])
  writer = client.structured_writer([config])
  for rows in episodes:
    for index, row in enumerate(rows):
      writer.append(row)
      if index >= 1 and index % FLUSH_EVERY == 0:
        writer.flush(FLUSH_EVERY, timeout_ms=60_000)
    writer.end_episode(timeout_ms=60_000)
  writer.flush(0, timeout_ms=60_000)


def measure(writers, client, expected_items, repeats):
  """Median items/s of each writer; rounds interleave them to share noise."""
  seconds = {name: [] for name, _ in writers}
  for _ in range(repeats):
    for name, fn in writers:
      client.reset(TABLE)
      elapsed, _ = common.timed(fn, 1)
      items = client.server_info(timeout=10)[TABLE].current_size
      if items != expected_items:
        raise SystemExit(
            f'{name} left {items} items, expected {expected_items}')
      seconds[name].append(elapsed)
  return [(name, expected_items / statistics.median(seconds[name]))
          for name, _ in writers]


def fixed_cost(client, repeats: int) -> float:
  """Median seconds of `rlds_reverb.push` of a tiny dataset."""
  tiny = common.in_memory_rlds(1, 10).cache()
  push_rlds_reverb(tiny, client)  # Warm up.
  return common.timed(lambda: push_rlds_reverb(tiny, client), repeats)[0]


def rss_child(num_episodes: int, steps: int) -> None:
  """In a fresh process: push a streamed dataset, print peak RSS in MiB.

  The in-process table keeps at most 1,000 items, so the server's storage
  does not grow with the dataset and the figure is the loader's.
  """
  data = common.streamed_rlds(num_episodes, steps)
  server = make_server(rlds_reverb.create_trajectory_data_spec(data), 1000)
  client = reverb.Client(f'localhost:{server.port}')
  result = rlds_reverb.push(data, client, TABLE, sequence_length=2)
  peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print(json.dumps({'episodes': result.episodes, 'peak_rss_mib': peak_mib}))
  server.stop()


def peak_rss(num_episodes: int, steps: int) -> float:
  output = subprocess.run(
      [sys.executable, __file__, '--rss-child', str(num_episodes),
       '--steps', str(steps)], check=True, capture_output=True, text=True)
  return json.loads(output.stdout.strip().splitlines()[-1])['peak_rss_mib']


def main():
  parser = argparse.ArgumentParser(description=__doc__)
  parser.add_argument('--episodes', type=int, default=20)
  parser.add_argument('--steps', type=int, default=1000)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--skip-rss', action='store_true')
  parser.add_argument('--rss-child', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.rss_child:
    rss_child(args.rss_child, args.steps)
    return

  data = common.in_memory_rlds(args.episodes, args.steps).cache()
  structure = rlds_reverb.create_trajectory_data_spec(data)
  episodes = numpy_rows(data)
  expected_items = args.episodes * (args.steps - 1)
  server = make_server(structure)
  client = reverb.Client(f'localhost:{server.port}')
  push_rlds_reverb(data, client)  # Warm up: tracing, first iterator.
  rows = measure([
      ('tf_agents push_rlds_to_reverb', lambda: push_tf_agents(data, client)),
      ('reverb structured writer',
       lambda: push_raw_writer(episodes, client, structure)),
      ('rlds_reverb.push', lambda: push_rlds_reverb(data, client)),
  ], client, expected_items, args.repeats)
  fixed_seconds = fixed_cost(client, args.repeats)
  server.stop()
  print(f'machine: {common.machine()}')
  print(f'data: {args.episodes} episodes x {args.steps} steps, observation '
        f'float32[{common.OBSERVATION_SIZE}], action float32['
        f'{common.ACTION_SIZE}]; items of 2 steps, stride 1; median of '
        f'{args.repeats} interleaved rounds')
  for name, rate in rows:
    print(f'{name:32s} {rate:10,.0f} items/s')
  ours = rows[2][1]
  print(f'rlds_reverb / tf_agents:      {ours / rows[0][1]:.1f}x')
  print(f'rlds_reverb / raw writer:     {100 * ours / rows[1][1]:.0f}%')
  print(f'rlds_reverb.push of 1 episode x 10 steps: {fixed_seconds:.3f} s '
        f'(the cost of any push: pipeline, checks, final confirmation)')
  if not args.skip_rss:
    small, large = peak_rss(10, args.steps), peak_rss(100, args.steps)
    print(f'peak RSS, streamed: 10 episodes {small:.0f} MiB, 100 episodes '
          f'{large:.0f} MiB: {100 * (large / small - 1):+.1f}%')


if __name__ == '__main__':
  with quiet.quieted():  # Reverb's server log lines, absl notes.
    main()
