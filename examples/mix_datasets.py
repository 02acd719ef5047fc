"""Train a DQN agent from two RLDS datasets mixed with fixed weights.

    dataset A (bundled CartPole)       dataset B (a random policy, recorded
          |                            here by RldsRecorder unless given)
          | rlds_reverb.push                 | rlds_reverb.push
          v                                  v
      table 'a'          one server         table 'b'
          \\__ rlds_reverb.replay_mixture([a, b], [0.75, 0.25], 64) __/
               every batch: exactly 48 rows of A, then 16 of B
                                  |
                        DdqnAgent.train on each batch

    python examples/mix_datasets.py
    python examples/mix_datasets.py --dataset DIR_A --dataset DIR_B --weights 3 1

As Octo and OpenVLA weight the datasets they train on; the weights hold in
every batch, not only on average (`tf.data.Dataset.sample_from_datasets`).
The datasets must have the same step spec.
"""

import argparse
import tempfile

from rlds_reverb._util import quiet

quiet.silence()  # Before TensorFlow and gym load.

import reverb  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.environments import suite_gym  # pylint: disable=g-import-not-at-top
from tf_agents.policies import random_py_policy  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top
import train_from_servers  # pylint: disable=g-import-not-at-top

SEQUENCE_LENGTH = 2  # One transition per item: what DqnAgent trains on.
RANDOM_STEPS = 2_000  # Steps of the random policy recorded as dataset B.


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--dataset', action='append', default=None,
                      help='an RLDS source, twice (default: the bundled set '
                           'and a random policy recorded here)')
  parser.add_argument('--weights', type=float, nargs=2, default=(0.75, 0.25))
  parser.add_argument('--train-steps', type=int, default=200)
  parser.add_argument('--batch-size', type=int, default=64)
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's and Reverb's own log lines")
  args = parser.parse_args()
  datasets = args.dataset or ['bundled:cartpole', None]
  if len(datasets) != 2:
    parser.error('--dataset: give two, or none')
  with quiet.quieted(enabled=not args.verbose):
    if datasets[1] is None:
      datasets[1] = record_random_policy(tempfile.mkdtemp(prefix='random_'))
    train(datasets, args)


def record_random_policy(directory: str) -> str:
  """RANDOM_STEPS of a uniform random CartPole policy, as an RLDS dataset."""
  env = suite_gym.load('CartPole-v1')
  policy = random_py_policy.RandomPyPolicy(env.time_step_spec(),
                                           env.action_spec())
  recorder = rlds_reverb.RldsRecorder(directory, policy.trajectory_spec,
                                      env=env)
  driver = py_driver.PyDriver(env, policy, [recorder], max_steps=RANDOM_STEPS)
  time_step, _ = driver.run(env.reset())
  summary = recorder.close(final_time_step=time_step)
  print(f'recorded a random policy: {summary}')
  return directory


def train(datasets, args: argparse.Namespace) -> None:
  episodes = [rlds_reverb.load(source) for source in datasets]
  spec = rlds_reverb.create_trajectory_data_spec(episodes[0])
  names = ['a', 'b']
  server = reverb.Server([
      tables.table(tables.uniform(name), tensor_spec.add_outer_dim(spec))
      for name in names])
  try:
    address = f'localhost:{server.port}'
    for name, source, data in zip(names, datasets, episodes):
      result = rlds_reverb.push(data, address, name,
                                sequence_length=SEQUENCE_LENGTH)
      print(f"table '{name}': {result.items:,} items of {source}")
    dataset = rlds_reverb.replay_mixture(
        [(address, name) for name in names], list(args.weights),
        args.batch_size, num_steps=SEQUENCE_LENGTH)
    total = sum(args.weights)
    print(f'rows per batch of {args.batch_size}: '
          f'{args.weights[0] / total * args.batch_size:.1f} of '
          f"'a', then {args.weights[1] / total * args.batch_size:.1f} of 'b'")
    # DDQN for CartPole-v1; the iterator lives only inside train_on.
    train_from_servers.train_on(dataset, train_from_servers.new_agent(),
                                args.train_steps)
  finally:
    server.stop()


if __name__ == '__main__':
  main()
