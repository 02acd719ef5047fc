"""What Grappler costs a small pipeline: the tests' case for turning it off.

The tests turn Grappler off in their own processes (tests/conftest.py):
TensorFlow runs it on each `tf.data` function's graph when an iterator is
made. This program makes the conversion pipeline of a small dataset (3
episodes, 84 steps) and times, in CPU milliseconds, making an iterator of it
and reading it whole, in a fresh process with Grappler on (TensorFlow's
default) and one with it off; rounds alternate, medians are printed with
the ratio. Grappler rewrites graphs for speed only, so both read the same
trajectories (checked).

    python benchmarks/iterator_cost.py [--rounds 3] [--iterators 20]
"""

import argparse
import json
import os
import statistics
import subprocess
import sys

_CHILD = r'''
import json, sys, time
import tensorflow as tf
if sys.argv[1] == 'off':
  tf.config.optimizer.set_experimental_options(
      {'disable_meta_optimizer': True})
import common
import rlds_reverb

data = common.in_memory_rlds(3, 28)
made = rlds_reverb.convert_rlds_to_trajectories(data)
next(iter(made))  # The first iterator pays for one-off set-up.
started = time.process_time()
for _ in range(int(sys.argv[2])):
  iter(made)
per_iterator = (time.process_time() - started) / int(sys.argv[2])
started = time.process_time()
rewards = [float(t.reward) for t in made]
print(json.dumps({'iterator_ms': per_iterator * 1e3,
                  'read_ms': (time.process_time() - started) * 1e3,
                  'rewards': rewards}))
'''


def run(grappler: str, iterators: int) -> dict:
  here = os.path.dirname(os.path.abspath(__file__))
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3',
             PYTHONPATH=os.pathsep.join(
                 [here, os.path.dirname(here), os.environ.get(
                     'PYTHONPATH', '')]))
  out = subprocess.run([sys.executable, '-c', _CHILD, grappler,
                        str(iterators)], env=env, check=True,
                       capture_output=True, text=True).stdout
  return json.loads(out.splitlines()[-1])


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--rounds', type=int, default=3)
  parser.add_argument('--iterators', type=int, default=20)
  args = parser.parse_args()
  runs = {'on': [], 'off': []}
  for _ in range(args.rounds):
    for grappler in runs:
      runs[grappler].append(run(grappler, args.iterators))
  assert runs['on'][0]['rewards'] == runs['off'][0]['rewards'], (
      'Grappler on and off read different trajectories')
  medians = {}
  for grappler, results in runs.items():
    medians[grappler] = {key: statistics.median(r[key] for r in results)
                         for key in ('iterator_ms', 'read_ms')}
    median = medians[grappler]
    print(f'Grappler {grappler:3}: an iterator {median["iterator_ms"]:.1f} ms '
          f'of CPU, a whole read {median["read_ms"]:.1f} ms (medians of '
          f'{args.rounds})')
  for key, what in (('iterator_ms', 'an iterator'), ('read_ms', 'a read')):
    print(f'on / off, {what}: '
          f'{medians["on"][key] / medians["off"][key]:.2f}x')


if __name__ == '__main__':
  main()
