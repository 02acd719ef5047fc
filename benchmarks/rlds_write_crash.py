"""SIGKILL a process writing RLDS episodes at random points; recover; compare.

    python benchmarks/rlds_write_crash.py --rounds 20 [--seed 0] [--json]

Each round starts a child process that appends episodes to one directory
(`EpisodeWriter(append=True)`, fsync per episode, a shard closed every 2
episodes) and prints each episode's index once `write` returned. After a
random number of printed episodes (0-6: some kills land while the child
starts and recovers) and a random delay (0-40 ms) the child gets SIGKILL.
Then `recover(dir)`, and the checks:

    finished   indices the child printed: `write` had returned
    recovered  episodes in the split after recovery
    lost       finished episodes not recovered: must be 0 (recovered may
               hold one more: killed between `write` and the print)
    exact      the recovered records equal, byte for byte, an uninterrupted
               writer's first `recovered` records (and at the end, every
               episode read back by TFDS equals the uninterrupted run's)

Rounds continue the same directory, so episode ids continue across crashes.
Exit status 1 if an episode was lost or differs.
"""

import argparse
import json
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

from rlds_reverb.tfds_out import EpisodeWriter  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import features_from_specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import layout  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import recover  # pylint: disable=g-import-not-at-top

NAME = 'crash'
SHARD_EPISODES = 2
MAX_FINISHED_BEFORE_KILL = 6
MAX_DELAY_S = 0.04
CHILD_TIMEOUT_S = 120


def features() -> tfds.features.FeaturesDict:
  flag = tf.TensorSpec([], tf.bool)
  return features_from_specs(
      {'observation': {'pixels': tf.TensorSpec([24, 24, 3], tf.uint8),
                       'position': tf.TensorSpec([4], tf.float32),
                       'note': tf.TensorSpec([], tf.string)},
       'action': tf.TensorSpec([], tf.int64),
       'reward': tf.TensorSpec([], tf.float32),
       'discount': tf.TensorSpec([], tf.float32),
       'is_first': flag, 'is_last': flag, 'is_terminal': flag},
      {'episode_id': tf.TensorSpec([], tf.int64)})


def episode(index: int) -> Dict[str, Any]:
  """Episode `index`, always the same: 1 to 120 steps of 24x24 frames."""
  rng = np.random.default_rng(index)
  length = 1 + (index * 37) % 120
  steps = np.arange(length)
  return {'steps': {
      'observation': {
          'pixels': rng.integers(0, 256, (length, 24, 24, 3), dtype=np.uint8),
          'position': rng.standard_normal((length, 4)).astype(np.float32),
          'note': np.array([f'{index}:{t}'.encode() for t in steps], object)},
      'action': rng.integers(0, 4, length),
      'reward': rng.standard_normal(length).astype(np.float32),
      'discount': np.ones(length, np.float32),
      'is_first': steps == 0,
      'is_last': steps == length - 1,
      'is_terminal': (steps == length - 1) & bool(index % 2),
  }, 'episode_id': np.int64(index)}


def child(directory: str) -> None:
  """Appends episodes forever, printing each index once written."""
  with EpisodeWriter(directory, features(), name=NAME, append=True,
                     shard_episodes=SHARD_EPISODES) as writer:
    while True:
      index = writer.write(episode(writer.num_episodes))
      print(index, flush=True)


def kill_round(directory: str, rng: random.Random,
               script: str = __file__) -> Dict[str, Any]:
  """Starts `script --child` (a writer printing each episode it finished),
  kills it at a random point; what it had finished."""
  process = subprocess.Popen(
      [sys.executable, os.path.abspath(script), '--child', directory],
      stdout=subprocess.PIPE, text=True)
  wanted = rng.randint(0, MAX_FINISHED_BEFORE_KILL)
  printed = []
  deadline = time.monotonic() + CHILD_TIMEOUT_S
  while len(printed) < wanted and time.monotonic() < deadline:
    line = process.stdout.readline()
    if not line:
      break
    printed.append(int(line))
  time.sleep(rng.uniform(0, MAX_DELAY_S))
  process.send_signal(signal.SIGKILL)
  printed += [int(line) for line in process.stdout.read().split()]
  process.wait()
  return {'finished': printed, 'killed_after': len(printed)}


def shard_records(directory: str) -> List[bytes]:
  """The records of the registered shards, in order."""
  info = layout.read_info(directory)
  [split] = [s for s in info.splits if s.name == 'train']
  found = []
  for index in range(len(split.shard_lengths)):
    path = os.path.join(directory, layout.shard_name(info.name, 'train', index))
    found += [record.numpy() for record in tf.data.TFRecordDataset(path)]
  return found


class Reference:
  """An uninterrupted run: the same episodes, written without a crash."""

  def __init__(self, directory: str):
    self.directory = directory
    self._count = 0

  def records(self, count: int) -> List[bytes]:
    if count > self._count:
      with EpisodeWriter(self.directory, features(), name=NAME, append=True,
                         shard_episodes=10_000) as writer:
        for index in range(self._count, count):
          writer.write(episode(index))
      self._count = count
    return shard_records(self.directory)[:count]


