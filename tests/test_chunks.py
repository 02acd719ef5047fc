"""Chunk lengths: what the server stores, the option, and the flush bound.

What the server stores is read from a checkpoint of it (`checkpoints.
chunk_lengths`): per item column, the length of every chunk. Rows stream
across episodes, so every chunk is full except the last of each column, cut
when the push confirms at its end.
"""

from collections import Counter
import json

import numpy as np
import pytest
import reverb
from reverb import pybind

import rlds_reverb
from rlds_reverb import checkpoints
from rlds_reverb.write import chunks
from tests import reverb_tables
from tests import rlds_data
from tests.reverb_tables import client_of
from tests.reverb_tables import drain
from tests.reverb_tables import same_items
from tests.tfa_reference import episodes_of
from tests.tfa_reference import observe_all
from tests.tfa_reference import signature_of
from tests.tfa_reference import trajectory_observer

EOE = rlds_reverb.EndOfEpisode
# Trajectory columns in `tree.flatten` order, for frames_data's episodes.
FRAME_COLUMNS = ('step_type', 'observation/frame', 'observation/state',
                 'action', 'next_step_type', 'reward', 'discount')


def frames_episode(num_steps: int, seed: int):
  """32x32x3 frames (3,072 B per step: chunks of 2) next to small columns."""
  episode = rlds_data.flat_episode(num_steps, seed)
  rng = np.random.default_rng(seed)
  episode['observation'] = {
      'frame': rng.integers(0, 255, (num_steps, 32, 32, 3), dtype=np.uint8),
      'state': episode['observation']}
  return episode


def frames_data(lengths=(40, 25, 60, 7)):
  return rlds_data.as_rlds(
      [frames_episode(n, seed=i) for i, n in enumerate(lengths)])


def stored_chunk_lengths(server, checkpoint_root, table):
  """Per column, the Counter of chunk lengths in a fresh checkpoint."""
  client_of(server).checkpoint()
  found = checkpoints.find(checkpoint_root)
  return checkpoints.chunk_lengths(found.path(found.newest))[table]


