"""Building a Reverb checkpoint from a TFDS directory, and a server loading
it, against the default push into a running server: one run.

    python benchmarks/build_throughput.py [--kind vector|image] [--steps N]
        [--episode-steps N] [--repeats 3] [--data-dir DIR] [--no-push]
        [--profile]

Kinds of data, written by TFDS into `--data-dir` (kept there, and reused when
it holds them), 2-step items (stride 1), one uniform table:

    vector  1,000,000 halfcheetah-shaped steps in episodes of 1,000
            (`common.tfds_dir('vector', ...)`)
    image   50,000 DMLab-shaped steps in episodes of 500: 72x96x3 frames that
            TFDS stores as PNG `Image` features (`common.tfds_dir('image',
            ...)`); built and pushed with images='encoded', so the PNG bytes
            go into the table as they are (no decoding, no encoding)
    still   20,000 steps in episodes of 500 that go still (issue 39): a
            float32[128] observation, noise for 64 steps, then held (an arm
            at rest); halfcheetah-shaped actions; snappy shrinks its chunks
            once the noise ends

Each round:

    build  `rlds_reverb.build_checkpoint(data, root, table, images=...)`: it
           reads the directory twice (push's checks, then the build:
           convert, plan the chunks and items, write them, DONE last)
    load   a fresh reverb.Server(table, DefaultCheckpointer(root)) in this
           process: it loads before it answers; it must hold every item

Once, unless --no-push:

    push    `rlds_reverb.push` of the same directory (same images setting)
            into a server in its own process, as a user does; that server's
            own checkpoint, loaded as the built one is: the reference load
    memory  resident memory per item of a server process holding the
            items, less an empty server's (`common.ServerProcess.rss_bytes`,
            as `server_memory.py` measures): one that loaded the built
            checkpoint at start, against one that loaded push's own
            checkpoint at start (like for like), and push's server after
            the push (which also holds what receiving the items left)
    chunks  chunk bytes of the built checkpoint and of push's own
            (`checkpoints.chunk_bytes`: the stored bytes of each distinct
            chunk's tensors, what a server holds of them in memory)

Printed: per stage, medians of wall-clock and CPU seconds (the process's:
tf.data's threads and the in-process server's load count too), steps per
CPU second, and ratios. The machine is shared: CPU times move less than
wall clock. Goals (issue 33), vector: build >= 300k steps per CPU second;
build + load >= 5x faster than the push; memory per item within 5% of the
push's.

Measured 2026-11-26 (`python benchmarks/build_throughput.py --kind K`;
2 cores shared with other agents' tests, load average 2-6, so the wall
clock and the loads ran about 2x slower than on a quiet machine (the issue
measured a 7.4 s load of 999,000 items); medians of 3 rounds):

    vector 1M   build 6.44 s, 5.53 CPU s (181k steps per CPU s; rounds
                162k-203k), of which ~1.1 CPU s is the checks' first read;
                load 15.9 s; build + load 22.4 s against a push of 73.2 s:
                3.27x; memory per item 1,830 B, 1.000x push's own
                checkpoint loaded alike, 0.994x push's server
    image 50k   build 5.94 s, 4.70 CPU s (10.6k steps per CPU s); load
                1.01 s; build + load 6.95 s against a push of 7.62 s: 1.10x;
                memory per item 12,312 B, 1.000x push's own checkpoint,
                0.967x push's server; the built checkpoint (stored, not
                zlib-compressed) loads in 0.31x the CPU time of push's own

Measured 2026-11-28 (issue 39: each chunk snappy-compressed by itself, as
Reverb's writer does; before, a column's first 16 KB decided for all its
chunks; the code before and after run in turns, load average 2-8, medians of
3 rounds):

    still 20k   chunk bytes 3.7439x push's own before, 1.0000x after
                (2,894,631 B against 2,894,632); memory per item 1.210x
                before, 0.995x after (1,799 B against 1,809 B)
    vector 1M   chunk bytes 1.0000x (97,681,248 against 97,681,249); memory
                per item 1,830 B, 1.000x; build 3.27, 3.56, 3.42 CPU s
                before, 3.86, 3.30, 3.59 after (the chunk encoding alone
                0.094 -> 0.159 CPU s); load 7.9-22.7 s
    image 50k   chunk bytes 1.0000x; memory per item 12,301 B, 0.999x; build
                3.41, 3.55, 3.43 CPU s before, 3.46, 3.39, 3.28 after
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

import common  # pylint: disable=g-bad-import-order

import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top

TABLE = 'replay'
MAX_SIZE = 10**8
# Kind: (steps, steps per episode, images setting of the build and push).
KINDS = {
    'vector': (1_000_000, 1000, 'raw'),
    'image': (50_000, 500, 'encoded'),
    'still': (20_000, 500, 'raw'),
}
STILL_SIZE = 128  # The 'still' kind's observation, noise for STILL_AFTER steps.
STILL_AFTER = 64


def dataset_dir(kind: str, data_dir: str, episodes: int, steps: int) -> str:
  """The TFDS directory of `episodes` x `steps` of `kind`, written once."""
  root = os.path.join(data_dir, f'{kind}_{episodes}x{steps}')
  for parent, _, files in os.walk(root):
    if 'dataset_info.json' in files:
      return parent
  if kind == 'still':
    return still_dir(episodes, steps, root)
  return common.tfds_dir(kind, episodes, steps, root)


def still_arrays(num_steps: int, seed: int) -> dict:
  """A halfcheetah-shaped episode whose observation (float32[STILL_SIZE])
  is noise for STILL_AFTER steps, then holds its last noisy value."""
  arrays = common.episode_arrays(num_steps, seed)
  observation = np.random.default_rng(seed).standard_normal(
      (num_steps, STILL_SIZE)).astype(np.float32)
  observation[STILL_AFTER:] = observation[STILL_AFTER - 1]
  return {**arrays, 'observation': observation}


def still_dir(episodes: int, steps: int, root: str) -> str:
  """`episodes` of `still_arrays` written by TFDS, as `common.tfds_dir`
  writes its shapes; the dataset's path."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  tensor = tfds.features.Tensor
  features = tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tensor(shape=(STILL_SIZE,), dtype=np.float32),
      'action': tensor(shape=(common.ACTION_SIZE,), dtype=np.float32),
      'reward': tensor(shape=(), dtype=np.float32),
      'discount': tensor(shape=(), dtype=np.float32),
      **{flag: tensor(shape=(), dtype=np.bool_)
         for flag in ('is_first', 'is_last', 'is_terminal')}})})
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      'bench_still', '1.0.0', features,
      {'train': [(seed, {'steps': still_arrays(steps, seed)})
                 for seed in range(episodes)]},
      data_dir=root, disable_shuffling=True,
      download_config=tfds.download.DownloadConfig(
          num_shards=min(4, episodes)))
  return os.fspath(builder.data_dir)


