"""Reverb checkpoint -> RLDS directory: `rlds_reverb.export`'s speed, size, RSS.

    python benchmarks/export_throughput.py [--repeats 3] [--scale 1.0]
                                           [--rss-steps 100000] [--rss-only]

Each case's episodes are written as an RLDS directory (the source), pushed
by `rlds_reverb.push` (2-step items, push's chunks) into a table of a real
Reverb server with a checkpointer, checkpointed, and exported; the median
over `repeats` exports into fresh directories is timed and compared, in the
same run, with the reference: `EpisodeWriter` writing the same episodes from
memory (export = reading the checkpoint + rebuilding episodes + that). The
first export of each case is a warm-up, not counted.

    export/s     exported steps per second, wall clock (goal: >= 100k
                 vector steps/s)
    per CPU s    exported steps per second of the process's CPU time (moves
                 less than wall clock when others load the machine)
    vs writer    export's rate / EpisodeWriter's from memory (median of the
                 per-round ratios; each round runs both)
    B/step       bytes of record files per step: exported, source, checkpoint
    out/source   exported bytes / source bytes (goal: <= 1.1)

Peak RSS: a child process exports a checkpoint of `rss-steps` vector steps
(1,000-step episodes), another one of 10x that, with the export's default
buffers; each reports how far its RSS rose during the export (VmHWM reset
after imports, VmRSS before). Goal: the same for both. Rates move between runs on a shared
machine: read the ratios.
"""

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Dict, List

import common  # pylint: disable=g-bad-import-order

import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import signature as signature_lib  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import Durability  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import EpisodeWriter  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import features_from_specs  # pylint: disable=g-import-not-at-top

TABLE = 'replay'


def vector_episode(num_steps: int, seed: int) -> Dict:
  return {'steps': common.episode_arrays(num_steps, seed)}


def frame_episode(num_steps: int, seed: int) -> Dict:
  return {'steps': common.frame_episode_arrays(num_steps, seed)}


# name: (episode fn, episodes, steps per episode); None: the bundled set.
CASES = {
    'vector, 1,000-step episodes': (vector_episode, 100, 1000),
    'vector, 50-step episodes': (vector_episode, 1000, 50),
    'bundled CartPole': None,
    'frames 72x96x3 (PNG)': (frame_episode, 10, 200),
}


def _spec_of(steps: Dict) -> Dict:
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return tf.nest.map_structure(
      lambda x: tf.TensorSpec(np.shape(x)[1:], tf.as_dtype(np.asarray(x).dtype)),
      steps)


def write_source(directory: str, episodes: List[Dict]) -> None:
  """The episodes as an RLDS directory, as the recorder writes them."""
  features = features_from_specs(_spec_of(episodes[0]['steps']))
  with EpisodeWriter(directory, features, name='source',
                     durability=Durability.FLUSH) as writer:
    for episode in episodes:
      writer.write(episode)


def disk_bytes(directory: str) -> int:
  """Bytes of the record files under `directory` (a dataset or checkpoint)."""
  total = 0
  for parent, _, names in os.walk(directory):
    total += sum(os.path.getsize(os.path.join(parent, name))
                 for name in names if 'tfrecord' in name)
  return total


def checkpoint_of(source: str, root: str) -> str:
  """`source` pushed into a signed table of a real server, checkpointed."""
  data = rlds_reverb.load(source)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  table = reverb.Table(
      TABLE, reverb.selectors.Fifo(), reverb.selectors.Fifo(),
      max_size=10_000_000, rate_limiter=reverb.rate_limiters.MinSize(1),
      signature=signature_lib.table_signature(spec))
  server = reverb.Server(
      [table], port=None,
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          os.path.join(root, 'checkpoints')))
  try:
    rlds_reverb.push(data, f'localhost:{server.port}', TABLE)
    return reverb.Client(f'localhost:{server.port}').checkpoint()
  finally:
    server.stop()


def export_once(checkpoint: str, out: str):
  """(wall seconds, CPU seconds, report, bytes of the output) of one export."""
  wall, cpu = time.perf_counter(), time.process_time()
  report = rlds_reverb.export(TABLE, out, checkpoint=checkpoint)
  wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
  size = disk_bytes(out)
  shutil.rmtree(out)
  return wall, cpu, report, size


def writer_once(episodes: List[Dict], directory: str):
  """(wall seconds, CPU seconds) of EpisodeWriter writing `episodes`."""
  wall, cpu = time.perf_counter(), time.process_time()
  write_source(directory, episodes)
  wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
  shutil.rmtree(directory)
  return wall, cpu


def episodes_of(name: str, scale: float) -> List[Dict]:
  if CASES[name] is None:
    return _bundled_episodes()
  make, count, length = CASES[name]
  return [make(length, seed) for seed in range(max(1, int(count * scale)))]


