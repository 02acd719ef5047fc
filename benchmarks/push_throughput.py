"""Push throughput and memory: TF-Agents, Reverb's raw writers, rlds_reverb.

One run, the same data, items of 2 steps with stride 1 (TF-Agents'
`ReverbAddTrajectoryObserver(2)`); shapes: vector (D4RL halfcheetah), image
(RL Unplugged DMLab 72x96x3 frames, synthetic), and real Atari frames
recorded by `ale_frames.py` (tfds only; `pip install ".[bench]"`):
atari_gray_png (84x84x1, as rlu_atari), atari_rgb_png and atari_rgb_jpeg
(210x160x3), 4,000 steps each; from two sources:

  tfds     a directory written by TFDS's own writer (4 record files; frames as
           PNG `Image` features, as RL Unplugged stores them), opened with
           `rlds_reverb.load`: what users push. 150 x 1000 vector steps,
           20 x 1000 image steps.
  memory   episodes held in memory (`from_tensor_slices` of stacked arrays):
           the cheapest source there is. 50 x 1000 vector, 20 x 1000 image.

The writers:

  tf_agents    vector (memory only): `rlds_to_reverb.push_rlds_to_reverb` +
               the observer's flush; frames: the observer fed our
               trajectories one by one (TF-Agents' converter gives nested
               observations an extra axis).
  structured   (memory only) Reverb's StructuredWriter appending pre-made
               numpy rows (made before timing) through its public `append`,
               creating the same items, flushed in bounded batches (24
               pending), and fully at the end: Reverb's default chunking.
  chunked      Reverb's C++ trajectory writer with the chunk lengths
               `rlds_reverb` chooses, fed the same rows pre-made in memory in
               one stream (a minimal loop written here: append, create the
               item, flush every 16 items keeping the items of open chunks,
               end once): the writer's limit, reading and converting nothing.
  push, stop   `rlds_reverb.push(..., on_invalid='stop')`: reading and
               converting included, one read of the data.
  push         `rlds_reverb.push` with its defaults (`on_invalid='raise'`):
               the data's flags are read and checked before anything is
               written, then the data is read again to write.
  encoded      (frames) the same two pushes with `images='encoded'`, into a
               table signed for encoded frames (its own server): a TFDS
               source's PNG/JPEG bytes are written as they are, not decoded;
               frames in memory are PNG-encoded at push time.

The server runs in a child process (as a deployment's would: its threads do
not share the writer's interpreter lock); the writers take turns, round after
round, on one empty table, so that they share the machine's noise, and the
item count is checked after every run. Then, per tfds shape, the cost of the
check's read (flags only) against a full read; the time of a push of 1
episode of 10 steps (what every push costs whatever its size); and peak RSS
of `rlds_reverb.push` over a streamed dataset of 10 and of 100 episodes, each
in a fresh process.

    python benchmarks/push_throughput.py [--source tfds memory]
        [--shape vector image atari_gray_png atari_rgb_png atari_rgb_jpeg]
        [--repeats 3] [--episodes N] [--skip-tf-agents] [--skip-rss]
    python benchmarks/push_throughput.py --quick    # tiny: does it run

`--episodes` sets the number of episodes of every synthetic shape and source.
"""

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from typing import Optional

import common  # pylint: disable=g-bad-import-order
from rlds_reverb._util import quiet  # pylint: disable=g-bad-import-order
import numpy as np
import reverb
from reverb import structured_writer as structured
from tf_agents.replay_buffers import reverb_utils
from tf_agents.replay_buffers import rlds_to_reverb
from tf_agents.specs import tensor_spec
import tree

import rlds_reverb
from rlds_reverb import validation
from rlds_reverb.sources import whole_reads
from rlds_reverb.write import chunks
from rlds_reverb.write import columns as columns_lib
from rlds_reverb.write import reverb_cpp

TABLE = 'bench'
FLUSH_EVERY = 24
TIMEOUT_MS = 60_000
# (source, shape): (episodes, steps per episode).
SIZES = {('memory', 'vector'): (50, 1000), ('memory', 'image'): (20, 1000),
         ('tfds', 'vector'): (150, 1000), ('tfds', 'image'): (20, 1000)}
ATARI = ('atari_gray_png', 'atari_rgb_png', 'atari_rgb_jpeg')
ATARI_STEPS = 4000
QUICK_EPISODES, QUICK_STEPS = 2, 50  # --quick: each synthetic source, Atari.


def server_process(spec) -> common.ServerProcess:
  return common.ServerProcess(TABLE, tensor_spec.add_outer_dim(spec), 10**7)