def check_round(directory: str, start: int, killed: Dict[str, Any],
                reference: Reference) -> Dict[str, Any]:
  """Recovers `directory`; compares it with what the child had finished
  (`start`: episodes recovered before the round, the child's first index)."""
  finished = killed['finished']
  if not os.path.isfile(os.path.join(directory, layout.INFO_FILE)):
    # Killed while creating the dataset: nothing can have been written.
    return {**killed, 'ids_continue': not finished, 'recovered': 0,
            'lost': len(finished), 'kept_in_flight': 0, 'exact': True,
            'readable_by_tfds': True, 'cut_bytes': 0, 'registered_shards': 0}
  recovery = recover(directory)
  recovered = recovery.episodes
  return {
      **killed,
      'ids_continue': finished == list(range(start, start + len(finished))),
      'recovered': recovered,
      'lost': len([index for index in finished if index >= recovered]),
      'kept_in_flight': recovered - start - len(finished),
      'exact': shard_records(directory) == reference.records(recovered),
      'readable_by_tfds': tfds.builder_from_directory(
          directory).info.splits['train'].num_examples == recovered,
      'cut_bytes': recovery.cut_bytes,
      'registered_shards': len(recovery.registered_shards),
  }


def values_equal(directory: str, reference: Reference) -> bool:
  """Every episode TFDS reads from both directories, compared by value."""
  ours = _read_values(directory)
  return ours == _read_values(reference.directory)[:len(ours)]


def _read_values(directory: str) -> List[List[Any]]:
  """Each episode's leaves, then its steps' (dtype, shape, bytes)."""
  dataset = tfds.builder_from_directory(directory).as_dataset(split='train')
  episodes = []
  for element in dataset:
    leaves = tf.nest.flatten({k: v for k, v in element.items() if k != 'steps'})
    for step in element['steps']:
      leaves += tf.nest.flatten(step)
    episodes.append([_value_key(leaf.numpy()) for leaf in leaves])
  return episodes


def _value_key(value: Any):
  """A comparable key: strings by value (an object array's bytes are
  pointers)."""
  array = np.asarray(value)
  if array.dtype == object or array.dtype.kind == 'S':
    return ('string', array.shape, tuple(array.ravel().tolist()))
  return (array.dtype.str, array.shape, array.tobytes())


def run(rounds: int, seed: int, directory: str, crash=None
        ) -> Dict[str, Any]:
  """`rounds` kill-and-recover rounds; `crash` is the module whose
  `kill_round`, `check_round`, `Reference` and `values_equal` run them (this
  one by default; `record_crash.py` brings its own)."""
  crash = crash or sys.modules[__name__]
  rng = random.Random(seed)
  data = os.path.join(directory, 'killed')
  reference = crash.Reference(os.path.join(directory, 'uninterrupted'))
  results, start = [], 0
  for number in range(rounds):
    result = crash.check_round(data, start, crash.kill_round(data, rng),
                               reference)
    results.append({'round': number, **result})
    start = result['recovered']
  return {
      'rounds': rounds,
      'episodes_finished': sum(r['killed_after'] for r in results),
      'episodes_lost': sum(r['lost'] for r in results),
      'rounds_exact': sum(
          r['exact'] and r['readable_by_tfds'] and r['ids_continue'] and
          r['kept_in_flight'] in (0, 1) for r in results),
      'rounds_with_torn_record_cut': sum(r['cut_bytes'] > 0 for r in results),
      'rounds_with_open_shards_registered': sum(
          r['registered_shards'] > 0 for r in results),
      'episodes_recovered': results[-1]['recovered'] if results else 0,
      'values_equal_uninterrupted_run': crash.values_equal(data, reference),
      'per_round': results,
  }


def main(crash=None) -> int:
  """The command line of this benchmark, or of `crash`'s (see `run`)."""
  crash = crash or sys.modules[__name__]
  parser = argparse.ArgumentParser(description=crash.__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=20)
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--json', action='store_true')
  parser.add_argument('--child', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    crash.child(args.child)
    return 0
  with tempfile.TemporaryDirectory() as directory:
    summary = run(args.rounds, args.seed, directory, crash)
  if args.json:
    print(json.dumps(summary, indent=1))
  else:
    for result in summary['per_round']:
      print(f"round {result['round']:2d}: killed after {result['killed_after']} "
            f"finished, recovered {result['recovered']} (lost "
            f"{result['lost']}), cut {result['cut_bytes']} B, registered "
            f"{result['registered_shards']} shards, exact {result['exact']}")
    print({key: value for key, value in summary.items()
           if key != 'per_round'})
  ok = (summary['episodes_lost'] == 0 and
        summary['rounds_exact'] == summary['rounds'] and
        summary['values_equal_uninterrupted_run'])
  return 0 if ok else 1


if __name__ == '__main__':
  sys.exit(main())
