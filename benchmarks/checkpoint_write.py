"""Writing a Reverb checkpoint's records without a server, and a server
loading them: `rlds_reverb.checkpoints.CheckpointWriter`'s speed.

    python benchmarks/checkpoint_write.py [--items 1000000] [--repeats 3]
        [--episode-steps 1000] [--chunk-length 32] [--level 0]
        [--shared-chunks] [--profile]

The data: 2-step items (stride 1) of halfcheetah-shaped episodes, as
TF-Agents trajectories flatten (step_type int32, observation float32[17],
action float32[6], policy_info empty, next_step_type int32, reward and
discount float32): 6 columns, ready as numpy arrays; each column cut into
chunks of `chunk-length` rows per episode (an item across a chunk boundary
takes one row of each), as push chunks them; `--shared-chunks` puts the six
columns' rows in one chunk instead (six tensors; a sixth of the chunks).
Each round:

    plan     the Chunks and Items arrays from the columns (numpy; a sketch of
             the plan layer, timed apart)
    write    CheckpointWriter: add_chunks per column, add_items, close (fsync,
             DONE) into a fresh root
    load     a fresh reverb.Server(table, DefaultCheckpointer(root)): it
             loads before it answers; its table must then hold every item

Printed: medians over the rounds, wall clock and the process's CPU time
(which moves less when other processes load the machine; the server runs
in this process, so its load's CPU time is counted too), items/s and the
checkpoint's bytes per item. The goal the write serves: building >= 300k
steps/s on one core, so that the server's load is the limit.
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
import tensorflow as tf  # pylint: disable=g-import-not-at-top

from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top

TABLE = 'replay'
# Trajectory columns in Reverb's order (the signature flattened).
COLUMNS = (('step_type', (), np.int32), ('observation', (17,), np.float32),
           ('action', (6,), np.float32), ('next_step_type', (), np.int32),
           ('reward', (), np.float32), ('discount', (), np.float32))


def columns_of(episodes: int, steps: int):
  """Every column's rows, episode after episode."""
  rng = np.random.default_rng(0)
  rows = episodes * steps
  step_type = np.ones((episodes, steps), np.int32)
  step_type[:, 0], step_type[:, -1] = 0, 2
  values = {
      'step_type': step_type.ravel(),
      'observation': rng.standard_normal((rows, 17)).astype(np.float32),
      'action': rng.uniform(-1, 1, (rows, 6)).astype(np.float32),
      'next_step_type': np.roll(step_type, -1, axis=1).ravel(),
      'reward': rng.standard_normal(rows).astype(np.float32),
      'discount': np.ones(rows, np.float32),
  }
  return [values[name] for name, _, _ in COLUMNS]


def table(max_size: int) -> reverb.Table:
  signature = [tf.TensorSpec((2,) + shape, dtype)
               for _, shape, dtype in COLUMNS]
  return reverb.Table(TABLE, reverb.selectors.Uniform(),
                      reverb.selectors.Fifo(), max_size=max_size,
                      rate_limiter=reverb.rate_limiters.MinSize(1),
                      signature=signature)