def _bundled_episodes() -> List[Dict]:
  """The bundled CartPole set's episodes as numpy steps."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  dataset = tfds.builder_from_directory(
      sources.bundled_dataset_dir()).as_dataset(split='train')
  episodes = []
  for episode in dataset:
    blocks = list(episode['steps'].batch(4096).as_numpy_iterator())
    episodes.append({'steps': {key: np.concatenate([b[key] for b in blocks])
                               for key in blocks[0]}})
  return episodes


def measure(name: str, repeats: int, scale: float, root: str) -> Dict:
  """Export and EpisodeWriter alternated `repeats` times (a shared
  machine's load hits both alike): medians of rates and of ratios."""
  episodes = episodes_of(name, scale)
  case_root = tempfile.mkdtemp(dir=root)
  source = os.path.join(case_root, 'source')
  write_source(source, episodes)
  checkpoint = checkpoint_of(source, case_root)
  out = os.path.join(case_root, 'out')
  export_once(checkpoint, out)  # Warm-up: TF builds its ops.
  rows = []
  for _ in range(repeats):
    wall, cpu, report, out_bytes = export_once(checkpoint, out)
    writer_wall, _ = writer_once(episodes, os.path.join(case_root, 'w'))
    rows.append((wall, cpu, writer_wall))
  wall, cpu, writer_wall = (np.array(column) for column in zip(*rows))
  steps = report.steps
  result = {
      'steps': steps, 'lost': report.lost,
      'rate': steps / np.median(wall), 'cpu_rate': steps / np.median(cpu),
      'writer_rate': steps / np.median(writer_wall),
      'vs_writer': float(np.median(writer_wall / wall)),
      'out_bytes': out_bytes / steps,
      'source_bytes': disk_bytes(source) / steps,
      'checkpoint_bytes': disk_bytes(checkpoint) / steps,
  }
  shutil.rmtree(case_root)
  return result


def child_rss(checkpoint: str, out: str) -> Dict:
  """In a child process: the RSS growth of one export (default buffers)."""
  result = subprocess.run(
      [sys.executable, os.path.abspath(__file__), '--child', checkpoint, out],
      capture_output=True, text=True, check=True)
  return json.loads(result.stdout.splitlines()[-1])


def run_child(checkpoint: str, out: str) -> None:
  # Its modules (TensorFlow, TFDS) loaded before the peak is reset.
  from rlds_reverb import exporter  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
  with open('/proc/self/clear_refs', 'w', encoding='ascii') as f:
    f.write('5')  # VmHWM := VmRSS.
  before = common.proc_status_bytes('VmRSS')
  start = time.perf_counter()
  report = rlds_reverb.export(TABLE, out, checkpoint=checkpoint)
  seconds = time.perf_counter() - start
  print(json.dumps({
      'steps': report.steps, 'seconds': seconds,
      'rss_before': before,
      'growth': common.proc_status_bytes('VmHWM') - before}))


def memory(rss_steps: int, root: str) -> List[Dict]:
  """RSS growth exporting vector checkpoints of rss_steps and 10x that."""
  results = []
  for steps in (rss_steps, 10 * rss_steps):
    case_root = tempfile.mkdtemp(dir=root)
    source = os.path.join(case_root, 'source')
    write_source(source, [vector_episode(1000, seed)
                          for seed in range(steps // 1000)])
    checkpoint = checkpoint_of(source, case_root)
    measured = child_rss(checkpoint, os.path.join(case_root, 'out'))
    measured['checkpoint_mb'] = disk_bytes(checkpoint) / 2**20
    results.append(measured)
    shutil.rmtree(case_root)
  return results


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--scale', type=float, default=1.0,
                      help='multiplies the number of episodes of each case')
  parser.add_argument('--rss-steps', type=int, default=100_000,
                      help='vector steps of the smaller RSS checkpoint')
  parser.add_argument('--rss-only', action='store_true',
                      help='measure only the peak RSS')
  parser.add_argument('--child', nargs=2, metavar=('CHECKPOINT', 'OUT'),
                      help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    run_child(*args.child)
    return
  print(common.machine())
  root = tempfile.mkdtemp()
  try:
    cases = [] if args.rss_only else list(CASES)
    if cases:
      print(f'{"case":28s} {"steps":>8s} {"export/s":>9s} '
            f'{"per CPU s":>9s} {"writer/s":>9s} {"vs writer":>9s}  '
            f'{"B/step out, source, ckpt":>25s} {"out/source":>10s}')
    for name in cases:
      r = measure(name, args.repeats, args.scale, root)
      print(f'{name:28s} {r["steps"]:8,d} {r["rate"]:9,.0f} '
            f'{r["cpu_rate"]:9,.0f} {r["writer_rate"]:9,.0f} '
            f'{r["vs_writer"]:8.2f}x  '
            f'{r["out_bytes"]:9,.1f} {r["source_bytes"]:7,.1f} '
            f'{r["checkpoint_bytes"]:7,.1f} '
            f'{r["out_bytes"] / r["source_bytes"]:9.3f}x'
            f'{"  (lost steps!)" if r["lost"] else ""}', flush=True)
    small, large = memory(args.rss_steps, root)
    for measured in (small, large):
      print(f'RSS: export of {measured["steps"]:,} vector steps '
            f'({measured["checkpoint_mb"]:.0f} MB checkpoint) in '
            f'{measured["seconds"]:.1f} s: RSS {measured["rss_before"] / 2**20:.0f} '
            f'MB before, +{measured["growth"] / 2**20:.1f} MB at its peak',
            flush=True)
    print(f'RSS growth at 10x the checkpoint: '
          f'{large["growth"] / max(small["growth"], 1):.2f}x')
  finally:
    shutil.rmtree(root)


if __name__ == '__main__':
  main()
