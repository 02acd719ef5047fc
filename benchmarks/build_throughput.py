"""Building a Reverb checkpoint from a TFDS directory, and a server loading
it, against the default push into a running server: one run.

    python benchmarks/build_throughput.py [--steps 1000000]
        [--episode-steps 1000] [--repeats 3] [--data-dir DIR] [--no-push]
        [--profile]

The data: halfcheetah-shaped episodes (`common.tfds_dir('vector', ...)`)
written by TFDS into `--data-dir` (kept there, and reused when it holds
them). 2-step items (stride 1), one uniform table. Each round:

    build  read the directory (`rlds_reverb.load`), convert the episodes
           (`convert.trajectory_blocks`), plan the chunks and items
           (`checkpoints.plan`), write them (`CheckpointWriter`, DONE last)
    load   a fresh reverb.Server(table, DefaultCheckpointer(root)) in this
           process: it loads before it answers; it must hold every item
    push   (once, unless --no-push) `rlds_reverb.push` of the same
           directory into a server in its own process, as a user does;
           that server's own checkpoint, loaded as the built one is: the
           reference for the load

Printed: per stage, medians of wall-clock and CPU seconds (the process's:
tf.data's threads and the in-process server's load count too), steps per
CPU second, and ratios. The machine is shared: CPU times move less than
wall clock. Goals (issue 33): build >= 300k steps per CPU second; build +
load >= 5x faster than the push.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import common  # pylint: disable=g-bad-import-order

import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top
from rlds_reverb import convert  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import plan as plan_lib  # pylint: disable=g-import-not-at-top
from rlds_reverb.write import items as items_lib  # pylint: disable=g-import-not-at-top

TABLE = 'replay'


def dataset_dir(data_dir: str, episodes: int, steps: int) -> str:
  """The TFDS directory of `episodes` x `steps`, written once."""
  root = os.path.join(data_dir, f'vector_{episodes}x{steps}')
  for parent, _, files in os.walk(root):
    if 'dataset_info.json' in files:
      return parent
  return common.tfds_dir('vector', episodes, steps, root)


def table(spec, max_size: int = 10**8) -> reverb.Table:
  return reverb.Table(
      TABLE, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
      max_size=max_size, rate_limiter=reverb.rate_limiters.MinSize(1),
      signature=tensor_spec.add_outer_dim(spec))


def flat_trajectory(block):
  """The trajectory's leaves: tf.data packs a flat tuple per element far
  faster than a nest of namedtuples and dicts (~1 ms an episode here)."""
  return tuple(tf.nest.flatten(block.trajectory))


def build(path: str, root: str, spec) -> int:
  """Reads, converts, plans and writes; the items written."""
  data = rlds_reverb.load(path)
  plan = plan_lib.Plan(spec, items_lib.SequenceItems(2), [TABLE])
  options = tf.data.Options()
  options.autotune.enabled = False
  blocks = convert.trajectory_blocks(data).map(flat_trajectory).prefetch(
      2).with_options(options)
  with checkpoints.CheckpointWriter(
      root, [checkpoints.TableSettings.of(table(spec))]) as writer:
    for columns in blocks.as_numpy_iterator():
      for planned in plan.add(columns):
        plan_lib.write(writer, planned)
    for planned in plan.close():
      plan_lib.write(writer, planned)
    writer.close()
  return plan.items


def load(root: str, spec) -> int:
  server = reverb.Server([table(spec)], checkpointer=(
      reverb.checkpointers.DefaultCheckpointer(root)))
  size = reverb.Client(f'localhost:{server.port}').server_info(
      timeout=60)[TABLE].current_size
  server.stop()
  return size


def push(path: str, spec, root: str) -> int:
  """Pushes into a server in its own process, which then checkpoints into
  `root` (the reference load: a server's own checkpoint)."""
  server = common.ServerProcess(TABLE, tensor_spec.add_outer_dim(spec),
                                checkpoint_dir=root)
  try:
    items = rlds_reverb.push(rlds_reverb.load(path), server.address,
                             TABLE).items
    server.client.checkpoint()
    return items
  finally:
    server.stop()


def timed(fn):
  wall, cpu = time.perf_counter(), time.process_time()
  result = fn()
  return time.perf_counter() - wall, time.process_time() - cpu, result


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=1_000_000)
  parser.add_argument('--episode-steps', type=int, default=1000)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--data-dir', default=os.path.join(
      tempfile.gettempdir(), 'rlds_reverb_build_throughput'))
  parser.add_argument('--no-push', action='store_true')
  parser.add_argument('--profile', action='store_true',
                      help='profile one build (CPU time) and stop')
  args = parser.parse_args()
  episodes = max(1, args.steps // args.episode_steps)
  steps = episodes * args.episode_steps
  path = dataset_dir(args.data_dir, episodes, args.episode_steps)
  spec = specs.trajectory_spec(specs.step_format(rlds_reverb.load(path)).spec)
  work = tempfile.mkdtemp(prefix='build_throughput_')
  print(f'{common.machine()}\n{episodes:,} episodes of '
        f'{args.episode_steps:,} steps ({steps:,}) in {path}; 2-step items; '
        f'{args.repeats} rounds')
  try:
    build(path, os.path.join(work, 'warm-up'), spec)  # tf.data's tracing.
    if args.profile:
      import cProfile  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      import pstats  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      profiler = cProfile.Profile(time.process_time)
      profiler.runcall(build, path, os.path.join(work, 'profile'), spec)
      pstats.Stats(profiler).sort_stats('tottime').print_stats(30)
      return
    rounds = []
    for round_ in range(args.repeats):
      root = os.path.join(work, f'round{round_}')
      build_wall, build_cpu, items = timed(lambda: build(path, root, spec))  # pylint: disable=cell-var-from-loop
      size = sum(os.path.getsize(os.path.join(parent, name))
                 for parent, _, names in os.walk(root) for name in names)
      load_wall, load_cpu, loaded = timed(lambda: load(root, spec))  # pylint: disable=cell-var-from-loop
      if loaded != items:
        raise SystemExit(f'The server loaded {loaded:,} items of {items:,}.')
      rounds.append(dict(build_wall=build_wall, build_cpu=build_cpu,
                         load_wall=load_wall, load_cpu=load_cpu))
      print(f'  round {round_ + 1}: build {build_wall:.2f} s '
            f'({build_cpu:.2f} CPU s, {steps / build_cpu:,.0f} steps per CPU '
            f's), load {load_wall:.2f} s ({load_cpu:.2f} CPU s); {items:,} '
            f'items, {size / items:.1f} B per item')
      shutil.rmtree(root)
    median = {key: statistics.median(r[key] for r in rounds)
              for key in rounds[0]}
    print(f'build       {median["build_wall"]:8.2f} s  '
          f'{median["build_cpu"]:8.2f} CPU s  '
          f'{steps / median["build_cpu"]:>10,.0f} steps per CPU s')
    print(f'load        {median["load_wall"]:8.2f} s  '
          f'{median["load_cpu"]:8.2f} CPU s  '
          f'{items / median["load_wall"]:>10,.0f} items/s')
    both_wall = median['build_wall'] + median['load_wall']
    both_cpu = median['build_cpu'] + median['load_cpu']
    print(f'build+load  {both_wall:8.2f} s  {both_cpu:8.2f} CPU s')
    print(f'build/load  {median["build_cpu"] / median["load_cpu"]:8.2f}x '
          f'CPU (the build costs that much of the load)')
    if not args.no_push:
      pushed_root = os.path.join(work, 'pushed')
      push_wall, push_cpu, pushed = timed(lambda: push(path, spec,
                                                       pushed_root))
      if pushed != items:
        raise SystemExit(f'The push wrote {pushed:,} items of {items:,}.')
      print(f'push        {push_wall:8.2f} s  {push_cpu:8.2f} CPU s '
            f'(this process; the server runs in its own)')
      print(f'push / (build+load)  {push_wall / both_wall:.2f}x wall clock')
      loads = [timed(lambda: load(pushed_root, spec))
               for _ in range(args.repeats)]
      load_wall = statistics.median(wall for wall, _, _ in loads)
      load_cpu = statistics.median(cpu for _, cpu, _ in loads)
      print(f"load push's own checkpoint  {load_wall:.2f} s  "
            f'{load_cpu:.2f} CPU s: the built one loads in '
            f'{median["load_cpu"] / load_cpu:.2f}x its CPU time')
  finally:
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
  main()