def plan(columns, episodes: int, steps: int, chunk: int,
         keys: checkpoints.Keys, shared: bool = False):
  """(Chunks per column, Items): 2-step items, chunks of `chunk` rows; with
  `shared`, one chunk holds every column's rows (tensor i: column i)."""
  per_episode = -(-steps // chunk)
  episode = np.repeat(np.arange(episodes), per_episode)
  first = np.tile(np.arange(per_episode) * chunk, episodes)
  lengths = np.minimum(chunk, steps - first)
  episode_ids = keys.take(episodes)[episode]
  if shared:
    chunk_keys = [keys.take(len(first))] * len(columns)
    chunks = [checkpoints.Chunks(
        keys=chunk_keys[0], episodes=episode_ids, steps=first,
        row_starts=episode * steps + first, lengths=lengths,
        tensors=tuple(columns))]
  else:
    chunk_keys = [keys.take(len(first)) for _ in columns]
    chunks = [checkpoints.Chunks(keys=k, episodes=episode_ids, steps=first,
                                 row_starts=episode * steps + first,
                                 lengths=lengths, tensors=(values,))
              for k, values in zip(chunk_keys, columns)]
  # Item i of an episode: steps i, i + 1; chunk i // chunk, or two chunks
  # when i + 1 starts the next one.
  step = np.tile(np.arange(steps - 1), episodes)
  item_episode = np.repeat(np.arange(episodes), steps - 1)
  count = len(step)
  index = item_episode * per_episode + step // chunk
  straddles = (step + 1) % chunk == 0
  slices = np.where(straddles, 2, 1)  # Per item, in every column.
  width = len(columns)
  slice_counts = np.repeat(slices, width)
  per_item = slices * width  # Slices per item.
  item_start = np.cumsum(per_item) - per_item
  total = int(per_item.sum())
  # Per slice: its item, column, and whether it is the second of two.
  owner = np.repeat(np.arange(count), per_item)
  within = np.arange(total) - item_start[owner]
  second = straddles[owner] & (within % 2 == 1)
  column = np.where(straddles[owner], within // 2, within)
  keys_by_column = np.stack(chunk_keys)  # [column, chunk]
  chunk_keys_flat = keys_by_column[column, index[owner] + second]
  offsets = np.where(second, 0, step[owner] % chunk)
  slice_lengths = np.where(straddles[owner], 1, 2)
  items = checkpoints.Items(
      keys=keys.take(count), priorities=np.ones(count),
      times=1_700_000_000 * 10**9 + np.arange(count, dtype=np.int64),
      num_columns=width, slice_counts=slice_counts,
      chunk_keys=chunk_keys_flat, offsets=offsets, lengths=slice_lengths,
      indexes=column if shared else np.zeros(total, np.int64),
      squeeze=np.zeros(width, bool))
  return chunks, items


def write(root: str, settings, chunks, items, level: int) -> str:
  with checkpoints.CheckpointWriter(root, [settings], level=level) as writer:
    for column in chunks:
      writer.add_chunks(column)
    writer.add_items(TABLE, items)
    return writer.close()


def timed(fn):
  wall, cpu = time.perf_counter(), time.process_time()
  result = fn()
  return time.perf_counter() - wall, time.process_time() - cpu, result


def directory_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(path, name))
             for name in os.listdir(path))


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--items', type=int, default=1_000_000)
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--episode-steps', type=int, default=1000)
  parser.add_argument('--chunk-length', type=int, default=32)
  parser.add_argument('--level', type=int, default=0,
                      help='zlib level of the files')
  parser.add_argument('--shared-chunks', action='store_true',
                      help='one chunk holds all 6 columns (a tensor each)')
  parser.add_argument('--profile', action='store_true',
                      help='profile one write (CPU time) and stop')
  args = parser.parse_args()
  steps = args.episode_steps
  episodes = max(1, round(args.items / (steps - 1)))
  columns = columns_of(episodes, steps)
  settings = checkpoints.TableSettings.of(table(10**9))
  work = tempfile.mkdtemp(prefix='checkpoint_write_')
  print(f'{episodes:,} episodes of {steps:,} steps: '
        f'{episodes * (steps - 1):,} 2-step items, 6 columns in '
        f'{"shared " if args.shared_chunks else ""}chunks of '
        f'{args.chunk_length}; zlib level {args.level}; {args.repeats} rounds')
  if args.profile:
    import cProfile  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    import pstats  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    chunks, items = plan(columns, episodes, steps, args.chunk_length,
                         checkpoints.Keys(0), args.shared_chunks)
    profiler = cProfile.Profile(time.process_time)
    profiler.runcall(write, os.path.join(work, 'profile'), settings, chunks,
                     items, args.level)
    pstats.Stats(profiler).sort_stats('tottime').print_stats(25)
    shutil.rmtree(work)
    return
  rounds = []
  try:
    for round_ in range(args.repeats):
      root = os.path.join(work, f'round{round_}')
      plan_wall, plan_cpu, (chunks, items) = timed(lambda: plan(
          columns, episodes, steps, args.chunk_length, checkpoints.Keys(),
          args.shared_chunks))
      write_wall, write_cpu, path = timed(lambda: write(  # pylint: disable=cell-var-from-loop
          root, settings, chunks, items, args.level))
      count = len(items)
      del chunks, items
      load_wall, load_cpu, server = timed(lambda: reverb.Server(  # pylint: disable=cell-var-from-loop
          [table(10**9)], checkpointer=(
              reverb.checkpointers.DefaultCheckpointer(root))))
      size = reverb.Client(f'localhost:{server.port}').server_info(
          timeout=60)[TABLE].current_size
      server.stop()
      if size != count:
        raise SystemExit(f'The server loaded {size:,} items of {count:,}.')
      rounds.append(dict(plan_wall=plan_wall, plan_cpu=plan_cpu,
                         write_wall=write_wall, write_cpu=write_cpu,
                         load_wall=load_wall, load_cpu=load_cpu,
                         bytes=directory_bytes(path), items=count))
      print(f'  round {round_ + 1}: write {count / write_wall:,.0f} items/s '
            f'({count / write_cpu:,.0f} per CPU s), plan '
            f'{count / plan_wall:,.0f}/s, load {count / load_wall:,.0f}/s '
            f'({count / load_cpu:,.0f} per CPU s)')
      shutil.rmtree(root)
  finally:
    shutil.rmtree(work, ignore_errors=True)
  median = {key: statistics.median(r[key] for r in rounds)
            for key in rounds[0]}
  count = median['items']
  print(f'write       {count / median["write_wall"]:>12,.0f} items/s '
        f'({count / median["write_cpu"]:,.0f} per CPU second)')
  print(f'plan        {count / median["plan_wall"]:>12,.0f} items/s '
        f'({count / median["plan_cpu"]:,.0f} per CPU second)')
  both = median['plan_wall'] + median['write_wall']
  print(f'plan+write  {count / both:>12,.0f} items/s')
  print(f'load        {count / median["load_wall"]:>12,.0f} items/s '
        f'({count / median["load_cpu"]:,.0f} per CPU second; a server '
        f'starting from the checkpoint)')
  print(f'write/load  {median["load_wall"] / median["write_wall"]:>12.2f}x '
        f'wall clock, {median["load_cpu"] / median["write_cpu"]:.2f}x CPU '
        f'(the writer is that many times faster than the load)')
  print(f'size        {median["bytes"] / count:>12.1f} B per item')


if __name__ == '__main__':
  main()
