"""Robotics-shaped data (strings, images, many dtypes) through every item kind.

The reference is TF-Agents' own observers (`ReverbAddTrajectoryObserver`,
`ReverbAddEpisodeObserver`) fed our trajectories one by one: TF-Agents' own
converter cannot take nested observations (see `test_push`). Padding and
tiling append zero steps, and a zero string is b'', as `tf.zeros_like` gives.
Tables are read back and compared as multisets, and through TF-Agents'
`ReverbReplayBuffer` with the strings checked step by step.
"""

import re

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.replay_buffers import reverb_utils
from tf_agents.specs import tensor_spec
import rlds_reverb
from rlds_reverb import tables
from rlds_reverb.write import rows as rows_lib
from tests import reverb_tables
from tests import rlds_data
from tests.reverb_tables import client_of
from tests.reverb_tables import drain
from tests.reverb_tables import same_items
from tests.tfa_reference import observe_all
from tests.tfa_reference import signature_of

EOE = rlds_reverb.EndOfEpisode
LENGTHS = (5, 1, 2, 4, 3, 6)  # The first episode needs no padding.


def instruction_info(step, next_step):
  """policy_info from the extra string and float fields of a step pair."""
  return {'instruction': step['language_instruction'],
          'next_instruction': next_step['language_instruction'],
          'embedding': step['language_embedding']}


@pytest.fixture(scope='module')
def robotics():
  episodes = [rlds_data.robotics_episode(n, seed=i, terminal=i % 2 == 0)
              for i, n in enumerate(LENGTHS)]
  return rlds_data.as_rlds(episodes)


SEQUENCE_CASES = {
    # name: (sequence_length, stride_length, end_of_episode)
    'L3_S1_PAD': (3, 1, EOE.PAD),
    'L4_S1_TILE': (4, 1, EOE.TILE),
    'L3_S2_PAD': (3, 2, EOE.PAD),
    'L2_S1_DROP': (2, 1, EOE.DROP),
}


@pytest.mark.parametrize('length, stride, end_of_episode',
                         SEQUENCE_CASES.values(), ids=SEQUENCE_CASES.keys())
def test_padded_string_items_match_tf_agents(make_server, robotics, length,
                                             stride, end_of_episode):
  signature = signature_of_info(robotics)
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  observe_all(
      rlds_reverb.convert_rlds_to_trajectories(robotics, instruction_info),
      [reverb_utils.ReverbAddTrajectoryObserver(
          client, 'tfa', length, stride_length=stride,
          pad_end_of_episodes=end_of_episode is not EOE.DROP,
          tile_end_of_episodes=end_of_episode is EOE.TILE)])
  result = rlds_reverb.push(
      robotics, client, 'ours', sequence_length=length, stride_length=stride,
      end_of_episode=end_of_episode, policy_info_fn=instruction_info)
  expected = drain(server, 'tfa')
  got = drain(server, 'ours')
  assert expected and result.items == len(expected)
  assert same_items(expected, got)
  if end_of_episode is not EOE.DROP:
    texts = [t for _, item in got
             for t in item.observation['natural_language_instruction']]
    assert b'' in texts  # Pad steps are in the items.


