"""Train a DQN agent from one replay table split over several Reverb servers.

    RLDS episodes --rlds_reverb.build_shards--> one checkpoint per server
                    (episode I -> server I % S; no server needed to build)
      -> S reverb.Servers, each starting from its own checkpoint, a seed it
         never changes (DefaultCheckpointer's fallback_checkpoint_path)
      -> rlds_reverb.replay_mixture([(address, table), ...], 'size', B):
         every batch holds each server's share of B by its table's size,
         so every item of the split table is equally likely
      -> DdqnAgent.train on each batch

    python examples/train_from_servers.py                  # 3 servers, bundled CartPole
    python examples/train_from_servers.py --servers 4 --train-steps 500

The servers run in this process here; on a cluster each runs on its own
machine (`rlds-reverb serve --from-checkpoint DIR/server-K-of-S`) and the
learner lists their addresses. What a learner sees is the same.
"""

import argparse
import os
import tempfile

from rlds_reverb._util import quiet

quiet.silence()  # Before TensorFlow and gym load.

import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.agents.dqn import dqn_agent  # pylint: disable=g-import-not-at-top
from tf_agents.environments import suite_gym  # pylint: disable=g-import-not-at-top
from tf_agents.environments import tf_py_environment  # pylint: disable=g-import-not-at-top
from tf_agents.networks import q_network  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top

TABLE = 'replay'
SEQUENCE_LENGTH = 2  # One transition per item: what DqnAgent trains on.


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--dataset', default='bundled:cartpole',
                      help='CartPole-v1 RLDS data (default: the bundled set)')
  parser.add_argument('--servers', type=int, default=3)
  parser.add_argument('--workers', type=int, default=2,
                      help='processes that build the checkpoints')
  parser.add_argument('--train-steps', type=int, default=200)
  parser.add_argument('--batch-size', type=int, default=64)
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's and Reverb's own log lines")
  args = parser.parse_args()
  with quiet.quieted(enabled=not args.verbose):
    train(args)


def start_servers(seeds, spec, own_root: str) -> list:
  """A server per built checkpoint, which it loads at start and never
  changes: a server's own checkpoints go to a root of its own (Reverb
  deletes everything else in the root it writes to)."""
  table = tables.uniform(TABLE)  # Its settings come from the checkpoint.
  signature = tensor_spec.add_outer_dim(spec)
  return [reverb.Server(
      [tables.table(table, signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          os.path.join(own_root, f'server-{index}'),
          fallback_checkpoint_path=seed))
          for index, seed in enumerate(seeds)]


def new_agent() -> dqn_agent.DdqnAgent:
  env = tf_py_environment.TFPyEnvironment(suite_gym.load('CartPole-v1'))
  agent = dqn_agent.DdqnAgent(
      env.time_step_spec(), env.action_spec(),
      q_network=q_network.QNetwork(env.observation_spec(), env.action_spec(),
                                   fc_layer_params=(100, 50)),
      optimizer=tf.keras.optimizers.Adam(2.5e-4),
      td_errors_loss_fn=tf.keras.losses.Huber(reduction='none'),
      target_update_period=100)
  agent.initialize()
  return agent


def train(args: argparse.Namespace) -> None:
  directory = tempfile.mkdtemp(prefix='train_from_servers_')
  built = rlds_reverb.build_shards(args.dataset, directory,
                                   tables.uniform(TABLE),
                                   workers=args.workers, servers=args.servers)
  for index, result in enumerate(built):
    print(f'server {index}: {result.items:,} items from {result.episodes} '
          f'episodes ({os.path.relpath(result.path, directory)})')
  spec = rlds_reverb.create_trajectory_data_spec(
      rlds_reverb.load(args.dataset))
  servers = start_servers([result.path for result in built], spec,
                          tempfile.mkdtemp(prefix='servers_own_'))
  try:
    sources = [(f'localhost:{server.port}', TABLE) for server in servers]
    dataset = rlds_reverb.replay_mixture(
        sources, 'size', args.batch_size, num_steps=SEQUENCE_LENGTH)
    print_shares(built, args.batch_size)
    train_on(dataset, new_agent(), args.train_steps)
  finally:
    for server in servers:  # After the iterator is gone: see train_on.
      server.stop()


def train_on(dataset: tf.data.Dataset, agent, steps: int) -> None:
  """`steps` train steps on batches of `dataset`. The iterator lives only
  here: one still sampling from servers stopped under it can crash the
  interpreter's exit ('terminate called without an active exception')."""
  train_step = tf.function(agent.train)
  experience = iter(dataset)
  for step in range(1, steps + 1):
    trajectories, _ = next(experience)
    loss = train_step(trajectories).loss
    if step % 100 == 0 or step == steps:
      print(f'train step {step}: loss {float(loss):.4f}')


def print_shares(built, batch_size: int) -> None:
  """What weights='size' gives each server of a batch: its share of the
  items (each batch rounds them so that the rows add up to the batch)."""
  sizes = np.array([result.items for result in built], np.float64)
  shares = ', '.join(f'{share:.1f}' for share in sizes / sizes.sum() *
                     batch_size)
  print(f'rows per batch of {batch_size} by server: {shares} '
        f'(server 0 first in each batch)')


if __name__ == '__main__':
  main()
