"""Server memory, checkpoint size and sampling rates of tables filled by each writer.

One run, the same data, items of 2 steps with stride 1. Each writer fills its
own Reverb server, each server in its own child process, so that the growth
of the child's resident memory is what the table's items cost:

  tf_agents    TF-Agents' `ReverbAddTrajectoryObserver(2)` fed the
               trajectories one by one (Reverb's Python trajectory writer,
               auto-tuned chunks), flushed
  structured   Reverb's StructuredWriter on pre-made numpy rows (Reverb's
               default chunking: auto-tuned, at most 2 steps a chunk)
  rlds_reverb  `rlds_reverb.push` (chunk lengths by `write.chunks`' rule):
               raw frames, today's push
  encoded      `rlds_reverb.push(..., images='encoded')`: frames kept as PNG
               or JPEG bytes (a TFDS source's own; PNG-encoded at push time
               from the in-memory `image` shape)
  --sweep      `rlds_reverb.push` with other chunk lengths, to choose the rule

With `--items episode`, whole-episode items instead: TF-Agents'
`ReverbAddEpisodeObserver` fed the trajectories against
`rlds_reverb.push_rlds_to_reverb` given the same observer (no sampling rates:
a sample is a whole episode, whatever the chunks).

For each: resident memory growth of the server per item and per step (and
`rlds-reverb serve`'s estimate, `write.memory`, against rlds_reverb's),
checkpoint bytes per item, and sampling rates through
`reverb.TrajectoryDataset` (encoded tables: the bytes, not decoded) and
TF-Agents' `ReverbReplayBuffer.as_dataset` (encoded tables:
`rlds_reverb.EncodedReplayBuffer.as_dataset`, frames decoded) in items/s,
in batches of 64 items of 2 steps; sampling rounds take turns across the
tables so that they share the noise. `benchmarks/sample_throughput.py`
measures the sampling of encoded tables per learner core.

    python benchmarks/server_memory.py [--shape vector image] [--sweep] [--repeats 3]
    python benchmarks/server_memory.py --shape image synthetic_png \
        atari_gray_png atari_rgb_png atari_rgb_jpeg
    python benchmarks/server_memory.py --items episode
    python benchmarks/server_memory.py --quick    # tiny sizes: does it run

Shapes in memory: vector (D4RL halfcheetah: 103 B of data per step), image
(RL Unplugged DMLab: 72x96x3 frames and scalars, 20,767 B per step),
embedding (halfcheetah plus a 512-float vector, 2,151 B per step; for
--sweep). Frame sets in TFDS directories (`common.FRAME_SETS`; writers
tf_agents, rlds_reverb and encoded): synthetic_png (the image shape's
frames, stored as PNG), atari_gray_png (84x84x1, as rlu_atari), atari_rgb_png
and atari_rgb_jpeg (210x160x3), real Atari play recorded by
`ale_frames.py` (needs `pip install ".[bench]"`).
"""

import argparse
import os
import statistics
import tempfile
import time

import common  # pylint: disable=g-bad-import-order
from rlds_reverb._util import quiet  # pylint: disable=g-bad-import-order
import numpy as np
import reverb
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.replay_buffers import reverb_utils
from tf_agents.specs import tensor_spec
import tree

import push_throughput  # pylint: disable=g-bad-import-order
import rlds_reverb
from rlds_reverb.write import chunks
from rlds_reverb.write import memory

TABLE = 'bench'
SIZES = {  # shape: (episodes, steps per episode)
    'vector': (20, 1000),
    'image': (10, 500),
    'embedding': (10, 1000),
}
FRAME_SET_STEPS = 5000  # Steps of each frame set (TFDS directories).
QUICK_SIZE = (2, 50)  # --quick: episodes, steps per episode.
# --sweep: chunk lengths to try, {field path prefix: length} per shape.
SWEEPS = {
    'vector': [{'': 2}, {'': 8}, {'': 16}, {'': 32}],
    'image': [{'observation/pixels': 1}, {'observation/pixels': 2},
              {'observation/pixels': 4}],
    'embedding': [{'observation/embedding': 1}, {'observation/embedding': 2},
                  {'observation/embedding': 4}, {'observation/embedding': 8},
                  {'observation/embedding': 32}],
}
BATCHES = 40
QUICK_BATCHES = 3
BATCH_SIZE = 64


