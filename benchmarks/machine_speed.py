"""How fast this machine runs the test suite's kind of work, against the
machine the tiers' budgets were set on (docs/development_tiers.md).

    python benchmarks/machine_speed.py          # prints the factor, e.g. 1.00

The suite's time goes mostly to Python and to TensorFlow building tf.data
functions (benchmarks/test_costs.py), so the work measured here is that: a
few dozen small pipelines, each with its own map functions traced, then
read; in two processes at once, as the tiers run on two workers (two busy
cores run slower each than one). CPU seconds per round, the median of both
processes' five rounds. The factor is that over REFERENCE_CPU_S (at least
1: a faster machine keeps the budgets as they are); `.ci/run` multiplies
the tiers' budgets by it, so that a tier that grew is caught on any
machine, and a slower machine alone is not taken for growth.
"""

import argparse
import os
import statistics
import subprocess
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

PIPELINES = 24
ROUNDS = 5
# This work's CPU seconds a round on the machine the budgets were set on.
# Derived, since that machine is gone: on the machine of 2026-11-29 09:30
# (AMD EPYC, 2 cores) a round took 1.67 CPU-s (median of three runs:
# 1.53-1.68), and the default tier took 985.8 s there against 386.2 and
# 390.9 s on the budgets' machine (nearly the same tree): 1.67 / 2.54.
REFERENCE_CPU_S = 0.66


def one_round() -> float:
  """CPU seconds to build and read `PIPELINES` small pipelines."""
  start = time.process_time()
  for index in range(PIPELINES):
    steps = tf.data.Dataset.from_tensor_slices({
        'observation': {'pixels': tf.zeros([8, 4, 4, 3], tf.uint8),
                        'state': tf.zeros([8, 5], tf.float32)},
        'action': tf.range(8), 'reward': tf.ones([8]) * index})
    steps = steps.map(lambda step: {  # A new function: traced anew.
        **step, 'reward': step['reward'] * 2.0,
        'scaled': tf.cast(step['observation']['pixels'], tf.float32) / 255.0})
    steps = steps.filter(lambda step: step['action'] >= 0).batch(4)
    for _ in steps:
      pass
  return time.process_time() - start


def factor(cpu_s: float) -> float:
  return max(1.0, cpu_s / REFERENCE_CPU_S)


def rounds_here() -> list:
  one_round()  # Warm: first-use costs are not the machine's speed.
  return [one_round() for _ in range(ROUNDS)]


def rounds_in_two_processes() -> list:
  """Both processes' rounds, run at the same time."""
  children = [subprocess.Popen([sys.executable, __file__, '--rounds'],
                               stdout=subprocess.PIPE, text=True)
              for _ in range(2)]
  outputs = [child.communicate()[0] for child in children]
  if any(child.returncode for child in children):
    raise SystemExit('machine_speed: a measuring process failed')
  return [float(value) for output in outputs for value in output.split()]


def main(argv=None) -> int:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--verbose', action='store_true',
                      help='also the CPU seconds of each round, on stderr')
  parser.add_argument('--rounds', action='store_true',
                      help='one process: print its rounds\' CPU seconds')
  args = parser.parse_args(argv)
  if args.rounds:
    print(' '.join(f'{r:.4f}' for r in rounds_here()))
    return 0
  rounds = rounds_in_two_processes()
  median = statistics.median(rounds)
  if args.verbose:
    print('rounds (CPU s): ' + ', '.join(f'{r:.3f}' for r in rounds),
          file=sys.stderr)
    print(f'median {median:.3f} CPU-s, reference {REFERENCE_CPU_S} CPU-s',
          file=sys.stderr)
  print(f'{factor(median):.2f}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
