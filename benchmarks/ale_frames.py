"""Real Atari frames as RLDS TFDS datasets: benchmark fixtures made on the fly.

    ALE (ale-py ships the ROMs)  random policy, 4 frames per step, the last
      -> record(game, steps)     two max-pooled (as DQN and RL Unplugged)
      -> episodes: grayscale 84x84x1 (area-resized, as `rlu_atari` stores them)
                   and native RGB 210x160x3, the same steps for both
      -> tfds_dir(kind, ...)     rlds_reverb's own TFDS writer (EpisodeWriter)
                                 with Image features, PNG or JPEG

Kinds (`KINDS`): atari_gray_png (rlu_atari's format), atari_rgb_png,
atari_rgb_jpeg (TFDS's JPEG, quality 95). Nothing is checked in and nothing
is downloaded; 4,000 steps take a few seconds. Needs `pip install
".[bench]"`.

    python benchmarks/ale_frames.py [--steps 4000] [--game ms_pacman]

prints each kind's bytes per frame, raw and encoded, and the time taken.
"""

import argparse
import functools
import os
import tempfile
import time

from rlds_reverb._util import quiet

quiet.silence()  # Before TensorFlow loads.

import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

from rlds_reverb import tfds_out  # pylint: disable=g-import-not-at-top

GAME = 'ms_pacman'  # Busy frames; random play ends an episode in ~500 steps.
FRAME_SKIP = 4
GRAY_SHAPE = (84, 84, 1)
RGB_SHAPE = (210, 160, 3)
# Kind: (frames, encoding).
KINDS = {
    'atari_gray_png': ('gray', 'png'),
    'atari_rgb_png': ('rgb', 'png'),
    'atari_rgb_jpeg': ('rgb', 'jpeg'),
}
SHAPES = {'gray': GRAY_SHAPE, 'rgb': RGB_SHAPE}


def _environment(game: str, seed: int):
  """An ALE emulator of `game`, deterministic (no sticky actions), quiet."""
  import ale_py  # pylint: disable=g-import-not-at-top
  from ale_py import roms  # pylint: disable=g-import-not-at-top
  ale_py.ALEInterface.setLoggerMode(ale_py.LoggerMode.Error)
  ale = ale_py.ALEInterface()
  ale.setInt('random_seed', seed)
  ale.setFloat('repeat_action_probability', 0.0)
  ale.loadROM(roms.get_rom_path(game))
  return ale


@functools.lru_cache(maxsize=4)
def record(game: str = GAME, num_steps: int = 4000, seed: int = 0,
           max_episode_steps: int = 1000) -> tuple:
  """Episodes of random play, `num_steps` steps in all (the last one cut).

  Each episode is {'steps': {'observation': {'gray', 'rgb'}, 'action',
  'reward', 'discount', 'is_first', 'is_last', 'is_terminal'}, 'episode_id',
  'episode_return'}, as numpy arrays. A step holds the observation the
  action was chosen at and the (clipped) reward it earned; the last step
  holds the final observation, action 0, reward 0, and discount 0 if the
  game ended there. Episodes last at most `max_episode_steps`.
  """
  ale = _environment(game, seed)
  actions = ale.getMinimalActionSet()
  rng = np.random.default_rng(seed)
  episodes, left = [], num_steps
  while left > 1:
    length = min(left, max_episode_steps)
    episodes.append(_episode(ale, actions, rng, length, len(episodes)))
    left -= len(episodes[-1]['steps']['action'])
    ale.reset_game()
  return tuple(episodes)


def _episode(ale, actions, rng, max_steps: int, episode_id: int) -> dict:
  """One episode of at most `max_steps` steps (at least 2)."""
  grays, rgbs, chosen, rewards = [], [], [], []
  gray, rgb = ale.getScreenGrayscale(), ale.getScreenRGB()
  while True:
    grays.append(gray)
    rgbs.append(rgb)
    if ale.game_over() or len(grays) == max_steps:
      break
    index = int(rng.integers(len(actions)))
    reward, gray, rgb = _act(ale, actions[index])
    chosen.append(index)
    rewards.append(np.clip(reward, -1, 1))
  terminal = ale.game_over()
  num_steps = len(grays)
  steps = np.arange(num_steps)
  reward = np.array(rewards + [0.0], np.float32)
  discount = np.ones(num_steps, np.float32)
  discount[-1] = 0.0 if terminal else 1.0
  return {
      'steps': {
          'observation': {'gray': _gray_84(np.stack(grays)),
                          'rgb': np.stack(rgbs)},
          'action': np.array(chosen + [0], np.int64),
          'reward': reward,
          'discount': discount,
          'is_first': steps == 0,
          'is_last': steps == num_steps - 1,
          'is_terminal': (steps == num_steps - 1) & terminal,
      },
      'episode_id': np.int64(episode_id),
      'episode_return': np.float32(reward.sum()),
  }