# --- A server in a child process. --------------------------------------------

class ServerProcess(common.ServerProcess):
  """A Reverb server in its own process; its RSS and checkpoint size."""

  def __init__(self, signature):
    self._checkpoints = tempfile.mkdtemp(prefix='server_memory_')
    super().__init__(TABLE, signature, 10**8, self._checkpoints)

  def checkpoint_bytes(self) -> int:
    path = self.client.checkpoint()
    return sum(entry.stat().st_size for entry in os.scandir(path))

  def items(self) -> int:
    return self.client.server_info(timeout=30)[TABLE].current_size


# --- The writers. ------------------------------------------------------------

def write_tf_agents(data, client) -> None:
  observer = reverb_utils.ReverbAddTrajectoryObserver(client, TABLE, 2)
  push_throughput.feed_observer(observer, data)
  observer.close()


def write_tf_agents_episodes(data, client, max_length: int) -> None:
  observer = reverb_utils.ReverbAddEpisodeObserver(client, TABLE, max_length)
  push_throughput.feed_observer(observer, data)
  observer.close()


def write_rlds_reverb_episodes(data, client, max_length: int) -> None:
  observer = reverb_utils.ReverbAddEpisodeObserver(client, TABLE, max_length)
  rlds_reverb.push_rlds_to_reverb(data, observer)
  observer.close()


def episode_writers(data, max_length: int):
  """(name, fn(client), image format if the table holds images encoded)."""
  return [
      ('tf_agents', lambda client: write_tf_agents_episodes(
          data, client, max_length), None),
      ('rlds_reverb', lambda client: write_rlds_reverb_episodes(
          data, client, max_length), None),
  ]


def writers(data, spec, sweep_options, image_format, structured: bool):
  """(name, fn(client), image format if encoded) of every writer to measure.

  `image_format`: that of the encoded push ('png', 'jpeg'); None: no
  encoded push (data without images).
  """
  result = [('tf_agents', lambda client: write_tf_agents(data, client), None)]
  if structured:
    rows = push_throughput.numpy_rows(data)
    result.append(('structured', lambda client: push_throughput.push_raw_writer(
        rows, client, spec), None))
  result.append(('rlds_reverb',
                 lambda client: rlds_reverb.push(data, client, TABLE), None))
  if image_format:
    result.append(('encoded', lambda client: rlds_reverb.push(
        data, client, TABLE, images='encoded', image_format=image_format),
                   image_format))
  for option in sweep_options:
    result.append((f'chunks {_option_text(option)}',
                   lambda client, o=option: rlds_reverb.push(
                       data, client, TABLE, chunk_length=o), None))
  return result


def _option_text(option) -> str:
  return ','.join(f'{key or "all"}={value}' for key, value in option.items())


# --- Sampling. ---------------------------------------------------------------

def trajectory_rate(server: ServerProcess, num_batches: int) -> float:
  """Items/s read through `reverb.TrajectoryDataset`, in batches of 64.

  Batched, as a learner reads it: one Python step per batch, not per item
  (~300 us each here, which would hide the table's own rate).
  """
  dataset = reverb.TrajectoryDataset.from_table_signature(
      server.address, TABLE, max_in_flight_samples_per_worker=2 * BATCH_SIZE)
  return _rate(dataset.batch(BATCH_SIZE), num_batches)


def replay_rate(server: ServerProcess, spec, encoded: bool,
                num_batches: int) -> float:
  """Items/s read through `ReverbReplayBuffer.as_dataset` in batches
  (`EncodedReplayBuffer`'s, frames decoded, from an encoded table)."""
  if encoded:
    replay = rlds_reverb.EncodedReplayBuffer(
        table_name=TABLE, sequence_length=2, server_address=server.address)
  else:
    replay = reverb_replay_buffer.ReverbReplayBuffer(
        spec, TABLE, sequence_length=2, server_address=server.address)
  return _rate(replay.as_dataset(sample_batch_size=BATCH_SIZE, num_steps=2),
               num_batches)


