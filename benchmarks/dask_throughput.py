"""Build and push on Beam's DaskRunner (a local cluster of 2 workers)
against the same jobs on 2 local worker processes: one run, as commands.

    python benchmarks/dask_throughput.py [--steps 1000000] [--repeats 3]
        [--data-dir DIR] [--no-push] [--no-build]

The data: halfcheetah-shaped vector steps (observation float32[17], action
float32[6]) in episodes of 1,000, in 4 record files, written by TFDS into
`--data-dir` (kept, reused). Each round runs, as a user would:

    build  rlds-reverb build --dataset DIR --out OUT --servers 2 --workers 2
           rlds-reverb build ... --servers 2 --runner dask --workers 2
           rlds-reverb build ... --servers 2 --runner dask --dask-scheduler A
    push   rlds-reverb push --dataset DIR --server ADDR --table bench
               --workers 2                 (a server in its own process)
           rlds-reverb push ... --runner dask --workers 2
           rlds-reverb push ... --runner dask --dask-scheduler A

`--runner dask --workers 2` starts (and closes) a local cluster of its own;
`--dask-scheduler A` is given one already running (a scheduler and 2 quiet
workers, started before the timer and closed after it), as on a real
deployment. Each command is timed whole (start-up and, in the first Dask
mode, the cluster's start and close included) with the CPU seconds of its
process tree (and of the running cluster's workers, start-up included). The
builds' outputs are checked (every item in the two checkpoints), the
pushes' tables too. Also printed: the seconds to start a LocalCluster of 2
quiet workers, timed alone in this process, and the pipeline's own seconds
(`BuildResult.seconds`, `--json`'s `seconds`); medians of wall and CPU
seconds, steps per second, and each Dask row's speed against the local
workers' (goal, issue 41: >= 0.8x).

Measured 2026-11-28 23:30 (2 cores, other work paused; medians of 3
rounds): build 11.81 s (--workers 2), 17.47 s (dask, own cluster: 0.68x),
11.80 s (dask, running cluster: 1.00x); push 41.85 s, 49.34 s (0.85x),
41.83 s (1.00x); a LocalCluster of 2 quiet workers ready in 3.5 s.
docs/scaling.md, "Measured here", says where the time goes.
"""

import argparse
import contextlib
import dataclasses
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import common  # pylint: disable=g-bad-import-order

TABLE = 'bench'
EPISODE_STEPS = 1000
LOCAL = '--workers 2'
# A cluster that is already running when the command starts, as on a real
# deployment: started (2 quiet workers) before the timer, closed after it.
RUNNING = '--runner dask --dask-scheduler'
BUILDS = {
    LOCAL: ['--workers', '2'],
    '--runner dask --workers 2': ['--runner', 'dask', '--workers', '2'],
    RUNNING: ['--runner', 'dask', '--dask-scheduler'],
}
PUSHES = BUILDS


@contextlib.contextmanager
def mode_arguments(mode: str):
  """The command's arguments for `mode`; a running cluster's address."""
  if mode != RUNNING:
    yield BUILDS[mode]
    return
  from rlds_reverb import dask_worker  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with dask_worker.local_cluster(2) as address:
    yield [*BUILDS[mode], address]


def run(command):
  """(wall seconds, stdout)."""
  env = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}
  start = time.perf_counter()
  result = subprocess.run(command, capture_output=True, text=True,
                          check=False, env=env)
  wall = time.perf_counter() - start
  if result.returncode != 0:
    raise RuntimeError(f'{" ".join(command)} failed: {result.stderr}')
  return wall, result.stdout


@dataclasses.dataclass
class Timing:
  arguments: list
  wall: float = 0.0
  cpu: float = 0.0


@contextlib.contextmanager
def timed(mode: str):
  """A `Timing` of one command: its wall seconds (set by the caller), and
  the CPU seconds of its process tree and of a running cluster's workers
  (counted once the cluster is closed, their start-up included)."""
  cpu_before = _children_cpu_seconds()
  with mode_arguments(mode) as arguments:
    timing = Timing(arguments)
    yield timing
  timing.cpu = _children_cpu_seconds() - cpu_before


