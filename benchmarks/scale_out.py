"""Push throughput of one push, 2 worker processes and Beam's DirectRunner.

    python benchmarks/scale_out.py [--episodes 48] [--repeats 3]

The data: a TFDS directory written here, EPISODES x 1000 steps of D4RL
halfcheetah shapes (observation float32[17], action float32[6]). The server
runs in its own process with one table signed for the data, as
`rlds-reverb serve` would; each round runs, in turn,

    rlds-reverb push --dataset DIR --server ADDR --table bench
    rlds-reverb push ... --workers 2
    rlds-reverb push ... --runner DirectRunner \
        --beam-option direct_num_workers=2 \
        --beam-option direct_running_mode=multi_processing

as a user would (process start, reading the data, pushing), after emptying
the table, and checks the table holds every item. (The Beam row needs
`pip install ".[beam]"`; without Beam it is left out.) Reported, medians
over rounds:
  * wall: the whole command, steps/s = steps / wall;
  * push: the push phase (the longest worker's; on Beam, the pipeline's run,
    worker starts included), steps/s = steps / push;
  * server CPU per item: the server process's user+system CPU time over the
    run divided by the items written, to size servers for bigger loads;
  * loader CPU per step: the push command's processes' user+system CPU time
    (start, check and push included) divided by the steps.
The server's resident memory per item held: RSS after the first push minus
RSS before it, over its items (later rounds reuse freed memory). After the
rounds, a checkpoint of the full table (`client.checkpoint()`): its seconds
and bytes on disk per item. Last, the same memory figure for 10 episodes
written by `rlds_reverb.push` and by TF-Agents' `push_rlds_to_reverb` with a
`ReverbAddTrajectoryObserver(2)` (Reverb's trajectory writer), each into a
fresh server process.
"""

import argparse
import importlib.util
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import common  # pylint: disable=g-bad-import-order
import numpy as np
import tensorflow_datasets as tfds

TABLE = 'bench'
STEPS = 1000

_SERVER = """
import os, sys
os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'
import reverb, rlds_reverb
spec = rlds_reverb.create_trajectory_data_spec(rlds_reverb.load(sys.argv[1]))
table = reverb.Table(sys.argv[2], reverb.selectors.Uniform(),
                     reverb.selectors.Fifo(), max_size=10**8,
                     rate_limiter=reverb.rate_limiters.MinSize(1),
                     signature=rlds_reverb.specs.table_signature(spec))
server = reverb.Server([table], checkpointer=reverb.checkpointers.
                       DefaultCheckpointer(sys.argv[3]))
print(server.port, flush=True)
sys.stdin.read()
server.stop()
del server  # Now, not at interpreter exit, when reverb's modules are gone.
"""


def write_dataset(root: str, num_episodes: int) -> str:
  tfds.disable_progress_bar()
  scalar = tfds.features.Scalar
  features = tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tfds.features.Tensor(shape=(common.OBSERVATION_SIZE,),
                                          dtype=np.float32),
      'action': tfds.features.Tensor(shape=(common.ACTION_SIZE,),
                                     dtype=np.float32),
      'reward': scalar(dtype=np.float32),
      'discount': scalar(dtype=np.float32),
      'is_first': scalar(dtype=np.bool_),
      'is_last': scalar(dtype=np.bool_),
      'is_terminal': scalar(dtype=np.bool_),
  })})
  examples = [(i, {'steps': common.episode_arrays(STEPS, i, terminal=False)})
              for i in range(num_episodes)]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name='halfcheetah_like', version='1.0.0', features=features,
      split_datasets={'train': examples}, data_dir=root,
      disable_shuffling=True)
  return str(builder.data_dir)


def rss_bytes(pid: int) -> int:
  with open(f'/proc/{pid}/status') as f:
    for line in f:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f'no VmRSS for process {pid}')


def directory_bytes(path: str) -> int:
  return sum(os.path.getsize(os.path.join(folder, name))
             for folder, _, names in os.walk(path) for name in names)