def _rate(batches, num_batches: int) -> float:
  """Items/s over `num_batches` batches, after 3 to warm up."""
  iterator = iter(batches)
  for _ in range(3):
    next(iterator)
  start = time.perf_counter()
  for _ in range(num_batches):
    next(iterator)
  return num_batches * BATCH_SIZE / (time.perf_counter() - start)


# --- One shape. ----------------------------------------------------------------

def shape_data(shape: str, data_dir: str, quick: bool):
  """(RLDS data, episode lengths, image format of an encoded push or None)."""
  if shape in common.FRAME_SETS:
    steps = QUICK_SIZE[0] * QUICK_SIZE[1] if quick else FRAME_SET_STEPS
    data = rlds_reverb.load(common.frame_set_dir(shape, steps, data_dir))
    return data, common.episode_lengths(data), common.image_format_of(shape)
  num_episodes, num_steps = QUICK_SIZE if quick else SIZES[shape]
  data = common.SHAPES[shape](num_episodes, num_steps).cache()
  return (data, [num_steps] * num_episodes,
          'png' if shape == 'image' else None)


def measure_shape(shape: str, sweep: bool, repeats: int,
                  episode_items: bool, data_dir: str, quick: bool) -> None:
  num_batches = QUICK_BATCHES if quick else BATCHES
  data, lengths, image_format = shape_data(shape, data_dir, quick)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  if episode_items:
    expected_items = len(lengths)
    all_writers = episode_writers(data, max(lengths))
  else:
    expected_items = common.items_of(lengths)
    all_writers = writers(data, spec, SWEEPS[shape] if sweep else [],
                          image_format, shape not in common.FRAME_SETS)
  results = {}
  servers = {}
  for name, write, encoding in all_writers:
    server = ServerProcess(
        common.encoded_signature(spec, encoding) if encoding
        else tensor_spec.add_outer_dim(spec))
    before = server.rss_bytes()
    start = time.perf_counter()
    write(server.client)
    seconds = time.perf_counter() - start
    if server.items() != expected_items:
      raise SystemExit(f'{name} left {server.items()} items, expected '
                       f'{expected_items}')
    grown = server.rss_bytes() - before
    results[name] = {
        'rss_per_item': grown / expected_items,
        'rss_per_step': grown / sum(lengths),
        'checkpoint_per_item': server.checkpoint_bytes() / expected_items,
        'write_seconds': seconds, 'encoded': bool(encoding),
        'trajectory': [], 'replay': []}
    servers[name] = server
  for _ in range(0 if episode_items else repeats):  # Tables take turns.
    for name, server in servers.items():
      results[name]['trajectory'].append(trajectory_rate(server, num_batches))
      results[name]['replay'].append(
          replay_rate(server, spec, results[name]['encoded'], num_batches))
  for server in servers.values():
    server.stop()
  if episode_items:
    _print_episode_items(shape, lengths, results)
  else:
    _print_shape(shape, data, lengths, results, repeats)


def _print_episode_items(shape, lengths, results) -> None:
  print(f'\n{shape}: {len(lengths)} episodes, {sum(lengths)} steps, one item '
        f'per episode')
  print(f'{"writer":34s} {"RSS B/step":>10s} {"ckpt B/step":>11s}')
  for name, r in results.items():
    print(f'{name:34s} {r["rss_per_step"]:10,.0f} '
          f'{r["checkpoint_per_item"] * len(lengths) / sum(lengths):11,.0f}')
  ours, tfa = results['rlds_reverb'], results['tf_agents']
  print(f'rlds_reverb / tf_agents:  memory {_ratio(ours, tfa, "rss_per_step")}'
        f', checkpoint {_ratio(ours, tfa, "checkpoint_per_item")}')


