"""`rlds_reverb.push`, the checked push, from Python: what the CLI does.

A real Reverb server with signed FIFO tables; every case reads the table back.
The command line runs the same code (`tests/test_cli.py`, `test_faults.py`).
"""

import json

import numpy as np
import pytest
import reverb

from tf_agents.replay_buffers import reverb_utils

import rlds_reverb
from rlds_reverb import checked_push
from rlds_reverb import specs
from rlds_reverb import validation
from tests import reverb_tables
from tests import rlds_data
from tests.cli_data import CLEAN
from tests.cli_data import corrupt_second_record
from tests.cli_data import write_tfds
from tests import warned as warned_lib


_episode = rlds_data.flat_episode_with
# 0 fine, 1 flagged invalid, 2 malformed, 3 empty, 4 fine, 5 malformed.
MIXED = [_episode(3, 0), _episode(4, 1), _episode(4, 2, is_terminal={1: True}),
         _episode(0, 3), _episode(5, 4), _episode(2, 5, is_first={0: False})]
FLAGGED = [False, True, False, False, False, False]
KEPT = [MIXED[0], MIXED[4]]


def _mixed():
  return rlds_data.as_rlds(MIXED, [{'invalid': np.bool_(f)} for f in FLAGGED])


@pytest.fixture(scope='module')
def served_tables():
  signature = reverb_tables.signature_for(rlds_data.as_rlds(CLEAN))
  return [reverb_tables.fifo_table('a', signature),
          reverb_tables.fifo_table('small', signature, max_size=3)]


def _size(address, table='a'):
  return reverb_tables.table_size(reverb.Client(address), table)


def test_malformed_episode_fails_before_anything_is_written(address):
  with pytest.raises(rlds_reverb.MalformedEpisodeError) as error:
    rlds_reverb.push(_mixed(), address, 'a')
  assert str(error.value) == (
      'Terminal step must be the last step of an episode. (episode 2, step 1)'
      '; 2 malformed episodes in all, nothing was written')
  assert isinstance(error.value, ValueError)
  assert "on_invalid='skip' leaves malformed episodes out." in (
      error.value.__notes__)
  assert _size(address) == 0


def test_skip_leaves_out_malformed_flagged_and_empty_episodes(address):
  result = rlds_reverb.push(_mixed(), address, 'a', on_invalid='skip')
  skipped = rlds_reverb.SkippedEpisode
  assert result.skipped == (
      skipped(1, 'flagged_invalid', 'flagged invalid in its metadata'),
      skipped(2, 'terminal_not_last',
              'Terminal step must be the last step of an episode.', 1),
      skipped(3, 'empty', 'no steps'),
      skipped(5, 'episode_not_first',
              'First step of an episode must have is_first set.', 0))
  assert (result.episodes, result.trajectories, result.items,
          result.skipped_episodes) == (2, 8, 6, 4)
  assert (reverb_tables.drained_pairs(address, 'a') ==
          reverb_tables.observation_pairs(KEPT))


def test_resume_file_continues_a_push_and_rejects_another(address, tmp_path):
  state_path = tmp_path / 'state.json'
  first = rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                           resume=str(state_path))
  assert (first.items, json.loads(state_path.read_text())['complete']) == (
      6, True)
  again = rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                           resume=str(state_path))
  assert (again.items, again.resumed_after_episodes) == (0, 3)
  assert len(reverb_tables.drain(address, 'a')) == 6  # Taken, not reset.

  # As a push killed after confirming one episode leaves it.
  state = json.loads(state_path.read_text())
  state.update(confirmed_episodes=1, confirmed_items=2, complete=False)
  state_path.write_text(json.dumps(state))
  rest = rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                          resume=str(state_path))
  assert (rest.episodes, rest.resumed_after_episodes) == (2, 1)
  assert (reverb_tables.drained_pairs(address, 'a') ==
          reverb_tables.observation_pairs(CLEAN[1:]))
  with pytest.raises(rlds_reverb.ResumeStateError,
                     match='records another push .*sequence_length was 2, '
                           'now 3'):
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                     sequence_length=3, resume=str(state_path))


def _resume_state(path, **fields):
  """The resume file at `path`, its counts replaced (as a push interrupted
  or killed, or an older version, leaves it)."""
  state = json.loads(path.read_text())
  state.update(fields)
  path.write_text(json.dumps(state))