def make_server(spec, max_size: int = 10**7) -> reverb.Server:
  table = reverb.Table(
      TABLE, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
      max_size=max_size, rate_limiter=reverb.rate_limiters.MinSize(1),
      signature=tensor_spec.add_outer_dim(spec))
  return reverb.Server([table])


def push_tf_agents(data, client) -> None:
  observer = reverb_utils.ReverbAddTrajectoryObserver(client, TABLE, 2)
  rlds_to_reverb.push_rlds_to_reverb(data, observer)
  observer.flush()


def observe_tf_agents(data, client) -> None:
  """TF-Agents' observer, fed our trajectories (nested observations)."""
  feed_observer(reverb_utils.ReverbAddTrajectoryObserver(client, TABLE, 2),
                data)


def feed_observer(observer, data) -> None:
  """`observer` called on each of our trajectories of `data`, then flushed."""
  for entry in rlds_reverb.convert_rlds_to_trajectories(data):
    observer(entry)
  observer.flush()


def push_rlds_reverb(data, client, on_invalid: str = 'stop',
                     images: str = 'raw') -> None:
  rlds_reverb.push(data, client, TABLE, sequence_length=2,
                   on_invalid=on_invalid, images=images)


def numpy_rows(data):
  """Per episode: the flat trajectory rows, made before any timing."""
  episodes = []
  for block in rlds_reverb.convert.trajectory_blocks(data).as_numpy_iterator():
    leaves = [np.asarray(leaf) for leaf in tree.flatten(block.trajectory)]
    episodes.append([list(row) for row in zip(*leaves)])
  return episodes


def push_raw_writer(episodes, client, structure) -> None:
  """Reverb's structured writer on ready rows: 2-step items within episodes."""
  pattern = structured.pattern_from_transform(
      list(range(len(tree.flatten(structure)))),
      lambda ref: tree.unflatten_as(structure, [c[-2:] for c in ref]))
  config = structured.create_config(
      pattern, TABLE, [structured.Condition.step_index() >= 1])
  writer = client.structured_writer([config])
  for rows in episodes:
    for index, row in enumerate(rows):
      writer.append(row)
      if index >= 1 and index % FLUSH_EVERY == 0:
        writer.flush(FLUSH_EVERY, timeout_ms=TIMEOUT_MS)
    writer.end_episode(timeout_ms=TIMEOUT_MS)
  writer.flush(0, timeout_ms=TIMEOUT_MS)


def chunk_lengths_of(data, spec):
  """The chunk lengths `rlds_reverb.push` chooses for this data (1 table)."""
  first = next(rlds_reverb.convert.trajectory_blocks(data).as_numpy_iterator())
  return chunks.lengths(columns_lib.columns_of(spec),
                        [np.asarray(leaf) for leaf in
                         tree.flatten(first.trajectory)], None,
                        chunks.max_chunk_length(1, 1))


def push_chunked_writer(episodes, client, lengths) -> None:
  """The C++ trajectory writer on ready rows, in one stream of episodes."""
  writer = reverb_cpp.ChunkedWriter(client, lengths, num_keep_alive_refs=2)
  squeeze = [False] * len(lengths)
  keep = max(lengths) - 1  # Items that may wait for open chunks.
  unflushed = 0
  for rows in episodes:
    previous = writer.append(rows[0])
    for row in rows[1:]:
      refs = writer.append(row)
      writer.create_item(TABLE, 1.0, list(zip(previous, refs)), squeeze)
      previous = refs
      unflushed += 1
      if unflushed == 16:
        writer.flush(keep, timeout_ms=TIMEOUT_MS)
        unflushed = 0
  writer.end_episode(timeout_ms=TIMEOUT_MS)
  writer.close()


def measure(writers, expected_items, repeats):
  """Items/s of each writer (name, fn, client of its table), per round.

  Rounds interleave the writers so that they share the machine's noise.
  """
  seconds = {name: [] for name, _, _ in writers}
  for _ in range(repeats):
    for name, fn, client in writers:
      client.reset(TABLE)
      elapsed, _ = common.timed(fn, 1)
      items = client.server_info(timeout=10)[TABLE].current_size
      if items != expected_items:
        raise SystemExit(
            f'{name} left {items} items, expected {expected_items}')
      seconds[name].append(elapsed)
  return {name: [expected_items / s for s in seconds[name]]
          for name, _, _ in writers}


def fixed_cost(client, repeats: int) -> float:
  """Median seconds of `rlds_reverb.push` of a tiny dataset."""
  tiny = common.in_memory_rlds(1, 10).cache()
  push_rlds_reverb(tiny, client)  # Warm up.
  return common.timed(lambda: push_rlds_reverb(tiny, client), repeats)[0]


