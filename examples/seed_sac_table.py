"""Seed a SAC replay table from a continuous-action RLDS dataset (D4RL MuJoCo).

    TFDS catalog dataset (prepared)  --rlds_reverb.push-->  Reverb table,
    e.g. d4rl_mujoco_halfcheetah/v2-expert                   2-step items, signed
    observation float32[17], action float32[6]               add_outer_dim(spec)
                                                                    |
             SacAgent.train  <--  ReverbReplayBuffer.as_dataset(num_steps=2)

For users who have the data. Nothing is downloaded: rlds_reverb.load raises
DatasetNotPreparedError, printed here as one line, if the dataset is not
prepared in --data-dir. To prepare it, on a machine with internet:

    tfds build d4rl_mujoco_halfcheetah/v2-expert --data_dir DIR

Then:

    python examples/seed_sac_table.py --data-dir DIR
    python examples/seed_sac_table.py --dataset d4rl_mujoco_halfcheetah/v2-expert \\
        --data-dir DIR --split 'train[:50]' --train-steps 10
    python examples/seed_sac_table.py --dataset /path/to/tfds/dir   # any RLDS dir

The table's signature is derived from the dataset's spec, so any RLDS dataset
with a flat float observation and action works. `--train-steps N` (default 5,
0 to skip) builds a TF-Agents SacAgent from the specs (actor and critic
networks; the action spec gets the bounds D4RL MuJoCo tasks use,
--action-bounds -1 1) and trains it on sampled batches: the shapes fit. A real
offline run would train for ~1M steps, usually with CQL or TD3+BC rather than
plain SAC, which over-estimates unseen actions.
"""

import argparse
import sys

from rlds_reverb._util import quiet

quiet.silence()  # Before TensorFlow and gym load.

import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.agents.ddpg import critic_network  # pylint: disable=g-import-not-at-top
from tf_agents.agents.sac import sac_agent  # pylint: disable=g-import-not-at-top
from tf_agents.agents.sac import tanh_normal_projection_network  # pylint: disable=g-import-not-at-top
from tf_agents.networks import actor_distribution_network  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_replay_buffer  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
from tf_agents.utils import common  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top

DEFAULT_DATASET = 'd4rl_mujoco_halfcheetah/v2-expert'
TABLE = 'sac_experience'
SEQUENCE_LENGTH = 2  # One transition per item: what SacAgent trains on.


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--dataset', default=DEFAULT_DATASET,
                      help='TFDS catalog name or TFDS directory '
                           '(default: %(default)s)')
  parser.add_argument('--data-dir', default=None,
                      help="where catalog datasets are prepared (TFDS' "
                           'default if omitted)')
  parser.add_argument('--split', default='train',
                      help="TFDS split, may be sliced: 'train[:50]'")
  parser.add_argument('--max-size', type=int, default=2_000_000,
                      help='table capacity in items (default: %(default)s)')
  parser.add_argument('--batch-size', type=int, default=256)
  parser.add_argument('--train-steps', type=int, default=5,
                      help='SacAgent train steps on sampled batches; 0 skips '
                           'building the agent (default: %(default)s)')
  parser.add_argument('--action-bounds', type=float, nargs=2,
                      default=(-1.0, 1.0), metavar=('MIN', 'MAX'),
                      help='bounds of the action spec for the SAC actor '
                           '(default: -1 1, as in D4RL MuJoCo)')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's and Reverb's own log lines")
  return parser.parse_args(argv)


def agent_specs(spec, bounds):
  """time_step_spec and a bounded action_spec for SAC, from the data spec."""
  if not (spec.action.dtype.is_floating and spec.action.shape.rank == 1):
    sys.exit(f'seed_sac_table: the action must be a float vector for SAC; the '
             f'dataset has {spec.action}.')
  action_spec = tensor_spec.BoundedTensorSpec(
      spec.action.shape, spec.action.dtype, minimum=bounds[0],
      maximum=bounds[1], name='action')
  time_step_spec = ts.time_step_spec(spec.observation, reward_spec=spec.reward)
  return time_step_spec, action_spec


