"""Time to a trainable table, as whole commands: serve + push, against build
+ serve of the build, on one server and on many. One run.

    python benchmarks/time_to_trainable.py [--steps 1000000] [--repeats 3]
        [--servers 1 2 4] [--workers 2] [--data-dir DIR] [--no-push]

The data: halfcheetah-shaped vector steps (observation float32[17], action
float32[6]) in episodes of 1,000, in 4 record files, written by TFDS into
`--data-dir` (kept, reused; `common.tfds_dir`). Each round, as a user would,
every command a fresh process:

    push   rlds-reverb serve --dataset DIR --table replay --port P
             ... until it prints 'serving ...' (its server answers), then
           rlds-reverb push --dataset DIR --server localhost:P --table replay
             ... until it returns (every item confirmed)
    build  rlds-reverb build --dataset DIR --out OUT --table replay
               --workers W --servers S      (each W of --workers; W = 1: the
                                             command's own process)
           rlds-reverb serve --dataset DIR --from-checkpoint OUT --table replay
             ... until it prints 'serving ...': every server loaded and
             answering (it prints once each has answered a server_info)

Readiness is the serve's own line: printed after its server (each of its
servers) answered a `server_info`, so no client polls a port that is not
open yet (a polling gRPC client backs off for seconds). Each table is
checked to hold every item. Then, once ready, this process (TensorFlow
warm) draws the first batch of 256 2-step items through
`rlds_reverb.ShardedReplayBuffer` over the servers (the sharded buffer's
checks, tracing and first samples: `first batch`), and the serve's
processes' resident memory is summed (`memory`: the serve and, for many
servers, each server process). Printed: medians of each stage and of the
whole (the first batch not counted in it), and each build's speed-up over
serve + push (issue 43's goal: >= 4x with 2 servers on 2 cores).
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import common  # pylint: disable=g-bad-import-order

TABLE = 'replay'
EPISODE_STEPS = 1000
ENV = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}


def command(*words) -> list:
  return [sys.executable, '-m', 'rlds_reverb', *map(str, words)]


class Served:
  """A serve command until it prints its 'serving ...' line: the seconds
  that took, its addresses, and stopping it."""

  def __init__(self, *words):
    start = time.perf_counter()
    self.process = subprocess.Popen(command('serve', *words),
                                    stdout=subprocess.PIPE,
                                    stderr=subprocess.PIPE, text=True,
                                    env=ENV)
    line = self.process.stdout.readline()
    self.seconds = time.perf_counter() - start
    if not line.startswith('serving '):
      self.process.kill()
      raise RuntimeError(f'serve did not start: {line}'
                         f'{self.process.stderr.read()}')
    self.addresses = [word for word in line.split()
                      if word.startswith('localhost:')]

  def first_batch_seconds(self, batch_size: int = 256) -> float:
    """A batch of `batch_size` through a sharded buffer over the servers,
    from making the buffer to the batch in hand."""
    import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    start = time.perf_counter()
    buffer = rlds_reverb.ShardedReplayBuffer(self.addresses, TABLE)
    iterator = iter(buffer.as_dataset(sample_batch_size=batch_size,
                                      num_steps=2))
    next(iterator)
    return time.perf_counter() - start

  def memory_bytes(self) -> int:
    """Resident memory of the serve and its children (the servers)."""
    pids = [self.process.pid] + children_of(self.process.pid)
    return sum(common.proc_status_bytes('VmRSS', pid) for pid in pids)

  def items(self) -> int:
    import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    return sum(reverb.Client(address).server_info(timeout=30)[
        TABLE].current_size for address in self.addresses)

  def stop(self) -> None:
    self.process.terminate()
    self.process.communicate(timeout=300)


def children_of(pid: int) -> list:
  """The pids whose parent is `pid`."""
  found = []
  for entry in os.listdir('/proc'):
    if entry.isdigit():
      try:
        with open(f'/proc/{entry}/stat') as stat:
          parent = int(stat.read().rsplit(')', 1)[1].split()[1])
      except (OSError, ValueError, IndexError):
        continue
      if parent == pid:
        found.append(int(entry))
  return found


def run(*words) -> float:
  start = time.perf_counter()
  result = subprocess.run(command(*words), capture_output=True, text=True,
                          env=ENV, check=False)
  if result.returncode:
    raise RuntimeError(f'{" ".join(map(str, words))}: {result.stderr}')
  return time.perf_counter() - start


def push_round(dataset: str, items: int) -> dict:
  served = Served('--dataset', dataset, '--table', TABLE, '--max-size',
                  10**8)
  try:
    pushed = run('push', '--dataset', dataset, '--server',
                 served.addresses[0], '--table', TABLE)
    _check(served, items)
    first, memory = served.first_batch_seconds(), served.memory_bytes()
  finally:
    served.stop()
  return {'serve': served.seconds, 'push': pushed,
          'total': served.seconds + pushed, 'first batch': first,
          'memory': memory}


def build_round(dataset: str, root: str, servers: int, items: int,
                workers: int) -> dict:
  out = os.path.join(root, f'built{servers}')
  shutil.rmtree(out, ignore_errors=True)
  built = run('build', '--dataset', dataset, '--out', out, '--table', TABLE,
              '--max-size', 10**8, '--workers', workers, '--servers',
              servers)
  served = Served('--dataset', dataset, '--from-checkpoint', out, '--table',
                  TABLE)
  try:
    _check(served, items)
    first, memory = served.first_batch_seconds(), served.memory_bytes()
  finally:
    served.stop()
  return {'build': built, 'serve': served.seconds,
          'total': built + served.seconds, 'first batch': first,
          'memory': memory}


def _check(served: Served, items: int) -> None:
  held = served.items()
  if held != items:
    raise RuntimeError(f'the tables hold {held:,} items, expected {items:,}')


def medians(rounds) -> dict:
  return {stage: statistics.median(r[stage] for r in rounds)
          for stage in rounds[0]}


def line(name: str, rounds) -> str:
  middle = medians(rounds)
  stages = ', '.join(f'{stage} {seconds:.1f} s'
                     for stage, seconds in middle.items()
                     if stage not in ('total', 'memory'))
  stages += f', memory {middle["memory"] / 2**20:,.0f} MiB'
  walls = ', '.join(f'{r["total"]:.1f}' for r in rounds)
  return f'  {name:36s} {middle["total"]:6.1f} s ({stages}) [rounds {walls}]'


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=1_000_000)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--servers', type=int, nargs='+', default=[1, 2, 4])
  parser.add_argument('--workers', type=int, nargs='+', default=[2])
  parser.add_argument('--data-dir', default=None)
  parser.add_argument('--no-push', action='store_true')
  args = parser.parse_args()
  print(common.machine())
  dataset, items = common.vector_steps_dir(args.steps, EPISODE_STEPS,
                                           args.data_dir)
  builds = {(workers, servers): [] for workers in args.workers
            for servers in args.servers}
  pushes = []
  with tempfile.TemporaryDirectory() as root:
    for _ in range(args.repeats):
      if not args.no_push:
        pushes.append(push_round(dataset, items))
      for (workers, servers), rounds in builds.items():
        rounds.append(build_round(dataset, root, servers, items, workers))
  print(f'\ntime to a trainable table ({args.steps:,} steps, {items:,} items),'
        f' medians of {args.repeats} rounds:')
  if pushes:
    print(line('serve + push', pushes))
  for (workers, servers), rounds in builds.items():
    print(line(f'build --workers {workers} --servers {servers} + serve',
               rounds))
  if pushes:
    base = medians(pushes)['total']
    for (workers, servers), rounds in builds.items():
      print(f'  --workers {workers} --servers {servers}: '
            f'{base / medians(rounds)["total"]:.2f}x faster than serve + push '
            '(goal, 2 servers: >= 4x)')


if __name__ == '__main__':
  main()