def test_episode_items_with_strings_match_tf_agents(make_server, robotics):
  signature = signature_of_info(robotics)
  server = make_server([reverb_tables.fifo_table(name, signature)
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  observe_all(
      rlds_reverb.convert_rlds_to_trajectories(robotics, instruction_info),
      [reverb_utils.ReverbAddEpisodeObserver(client, 'tfa', 8)])
  observer = reverb_utils.ReverbAddEpisodeObserver(client, 'ours', 8)
  assert rlds_reverb.push_rlds_to_reverb(
      robotics, observer, instruction_info) == sum(LENGTHS)
  observer.close()
  expected = drain(server, 'tfa')
  assert len(expected) == len(LENGTHS)
  assert same_items(expected, drain(server, 'ours'))


def test_strings_sample_back_through_replay_buffer(make_server, robotics):
  """Every sampled item holds consecutive steps of one episode, then b''."""
  spec = rlds_reverb.create_trajectory_data_spec(robotics, instruction_info)
  server = make_server([tables.table(tables.uniform('replay', 1000),
                                     signature_of_info(robotics))])
  rlds_reverb.push(robotics, reverb_tables.address(server), 'replay',
                   sequence_length=3, end_of_episode=EOE.PAD,
                   policy_info_fn=instruction_info)
  replay = reverb_replay_buffer.ReverbReplayBuffer(
      spec, 'replay', sequence_length=3, local_server=server)
  batch, _ = next(iter(replay.as_dataset(sample_batch_size=64, num_steps=3)))
  texts = batch.observation['natural_language_instruction'].numpy()
  instructions = batch.policy_info['instruction'].numpy()
  assert texts.shape == (64, 3)
  for item_texts, item_instructions in zip(texts, instructions):
    real = [t for t in item_texts if t]
    assert list(item_texts[len(real):]) == [b''] * (3 - len(real))
    places = [parse_place(t) for t in real]
    episode, first_step = places[0]
    assert places == [(episode, first_step + k) for k in range(len(real))]
    assert list(item_instructions) == (
        [f'instruction {episode}'.encode()] * len(real) +
        [b''] * (3 - len(real)))


def test_pad_rows_are_checked_before_anything_is_written(
    make_server, robotics, monkeypatch):
  """The bug this guards against: pad rows with integer zeros for strings.

  Re-enacted here, the push must fail before its first row, although the
  first episode needs no padding (its five steps fill an item of three).
  """
  monkeypatch.setattr(rows_lib, 'zero_rows', integer_zero_rows)
  server = make_server([reverb_tables.fifo_table('t')])
  with pytest.raises(rlds_reverb.ColumnMismatchError) as error:
    rlds_reverb.push(robotics, reverb_tables.address(server), 't',
                     sequence_length=3, end_of_episode=EOE.PAD)
  assert str(error.value) == (
      "Column 'observation/natural_language_instruction' of the pad row that "
      'ends padded episodes: rows of dtype int64, the table expects string; '
      "Reverb's writer would reject it.")
  assert reverb_tables.table_size(client_of(server), 't') == 0


def integer_zero_rows(leaf, num_rows):
  """The old padding: `np.zeros` of a string column gives integers."""
  shape = (num_rows,) + leaf.shape[1:]
  return np.zeros(shape, np.int64 if leaf.dtype == object else leaf.dtype)


def test_rows_of_another_shape_go_to_a_new_writer(make_server):
  """An observation whose size the spec leaves unknown changes per episode.

  One Reverb writer rejects a column whose shape changes; the push confirms
  what it wrote and continues with a new writer.
  """
  sizes = (3, 3, 5, 2, 2)
  episodes = [
      rlds_data.flat_episode(4, seed=i, observation_size=size)
      for i, size in enumerate(sizes)]
  data = ragged_observations(episodes)
  assert data.element_spec['steps'].element_spec['observation'].shape == [None]
  server = make_server([reverb_tables.fifo_table('t', signature_of(data))])
  result = rlds_reverb.push(data, reverb_tables.address(server), 't',
                            sequence_length=2)
  assert result.items == 3 * len(sizes)
  got = sorted(item.observation.tobytes() for _, item in
               drain(server, 't'))
  expected = sorted(np.stack(e['observation'][i:i + 2]).tobytes()
                    for e in episodes for i in range(3))
  assert got == expected


def ragged_observations(episodes):
  """Episodes whose observation size differs, under one spec [None]."""
  signature = {'steps': {
      key: tf.TensorSpec((None,) * np.ndim(value), tf.as_dtype(value.dtype))
      for key, value in episodes[0].items()}}
  return tf.data.Dataset.from_generator(
      lambda: iter([{'steps': e} for e in episodes]),
      output_signature=signature).map(rlds_data._steps_dataset)  # pylint: disable=protected-access


def parse_place(text: bytes):
  """(episode, step) of a robotics observation text."""
  match = re.fullmatch(rb'ep(\d+) step(\d+): pick the block', text)
  assert match, text
  return int(match.group(1)), int(match.group(2))


def signature_of_info(data):
  return tensor_spec.add_outer_dim(
      rlds_reverb.create_trajectory_data_spec(data, instruction_info))