def test_a_resume_file_of_version_1_still_loads(address, tmp_path):
  """Files written before `partial_items` existed: no partial episode."""
  state_path = tmp_path / 'state.json'
  rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                   resume=str(state_path))
  reverb_tables.drain(address, 'a')
  state = json.loads(state_path.read_text())
  del state['partial_items']
  state.update(version=1, confirmed_episodes=1, confirmed_items=2,
               complete=False)
  state_path.write_text(json.dumps(state))
  rest = rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                          resume=str(state_path))
  assert (rest.episodes, rest.resumed_after_episodes) == (2, 1)
  assert (reverb_tables.drained_pairs(address, 'a') ==
          reverb_tables.observation_pairs(CLEAN[1:]))
  saved = json.loads(state_path.read_text())
  assert (saved['version'], saved['partial_items'], saved['complete']) == (
      2, 0, True)


# Episode 0 has 7 steps; `done` of its items are in the table already.
INSIDE_CASES = {
    # name: (sequence_length, stride, end_of_episode, done)
    'pairs': (2, 1, 'drop', 1),
    'stride_padded': (3, 2, 'pad', 1),
    'tiled_into_the_pad_rows': (3, 1, 'tile', 5),
    'every_item_done': (2, 1, 'drop', 6),
}
INSIDE_EPISODES = [rlds_data.flat_episode(7, seed=60),
                   rlds_data.flat_episode(2, seed=61),
                   rlds_data.flat_episode(5, seed=62)]


@pytest.mark.parametrize('length, stride, end, done', INSIDE_CASES.values(),
                         ids=INSIDE_CASES.keys())
def test_a_resumed_push_continues_inside_the_episode(address, tmp_path, length,
                                                     stride, end, done):
  """A resume file with items of the next episode (what Ctrl-C leaves): the
  rerun makes only that episode's other items, from the rows they need
  (pad rows too), then the rest: together, a clean push's items, in order."""
  state_path = tmp_path / 'state.json'
  settings = dict(sequence_length=length, stride_length=stride,
                  end_of_episode=end)
  data = rlds_data.as_rlds(INSIDE_EPISODES)
  rlds_reverb.push(data, address, 'a', resume=str(state_path), **settings)
  clean = reverb_tables.drain_flat(address, 'a')
  _resume_state(state_path, confirmed_episodes=0, confirmed_items=done,
                partial_items=done, complete=False)
  rest = rlds_reverb.push(data, address, 'a', resume=str(state_path),
                          **settings)
  assert rest.items == len(clean) - done
  assert rest.resumed_after_episodes == 0
  reverb_tables.assert_same_flat_items(reverb_tables.drain_flat(address, 'a'),
                                       clean[done:])
  assert json.loads(state_path.read_text())['complete']


def test_capacity_problems_are_warnings(address):
  with pytest.warns(rlds_reverb.CapacityWarning) as warned:
    result = rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'small')
  message = ("table 'small' holds at most 3 items and has 0; this push "
             'writes 6, so Reverb will silently remove 3 of the oldest.')
  assert warned_lib.ours(warned) == [message]
  assert result.warnings == (message,)
  assert (result.items, _size(address, 'small')) == (6, 3)


def test_corrupt_record_is_a_read_error_and_writes_nothing(address, tmp_path):
  directory = write_tfds(tmp_path, 'clean_rlds', CLEAN)
  corrupt_second_record(directory)
  with pytest.raises(rlds_reverb.DataReadError,
                     match=r'^Cannot read the data: .+; nothing was written\.$'):
    rlds_reverb.push(rlds_reverb.load(directory), address, 'a')
  assert _size(address) == 0


def test_on_invalid_must_be_a_mode(address):
  with pytest.raises(ValueError,
                     match=r"on_invalid must be one of \['raise', 'skip', "
                           r"'stop'\], got 'ignore'\."):
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                     on_invalid='ignore')
  assert rlds_reverb.OnInvalid.of('skip') is rlds_reverb.OnInvalid.SKIP


def test_resume_refuses_tables_that_lost_what_was_confirmed(address, tmp_path):
  """A server restarted empty (here: a reset table) no longer holds the
  confirmed items: resuming would leave them out, so the push refuses."""
  state_path = str(tmp_path / 'state.json')
  rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a', resume=state_path)
  reverb.Client(address).reset('a')
  with pytest.raises(rlds_reverb.ResumeStateError) as error:
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a', resume=state_path)
  assert str(error.value) == (
      f'Resume file {state_path} says 6 items of this push were confirmed '
      f"into table 'a' at {address}, but that table has taken 0 inserts "
      f'since it was made: they are gone (a server restarted without a '
      f'checkpoint that holds them, or the table was reset). Nothing was '
      f'written. Delete {state_path} to push everything again, or continue '
      f'after the episodes it names with --resume-anyway (Python: '
      f'resume_anyway=True).')
  assert _size(address) == 0
  # As a push killed after its first episode leaves it: the rest, anyway.
  with open(state_path) as f:
    state = json.load(f)
  state.update(confirmed_episodes=1, confirmed_items=2, complete=False)
  with open(state_path, 'w') as f:
    json.dump(state, f)
  rest = rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                          resume=state_path, resume_anyway=True)
  assert (rest.episodes, rest.resumed_after_episodes) == (2, 1)
  assert (reverb_tables.drained_pairs(address, 'a') ==
          reverb_tables.observation_pairs(CLEAN[1:]))


