"""RLDS episodes to a TFDS directory: `EpisodeWriter` against TFDS's own writer.

    python benchmarks/rlds_write.py [--repeats 3] [--scale 1.0]

Both write the same episodes, in one run, into fresh directories on the
same disk, and are timed to the last byte closed:

    ours            EpisodeWriter: whole episodes from stacked arrays, each
                    flushed and fsynced (Durability.FSYNC, the default)
    ours (flush)    the same with Durability.FLUSH (no fsync)
    SequentialWriter  tfds.core.SequentialWriter (EnvLogger 1.2's TFDS
                    backend) fed each episode as a list of step dicts, as
                    EnvLogger does: TFDS encodes it step by step

Shapes: halfcheetah vectors (17 + 6 floats) in 1,000-step and 20-step
episodes; 84x84x3 frames of a blocky scene (benchmarks/common.py) stored
raw (a plain uint8 Tensor: int64 lists) and as PNG. Rates move between runs
on a shared machine: read the ratios. Also prints bytes on disk per step, and
the RSS of writing 2,000 then 20,000 more short episodes (flat).
"""

import argparse
import os
import shutil
import tempfile
import time
from typing import Callable, Dict, List

import common  # pylint: disable=g-bad-import-order

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

from rlds_reverb.tfds_out import Durability  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import EpisodeWriter  # pylint: disable=g-import-not-at-top
from rlds_reverb.tfds_out import features_from_specs  # pylint: disable=g-import-not-at-top

FRAME = (84, 84, 3)
SHARD_EPISODES = 1000


def vector_episode(num_steps: int, seed: int) -> Dict:
  return {'steps': common.episode_arrays(num_steps, seed),
          'episode_id': np.int64(seed)}


def frame_episode(num_steps: int, seed: int) -> Dict:
  return {'steps': common.frame_episode_arrays(num_steps, seed, FRAME),
          'episode_id': np.int64(seed)}


# name: (episode fn, episodes, steps per episode, images)
CASES = {
    'vector, 1,000-step episodes': (vector_episode, 20, 1000, 'png'),
    'vector, 20-step episodes': (vector_episode, 1000, 20, 'png'),
    'frames 84x84x3, raw': (frame_episode, 5, 100, 'none'),
    'frames 84x84x3, PNG': (frame_episode, 5, 100, 'png'),
}


def step_spec(episode: Dict) -> Dict:
  return tf.nest.map_structure(
      lambda x: tf.TensorSpec(x.shape[1:], tf.as_dtype(x.dtype)),
      episode['steps'])


def features_of(episode: Dict, images: str) -> tfds.features.FeaturesDict:
  return features_from_specs(step_spec(episode),
                             {'episode_id': tf.TensorSpec([], tf.int64)},
                             image_encoding=images)


def write_ours(directory, features, episodes, durability) -> None:
  with EpisodeWriter(directory, features, name='bench',
                     shard_episodes=SHARD_EPISODES,
                     durability=durability) as writer:
    for episode in episodes:
      writer.write(episode)


def write_sequential(directory, features, episodes) -> None:
  """TFDS's SequentialWriter, one `add_examples` per episode of step dicts."""
  os.makedirs(directory)
  info = tfds.core.DatasetInfo(
      builder=tfds.core.dataset_info.DatasetIdentity(
          name='bench', version=tfds.core.Version('1.0.0'),
          data_dir=directory, module_name=''),
      features=features)
  writer = tfds.core.SequentialWriter(info, SHARD_EPISODES)
  writer.initialize_splits(['train'])
  for episode in episodes:
    writer.add_examples({'train': [{**episode,
                                    'steps': step_list(episode['steps'])}]})
  writer.close_all()


def step_list(steps: Dict) -> List[Dict]:
  """An episode's [T, ...] fields as T step dicts (what EnvLogger holds)."""
  length = len(steps['is_first'])
  return [tf.nest.map_structure(lambda x, t=t: x[t], steps)
          for t in range(length)]


def disk_bytes(directory: str) -> int:
  return sum(os.path.getsize(os.path.join(directory, name))
             for name in os.listdir(directory) if '.tfrecord' in name)


def timed_write(write: Callable[[str, List[Dict]], None], episodes,
                root: str, repeats: int):
  """(median seconds, bytes of record files) writing into fresh dirs, after
  one untimed episode (TensorFlow builds its ops on first use)."""
  write(os.path.join(root, 'warm-up'), episodes[:1])
  shutil.rmtree(os.path.join(root, 'warm-up'))
  seconds, size = [], 0
  for repeat in range(repeats):
    directory = os.path.join(root, f'run{repeat}')
    start = time.perf_counter()
    write(directory, episodes)
    seconds.append(time.perf_counter() - start)
    size = disk_bytes(directory)
    shutil.rmtree(directory)
  return float(np.median(seconds)), size


def measure(name: str, repeats: int, scale: float, root: str) -> Dict:
  make, count, length, images = CASES[name]
  count = max(1, int(count * scale))
  episodes = [make(length, seed) for seed in range(count)]
  features = features_of(episodes[0], images)
  steps = count * length
  writers = {
      'ours': lambda d, e: write_ours(d, features, e, Durability.FSYNC),
      'ours (flush)': lambda d, e: write_ours(d, features, e,
                                              Durability.FLUSH),
      'SequentialWriter': lambda d, e: write_sequential(d, features, e),
  }
  results = {}
  for writer_name, write in writers.items():
    seconds, size = timed_write(write, episodes, root, repeats)
    results[writer_name] = (steps / seconds, size / steps)
  return {'steps': steps, 'episodes': count, **results}


def memory_growth(root: str) -> Dict[str, float]:
  """RSS (MB) after 2,000 20-step vector episodes and after 20,000 more."""
  episode = vector_episode(20, 0)
  directory = os.path.join(root, 'memory')
  rss = {}
  with EpisodeWriter(directory, features_of(episode, 'png'), name='bench',
                     shard_episodes=SHARD_EPISODES,
                     durability=Durability.FLUSH) as writer:
    for count in range(1, 22_001):
      writer.write(episode)
      if count in (2_000, 22_000):
        rss[count] = common.proc_status_bytes('VmRSS') / 2**20
  shutil.rmtree(directory)
  return rss


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--scale', type=float, default=1.0,
                      help='multiplies the number of episodes of each case')
  args = parser.parse_args()
  print(common.machine())
  root = tempfile.mkdtemp()
  try:
    print(f'{"case":29s} {"steps":>7s} {"ours/s":>9s} {"flush/s":>9s} '
          f'{"TFDS/s":>9s} {"ratio":>6s} {"flush":>6s}  B/step ours, TFDS')
    for name in CASES:
      result = measure(name, args.repeats, args.scale, root)
      ours, flush, tfds_rate = (result['ours'], result['ours (flush)'],
                                result['SequentialWriter'])
      print(f'{name:29s} {result["steps"]:7,d} {ours[0]:9,.0f} '
            f'{flush[0]:9,.0f} {tfds_rate[0]:9,.0f} '
            f'{ours[0] / tfds_rate[0]:5.1f}x {flush[0] / tfds_rate[0]:5.1f}x  '
            f'{ours[1]:,.0f}, {tfds_rate[1]:,.0f}', flush=True)
    rss = memory_growth(root)
    print(f'RSS writing 20-step episodes: {rss[2_000]:.1f} MB after 2,000, '
          f'{rss[22_000]:.1f} MB after 22,000')
  finally:
    shutil.rmtree(root)


if __name__ == '__main__':
  main()
