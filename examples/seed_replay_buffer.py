"""Seed a Reverb replay buffer from RLDS data and read it as TF-Agents does.

    RLDS episodes -> trajectory spec -> Reverb table signed add_outer_dim(spec)
      -> rlds_reverb.push (2-step items) -> ReverbReplayBuffer.as_dataset

    python examples/seed_replay_buffer.py                    # bundled CartPole
    python examples/seed_replay_buffer.py --dataset DIR      # a TFDS directory
"""

import argparse

from rlds_reverb._util import quiet

quiet.silence()  # Before TensorFlow and gym load.

import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_replay_buffer  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top

TABLE = 'experience'
SEQUENCE_LENGTH = 2


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--dataset', default='bundled:cartpole',
                      help='TFDS directory or bundled:cartpole (default)')
  parser.add_argument('--batch-size', type=int, default=8)
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's and Reverb's own log lines")
  args = parser.parse_args()
  with quiet.quieted(enabled=not args.verbose):
    seed_and_sample(args.dataset, args.batch_size)


def seed_and_sample(dataset: str, batch_size: int) -> None:
  """Pushes `dataset` into a new table and prints one sampled batch."""
  episodes = rlds_reverb.load(dataset)
  spec = rlds_reverb.create_trajectory_data_spec(episodes)
  # Uniform replay of 1,000,000 items, as TF-Agents' examples build it.
  table = tables.table(tables.uniform(TABLE, max_size=1_000_000),
                       tensor_spec.add_outer_dim(spec))
  server = reverb.Server([table])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    result = rlds_reverb.push(episodes, client, TABLE,
                              sequence_length=SEQUENCE_LENGTH)
    print(f'pushed {result.episodes:,} episodes, {result.trajectories:,} '
          f'steps, {result.items:,} items in {result.seconds:.2f} s')
    print(f'table size {client.server_info()[TABLE].current_size:,}')

    replay_buffer = reverb_replay_buffer.ReverbReplayBuffer(
        spec, TABLE, sequence_length=SEQUENCE_LENGTH, local_server=server)
    dataset = replay_buffer.as_dataset(sample_batch_size=batch_size,
                                       num_steps=SEQUENCE_LENGTH)
    trajectories, _ = next(iter(dataset))
    for name, value in trajectories._asdict().items():
      for leaf in tf.nest.flatten(value):  # policy_info () has no leaves.
        print(f'batch {name}: {leaf.dtype.name}{leaf.shape.as_list()}')
  finally:
    server.stop()


if __name__ == '__main__':
  main()
