"""A Reverb server's load of a built checkpoint against the table's size.

One run. For each size (default 1M, 2M and 5M steps of halfcheetah-shaped
episodes of 1,000 steps, made in memory, `common.in_memory_rlds`), the
items of 2-step trajectories are built into a checkpoint
(`rlds_reverb.build_checkpoint`, one uniform table); then, `--repeats`
times, a fresh child process imports Reverb and TensorFlow (not timed:
warm) and starts `reverb.Server(table, DefaultCheckpointer(root))`, which
loads the checkpoint, single-threaded, before it answers. The child times
that constructor: wall clock, its user and system CPU (system time is the
kernel handing the process fresh memory pages), and its resident memory
grown by the load.

Printed per size: medians of the load's wall, user and system CPU seconds,
items per second, resident bytes per item, and the growth against the first
size (how much more time per item a bigger table costs).

    python benchmarks/load_scaling.py [--steps 1000000 2000000 5000000]
        [--repeats 3] [--keep DIR]
"""

import argparse
import multiprocessing
import os
import resource
import shutil
import statistics
import tempfile
import time

import common  # pylint: disable=g-bad-import-order
from rlds_reverb._util import quiet  # pylint: disable=g-bad-import-order

TABLE = 'replay'
EPISODE_STEPS = 1000
MAX_SIZE = 10**9


def table_options():
  from rlds_reverb import tables  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return tables.uniform(TABLE, MAX_SIZE)


def build(steps: int, root: str) -> int:
  """A checkpoint of `steps` steps under `root`; its items."""
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  data = common.in_memory_rlds(steps // EPISODE_STEPS, EPISODE_STEPS)
  return rlds_reverb.build_checkpoint(data, root, table_options()).items


def _load_child(root: str, connection) -> None:
  """Child: warm imports, then the timed load; sends what it measured."""
  quiet.silence()
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import tables  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  spec = rlds_reverb.create_trajectory_data_spec(common.in_memory_rlds(1, 4))
  table = tables.table(table_options(), tensor_spec.add_outer_dim(spec))
  rss = common.proc_status_bytes('VmRSS')
  usage = resource.getrusage(resource.RUSAGE_SELF)
  start = time.perf_counter()
  server = reverb.Server(
      [table], checkpointer=reverb.checkpointers.DefaultCheckpointer(root))
  wall = time.perf_counter() - start
  after = resource.getrusage(resource.RUSAGE_SELF)
  grown = common.proc_status_bytes('VmRSS') - rss
  items = reverb.Client(f'localhost:{server.port}').server_info(
      timeout=60)[TABLE].current_size
  connection.send({'wall': wall, 'user': after.ru_utime - usage.ru_utime,
                   'sys': after.ru_stime - usage.ru_stime, 'rss': grown,
                   'items': items})
  server.stop()


def load(root: str) -> dict:
  context = multiprocessing.get_context('spawn')
  parent, child = context.Pipe()
  process = context.Process(target=_load_child, args=(root, child))
  process.start()
  measured = parent.recv()
  process.join(timeout=300)
  return measured


def median(rounds, key) -> float:
  return statistics.median(r[key] for r in rounds)


def report(results) -> None:
  print(f'{"steps":>10s} {"items":>10s} {"load s":>7s} {"user s":>7s} '
        f'{"sys s":>6s} {"items/s":>9s} {"B/item":>7s} {"s/item vs first":>15s}')
  first = None
  for steps, (items, rounds) in results.items():
    wall = median(rounds, 'wall')
    per_item = wall / items
    first = first or per_item
    print(f'{steps:10,d} {items:10,d} {wall:7.2f} {median(rounds, "user"):7.2f} '
          f'{median(rounds, "sys"):6.2f} {items / wall:9,.0f} '
          f'{median(rounds, "rss") / items:7,.0f} {per_item / first:14.2f}x')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, nargs='+',
                      default=[1_000_000, 2_000_000, 5_000_000])
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--keep', default=None,
                      help='build under this directory and keep it')
  args = parser.parse_args()
  print(common.machine())
  base = args.keep or tempfile.mkdtemp(prefix='load_scaling_')
  results = {}
  try:
    for steps in args.steps:
      root = os.path.join(base, f'built_{steps}')
      if not os.path.exists(root):
        build(steps, root)
      rounds = [load(root) for _ in range(args.repeats)]
      items = rounds[0]['items']
      if any(r['items'] != items for r in rounds):
        raise RuntimeError(f'{steps:,} steps: loads held different items')
      results[steps] = (items, rounds)
      walls = ', '.join(f'{r["wall"]:.2f} s' for r in rounds)
      print(f'{steps:,} steps: loads of {items:,} items: {walls}', flush=True)
  finally:
    if not args.keep:
      shutil.rmtree(base, ignore_errors=True)
  report(results)


if __name__ == '__main__':
  with quiet.quieted():
    main()
