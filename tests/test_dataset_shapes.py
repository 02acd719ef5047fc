"""The whole path on datasets shaped like real ones (`tests/dataset_shapes.py`).

For each shape, written as a TFDS directory and opened with `rlds_reverb.load`:
validation finds nothing, statistics count every step, conversion gives the
source values step by step, `push` (2-step items, and 3-step items padded)
writes what TF-Agents' observer writes, the items sample back through
`ReverbReplayBuffer` as pairs of consecutive source steps, and n-step
transitions are all written.

    python -m pytest -q tests/test_dataset_shapes.py            # 2,700-step Atari episode
    python -m pytest -q -m slow tests/test_dataset_shapes.py    # 27,000 ('atari_full')
"""

from typing import Dict, List, Tuple

import numpy as np
import pytest
from tf_agents.replay_buffers import reverb_replay_buffer
from tf_agents.replay_buffers import reverb_utils
import tree

import rlds_reverb
from rlds_reverb import stats
from rlds_reverb import tables
from rlds_reverb import validation
from tests import dataset_shapes
from tests import reverb_tables
from tests.reverb_tables import client_of
from tests.reverb_tables import drain
from tests.reverb_tables import same_items
from tests.tfa_reference import observe_all
from tests.tfa_reference import signature_of

EOE = rlds_reverb.EndOfEpisode


# 'atari_full' is slow tier: the Atari shape with a 27,000-step episode (a
# full game). The default tier's 'atari' takes the same checks through a
# 2,700-step episode among short ones.
FULL_ATARI = 'atari_full'
FULL_ATARI_LENGTHS = ((dataset_shapes.ATARI_FULL_EPISODE,) +
                      dataset_shapes.SHAPES['atari'].lengths[1:])


@pytest.fixture(scope='module', params=sorted(dataset_shapes.SHAPES) + [
    pytest.param(FULL_ATARI, marks=pytest.mark.slow)])
def shape(request, tmp_path_factory):
  """(name, the loaded dataset, the numpy episodes written)."""
  name, lengths = ((request.param, None) if request.param != FULL_ATARI
                   else ('atari', FULL_ATARI_LENGTHS))
  directory, episodes = dataset_shapes.write(
      name, str(tmp_path_factory.mktemp(request.param)), lengths)
  return request.param, rlds_reverb.load(directory), episodes


def source_steps(episodes) -> Dict[str, object]:
  """Every step field of every episode, concatenated in order."""
  return tree.map_structure(lambda *leaves: np.concatenate(leaves),
                            *[episode['steps'] for episode in episodes])


def test_validation_and_statistics_count_every_step(shape):
  _, data, episodes = shape
  lengths = [len(e['steps']['is_first']) for e in episodes]
  report = validation.validate(data)
  assert (report.episodes, report.steps, report.problems) == (
      len(lengths), sum(lengths), [])
  assert stats.episode_stats(data).lengths.tolist() == lengths


def test_conversion_gives_the_source_values(shape):
  _, data, episodes = shape
  steps = source_steps(episodes)
  blocks = list(rlds_reverb.convert.trajectory_blocks(data).as_numpy_iterator())
  got = tree.map_structure(lambda *leaves: np.concatenate(leaves),
                           *[block.trajectory for block in blocks])
  for field in ('observation', 'action', 'reward'):
    tree.map_structure(np.testing.assert_array_equal, getattr(got, field),
                       steps[field])


@pytest.mark.parametrize('length, end_of_episode',
                         [(2, EOE.DROP), (3, EOE.PAD)], ids=['L2', 'L3_PAD'])
def test_push_writes_what_tf_agents_observer_writes(make_server, shape, length,
                                                     end_of_episode):
  _, data, _ = shape
  server = make_server([reverb_tables.fifo_table(name, signature_of(data))
                        for name in ('tfa', 'ours')])
  client = client_of(server)
  observe_all(rlds_reverb.convert_rlds_to_trajectories(data), [
      reverb_utils.ReverbAddTrajectoryObserver(
          client, 'tfa', length,
          pad_end_of_episodes=end_of_episode is EOE.PAD)])
  result = rlds_reverb.push(data, client, 'ours', sequence_length=length,
                            end_of_episode=end_of_episode)
  expected = drain(server, 'tfa')
  assert expected and result.items == len(expected)
  assert same_items(expected, drain(server, 'ours'))


def test_items_sample_back_as_consecutive_source_steps(make_server, shape):
  _, data, episodes = shape
  spec = rlds_reverb.create_trajectory_data_spec(data)
  server = make_server([tables.table(tables.uniform('replay', 10**6),
                                     signature_of(data))])
  rlds_reverb.push(data, reverb_tables.address(server), 'replay')
  replay = reverb_replay_buffer.ReverbReplayBuffer(
      spec, 'replay', sequence_length=2, local_server=server)
  batch, _ = next(iter(replay.as_dataset(sample_batch_size=16, num_steps=2)))
  places = step_places(episodes)
  for item in range(16):
    first, second = (
        places[step_key(tree.map_structure(
            lambda leaf, t=t: leaf.numpy()[item, t], batch.observation))]
        for t in (0, 1))
    assert second == (first[0], first[1] + 1)


def test_nstep_transitions_are_all_written(make_server, shape):
  _, data, episodes = shape
  spec = rlds_reverb.create_nstep_transition_spec(data)
  server = make_server([reverb_tables.fifo_table('nstep', spec)])
  result = rlds_reverb.push_nstep_transitions(
      data, reverb_tables.address(server), 'nstep', n=3, discount=0.99)
  expected = sum(len(e['steps']['is_first']) - 1 for e in episodes)
  assert result.items == expected
  assert len(drain(server, 'nstep')) == expected


def step_places(episodes) -> Dict[Tuple, List[Tuple[int, int]]]:
  """{observation key: (episode, step)}; the data has no repeated ones."""
  places = {}
  for e, episode in enumerate(episodes):
    observations = episode['steps']['observation']
    for s in range(len(episode['steps']['is_first'])):
      key = step_key(tree.map_structure(lambda x, s=s: x[s], observations))
      assert key not in places, 'test data repeats an observation'
      places[key] = (e, s)
  return places


def step_key(observation) -> Tuple:
  return tuple(np.asarray(leaf).tobytes() if np.asarray(leaf).dtype != object
               else bytes(leaf) for leaf in tree.flatten(observation))
