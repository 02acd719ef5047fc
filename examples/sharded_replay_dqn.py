"""A TF-Agents DQN script on a replay buffer sharded over Reverb servers:
trained offline from a build of many servers, then collecting online into
the same servers.

    rlds-reverb build --dataset bundled:cartpole --out built2 --servers 2 --table replay
    rlds-reverb serve --dataset bundled:cartpole --from-checkpoint built2 \\
        --checkpoint-dir served2 --table replay &     # writes served2/servers.json
    python examples/sharded_replay_dqn.py --servers-file served2/servers.json

It is the usual script for one `ReverbReplayBuffer` with two lines changed,
marked below: the buffer (`ShardedReplayBuffer` over the servers file), and
the observer (`buffer.observer(...)`, which writes whole episode I to server
I % S). `as_dataset` and `num_frames` are used as before; each batch holds
every server's share of the items, so each item is equally likely.
Prints one JSON line: frames before and after collecting, train steps,
episodes collected, losses.
"""

import argparse
import json

from rlds_reverb._util import quiet

quiet.silence()  # Before TensorFlow and gym load.

import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.environments import suite_gym  # pylint: disable=g-import-not-at-top
from tf_agents.policies import py_tf_eager_policy  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
import train_from_servers  # pylint: disable=g-import-not-at-top

SEQUENCE_LENGTH = 2  # One transition per item: what DqnAgent trains on.


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--servers-file', required=True,
                      help='what rlds-reverb serve of a build of many servers '
                           'wrote (CHECKPOINT_DIR/servers.json)')
  parser.add_argument('--offline-steps', type=int, default=200)
  parser.add_argument('--online-iterations', type=int, default=3)
  parser.add_argument('--collect-steps', type=int, default=100,
                      help='environment steps collected per iteration')
  parser.add_argument('--train-steps', type=int, default=50,
                      help='train steps per online iteration')
  parser.add_argument('--batch-size', type=int, default=64)
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's and Reverb's own log lines")
  args = parser.parse_args()
  with quiet.quieted(enabled=not args.verbose):
    print(json.dumps(run(args)), flush=True)


def train(agent, experience, steps: int) -> float:
  loss = float('nan')
  for _ in range(steps):
    trajectories, _ = next(experience)
    loss = float(agent.train(trajectories).loss)
  return loss


def run(args: argparse.Namespace) -> dict:
  env = suite_gym.load('CartPole-v1')
  agent = train_from_servers.new_agent()  # DDQN for CartPole-v1.
  agent.train = tf.function(agent.train)

  # Was: reverb_replay_buffer.ReverbReplayBuffer(agent.collect_data_spec,
  #          table_name, sequence_length=2, local_server=server)
  buffer = rlds_reverb.ShardedReplayBuffer(args.servers_file,
                                           sequence_length=SEQUENCE_LENGTH)
  frames_before = buffer.num_frames()
  experience = iter(buffer.as_dataset(sample_batch_size=args.batch_size,
                                      num_steps=SEQUENCE_LENGTH).prefetch(3))
  offline_loss = train(agent, experience, args.offline_steps)

  # Was: reverb_utils.ReverbAddTrajectoryObserver(buffer.py_client,
  #          table_name, sequence_length=2)
  observer = buffer.observer(sequence_length=SEQUENCE_LENGTH)
  episodes = []  # Whole episodes seen by the driver.
  driver = py_driver.PyDriver(
      env, py_tf_eager_policy.PyTFEagerPolicy(agent.collect_policy,
                                              use_tf_function=True),
      [observer, lambda trajectory: episodes.append(trajectory.is_boundary())],
      max_steps=args.collect_steps)
  time_step = env.reset()
  online_loss = float('nan')
  for _ in range(args.online_iterations):
    time_step, _ = driver.run(time_step)
    observer.flush()
    online_loss = train(agent, experience, args.train_steps)
  observer.close()
  return {'frames_before': frames_before, 'frames_after': buffer.num_frames(),
          'servers': len(buffer.places),
          'train_steps': args.offline_steps
                         + args.online_iterations * args.train_steps,
          'episodes_collected': int(sum(episodes)),
          'offline_loss': round(offline_loss, 4),
          'online_loss': round(online_loss, 4)}


if __name__ == '__main__':
  main()