def make_sac_agent(time_step_spec, action_spec) -> sac_agent.SacAgent:
  """TF-Agents' SAC MuJoCo setup: 256x256 actor and critic, tanh-Normal."""
  observation_spec = time_step_spec.observation
  critic_net = critic_network.CriticNetwork(
      (observation_spec, action_spec), joint_fc_layer_params=(256, 256),
      kernel_initializer='glorot_uniform',
      last_kernel_initializer='glorot_uniform')
  actor_net = actor_distribution_network.ActorDistributionNetwork(
      observation_spec, action_spec, fc_layer_params=(256, 256),
      continuous_projection_net=(
          tanh_normal_projection_network.TanhNormalProjectionNetwork))
  agent = sac_agent.SacAgent(
      time_step_spec, action_spec, actor_network=actor_net,
      critic_network=critic_net,
      actor_optimizer=tf.keras.optimizers.Adam(3e-4),
      critic_optimizer=tf.keras.optimizers.Adam(3e-4),
      alpha_optimizer=tf.keras.optimizers.Adam(3e-4),
      target_update_tau=0.005, target_update_period=1, gamma=0.99,
      train_step_counter=tf.Variable(0, dtype=tf.int64))
  agent.initialize()
  agent.train = common.function(agent.train)
  return agent


def main(argv=None) -> int:
  args = parse_args(argv)
  with quiet.quieted(enabled=not args.verbose):  # TFDS' notes, Reverb's logs.
    return run(args)


def run(args: argparse.Namespace) -> int:
  tf.random.set_seed(args.seed)
  try:
    # Uniform sampling, oldest evicted first, as in TF-Agents' SAC examples.
    replay = tables.uniform(TABLE, max_size=args.max_size)
    episodes = rlds_reverb.load(args.dataset, split=args.split,
                                data_dir=args.data_dir)
  except (rlds_reverb.DatasetNotPreparedError, rlds_reverb.SourceError,
          rlds_reverb.TableOptionsError) as e:
    print(f'seed_sac_table: error: {e}', file=sys.stderr)
    return 2
  spec = rlds_reverb.create_trajectory_data_spec(episodes)
  print(f'dataset {args.dataset} ({args.split}): observation '
        f'{spec.observation.dtype.name}{spec.observation.shape.as_list()}, '
        f'action {spec.action.dtype.name}{spec.action.shape.as_list()}')
  time_step_spec, action_spec = agent_specs(spec, args.action_bounds)

  server = reverb.Server([tables.table(replay,
                                       tensor_spec.add_outer_dim(spec))])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    result = rlds_reverb.push(episodes, client, TABLE,
                              sequence_length=SEQUENCE_LENGTH)
    print(f'pushed {result.episodes:,} episodes, {result.trajectories:,} '
          f'steps, {result.items:,} items in {result.seconds:.1f} s')
    print(f'table {TABLE} size {client.server_info()[TABLE].current_size:,}')

    agent = make_sac_agent(time_step_spec, action_spec) if (
        args.train_steps > 0) else None
    # The agent's collect_data_spec is the data spec with a bounded action;
    # without an agent, the dataset's own spec reads the same items.
    data_spec = agent.collect_data_spec if agent else spec
    replay_buffer = reverb_replay_buffer.ReverbReplayBuffer(
        data_spec, TABLE, sequence_length=SEQUENCE_LENGTH, local_server=server)
    dataset = replay_buffer.as_dataset(
        sample_batch_size=args.batch_size, num_steps=SEQUENCE_LENGTH,
        num_parallel_calls=2).prefetch(2)
    return train_on(dataset, agent, args.train_steps)
  finally:
    server.stop()  # After the iterator is gone: see train_on.


def train_on(dataset: tf.data.Dataset, agent, steps: int) -> int:
  """A batch's shapes, then `steps` SAC train steps; 1 on a non-finite
  loss. The iterator lives only here: one still sampling from a server
  stopped under it can crash the interpreter's exit."""
  iterator = iter(dataset)
  experience, _ = next(iterator)
  print(f'batch observation {experience.observation.shape.as_list()}, '
        f'action {experience.action.shape.as_list()}, reward '
        f'{experience.reward.shape.as_list()}, discount '
        f'{experience.discount.shape.as_list()}')
  for _ in range(steps):
    loss_info = agent.train(experience)
    experience, _ = next(iterator)
    extra = loss_info.extra
    print(f'sac train step {int(agent.train_step_counter.numpy())}: loss '
          f'{float(loss_info.loss):.3f} (critic '
          f'{float(extra.critic_loss):.3f}, actor '
          f'{float(extra.actor_loss):.3f}, alpha '
          f'{float(extra.alpha_loss):.3f})')
    if not np.isfinite(float(loss_info.loss)):
      print('seed_sac_table: error: non-finite SAC loss', file=sys.stderr)
      return 1
  return 0


if __name__ == '__main__':
  sys.exit(main())
