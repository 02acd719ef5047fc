"""What a replay mixture's lost server costs the learner's process, idle.

One run. Two servers of the bundled CartPole items, one in this process, one
in a child process (`common.ServerProcess`); a `replay_mixture` over both
with `on_server_loss='drop'`, three batches drawn; then the child is killed
(SIGKILL) and more batches drawn (the mixture goes on with the live server).
The process's CPU while it sleeps, in cores:

  before the kill          the mixture's iterator alive, both servers up
  after the drop           the iterator alive: Reverb's sampler of the lost
                           server retries it in its own threads
  iterator let go          the iterator and the dataset dropped

    python benchmarks/lost_server_cpu.py [--idle-s 3] [--rounds 3]

Medians over rounds (each round a new pair of servers).
"""

import argparse
import statistics
import time
import warnings

import common  # pylint: disable=g-bad-import-order
from rlds_reverb._util import quiet  # pylint: disable=g-bad-import-order
import reverb
from tf_agents.specs import tensor_spec

import rlds_reverb
from rlds_reverb import tables

SOURCE = 'bundled:cartpole'
TABLE = 'replay'
AFTER_LOSS = 40  # Batches drawn after the kill: the drop is made by then.


def idle_cores(seconds: float) -> float:
  started = common.cpu_seconds()
  time.sleep(seconds)
  return (common.cpu_seconds() - started) / seconds


def one_round(signature, idle_s: float) -> dict:
  alive = reverb.Server([tables.table(tables.uniform(TABLE), signature)])
  doomed = common.ServerProcess(TABLE, signature)
  try:
    addresses = [f'localhost:{alive.port}', doomed.address]
    for address in addresses:
      rlds_reverb.push(rlds_reverb.load(SOURCE).take(2), address, TABLE)
    mixture = rlds_reverb.replay_mixture(
        [(address, TABLE) for address in addresses], [1, 1], 8, timeout=1,
        on_server_loss='drop')
    iterator = iter(mixture)
    for _ in range(3):
      next(iterator)
    cores = {'before the kill': idle_cores(idle_s)}
    doomed.process.kill()
    with warnings.catch_warnings():
      warnings.simplefilter('ignore', rlds_reverb.ServerLostWarning)
      for _ in range(AFTER_LOSS):
        next(iterator)
    cores['after the drop'] = idle_cores(idle_s)
    del iterator, mixture
    cores['iterator let go'] = idle_cores(idle_s)
    return cores
  finally:
    doomed.process.kill()
    doomed.process.join()
    alive.stop()


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--idle-s', type=float, default=3.0)
  parser.add_argument('--rounds', type=int, default=3)
  args = parser.parse_args()
  quiet.silence()
  signature = tensor_spec.add_outer_dim(
      rlds_reverb.create_trajectory_data_spec(rlds_reverb.load(SOURCE)))
  rounds = [one_round(signature, args.idle_s) for _ in range(args.rounds)]
  print(f'{common.machine()}; {args.rounds} rounds, {args.idle_s} s idle each')
  for moment in rounds[0]:
    values = [r[moment] for r in rounds]
    print(f'{moment:<16} {statistics.median(values):.2f} cores '
          f'(rounds: {", ".join(f"{v:.2f}" for v in values)})')


if __name__ == '__main__':
  main()
