"""Sampling with the decode: raw against encoded tables, per learner core.

One run. For each frame set (TFDS directories of PNG or JPEG frames:
synthetic 72x96x3, and real Atari play from `ale_frames`), two servers, each
in a child process, are filled from the same dataset: one by
`rlds_reverb.push` (raw frames: today's table), one by `rlds_reverb.push(...,
images='encoded')` (the dataset's own PNG/JPEG bytes). A learner in this
process then samples 2-step items in batches of 64:

  raw       TF-Agents' `ReverbReplayBuffer.as_dataset` on the raw table
  encoded   `rlds_reverb.EncodedReplayBuffer.as_dataset` on the encoded
            table: the same elements, the frames decoded in the pipeline

each with `num_parallel_calls` 1 (one stream of samples at a time), 2, and
TF-Agents' default (AUTOTUNE over up to 32 interleaved streams). Rounds take
turns across the configurations, so that they share the machine's noise.

For each: items/s (wall), items per CPU-second of this process (the learner:
its tf.data and gRPC threads, the decode; "items/s per core"), and the
server's CPU per item. Then the ratios encoded / raw, and how many learner
cores the encoded table needs to sample at the raw table's rate (the raw
rate with TF-Agents' default / the encoded items per CPU-second).

    python benchmarks/sample_throughput.py [--shape synthetic_png
        atari_gray_png atari_rgb_png atari_rgb_jpeg] [--steps 4000]
        [--repeats 3] [--batches 40] [--quick]

The Atari sets need `pip install ".[bench]"` (ale-py).
"""

import argparse
import tempfile
import time

import common  # pylint: disable=g-bad-import-order
from rlds_reverb._util import quiet  # pylint: disable=g-bad-import-order
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.specs import tensor_spec

import rlds_reverb

TABLE = 'bench'
BATCH_SIZE = 64
# Label: num_parallel_calls (None: TF-Agents' default, AUTOTUNE).
PARALLEL = {'1 stream': 1, '2 parallel': 2, 'default': None}


def filled_servers(data, image_format: str):
  """(raw server, encoded server), each filled from `data`, and the spec."""
  spec = rlds_reverb.create_trajectory_data_spec(data)
  raw = common.ServerProcess(TABLE, tensor_spec.add_outer_dim(spec))
  rlds_reverb.push(data, raw.client, TABLE)
  encoded = common.ServerProcess(
      TABLE, common.encoded_signature(spec, image_format))
  rlds_reverb.push(data, encoded.client, TABLE, images='encoded')
  return raw, encoded, spec


def replay_buffers(raw, encoded, spec):
  """{'raw': ReverbReplayBuffer, 'encoded': EncodedReplayBuffer}."""
  return {
      'raw': reverb_replay_buffer.ReverbReplayBuffer(
          spec, TABLE, sequence_length=2, server_address=raw.address),
      'encoded': rlds_reverb.EncodedReplayBuffer(
          table_name=TABLE, sequence_length=2,
          server_address=encoded.address),
  }


def sample_rate(replay, num_parallel_calls, server, batches: int) -> dict:
  """Items/s, items per learner CPU-second, server CPU seconds per item.

  Over `batches` batches, after 3 to warm up (tracing, connections).
  """
  dataset = replay.as_dataset(sample_batch_size=BATCH_SIZE, num_steps=2,
                              num_parallel_calls=num_parallel_calls)
  iterator = iter(dataset)
  for _ in range(3):
    next(iterator)
  cpu, server_cpu = common.cpu_seconds(), common.cpu_seconds(
      server.process.pid)
  start = time.perf_counter()
  for _ in range(batches):
    next(iterator)
  wall = time.perf_counter() - start
  cpu = common.cpu_seconds() - cpu
  server_cpu = common.cpu_seconds(server.process.pid) - server_cpu
  del iterator  # Stops its prefetching threads.
  items = batches * BATCH_SIZE
  return {'rate': items / wall, 'per_cpu': items / cpu,
          'server_cpu': server_cpu, 'items': items}


def decode_cost(data, spec, image_format: str, num_frames: int = 1000
                ) -> float:
  """CPU microseconds of `tf.io.decode_image` per frame: the decode's floor.

  The first image field's first `num_frames` frames, encoded as TFDS
  encodes them (the same TensorFlow encoder), decoded one per call in a
  tf.data map, one stream, 5 times over.
  """
  path, leaf = common.image_leaves(spec)[0]
  keys = path.split('/')
  frames = data.flat_map(_steps).map(
      lambda step: _field(step, keys)).take(num_frames)
  encode = tf.io.encode_png if image_format == 'png' else tf.io.encode_jpeg
  encoded = list(frames.map(encode).as_numpy_iterator())
  decoded = tf.data.Dataset.from_tensor_slices(encoded).map(
      lambda image: tf.io.decode_image(image, channels=leaf.shape[-1],
                                       expand_animations=False)).batch(256)
  for _ in decoded:  # Warm up.
    pass
  cpu = common.cpu_seconds()
  for _ in range(5):
    for _ in decoded:
      pass
  return 1e6 * (common.cpu_seconds() - cpu) / (5 * len(encoded))