def _act(ale, action):
  """`FRAME_SKIP` frames of `action`: summed reward, the last two pooled."""
  reward, screens = 0.0, []
  for frame in range(FRAME_SKIP):
    reward += ale.act(action)
    if frame >= FRAME_SKIP - 2:
      screens.append((ale.getScreenGrayscale(), ale.getScreenRGB()))
  (gray, rgb), (last_gray, last_rgb) = screens
  return reward, np.maximum(gray, last_gray), np.maximum(rgb, last_rgb)


def _gray_84(frames: np.ndarray) -> np.ndarray:
  """[T, 210, 160] -> [T, 84, 84, 1] uint8, area-averaged (rlu_atari's way)."""
  resized = tf.image.resize(frames[..., np.newaxis], GRAY_SHAPE[:2],
                            method='area')
  return np.round(resized.numpy()).astype(np.uint8)


def episodes_of(kind: str, game: str = GAME, num_steps: int = 4000,
                seed: int = 0, max_episode_steps: int = 1000) -> list:
  """The recorded episodes with the observation of `kind`'s frames."""
  frames, _ = KINDS[kind]
  result = []
  for episode in record(game, num_steps, seed, max_episode_steps):
    steps = dict(episode['steps'], observation=episode['steps'][
        'observation'][frames])
    result.append(dict(episode, steps=steps))
  return result


def features(kind: str) -> tfds.features.FeaturesDict:
  """`rlu_atari`'s features (no checkpoint_id), frames of `kind`."""
  frames, encoding = KINDS[kind]
  step_spec = {
      'observation': tf.TensorSpec(SHAPES[frames], tf.uint8),
      'action': tf.TensorSpec((), tf.int64),
      'reward': tf.TensorSpec((), tf.float32),
      'discount': tf.TensorSpec((), tf.float32),
      **{flag: tf.TensorSpec((), tf.bool)
         for flag in ('is_first', 'is_last', 'is_terminal')},
  }
  metadata_spec = {'episode_id': tf.TensorSpec((), tf.int64),
                   'episode_return': tf.TensorSpec((), tf.float32)}
  return tfds_out.features_from_specs(step_spec, metadata_spec,
                                      image_encoding=encoding)


def tfds_dir(kind: str, num_steps: int, data_dir: str, game: str = GAME,
             seed: int = 0, num_shards: int = 4,
             max_episode_steps: int = 1000) -> str:
  """Writes `kind`'s episodes as a TFDS dataset under `data_dir`; its path.

  In the order recorded, in up to `num_shards` record files; read it with
  `rlds_reverb.load(path)` or `tfds.builder_from_directory(path)`.
  """
  episodes = episodes_of(kind, game, num_steps, seed, max_episode_steps)
  directory = os.path.join(
      data_dir, f'{kind}_{game}_{num_steps}_{seed}_{max_episode_steps}',
      '1.0.0')
  shard_episodes = -(-len(episodes) // num_shards)
  with tfds_out.EpisodeWriter(
      directory, features(kind), name=kind, shard_episodes=shard_episodes,
      durability=tfds_out.Durability.FLUSH) as writer:
    for episode in episodes:
      writer.write(episode)
  return directory


def frame_bytes(directory: str) -> float:
  """Mean bytes of an encoded frame in the record files of `directory`."""
  builder = tfds.builder_from_directory(directory)
  data = builder.as_dataset(split='train', decoders={
      'steps': {'observation': tfds.decode.SkipDecoding()}})
  sizes = data.flat_map(_steps).map(_frame_length).batch(10**6)
  return float(np.mean(np.concatenate(list(sizes.as_numpy_iterator()))))


def _steps(episode):
  return episode['steps']


def _frame_length(step):
  return tf.strings.length(step['observation'])


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=4000)
  parser.add_argument('--game', default=GAME)
  args = parser.parse_args()
  start = time.perf_counter()
  episodes = record(args.game, args.steps)
  print(f'{args.game}: {len(episodes)} episodes, '
        f'{sum(len(e["steps"]["action"]) for e in episodes)} steps, recorded '
        f'in {time.perf_counter() - start:.1f} s')
  with tempfile.TemporaryDirectory(prefix='ale_frames_') as data_dir:
    for kind, (frames, _) in KINDS.items():
      start = time.perf_counter()
      directory = tfds_dir(kind, args.steps, data_dir, args.game)
      seconds = time.perf_counter() - start
      print(f'{kind:15s} {int(np.prod(SHAPES[frames])):7,d} B raw, '
            f'{frame_bytes(directory):7,.0f} B encoded; written in '
            f'{seconds:.1f} s')


if __name__ == '__main__':
  main()
