"""Workers forked from the forkserver against spawned ones: the same
`push_shards` calls, in one process each way.

    python benchmarks/worker_start.py [--calls 3] [--workers 2] [--dataset DIR]

Each way runs in a fresh Python that starts a Reverb server and calls
`push_shards(DIR, server, 't', workers=W)` `--calls` times, printing each
call's wall seconds: the first call pays for the workers' imports (spawned:
every worker imports TensorFlow; forked: the forkserver imports it once),
the later ones show what a process that runs several pools pays. Each call
drains nothing: the table grows, and every call checks that it pushed the
same items. Then the medians of the later calls and their ratio.
"""

import argparse
import os
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
BUNDLED = os.path.join(HERE, '..', 'rlds_reverb', 'data', 'cartpole')

CHILD = r'''
import multiprocessing
import sys
import time

import reverb

from rlds_reverb import parallel
from rlds_reverb._util import worker_start

if __name__ == '__main__':
  way, dataset, calls, workers = sys.argv[1:5]
  if way == 'spawn':  # What every pool was before the forkserver.
    worker_start.context = lambda: multiprocessing.get_context('spawn')
  server = reverb.Server([reverb.Table(
      't', reverb.selectors.Uniform(), reverb.selectors.Fifo(), 10**8,
      reverb.rate_limiters.MinSize(1))])
  items = set()
  for _ in range(int(calls)):
    start = time.perf_counter()
    result = parallel.push_shards(dataset, f'localhost:{server.port}', 't',
                                  workers=int(workers))
    print(f'call {time.perf_counter() - start:.2f}', flush=True)
    items.add(result.items)
  assert len(items) == 1, items
  print(f'items {items.pop()}', flush=True)
'''


def run(way: str, dataset: str, calls: int, workers: int):
  """The wall seconds of each call, and the items each pushed."""
  env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3',
         'RLDS_REVERB_QUIET': '1'}
  done = subprocess.run([sys.executable, '-c', CHILD, way, dataset,
                         str(calls), str(workers)],
                        capture_output=True, text=True, env=env, check=False)
  if done.returncode:
    raise SystemExit(f'{way}: exit {done.returncode}: {done.stderr[-2000:]}')
  lines = done.stdout.split('\n')
  seconds = [float(l.split()[1]) for l in lines if l.startswith('call ')]
  items = [int(l.split()[1]) for l in lines if l.startswith('items ')]
  return seconds, items[0]


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--calls', type=int, default=3)
  parser.add_argument('--workers', type=int, default=2)
  parser.add_argument('--dataset', default=os.path.abspath(BUNDLED))
  args = parser.parse_args()
  later = {}
  for way in ('spawn', 'forkserver'):
    seconds, items = run(way, args.dataset, args.calls, args.workers)
    later[way] = statistics.median(seconds[1:] or seconds)
    print(f'{way:>10}: calls {", ".join(f"{s:.2f}" for s in seconds)} s '
          f'({items} items each)')
  print(f'later calls, median: spawned {later["spawn"]:.2f} s, forked '
        f'{later["forkserver"]:.2f} s: {later["spawn"] / later["forkserver"]:.2f}x')


if __name__ == '__main__':
  main()
