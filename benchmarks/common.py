"""Shared data and timing helpers for the benchmarks (D4RL halfcheetah shapes)."""

import multiprocessing
import os
import platform
import statistics
import tempfile
import time

from rlds_reverb._util import quiet

quiet.silence()  # Before TensorFlow and gym load.

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

OBSERVATION_SIZE = 17
ACTION_SIZE = 6


def episode_arrays(num_steps: int, seed: int, terminal: bool = True) -> dict:
  """One episode of random halfcheetah-shaped steps as numpy arrays."""
  rng = np.random.default_rng(seed)
  index = np.arange(num_steps)
  return {
      'observation': rng.standard_normal(
          (num_steps, OBSERVATION_SIZE)).astype(np.float32),
      'action': rng.uniform(-1, 1, (num_steps, ACTION_SIZE)).astype(np.float32),
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': np.ones(num_steps, np.float32),
      'is_first': index == 0,
      'is_last': index == num_steps - 1,
      'is_terminal': (index == num_steps - 1) & terminal,
  }


def in_memory_rlds(num_episodes: int, num_steps: int) -> tf.data.Dataset:
  """RLDS episodes held in memory: a dataset of {'steps': Dataset}."""
  return _in_memory(episode_arrays, num_episodes, num_steps)


def streamed_rlds(num_episodes: int, num_steps: int) -> tf.data.Dataset:
  """RLDS episodes made one at a time, never all in memory."""
  return tf.data.Dataset.range(num_episodes).map(
      lambda seed: tf.py_function(
          lambda s: list(episode_arrays(num_steps, int(s)).values()), [seed],
          [tf.float32, tf.float32, tf.float32, tf.float32, tf.bool, tf.bool,
           tf.bool])).map(_from_list)


def _from_list(*values):
  keys = ('observation', 'action', 'reward', 'discount', 'is_first', 'is_last',
          'is_terminal')
  shapes = ([None, OBSERVATION_SIZE], [None, ACTION_SIZE], [None], [None],
            [None], [None], [None])
  steps = {}
  for key, value, shape in zip(keys, values, shapes):
    steps[key] = tf.ensure_shape(value, shape)
  return _as_episode(steps)


def _as_episode(steps):
  return {'steps': tf.data.Dataset.from_tensor_slices(steps)}


def timed(fn, repeats: int):
  """(median seconds, result of the last call) over `repeats` calls."""
  seconds, result = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    result = fn()
    seconds.append(time.perf_counter() - start)
  return statistics.median(seconds), result


def median_of(runs, key) -> float:
  """The median of `key` over rounds (dicts of figures)."""
  return statistics.median(run[key] for run in runs)


def median_ratio(a, b, key) -> float:
  """The median over rounds of `a`'s `key` over `b`'s, round by round:
  configurations measured in turns share each round's noise."""
  return statistics.median(x[key] / y[key] for x, y in zip(a, b))


def proc_status_bytes(key: str, pid='self') -> int:
  """A memory figure of /proc/PID/status ('VmRSS', 'VmHWM'), in bytes."""
  with open(f'/proc/{pid}/status', encoding='ascii') as f:
    for line in f:
      if line.startswith(f'{key}:'):
        return int(line.split()[1]) * 1024
  raise RuntimeError(f'no {key} in /proc/{pid}/status')


def cpu_seconds(pid='self') -> float:
  """User + system CPU seconds of a process (all its threads), from /proc."""
  with open(f'/proc/{pid}/stat', encoding='ascii') as f:
    fields = f.read().rsplit(')', 1)[1].split()
  return (int(fields[11]) + int(fields[12])) / os.sysconf('SC_CLK_TCK')


def machine() -> str:
  return (f'{platform.machine()}, {os.cpu_count()} cores, Python '
          f'{platform.python_version()}, TensorFlow {tf.__version__}')


# 72x96x3 frames with RL Unplugged DMLab's step structure (20,772 B a step).
FRAME_SHAPE = (72, 96, 3)