@pytest.mark.parametrize('where', ['missing_dir', 'a_directory'])
def test_unwritable_resume_file_is_refused_before_writing(address, tmp_path,
                                                          where):
  path = {'missing_dir': tmp_path / 'no' / 'state.json',
          'a_directory': tmp_path}[where]
  reason = {'missing_dir': f'No such file or directory: {path}',
            'a_directory': 'it is a directory'}[where]
  with pytest.raises(rlds_reverb.ResumeStateError) as error:
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a', resume=str(path))
  assert str(error.value) == (
      f'Resume file {path} cannot be written ({reason}). Nothing was written.')
  assert _size(address) == 0


def _drop_in(data, address, table, priority):
  client = reverb.Client(address)
  observer = reverb_utils.ReverbAddTrajectoryObserver(client, table, 2,
                                                      priority=priority)
  return rlds_reverb.push_rlds_to_reverb(data, observer)


def _checked(data, address, table, priority):
  return rlds_reverb.push(data, address, table, priority=priority)


@pytest.mark.parametrize('push', [_checked, _drop_in], ids=['push', 'drop_in'])
@pytest.mark.parametrize('priority', [float('nan'), float('inf'), -1.0])
def test_priority_reverb_cannot_sample_by_is_refused(address, push, priority):
  """Reverb refuses NaN only at its first item, rows already sent; it takes
  a negative or infinite priority, which breaks prioritized sampling."""
  with pytest.raises(ValueError) as error:
    push(rlds_data.as_rlds(CLEAN), address, 'a', priority)
  assert str(error.value) == (
      f'priority must be finite and >= 0, got {priority!r}.')
  assert _size(address) == 0


def test_a_table_named_twice_is_refused(address):
  with pytest.raises(ValueError) as error:
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, ['a', 'a'])
  assert str(error.value) == (
      "Table 'a' is named 2 times: each item would be written that many "
      'times into it; name each table once.')
  assert _size(address) == 0


@pytest.mark.parametrize('sequence_length, message', [
    (10, 'no episode gives an item: nothing will be written; an item has 10 '
         'steps and the longest episode 4 steps.'),
    (4, '2 of 3 episodes give no item; an item has 4 steps and the longest '
        'episode 4 steps.'),
])
def test_episodes_shorter_than_an_item_are_warned_of(address, sequence_length,
                                                     message):
  hint = (" Padding (end_of_episode='pad', --pad-end-of-episodes) gives each "
          'episode shorter than an item one item.')
  with pytest.warns(rlds_reverb.ShortEpisodesWarning) as warned:
    result = rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a',
                              sequence_length=sequence_length)
  assert warned_lib.ours(warned) == [message + hint]
  assert result.warnings == (message + hint,)
  expected = sum(max(0, len(e['is_first']) - sequence_length + 1)
                 for e in CLEAN)
  assert result.items == _size(address) == expected


@pytest.mark.parametrize('timeout', [0, -1.0, float('nan'), float('inf')])
def test_timeout_must_be_finite_and_positive(address, timeout):
  with pytest.raises(ValueError) as error:
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), address, 'a', timeout=timeout)
  assert str(error.value) == (
      f'timeout must be a finite number of seconds > 0, got {timeout!r}.')
  assert _size(address) == 0


def _interrupted(*args, **kwargs):
  raise KeyboardInterrupt


def test_ctrl_c_while_the_write_pipeline_is_built_says_nothing_was_written(
    address, monkeypatch):
  """An interrupt between the check and the first row (building the read
  pipeline takes a while) must say so, as one during the check does."""
  job = checked_push.CheckedPush(rlds_data.as_rlds(CLEAN), address, ['a'],
                                 rlds_reverb.PushOptions())
  job.check()
  monkeypatch.setattr(validation, 'without_episodes', _interrupted)
  with pytest.raises(KeyboardInterrupt) as interrupted:
    job.write()
  assert interrupted.value.__notes__ == ['Nothing was written.']
  assert _size(address) == 0
