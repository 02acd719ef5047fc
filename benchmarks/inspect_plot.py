"""What `inspect --plot` costs over `inspect`, on a skewed 27,150-step dataset.

    python benchmarks/inspect_plot.py [--repeats 3] [--save-plot FILE.png]

The data: a TFDS directory written here, Atari-like: 100 episodes of 1 or 2
steps (150 steps) and one of 27,000, observations 8x8x3 uint8 frames (TFDS
`Image` features, PNG-encoded, as TFDS image data is). Each round runs,
in turn,

    rlds-reverb inspect --dataset DIR
    rlds-reverb inspect --dataset DIR --plot FILE.png

as a user would (a process each, TensorFlow start included). Reported:
the median wall seconds and peak resident memory of each over the rounds,
and `--plot` / plain per round, with the median of those ratios (robust to
a round slowed by other work on a shared machine).

To measure an older version in the same way, run it with that version first
on the path, from a directory without another `rlds_reverb` in it:
    git archive COMMIT rlds_reverb | tar -x -C /tmp/old
    cd /tmp && PYTHONPATH=/tmp/old python BENCHMARKS/inspect_plot.py
"""

import argparse
import contextlib
import io
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import common  # pylint: disable=g-bad-import-order
import numpy as np
import tensorflow_datasets as tfds

LONG_EPISODE = 27_000
SHORT_EPISODES = 100
FRAME = (8, 8, 3)


def episode(num_steps: int, seed: int) -> dict:
  """A well-formed episode of random frames, actions and rewards."""
  rng = np.random.default_rng(seed)
  index = np.arange(num_steps)
  return {
      'observation': rng.integers(0, 256, (num_steps,) + FRAME, np.uint8),
      'action': rng.integers(0, 18, num_steps).astype(np.int64),
      'reward': rng.choice([0.0, 1.0], num_steps, p=[0.95, 0.05]).astype(
          np.float32),
      'discount': np.ones(num_steps, np.float32),
      'is_first': index == 0,
      'is_last': index == num_steps - 1,
      'is_terminal': index == num_steps - 1,
  }


def features() -> tfds.features.FeaturesDict:
  scalar = tfds.features.Scalar
  return tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': tfds.features.Image(shape=FRAME),
      'action': scalar(dtype=np.int64),
      'reward': scalar(dtype=np.float32),
      'discount': scalar(dtype=np.float32),
      'is_first': scalar(dtype=np.bool_),
      'is_last': scalar(dtype=np.bool_),
      'is_terminal': scalar(dtype=np.bool_),
  })})


def write_dataset(root: str) -> str:
  """The TFDS directory: short episodes, then the long one; returns its path."""
  tfds.disable_progress_bar()
  lengths = [1 + i % 2 for i in range(SHORT_EPISODES)] + [LONG_EPISODE]
  examples = [(i, {'steps': episode(length, seed=i)})
              for i, length in enumerate(lengths)]
  with contextlib.redirect_stdout(io.StringIO()):  # 'Downloading and ...'
    builder = tfds.dataset_builders.store_as_tfds_dataset(
        name='atari_like', version='1.0.0', features=features(),
        split_datasets={'train': examples}, data_dir=root,
        disable_shuffling=True)
  return os.fspath(builder.data_dir)


def run_inspect(dataset: str, plot=None):
  """(wall seconds, peak RSS in MiB) of one `rlds-reverb inspect` process."""
  command = [sys.executable, '-m', 'rlds_reverb', 'inspect', '--dataset',
             dataset] + (['--plot', plot] if plot else [])
  start = time.perf_counter()
  process = subprocess.Popen(command, stdout=subprocess.DEVNULL,
                             stderr=subprocess.PIPE)
  _, status, usage = os.wait4(process.pid, 0)
  seconds = time.perf_counter() - start
  stderr = process.stderr.read().decode()
  process.stderr.close()
  if os.waitstatus_to_exitcode(status) != 0:
    sys.exit(f'{" ".join(command)} failed:\n{stderr}')
  return seconds, usage.ru_maxrss / 1024


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--save-plot', default=None, metavar='FILE.png',
                      help='keep the last round\'s plot there, to look at')
  args = parser.parse_args()
  print(f'machine: {common.machine()}')
  with tempfile.TemporaryDirectory() as root:
    dataset = write_dataset(root)
    plot = os.path.join(root, 'episodes.png')
    print(f'data: {SHORT_EPISODES} episodes of 1-2 steps + 1 of '
          f'{LONG_EPISODE:,}, {FRAME} uint8 frames, at {dataset}')
    plain, plotted = [], []
    for round_index in range(args.repeats):
      plain.append(run_inspect(dataset))
      plotted.append(run_inspect(dataset, plot))
      print(f'round {round_index + 1}: inspect {plain[-1][0]:.1f} s '
            f'({plain[-1][1]:.0f} MiB), --plot {plotted[-1][0]:.1f} s '
            f'({plotted[-1][1]:.0f} MiB), ratio '
            f'{plotted[-1][0] / plain[-1][0]:.2f}x', flush=True)
    if args.save_plot:
      shutil.copyfile(plot, args.save_plot)
  plain_s = statistics.median(s for s, _ in plain)
  plotted_s = statistics.median(s for s, _ in plotted)
  ratio = statistics.median(p[0] / q[0] for p, q in zip(plotted, plain))
  print(f'median of {args.repeats}: inspect {plain_s:.1f} s '
        f'(peak {statistics.median(m for _, m in plain):.0f} MiB), '
        f'inspect --plot {plotted_s:.1f} s '
        f'(peak {statistics.median(m for _, m in plotted):.0f} MiB); '
        f'--plot / plain: {ratio:.2f}x (median of the rounds\' ratios), '
        f'{plotted_s / plain_s:.2f}x (ratio of the medians)')


if __name__ == '__main__':
  main()