def frame_episode_arrays(num_steps: int, seed: int,
                         frame_shape=FRAME_SHAPE) -> dict:
  """One DMLab-shaped episode: frames of a blocky scene, a fifth of it noise.

  Reverb compresses chunks with snappy, which finds repeated runs but does no
  entropy coding: uniform noise would not compress at all, a flat scene
  would shrink to a sixth. Here snappy keeps about 55% of a frame (11.4 of
  20.7 KB), about what TF-Agents' observer items measured in issue 13 imply.
  """
  rng = np.random.default_rng(seed)
  height, width, _ = frame_shape
  rows = np.arange(height)[:, None, None]
  cols = np.arange(width)[None, :, None]
  channels = np.arange(3)[None, None, :]
  scene = (rows // 4 * 16 + cols // 6 * 9 + channels * 60) % 256
  frames = np.empty((num_steps,) + frame_shape, np.uint8)
  for step in range(num_steps):
    noisy = rng.random((height, width, 1)) < 0.2
    frame = np.where(noisy, rng.integers(0, 256, frame_shape), scene)
    top, left = (step * 3) % (height - 12), (step * 5 + seed * 7) % (width - 12)
    frame[top:top + 12, left:left + 12] = 250
    frames[step] = frame
  index = np.arange(num_steps)
  return {
      'observation': {
          'pixels': frames,
          'last_action': rng.integers(0, 15, num_steps).astype(np.int64),
          'last_reward': rng.standard_normal(num_steps).astype(np.float32),
      },
      'action': rng.integers(0, 15, num_steps).astype(np.int64),
      'reward': rng.standard_normal(num_steps).astype(np.float32),
      'discount': np.ones(num_steps, np.float32),
      'is_first': index == 0,
      'is_last': index == num_steps - 1,
      'is_terminal': (index == num_steps - 1),
  }


def in_memory_frames_rlds(num_episodes: int, num_steps: int) -> tf.data.Dataset:
  """DMLab-shaped RLDS episodes held in memory."""
  return _in_memory(frame_episode_arrays, num_episodes, num_steps)



def embedding_episode_arrays(num_steps: int, seed: int) -> dict:
  """Halfcheetah shapes plus a 512-float embedding (2 KB a step) to observe."""
  episode = episode_arrays(num_steps, seed)
  rng = np.random.default_rng(seed + 1)
  episode['observation'] = {
      'state': episode['observation'],
      'embedding': rng.standard_normal((num_steps, 512)).astype(np.float32)}
  return episode


def in_memory_embedding_rlds(num_episodes: int,
                             num_steps: int) -> tf.data.Dataset:
  return _in_memory(embedding_episode_arrays, num_episodes, num_steps)


def _in_memory(episode_arrays_fn, num_episodes: int,
               num_steps: int) -> tf.data.Dataset:
  """Episodes of `episode_arrays_fn(num_steps, seed)`, held in memory."""
  stacked = [episode_arrays_fn(num_steps, seed) for seed in range(num_episodes)]
  arrays = tf.nest.map_structure(lambda *leaves: np.stack(leaves), *stacked)
  return tf.data.Dataset.from_tensor_slices(arrays).map(_as_episode)


# RLDS data by shape name: fn(num_episodes, num_steps) -> tf.data.Dataset.
SHAPES = {
    'vector': in_memory_rlds,
    'image': in_memory_frames_rlds,
    'embedding': in_memory_embedding_rlds,
}


# --- RLDS directories written by TFDS. ---------------------------------------

def _vector_features():
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tfds.features.Tensor(shape=(OBSERVATION_SIZE,),
                                          dtype=np.float32),
      'action': tfds.features.Tensor(shape=(ACTION_SIZE,), dtype=np.float32),
      **_scalar_features()})})


def _frame_features():
  """RL Unplugged DMLab's way: frames as PNG `Image` features."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tfds.features.FeaturesDict({
          'pixels': tfds.features.Image(shape=FRAME_SHAPE, dtype=np.uint8,
                                        encoding_format='png'),
          'last_action': tfds.features.Tensor(shape=(), dtype=np.int64),
          'last_reward': tfds.features.Tensor(shape=(), dtype=np.float32)}),
      'action': tfds.features.Tensor(shape=(), dtype=np.int64),
      **_scalar_features()})})


def _scalar_features():
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  return {'reward': tfds.features.Tensor(shape=(), dtype=np.float32),
          'discount': tfds.features.Tensor(shape=(), dtype=np.float32),
          **{flag: tfds.features.Tensor(shape=(), dtype=np.bool_)
             for flag in ('is_first', 'is_last', 'is_terminal')}}


# Shape name: (features(), episode_arrays(num_steps, seed)).
TFDS_SHAPES = {
    'vector': (_vector_features, episode_arrays),
    'image': (_frame_features, frame_episode_arrays),
}


def tfds_dir(shape: str, num_episodes: int, num_steps: int, data_dir: str,
             num_shards: int = 4) -> str:
  """Writes `shape` episodes with TFDS's own writer; the dataset's path.

  Episodes are stored in the order written (`disable_shuffling`), in
  `num_shards` record files.
  """
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
  features, arrays = TFDS_SHAPES[shape]
  episodes = [(seed, {'steps': arrays(num_steps, seed)})
              for seed in range(num_episodes)]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      f'bench_{shape}', '1.0.0', features(), {'train': episodes},
      data_dir=data_dir, disable_shuffling=True,
      download_config=tfds.download.DownloadConfig(
          num_shards=min(num_shards, num_episodes)))
  return os.fspath(builder.data_dir)


def reused_tfds_dir(shape: str, num_episodes: int, num_steps: int,
                    data_dir: str) -> str:
  """`tfds_dir`'s dataset in `data_dir` if one is there (kept from an
  earlier run: writing 1M steps takes minutes), else written now."""
  path = os.path.join(data_dir, f'bench_{shape}', '1.0.0')
  if os.path.exists(os.path.join(path, 'dataset_info.json')):
    return path
  return tfds_dir(shape, num_episodes, num_steps, data_dir)


def vector_steps_dir(steps: int, episode_steps: int, data_dir) -> tuple:
  """(the path, its 2-step items) of `steps` halfcheetah-shaped steps in
  episodes of `episode_steps`, in `data_dir` (`reused_tfds_dir`; a new
  temporary directory if None)."""
  data_dir = data_dir or tempfile.mkdtemp(prefix='bench_vector_')
  episodes = steps // episode_steps
  return (reused_tfds_dir('vector', episodes, episode_steps, data_dir),
          episodes * (episode_steps - 1))


# --- Image datasets in TFDS directories, synthetic and real. -----------------

# Frames stored as TFDS `Image` features: the synthetic DMLab-shaped ones
# (`tfds_dir('image', ...)`, PNG) and real Atari play (`ale_frames`).
FRAME_SETS = ('synthetic_png', 'atari_gray_png', 'atari_rgb_png',
              'atari_rgb_jpeg')


def frame_set_dir(name: str, num_steps: int, data_dir: str) -> str:
  """Writes about `num_steps` steps of frame set `name`; the dataset's path.

  Synthetic: episodes of 500 steps (fewer if `num_steps` is less); Atari:
  random play of `ale_frames.GAME`, episodes as long as the game lasts.
  """
  if name == 'synthetic_png':
    episode_steps = min(num_steps, 500)
    return tfds_dir('image', max(1, num_steps // episode_steps),
                    episode_steps, data_dir)
  import ale_frames  # pylint: disable=g-import-not-at-top  (needs ale-py)
  return ale_frames.tfds_dir(name, num_steps, data_dir)


def image_format_of(name: str) -> str:
  """The encoding of a frame set's images: 'png' or 'jpeg'."""
  return 'jpeg' if name.endswith('jpeg') else 'png'