def memory_per_item(dataset: str, writer: str, num_episodes: int) -> float:
  """Server RSS growth per item when `writer` pushes `num_episodes`."""
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tf_agents.replay_buffers import rlds_to_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with tempfile.TemporaryDirectory() as checkpoint_dir:
    server = subprocess.Popen(
        [sys.executable, '-c', _SERVER, dataset, TABLE, checkpoint_dir],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
      client = reverb.Client(f'localhost:{int(server.stdout.readline())}')
      before = rss_bytes(server.pid)
      data = rlds_reverb.load(dataset).take(num_episodes)
      if writer == 'rlds_reverb':
        rlds_reverb.push(data, client, TABLE, sequence_length=2)
      else:
        observer = reverb_utils.ReverbAddTrajectoryObserver(client, TABLE, 2)
        rlds_to_reverb.push_rlds_to_reverb(data, observer)
        observer.flush()
      items = client.server_info(timeout=30)[TABLE].current_size
      return (rss_bytes(server.pid) - before) / items
    finally:
      server.stdin.close()
      server.wait(timeout=60)


# How each row runs the push: options after the common ones.
MODES = {
    'one push': [],
    '--workers 2': ['--workers', '2'],
    'DirectRunner, 2 workers': [
        '--runner', 'DirectRunner', '--beam-option', 'direct_num_workers=2',
        '--beam-option', 'direct_running_mode=multi_processing'],
}


def run_push(dataset: str, address: str, mode: str):
  command = [sys.executable, '-m', 'rlds_reverb', 'push', '--dataset', dataset,
             '--server', address, '--table', TABLE, '--json', *MODES[mode]]
  cpu_before = _children_cpu_seconds()
  start = time.perf_counter()
  result = subprocess.run(command, capture_output=True, text=True, check=False)
  wall = time.perf_counter() - start
  if result.returncode != 0:
    raise RuntimeError(f'push failed: {result.stderr}')
  return wall, _children_cpu_seconds() - cpu_before, json.loads(result.stdout)


def _children_cpu_seconds() -> float:
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  return usage.ru_utime + usage.ru_stime


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--episodes', type=int, default=48)
  parser.add_argument('--repeats', type=int, default=5)
  args = parser.parse_args()
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  with tempfile.TemporaryDirectory() as root:
    dataset = write_dataset(root, args.episodes)
    checkpoint_dir = os.path.join(root, 'checkpoints')
    server = subprocess.Popen(
        [sys.executable, '-c', _SERVER, dataset, TABLE, checkpoint_dir],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
      address = f'localhost:{int(server.stdout.readline())}'
      client = reverb.Client(address)
      rss_at_start, rss_per_item = rss_bytes(server.pid), None
      runs = {mode: [] for mode in MODES
              if 'Runner' not in mode or importlib.util.find_spec(
                  'apache_beam')}
      for _ in range(args.repeats):
        for mode in runs:
          client.reset(TABLE)
          cpu_before = common.cpu_seconds(server.pid)
          wall, loader_cpu, summary = run_push(dataset, address, mode)
          server_cpu = common.cpu_seconds(server.pid) - cpu_before
          size = client.server_info(timeout=30)[TABLE].current_size
          if size != summary['items']:
            raise RuntimeError(f'table has {size} items, push confirmed '
                               f'{summary["items"]}')
          runs[mode].append((wall, summary['seconds'], server_cpu,
                                summary['trajectories'], summary['items'],
                                loader_cpu))
          if rss_per_item is None:
            rss_per_item = (rss_bytes(server.pid) - rss_at_start) / size
      items = size
      start = time.perf_counter()
      client.checkpoint()
      checkpoint_s = time.perf_counter() - start
      checkpoint_per_item = directory_bytes(checkpoint_dir) / items
    finally:
      server.stdin.close()
      server.wait(timeout=60)
    memory = {writer: memory_per_item(dataset, writer, 10)
              for writer in ('rlds_reverb', 'tf_agents')}

  print(f'machine: {common.machine()}')
  print(f'data: {args.episodes} episodes x {STEPS} steps; median of '
        f'{args.repeats} rounds')
  rates = {}
  print(f'{"run":>24} {"wall s":>8} {"steps/s":>9} {"push s":>8} '
        f'{"steps/s":>9} {"server CPU us/item":>19} {"loader CPU us/step":>19}')
  for mode, samples in runs.items():
    wall = statistics.median(s[0] for s in samples)
    push = statistics.median(s[1] for s in samples)
    cpu_per_item = statistics.median(s[2] / s[4] for s in samples) * 1e6
    loader_per_step = statistics.median(s[5] / s[3] for s in samples) * 1e6
    steps = samples[0][3]
    rates[mode] = (steps / wall, steps / push)
    print(f'{mode:>24} {wall:>8.2f} {steps / wall:>9,.0f} {push:>8.2f} '
          f'{steps / push:>9,.0f} {cpu_per_item:>19.1f} '
          f'{loader_per_step:>19.1f}')
  one = rates['one push']
  for mode, (by_wall, by_push) in rates.items():
    if mode != 'one push':
      print(f'{mode} vs one push: {by_wall / one[0]:.2f}x by wall, '
            f'{by_push / one[1]:.2f}x in the push phase')
  print(f'server memory with the table full: {rss_per_item:.0f} bytes/item; '
        f'checkpoint of {items:,} items: {checkpoint_s:.2f} s, '
        f'{checkpoint_per_item:.0f} bytes/item on disk')
  print(f'server memory per item, 10 episodes: rlds_reverb.push '
        f'{memory["rlds_reverb"]:.0f} bytes, TF-Agents observer '
        f'{memory["tf_agents"]:.0f} bytes')


if __name__ == '__main__':
  main()