def rss_child(num_episodes: int, steps: int) -> None:
  """In a fresh process: push a streamed dataset, print peak RSS in MiB.

  The in-process table keeps at most 1,000 items, so the server's storage
  does not grow with the dataset and the figure is the loader's.
  """
  data = common.streamed_rlds(num_episodes, steps)
  server = make_server(rlds_reverb.create_trajectory_data_spec(data), 1000)
  client = reverb.Client(f'localhost:{server.port}')
  result = rlds_reverb.push(data, client, TABLE, sequence_length=2)
  print(json.dumps({'episodes': result.episodes,
                    'peak_rss_mib': peak_rss_of_this_process() / 2**20}))
  server.stop()


def peak_rss_of_this_process() -> int:
  """VmHWM, in bytes: this program's own peak.

  Not `getrusage(...).ru_maxrss`: Linux carries that over `exec` from the
  forking parent, whose peak (gigabytes of frames) it would report.
  """
  return common.proc_status_bytes('VmHWM')


def peak_rss(num_episodes: int, steps: int) -> float:
  output = subprocess.run(
      [sys.executable, __file__, '--rss-child', str(num_episodes),
       '--steps', str(steps)], check=True, capture_output=True, text=True)
  return json.loads(output.stdout.strip().splitlines()[-1])['peak_rss_mib']


def source_data(source: str, shape: str, num_episodes: Optional[int],
                data_dir: str, quick: bool):
  """(RLDS data, episode lengths) of `shape` from `source`."""
  if shape in ATARI:
    if source == 'memory':
      raise SystemExit(f'{shape} is read from a TFDS directory: --source tfds')
    import ale_frames  # pylint: disable=g-import-not-at-top  (needs ale-py)
    steps = QUICK_EPISODES * QUICK_STEPS if quick else ATARI_STEPS
    data = rlds_reverb.load(ale_frames.tfds_dir(shape, steps, data_dir))
    return data, common.episode_lengths(data)
  default_episodes, num_steps = SIZES[source, shape]
  if quick:
    default_episodes, num_steps = QUICK_EPISODES, QUICK_STEPS
  num_episodes = num_episodes or default_episodes
  if source == 'memory':
    data = common.SHAPES[shape](num_episodes, num_steps).cache()
  else:
    data = rlds_reverb.load(common.tfds_dir(shape, num_episodes, num_steps,
                                            data_dir))
  return data, [num_steps] * num_episodes


def measure_shape(source: str, shape: str, repeats: int,
                  num_episodes: Optional[int], with_tf_agents: bool,
                  data_dir: str, quick: bool) -> None:
  data, lengths = source_data(source, shape, num_episodes, data_dir, quick)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  frames = bool(common.image_leaves(spec))
  pre_made = shape in ('vector', 'image')  # Rows held in memory: not Atari.
  episodes = numpy_rows(data) if pre_made else None
  lengths_of_chunks = chunk_lengths_of(data, spec)
  expected_items = common.items_of(lengths)
  server = server_process(spec)
  client = server.client
  servers = [server]
  push_rlds_reverb(data, client)  # Warm up: tracing, first iterator.
  writers = []
  if with_tf_agents and (source == 'memory' or frames):
    tf_agents = observe_tf_agents if frames else push_tf_agents
    writers.append(('tf_agents', lambda: tf_agents(data, client), client))
  if source == 'memory':
    writers.append(('structured (pre-made rows)',
                    lambda: push_raw_writer(episodes, client, spec), client))
  if pre_made:
    writers.append(('chunked (pre-made rows)', lambda: push_chunked_writer(
        episodes, client, lengths_of_chunks), client))
  writers += [
      (STOP, lambda: push_rlds_reverb(data, client), client),
      (DEFAULT, lambda: push_rlds_reverb(data, client, 'raise'), client),
  ]
  if frames:
    encoded = common.ServerProcess(TABLE, common.encoded_signature(
        spec, common.image_format_of(shape)), 10**7)
    servers.append(encoded)
    push_rlds_reverb(data, encoded.client, images='encoded')  # Warm up.
    writers.append((ENCODED_STOP, lambda: push_rlds_reverb(
        data, encoded.client, images='encoded'), encoded.client))
    if source == 'tfds':
      writers.append((ENCODED_DEFAULT, lambda: push_rlds_reverb(
          data, encoded.client, 'raise', images='encoded'), encoded.client))
  rates = measure(writers, expected_items, repeats)
  for each in servers:
    each.stop()
  label = {'memory': 'in memory (from_tensor_slices)',
           'tfds': 'a TFDS directory read by load()'}[source]
  print(f'\n{shape}, {label}: {len(lengths)} episodes, {sum(lengths)} steps; '
        f'chunk lengths {lengths_of_chunks}; items of 2 steps, stride 1; '
        f'median of {repeats} interleaved rounds')
  for name, values in rates.items():
    print(f'{name:34s} {statistics.median(values):10,.0f} items/s')
  for ours_name in (STOP, DEFAULT):
    for name in ('tf_agents', 'structured (pre-made rows)',
                 'chunked (pre-made rows)'):
      if name in rates:
        print_ratio(ours_name, name, rates)
  for encoded_name, raw_name in ((ENCODED_STOP, STOP),
                                 (ENCODED_DEFAULT, DEFAULT)):
    for name in (raw_name, 'tf_agents'):
      if encoded_name in rates and name in rates:
        print_ratio(encoded_name, name, rates)
  if source == 'tfds':
    print_read_costs(data, repeats)