def episode_lengths(rlds_data: tf.data.Dataset) -> list:
  """Steps of each episode of `rlds_data`, read through its flags."""
  return [int(n) for n in rlds_data.map(_num_steps).as_numpy_iterator()]


def _num_steps(episode):
  return episode['steps'].reduce(np.int64(0), _count)


def _count(count, step):
  del step
  return count + 1


def image_leaves(spec) -> list:
  """(path, spec) of the uint8 [..., H, W, C] leaves of `spec` (C 1, 3, 4)."""
  from rlds_reverb.specs import paths  # pylint: disable=g-import-not-at-top
  return [(path, leaf) for path, leaf in paths.flatten_with_paths(spec)
          if leaf.dtype == tf.uint8 and leaf.shape.rank >= 3
          and leaf.shape[-1] in (1, 3, 4)]


def encoded_signature(spec, image_format: str):
  """The signature of a table of `spec`'s items (2 steps) with its images
  stored encoded, as `rlds_reverb.push(..., images='encoded')` writes them."""
  from rlds_reverb.specs import encoded  # pylint: disable=g-import-not-at-top
  from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
  return encoded.encoded_spec(
      tensor_spec.add_outer_dim(spec),
      [path for path, _ in image_leaves(spec)], image_format)


def items_of(lengths, sequence_length: int = 2) -> int:
  """Items of `sequence_length` steps, stride 1, within episodes."""
  return sum(max(0, n - sequence_length + 1) for n in lengths)


# --- A Reverb server in a child process. -------------------------------------

def _serve(table_name, signature, max_size, checkpoint_dir, connection):
  """Child: one table (checkpointing into `checkpoint_dir`, if given)."""
  import reverb  # pylint: disable=g-import-not-at-top
  quiet.silence()
  table = reverb.Table(
      table_name, reverb.selectors.Uniform(), reverb.selectors.Fifo(),
      max_size=max_size, rate_limiter=reverb.rate_limiters.MinSize(1),
      signature=signature)
  checkpointer = (reverb.checkpointers.DefaultCheckpointer(checkpoint_dir)
                  if checkpoint_dir else None)
  server = reverb.Server([table], checkpointer=checkpointer)
  connection.send(server.port)
  connection.recv()
  server.stop()


class ServerProcess:
  """A Reverb server with one table in its own process.

  The server's threads then do not share this process's interpreter lock
  with the writer being measured, as on a real deployment.
  """

  def __init__(self, table_name: str, signature, max_size: int = 10**8,
               checkpoint_dir=None):
    import reverb  # pylint: disable=g-import-not-at-top
    context = multiprocessing.get_context('spawn')
    self._connection, child = context.Pipe()
    self.process = context.Process(
        target=_serve,
        args=(table_name, signature, max_size, checkpoint_dir, child))
    self.process.start()
    self.port = self._connection.recv()
    self.address = f'localhost:{self.port}'
    self.client = reverb.Client(self.address)

  def rss_bytes(self) -> int:
    """Resident memory of the server's process, once it settles: items
    arrive asynchronously, so a second after the last write."""
    time.sleep(1.0)
    return proc_status_bytes('VmRSS', self.process.pid)

  def stop(self) -> None:
    self._connection.send('stop')
    self.process.join(timeout=60)