def _steps(episode):
  return episode['steps']


def _field(step, keys):
  for key in keys:
    step = step[key]
  return step


def measure_shape(name: str, num_steps: int, repeats: int, batches: int,
                  data_dir: str) -> None:
  directory = common.frame_set_dir(name, num_steps, data_dir)
  data = rlds_reverb.load(directory)
  lengths = common.episode_lengths(data)
  image_format = common.image_format_of(name)
  raw, encoded, spec = filled_servers(data, image_format)
  servers = {'raw': raw, 'encoded': encoded}
  replays = replay_buffers(raw, encoded, spec)
  results = {(table, label): [] for label in PARALLEL for table in servers}
  for _ in range(repeats):  # Configurations take turns.
    for label, num_parallel_calls in PARALLEL.items():
      for table, server in servers.items():
        results[table, label].append(sample_rate(
            replays[table], num_parallel_calls, server, batches))
  for server in servers.values():
    server.stop()
  print_shape(name, spec, lengths, results, repeats)
  decode_us = decode_cost(data, spec, image_format)
  print(f'decode alone: {decode_us:.0f} us of CPU per frame '
        f'(tf.io.decode_image in a tf.data map): at most '
        f'{1e6 / (2 * decode_us):,.0f} 2-step items per CPU-second')


def _server_us(runs) -> float:
  """Server CPU per item over all rounds (/proc counts in 10 ms ticks)."""
  return 1e6 * sum(r['server_cpu'] for r in runs) / sum(r['items']
                                                          for r in runs)


def _server_ratio(a, b) -> str:
  return f'{_server_us(a) / _server_us(b):.2f}x' if _server_us(b) else 'n/a'


def print_shape(name, spec, lengths, results, repeats) -> None:
  frames = [f'{path} {s.shape.as_list()}' for path, s in
            common.image_leaves(spec)]
  print(f'\n{name}: {len(lengths)} episodes, {sum(lengths)} steps '
        f'({", ".join(frames)}); batches of {BATCH_SIZE} 2-step items; '
        f'median of {repeats} interleaved rounds')
  print(f'{"table":8s} {"num_parallel_calls":18s} {"items/s":>9s} '
        f'{"items/CPU-s":>11s} {"server us/item":>14s}')
  for (table, label), runs in results.items():
    print(f'{table:8s} {label:18s} {common.median_of(runs, "rate"):9,.0f} '
          f'{common.median_of(runs, "per_cpu"):11,.0f} '
          f'{_server_us(runs):14,.1f}')
  for label in PARALLEL:
    raw, encoded = results['raw', label], results['encoded', label]
    print(f'encoded / raw, {label}: items/s '
          f'{common.median_ratio(encoded, raw, "rate"):.2f}x, per learner '
          f'core {common.median_ratio(encoded, raw, "per_cpu"):.2f}x, server '
          f'CPU per item {_server_ratio(encoded, raw)}')
  raw_rate = common.median_of(results['raw', 'default'], 'rate')
  raw_cores = raw_rate / common.median_of(results['raw', 'default'], 'per_cpu')
  encoded_per_cpu = max(common.median_of(results['encoded', label], 'per_cpu')
                        for label in PARALLEL)
  print(f'to sample at the raw table\'s rate ({raw_rate:,.0f} items/s, '
        f'{raw_cores:.2f} learner cores busy): {raw_rate / encoded_per_cpu:.2f}'
        f' learner cores with the encoded table (at its best '
        f'{encoded_per_cpu:,.0f} items per CPU-second)')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--shape', nargs='+', default=list(common.FRAME_SETS),
                      choices=common.FRAME_SETS)
  parser.add_argument('--steps', type=int, default=4000,
                      help='steps of each frame set')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--batches', type=int, default=40,
                      help='batches timed per measurement')
  parser.add_argument('--quick', action='store_true',
                      help='tiny sizes, to check that it runs')
  args = parser.parse_args()
  if args.quick:
    args.steps, args.repeats, args.batches = 200, 1, 3
  print(f'machine: {common.machine()}')
  with tempfile.TemporaryDirectory(prefix='sample_throughput_') as data_dir:
    for name in args.shape:
      measure_shape(name, args.steps, args.repeats, args.batches, data_dir)


if __name__ == '__main__':
  with quiet.quieted():
    main()