STOP = 'rlds_reverb.push, stop'
DEFAULT = 'rlds_reverb.push (default)'
ENCODED_STOP = 'rlds_reverb.push encoded, stop'
ENCODED_DEFAULT = 'rlds_reverb.push encoded (default)'


def print_ratio(ours: str, reference: str, rates) -> None:
  ratios = [a / b for a, b in zip(rates[ours], rates[reference])]
  print(f'{ours} / {reference}: {statistics.median(ratios):5.2f}x '
        f'(per round: {", ".join(f"{r:.2f}" for r in ratios)})')


def print_read_costs(data, repeats: int) -> None:
  """Seconds of the default push's check (flags only, images left encoded)
  against reading every field, TFDS's standard way and whole."""
  reads = [
      ('the check (validate)', lambda: validation.validate(data)),
      ('full read, whole episodes',
       lambda: consume(whole_reads.whole(data))),
      ('full read, TFDS step by step',
       lambda: consume(data.flat_map(_steps).batch(1024))),
  ]
  for name, fn in reads:
    fn()  # Warm up.
    print(f'{name:29s} {common.timed(fn, repeats)[0]:8.2f} s')


def consume(dataset) -> None:
  for _ in dataset.prefetch(2):
    pass


def _steps(episode):
  return episode['steps']


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--source', nargs='+', default=['tfds', 'memory'],
                      choices=['tfds', 'memory'])
  parser.add_argument('--shape', nargs='+', default=['vector', 'image'],
                      choices=['vector', 'image'] + list(ATARI))
  parser.add_argument('--steps', type=int, default=1000,
                      help='steps per episode of the RSS runs')
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--episodes', type=int,
                      help='episodes of every shape and source (default: '
                      '150 vector from TFDS, 50 in memory, 20 image)')
  parser.add_argument('--skip-tf-agents', action='store_true')
  parser.add_argument('--skip-rss', action='store_true')
  parser.add_argument('--quick', action='store_true',
                      help='tiny sizes, 1 round, no RSS runs: does it run')
  parser.add_argument('--rss-child', type=int, help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.rss_child:
    rss_child(args.rss_child, args.steps)
    return
  if args.quick:
    args.repeats, args.skip_rss = 1, True
  print(f'machine: {common.machine()}')
  with tempfile.TemporaryDirectory(prefix='push_throughput_') as data_dir:
    for source in args.source:
      for shape in args.shape:
        if source == 'memory' and shape in ATARI:
          continue  # Atari frames come from TFDS directories only.
        measure_shape(source, shape, args.repeats, args.episodes,
                      not args.skip_tf_agents, data_dir, args.quick)
  server = make_server(rlds_reverb.create_trajectory_data_spec(
      common.in_memory_rlds(1, 10)))
  fixed_seconds = fixed_cost(reverb.Client(f'localhost:{server.port}'),
                             args.repeats)
  server.stop()
  print(f'\nrlds_reverb.push of 1 episode x 10 steps: {fixed_seconds:.3f} s '
        f'(the cost of any push: pipeline, checks, final confirmation)')
  if not args.skip_rss:
    small, large = peak_rss(10, args.steps), peak_rss(100, args.steps)
    print(f'peak RSS, streamed: 10 episodes {small:.0f} MiB, 100 episodes '
          f'{large:.0f} MiB: {100 * (large / small - 1):+.1f}%')


if __name__ == '__main__':
  with quiet.quieted():  # Reverb's server log lines, absl notes.
    main()