def _children_cpu_seconds() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def build_round(dataset: str, root: str, mode: str):
  out = os.path.join(root, 'built')
  shutil.rmtree(out, ignore_errors=True)
  with timed(mode) as timing:
    timing.wall, stdout = run([
        sys.executable, '-m', 'rlds_reverb', 'build', '--dataset', dataset,
        '--out', out, '--servers', '2', '--table', TABLE, *timing.arguments])
  wall, cpu = timing.wall, timing.cpu
  items = sum(int(line.split('; ')[1].split(' items')[0].replace(',', ''))
              for line in stdout.splitlines() if line.startswith('built '))
  pipeline = [float(line.rsplit('; ', 1)[1].split(' s')[0])
              for line in stdout.splitlines() if line.startswith('built ')]
  return wall, cpu, items, max(pipeline)


def push_round(dataset: str, address: str, mode: str):
  with timed(mode) as timing:
    timing.wall, stdout = run([
        sys.executable, '-m', 'rlds_reverb', 'push', '--dataset', dataset,
        '--server', address, '--table', TABLE, '--json', *timing.arguments])
  wall, cpu = timing.wall, timing.cpu
  summary = json.loads(stdout)
  return wall, cpu, summary['items'], summary['seconds']


def cluster_start_seconds() -> float:
  """A LocalCluster of 2 quiet workers, started and closed in this process."""
  from rlds_reverb import dask_worker  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  start = time.perf_counter()
  with dask_worker.local_cluster(2):
    ready = time.perf_counter() - start
  return ready


def report(name: str, runs: dict, steps: int, items: int) -> None:
  print(f'\n{name} ({steps:,} steps, {items:,} items), medians of '
        f'{len(next(iter(runs.values())))} rounds:')
  medians = {}
  for mode, rounds in runs.items():
    wall = statistics.median(r[0] for r in rounds)
    cpu = statistics.median(r[1] for r in rounds)
    pipeline = statistics.median(r[3] for r in rounds)
    medians[mode] = wall
    print(f'  {mode:28s} {wall:7.2f} s wall ({steps / wall:9,.0f} steps/s), '
          f'{cpu:7.2f} CPU s, job {pipeline:6.2f} s '
          f'[walls {", ".join(f"{r[0]:.1f}" for r in rounds)}]')
  for mode, wall in medians.items():
    if mode != LOCAL:
      print(f'  {mode} speed / {LOCAL} speed: {medians[LOCAL] / wall:.2f}x '
            f'(goal >= 0.8x)')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=1_000_000)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--data-dir', default=None)
  parser.add_argument('--no-push', action='store_true')
  parser.add_argument('--no-build', action='store_true')
  args = parser.parse_args()
  print(common.machine())
  dataset, items = common.vector_steps_dir(args.steps, EPISODE_STEPS,
                                           args.data_dir)
  starts = [cluster_start_seconds() for _ in range(args.repeats)]
  print(f'LocalCluster of 2 quiet workers: ready in '
        f'{statistics.median(starts):.2f} s (median of {len(starts)})')

  with tempfile.TemporaryDirectory() as root:
    runs = {mode: [] for mode in BUILDS}
    for _ in range(0 if args.no_build else args.repeats):
      for mode in BUILDS:
        runs[mode].append(build_round(dataset, root, mode))
        if runs[mode][-1][2] != items:
          raise RuntimeError(f'{mode}: built {runs[mode][-1][2]} items, '
                             f'expected {items}')
    if not args.no_build:
      report('build --servers 2', runs, args.steps, items)

  if args.no_push:
    return
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  server = common.ServerProcess(TABLE, _signature(dataset), max_size=10**8)
  try:
    client = reverb.Client(server.address)
    runs = {mode: [] for mode in PUSHES}
    for _ in range(args.repeats):
      for mode in PUSHES:
        client.reset(TABLE)
        runs[mode].append(push_round(dataset, server.address, mode))
        size = client.server_info(timeout=30)[TABLE].current_size
        if size != items or runs[mode][-1][2] != items:
          raise RuntimeError(f'{mode}: the table holds {size} items, the '
                             f'push said {runs[mode][-1][2]}; expected '
                             f'{items}')
    report('push into one server', runs, args.steps, items)
  finally:
    server.stop()


def _signature(dataset: str):
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return rlds_reverb.specs.table_signature(
      rlds_reverb.create_trajectory_data_spec(rlds_reverb.load(dataset)))


if __name__ == '__main__':
  main()
