"""A serve of a build of many servers with the build's record of its dataset
(no checker process) against the same serve without it (the checker signs
the dataset with TensorFlow while the servers load). One run.

    python benchmarks/serve_record.py --data-dir DIR [--servers 2]
        [--repeats 3]

The data: time_to_trainable.py's (1M halfcheetah-shaped steps in a TFDS
directory under `--data-dir`, written once and reused). One `rlds-reverb
build --servers S`, then `rlds-reverb serve --from-checkpoint` as a fresh
process until it prints its 'serving ...' line (every server answered and
the check passed), with `dataset.json` in place and moved away, in turns.
Printed: each way's seconds, their medians and the ratio.
"""

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

import common  # pylint: disable=g-bad-import-order
import time_to_trainable  # pylint: disable=g-bad-import-order

RECORD = 'dataset.json'  # rlds_reverb.cli.build_record.RECORD
ENV = {**os.environ, 'TF_CPP_MIN_LOG_LEVEL': '3'}


def command(*words) -> list:
  return [sys.executable, '-m', 'rlds_reverb', *map(str, words)]


def serve_seconds(dataset: str, built: str) -> float:
  """Seconds from the serve's start to its 'serving ...' line; then stopped."""
  start = time.monotonic()
  process = subprocess.Popen(
      command('serve', '--dataset', dataset, '--from-checkpoint', built,
              '--table', time_to_trainable.TABLE),
      env=ENV, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  line = process.stdout.readline()
  took = time.monotonic() - start
  process.terminate()
  process.wait(timeout=60)
  if not line.startswith('serving'):
    raise SystemExit(f'serve_record: the serve did not start: {line!r}')
  return took


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--data-dir', required=True)
  parser.add_argument('--steps', type=int, default=1_000_000)
  parser.add_argument('--servers', type=int, default=2)
  parser.add_argument('--repeats', type=int, default=3)
  args = parser.parse_args()
  print(common.machine())
  dataset, _ = common.vector_steps_dir(
      args.steps, time_to_trainable.EPISODE_STEPS, args.data_dir)
  root = tempfile.mkdtemp(prefix='serve_record_')
  built = os.path.join(root, 'built')
  try:
    subprocess.run(
        command('build', '--dataset', dataset, '--out', built, '--table',
                time_to_trainable.TABLE, '--max-size', 100_000_000,
                '--servers', args.servers),
        env=ENV, check=True, capture_output=True)
    record = os.path.join(built, RECORD)
    aside = os.path.join(root, RECORD)
    seconds = {'with the record': [], 'with the checker': []}
    for _ in range(args.repeats):
      seconds['with the record'].append(serve_seconds(dataset, built))
      os.rename(record, aside)
      seconds['with the checker'].append(serve_seconds(dataset, built))
      os.rename(aside, record)
  finally:
    shutil.rmtree(root, ignore_errors=True)
  medians = {way: statistics.median(values) for way, values in seconds.items()}
  print(f'serve of {args.servers} servers until every one answers '
        f'({args.steps:,} steps, medians of {args.repeats}):')
  for way, values in seconds.items():
    rounds = ', '.join(f'{value:.2f}' for value in values)
    print(f'  {way:18} {medians[way]:5.2f} s [rounds {rounds}]')
  ratio = medians['with the checker'] / medians['with the record']
  print(f'  the record: {ratio:.2f}x faster')


if __name__ == '__main__':
  main()