def _print_shape(shape, data, lengths, results, repeats) -> None:
  step_bytes = sum(
      int(np.prod(s.shape)) * s.dtype.size
      for s in tree.flatten(data.element_spec['steps'].element_spec))
  columns = len(tree.flatten(rlds_reverb.create_trajectory_data_spec(data)))
  print(f'\n{shape}: {len(lengths)} episodes, {sum(lengths)} steps, '
        f'{step_bytes:,} B of RLDS data per step (decoded), {columns} item '
        f'columns; 2-step items; sampling: median of {repeats} interleaved '
        f'rounds')
  print(f'{"writer":34s} {"RSS B/item":>10s} {"B/step":>8s} '
        f'{"ckpt B/item":>11s} {"Trajectory/s":>12s} {"Replay/s":>9s}')
  for name, r in results.items():
    print(f'{name:34s} {r["rss_per_item"]:10,.0f} {r["rss_per_step"]:8,.0f} '
          f'{r["checkpoint_per_item"]:11,.0f} '
          f'{statistics.median(r["trajectory"]):12,.0f} '
          f'{statistics.median(r["replay"]):9,.0f}')
  ours, tfa = results['rlds_reverb'], results['tf_agents']
  estimate = memory.item_memory(rlds_reverb.create_trajectory_data_spec(data))
  print(f"serve's estimate (write.memory): {estimate.bytes_per_item:,.0f} "
        f'B/item; rlds_reverb measured / estimate: '
        f'{ours["rss_per_item"] / estimate.bytes_per_item:.2f}x')
  print(f'rlds_reverb / tf_agents:  memory {_ratio(ours, tfa, "rss_per_item")}'
        f', checkpoint {_ratio(ours, tfa, "checkpoint_per_item")}')
  if 'structured' in results:
    structured = results['structured']
    print(f'rlds_reverb / structured: memory '
          f'{_ratio(ours, structured, "rss_per_item")}, sampling '
          f'{_median_ratio(ours, structured, "trajectory")} '
          f'(TrajectoryDataset), '
          f'{_median_ratio(ours, structured, "replay")} (ReverbReplayBuffer)')
  if 'encoded' in results:
    encoded = results['encoded']
    for name, other in (('rlds_reverb', ours), ('tf_agents', tfa)):
      print(f'encoded / {name}: memory {_ratio(encoded, other, "rss_per_item")}'
            f', checkpoint {_ratio(encoded, other, "checkpoint_per_item")}, '
            f'sampling {_median_ratio(encoded, other, "trajectory")} '
            f'(TrajectoryDataset, not decoded), '
            f'{_median_ratio(encoded, other, "replay")} (replay buffer, '
            f'decoded)')


def _ratio(a, b, key) -> str:
  return f'{a[key] / b[key]:.2f}x'


def _median_ratio(a, b, key) -> str:
  ratios = [x / y for x, y in zip(a[key], b[key])]
  return f'{statistics.median(ratios):.2f}x'


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--shape', nargs='+', default=['vector', 'image'],
                      choices=sorted(SIZES) + list(common.FRAME_SETS))
  parser.add_argument('--sweep', action='store_true',
                      help='also rlds_reverb.push with other chunk lengths')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--items', choices=('sequence', 'episode'),
                      default='sequence',
                      help='2-step items, or one item per episode')
  parser.add_argument('--quick', action='store_true',
                      help=f'{QUICK_SIZE[0]} episodes x {QUICK_SIZE[1]} '
                      f'steps, 1 round: to check that it runs')
  args = parser.parse_args()
  if args.quick:
    args.repeats = 1
  print(f'machine: {common.machine()}')
  print(f'chunk rule: CHUNK_BYTES={chunks.CHUNK_BYTES}, '
        f'MAX_CHUNK_LENGTH={chunks.MAX_CHUNK_LENGTH}')
  with tempfile.TemporaryDirectory(prefix='server_memory_') as data_dir:
    for shape in args.shape:
      measure_shape(shape, args.sweep, args.repeats,
                    args.items == 'episode', data_dir, args.quick)


if __name__ == '__main__':
  with quiet.quieted():
    main()