def full_chunks(rows: int, length: int) -> Counter:
  """Chunks of `length` over `rows` rows, the last one cut short."""
  counter = Counter({length: rows // length})
  if rows % length:
    counter[rows % length] += 1
  return +counter


@pytest.fixture
def checkpointed_server(tmp_path):
  """A server with a checkpointer and one signed FIFO table per name."""
  servers = []

  def start(data, names=('t',)):
    server = reverb.Server(
        [reverb_tables.fifo_table(name, signature_of(data)) for name in names],
        checkpointer=reverb.checkpointers.DefaultCheckpointer(
            str(tmp_path / 'checkpoints')))
    servers.append(server)
    return server, str(tmp_path / 'checkpoints')

  yield start
  for server in servers:
    server.stop()


CHUNK_CASES = {
    # name: (chunk_length option, tables, stride, expected length by column)
    'rule': (None, ('t',), 1,
             {'observation/frame': 2, 'observation/state': 32}),
    'one_int': (8, ('t',), 1, {'observation/frame': 8, 'reward': 8}),
    'numpy_int': (np.int64(8), ('t',), 1,
                  {'observation/frame': 8, 'reward': 8}),
    'by_path_and_prefix': ({'observation': 4, 'observation/frame': 2}, ('t',),
                           1, {'observation/frame': 2, 'observation/state': 4,
                               'reward': 32}),
    'two_tables_capped': (None, ('t', 'u'), 1,
                          {'observation/frame': 2, 'reward': 17}),
    'stride_2': (None, ('t',), 2, {'observation/frame': 2, 'reward': 32}),
}


@pytest.mark.parametrize('option, tables, stride, expected',
                         CHUNK_CASES.values(), ids=CHUNK_CASES.keys())
def test_server_stores_chunks_of_the_chosen_lengths(checkpointed_server,
                                                    option, tables, stride,
                                                    expected):
  """Even lengths: with stride 2, every row is in an item, so it is stored.

  (A chunk no item references is never sent: with an odd length, stride 2
  and chunks of 1, the episode's last row would be missing.)
  """
  lengths = (40, 26, 60, 8)
  data = frames_data(lengths)
  server, root = checkpointed_server(data, tables)
  result = rlds_reverb.push(data, reverb_tables.address(server), list(tables),
                            stride_length=stride, chunk_length=option)
  assert result.items > 0
  stored = stored_chunk_lengths(server, root, tables[0])
  assert len(stored) == len(FRAME_COLUMNS)
  for path, length in expected.items():
    column = FRAME_COLUMNS.index(path)
    assert stored[column] == full_chunks(sum(lengths), length), path


def test_transitions_store_chunks_of_the_rule(tmp_path):
  lengths = (30, 3, 50)
  data = rlds_data.as_rlds(episodes_of(lengths, seed=4))
  spec = rlds_reverb.create_nstep_transition_spec(data)
  server = reverb.Server(
      [reverb_tables.fifo_table('n', spec)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          str(tmp_path / 'nstep')))
  try:
    result = rlds_reverb.push_nstep_transitions(
        data, reverb_tables.address(server), 'n', n=3, discount=0.9)
    assert result.items == sum(lengths) - len(lengths)
    stored = stored_chunk_lengths(server, str(tmp_path / 'nstep'), 'n')
    for counter in stored:  # One row per transition: T - 1 per episode.
      assert counter == full_chunks(sum(lengths) - len(lengths), 32)
  finally:
    server.stop()


SAME_ITEMS_CASES = {
    # name: (sequence_length, stride, end_of_episode, chunk_length)
    'L5_longer_than_chunks_of_2': (5, 1, EOE.DROP, 2),
    'L4_S3_TILE_chunks_of_3': (4, 3, EOE.TILE, 3),
    'L3_S2_PAD_frames_by_path': (3, 2, EOE.PAD, {'observation/frame': 1}),
    'L2_default': (2, 1, EOE.DROP, None),
}


@pytest.mark.parametrize('length, stride, end_of_episode, option',
                         SAME_ITEMS_CASES.values(), ids=SAME_ITEMS_CASES.keys())
def test_items_are_tf_agents_whatever_the_chunks(make_server, length, stride,
                                                 end_of_episode, option):
  data = frames_data((9, 1, 2, 14, 4))
  server = make_server([reverb_tables.fifo_table(name, signature_of(data))
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  observe_all(rlds_reverb.convert_rlds_to_trajectories(data), [
      trajectory_observer(client, 'tfa', length, stride, 1.0, end_of_episode)])
  result = rlds_reverb.push(data, client, 'ours', sequence_length=length,
                            stride_length=stride, end_of_episode=end_of_episode,
                            chunk_length=option)
  expected = drain(server, 'tfa')
  assert expected and result.items == len(expected)
  assert same_items(expected, drain(server, 'ours'))


# --- The flush bound: Reverb never warns of 50 pending items. ---------------

WARNING = 'pending items is alarmingly high'


def test_raw_writer_with_long_chunks_gets_the_warning(make_server, capfd):
  """The check below can fail: 69 items held by one open chunk of 64."""
  server = make_server([reverb.Table.queue('q', 1000)])
  writer = client_of(server)._client.NewTrajectoryWriter(  # pylint: disable=protected-access
      pybind.ConstantChunkerOptions(64, 64), False)
  previous = None
  for step in range(70):
    refs = writer.Append([np.float32(step)])
    if previous:
      writer.CreateItem('q', 1.0, list(zip(previous, refs)), [False])
    previous = refs
  writer.EndEpisode(True, 10_000)
  writer.Close()
  assert WARNING in capfd.readouterr().err


BOUND_CASES = {
    # name: (tables, sequence_length, stride)
    'one_table': (('a',), 2, 1),
    'three_tables': (('a', 'b', 'c'), 2, 1),
    'stride_3_long_items': (('a', 'b'), 6, 3),
    'forty_tables': (tuple(f't{i}' for i in range(40)), 2, 1),
}


@pytest.mark.parametrize('tables, length, stride', BOUND_CASES.values(),
                         ids=BOUND_CASES.keys())
def test_push_never_gets_the_warning(make_server, capfd, tables, length,
                                     stride):
  data = rlds_data.as_rlds(episodes_of([300, 2, 150, 400], seed=9))
  server = make_server([reverb.Table.queue(name, 10_000) for name in tables])
  capfd.readouterr()
  result = rlds_reverb.push(data, reverb_tables.address(server), list(tables),
                            sequence_length=length, stride_length=stride)
  assert result.items > 40 * len(tables)
  assert WARNING not in capfd.readouterr().err
  assert reverb_tables.table_size(client_of(server), tables[-1]) == (
      result.items // len(tables))


# --- The option: checked before anything is written. ------------------------

BAD_OPTIONS = {
    'zero': (0, 'chunk_length must be a positive int, got 0.'),
    'float': (2.5, 'chunk_length must be a positive int, got 2.5.'),
    'bool': (True, 'chunk_length must be a positive int, got True.'),
    'too_long': (
        33, 'chunk_length is 33, more than 32: with these tables and stride, '
        'chunks longer than 32 steps hold more items unconfirmed than Reverb '
        'takes without warning.'),
    'bad_value_by_path': ({'reward': -1},
                          "chunk_length['reward'] must be a positive int, "
                          'got -1.'),
    'unknown_path': (
        {'observation/pixels': 2},
        "chunk_length names 'observation/pixels', which is no field of the "
        'items; the fields are step_type, observation, action, '
        'next_step_type, reward, discount.'),
    'not_a_prefix': (
        {'obs': 2},
        "chunk_length names 'obs', which is no field of the items; the "
        'fields are step_type, observation, action, next_step_type, reward, '
        'discount.'),
}


@pytest.mark.parametrize('option, message', BAD_OPTIONS.values(),
                         ids=BAD_OPTIONS.keys())
def test_bad_option_is_one_line_and_writes_nothing(make_server, option,
                                                   message):
  data = rlds_data.as_rlds(episodes_of([5, 6], seed=2))
  server = make_server([reverb_tables.fifo_table('t', signature_of(data))])
  with pytest.raises(ValueError) as error:
    rlds_reverb.push(data, reverb_tables.address(server), 't',
                     chunk_length=option)
  assert str(error.value) == message
  assert reverb_tables.table_size(client_of(server), 't') == 0


RULE_CASES = {
    # name: (bytes per step, longest, chunk length)
    'empty_or_unknown': (0, 32, 32),
    'scalar': (4, 32, 32),
    'halfcheetah_observation': (68, 32, 32),
    'exactly_256_bytes': (256, 32, 32),
    'just_over_256_bytes': (257, 32, 31),
    'embedding_2kb': (2048, 32, 4),
    'frames_at_least_2': (20_736, 32, 2),
    'capped_by_tables': (4, 17, 17),
    'cap_below_the_minimum': (20_736, 1, 1),
}


@pytest.mark.parametrize('size, longest, expected', RULE_CASES.values(),
                         ids=RULE_CASES.keys())
def test_rule(size, longest, expected):
  assert chunks.rule(size, longest) == expected


@pytest.mark.parametrize('tables, stride, expected', [
    (1, 1, 32), (2, 1, 17), (3, 1, 11), (2, 2, 32), (10, 1, 3), (20, 1, 1),
    (48, 1, 1)])
def test_max_chunk_length_keeps_the_flush_bound(tables, stride, expected):
  longest = chunks.max_chunk_length(tables, stride)
  assert longest == expected
  held = chunks.held_items(longest, tables, stride)
  assert held + chunks.flush_every(longest, tables, stride) + tables - 1 <= 49


# --- On the command line. ----------------------------------------------------

@pytest.fixture(scope='module')
def frames_dir(tmp_path_factory):
  """A TFDS directory of `frames_data`'s shape: 3 episodes, 30 steps."""
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  features = tfds.features.FeaturesDict({'steps': tfds.features.Dataset({
      'observation': {
          'frame': tfds.features.Tensor(shape=(32, 32, 3), dtype=np.uint8),
          'state': tfds.features.Tensor(shape=(3,), dtype=np.float32)},
      'action': np.int64, 'reward': np.float32, 'discount': np.float32,
      'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_})})
  episodes = [(i, {'steps': frames_episode(n, seed=i)})
              for i, n in enumerate((12, 8, 10))]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      'frames', '1.0.0', features, {'train': episodes},
      data_dir=str(tmp_path_factory.mktemp('frames')), disable_shuffling=True)
  return str(builder.data_dir)


def test_cli_chunk_lengths_reach_the_server(frames_dir, tmp_path):
  from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  data = frames_data((12, 8, 10))
  server = reverb.Server(
      [reverb_tables.fifo_table('t', signature_of(data))],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          str(tmp_path / 'checkpoints')))
  try:
    result = run_cli_here('push', '--dataset', frames_dir, '--server',
                          reverb_tables.address(server), '--table', 't',
                          '--chunk-length', '8', '--chunk-length',
                          'observation/frame=3', '--json')
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout)['items'] == 27
    stored = stored_chunk_lengths(server, str(tmp_path / 'checkpoints'), 't')
  finally:
    server.stop()
  for path, length in (('observation/frame', 3), ('observation/state', 8),
                       ('reward', 8)):
    assert stored[FRAME_COLUMNS.index(path)] == full_chunks(30, length), path


@pytest.mark.parametrize('value, message', [
    # argparse's own line names the command: 'rlds-reverb push: error: ...'.
    ('0', "argument --chunk-length: must be N or FIELD=N with N >= 1, e.g. "
          "16 or observation/pixels=2, got '0'"),
    ('observation/frame=x', "argument --chunk-length: must be N or FIELD=N "
     "with N >= 1, e.g. 16 or observation/pixels=2, got 'observation/frame=x'"),
    ('pixels=2', "--chunk-length: chunk_length names 'pixels', which is no "
     'field of the items; the fields are step_type, observation/frame, '
     'observation/state, action, next_step_type, reward, discount.'),
])
def test_cli_bad_chunk_length_is_one_line_exit_2(frames_dir, value, message):
  from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  result = run_cli_here('push', '--dataset', frames_dir, '--server',
                        'localhost:1', '--table', 't', '--chunk-length', value)
  assert result.returncode == 2
  errors = [line for line in result.stderr.splitlines() if 'error:' in line]
  assert len(errors) == 1
  assert errors[0].split(' error: ', 1)[1] == message