def signature(path: str, images: str):
  """The table's signature: the trajectory spec's, images as PNG bytes when
  they are kept encoded."""
  spec = specs.trajectory_spec(specs.step_format(rlds_reverb.load(path)).spec)
  if images == 'encoded':
    return common.encoded_signature(spec, 'png')
  return tensor_spec.add_outer_dim(spec)


def table_options() -> tables.TableOptions:
  """Uniform, FIFO removal, MinSize(1): `common.ServerProcess`'s table."""
  return tables.uniform(TABLE, MAX_SIZE)


def build(path: str, root: str, images: str) -> rlds_reverb.BuildResult:
  """Reads, checks, converts, plans and writes a checkpoint under `root`."""
  return rlds_reverb.build_checkpoint(rlds_reverb.load(path), root,
                                      table_options(), images=images)


def load(root: str, table_signature) -> int:
  """A server in this process loads `root`'s checkpoint; the items it holds."""
  server = reverb.Server(
      [tables.table(table_options(), table_signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(root))
  size = reverb.Client(f'localhost:{server.port}').server_info(
      timeout=60)[TABLE].current_size
  server.stop()
  return size


def push(path: str, images: str, table_signature, root: str):
  """Pushes into a server in its own process, which then checkpoints into
  `root` (the reference load: a server's own checkpoint).

  Returns (items, wall s, CPU s of this process, the server's resident bytes
  grown by the items)."""
  server = common.ServerProcess(TABLE, table_signature, MAX_SIZE,
                                checkpoint_dir=root)
  try:
    empty = server.rss_bytes()
    wall, cpu, result = timed(lambda: rlds_reverb.push(
        rlds_reverb.load(path), server.address, TABLE, images=images))
    grown = server.rss_bytes() - empty
    server.client.checkpoint()
    return result.items, wall, cpu, grown
  finally:
    server.stop()


def loaded_memory(root: str, table_signature) -> int:
  """Resident bytes of a server process that loaded `root`'s checkpoint at
  start, less those of an empty one."""
  empty = common.ServerProcess(TABLE, table_signature, MAX_SIZE)
  try:
    empty_bytes = empty.rss_bytes()
  finally:
    empty.stop()
  loaded = common.ServerProcess(TABLE, table_signature, MAX_SIZE,
                                checkpoint_dir=root)
  try:
    return loaded.rss_bytes() - empty_bytes
  finally:
    loaded.stop()


def timed(fn):
  wall, cpu = time.perf_counter(), time.process_time()
  result = fn()
  return time.perf_counter() - wall, time.process_time() - cpu, result


def directory_bytes(root: str) -> int:
  return sum(os.path.getsize(os.path.join(parent, name))
             for parent, _, names in os.walk(root) for name in names)


def profile(path: str, root: str, images: str) -> None:
  """One build under cProfile (CPU time), the top functions by own time."""
  import cProfile  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import pstats  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  profiler = cProfile.Profile(time.process_time)
  profiler.runcall(build, path, root, images)
  pstats.Stats(profiler).sort_stats('tottime').print_stats(30)


def measure_builds(path, work, images, table_signature, steps, repeats):
  """`repeats` rounds of build then load; medians and the items built."""
  rounds, items = [], 0
  for round_ in range(repeats):
    root = os.path.join(work, f'round{round_}')
    build_wall, build_cpu, result = timed(
        lambda: build(path, root, images))  # pylint: disable=cell-var-from-loop
    items = result.items
    load_wall, load_cpu, loaded = timed(
        lambda: load(root, table_signature))  # pylint: disable=cell-var-from-loop
    if loaded != items:
      raise SystemExit(f'The server loaded {loaded:,} items of {items:,}.')
    rounds.append(dict(build_wall=build_wall, build_cpu=build_cpu,
                       load_wall=load_wall, load_cpu=load_cpu))
    print(f'  round {round_ + 1}: build {build_wall:.2f} s '
          f'({build_cpu:.2f} CPU s, {steps / build_cpu:,.0f} steps per CPU '
          f's), load {load_wall:.2f} s ({load_cpu:.2f} CPU s); {items:,} '
          f'items, {result.bytes / items:.1f} B per item')
    if round_ < repeats - 1:
      shutil.rmtree(root)
  median = {key: statistics.median(r[key] for r in rounds)
            for key in rounds[0]}
  return median, items, root


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--kind', choices=sorted(KINDS), default='vector')
  parser.add_argument('--steps', type=int, help='default: the kind\'s')
  parser.add_argument('--episode-steps', type=int,
                      help='default: the kind\'s')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--data-dir', default=os.path.join(
      tempfile.gettempdir(), 'rlds_reverb_build_throughput'))
  parser.add_argument('--no-push', action='store_true')
  parser.add_argument('--profile', action='store_true',
                      help='profile one build (CPU time) and stop')
  args = parser.parse_args()
  default_steps, default_episode_steps, images = KINDS[args.kind]
  episode_steps = args.episode_steps or default_episode_steps
  episodes = max(1, (args.steps or default_steps) // episode_steps)
  steps = episodes * episode_steps
  path = dataset_dir(args.kind, args.data_dir, episodes, episode_steps)
  table_signature = signature(path, images)
  work = tempfile.mkdtemp(prefix='build_throughput_')
  print(f'{common.machine()}\n{args.kind}: {episodes:,} episodes of '
        f'{episode_steps:,} steps ({steps:,}) in {path}; images={images}; '
        f'2-step items; {args.repeats} rounds')
  try:
    build(path, os.path.join(work, 'warm-up'), images)  # tf.data's tracing.
    if args.profile:
      profile(path, os.path.join(work, 'profile'), images)
      return
    median, items, built_root = measure_builds(
        path, work, images, table_signature, steps, args.repeats)
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
    if args.no_push:
      return
    pushed_root = os.path.join(work, 'pushed')
    pushed, push_wall, push_cpu, push_memory = push(
        path, images, table_signature, pushed_root)
    if pushed != items:
      raise SystemExit(f'The push wrote {pushed:,} items of {items:,}.')
    print(f'push        {push_wall:8.2f} s  {push_cpu:8.2f} CPU s '
          f'(this process; the server runs in its own)')
    print(f'push / (build+load)  {push_wall / both_wall:.2f}x wall clock')
    loads = [timed(lambda: load(pushed_root, table_signature))
             for _ in range(args.repeats)]
    load_wall = statistics.median(wall for wall, _, _ in loads)
    load_cpu = statistics.median(cpu for _, cpu, _ in loads)
    print(f"load push's own checkpoint  {load_wall:.2f} s  "
          f'{load_cpu:.2f} CPU s: the built one loads in '
          f'{median["load_cpu"] / load_cpu:.2f}x its CPU time')
    built_memory = loaded_memory(built_root, table_signature)
    pushed_memory = loaded_memory(pushed_root, table_signature)
    print(f'server memory per item, loaded at start: built '
          f'{built_memory / items:,.0f} B, push\'s own checkpoint '
          f'{pushed_memory / items:,.0f} B: {built_memory / pushed_memory:.3f}x')
    print(f'  push\'s server after the push: {push_memory / items:,.0f} B: '
          f'built / pushed {built_memory / push_memory:.3f}x')
    built_chunks = checkpoints.chunk_bytes(built_root)
    pushed_chunks = checkpoints.chunk_bytes(pushed_root)
    print(f'chunk bytes: built {built_chunks:,}, push\'s own checkpoint '
          f'{pushed_chunks:,}: {built_chunks / pushed_chunks:.4f}x')
  finally:
    shutil.rmtree(work, ignore_errors=True)


if __name__ == '__main__':
  main()
