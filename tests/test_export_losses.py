"""What cannot come back is left out whole and counted exactly.

The bundled CartPole set (64 episodes, 9,932 steps, 9,868 two-step items)
is pushed with one step per chunk, so that the rows a checkpoint holds are
exactly those of the items left in the table; then

    max_size=3000 (FIFO eviction)   the oldest items go: episodes lose
                                    their start
    max_times_sampled=1, LIFO       the newest items are sampled away:
                                    episodes lose their end

and the counts of the report are computed here from the episode lengths.
With push's own 32-step chunks, every row survives items sampled away.
"""

import os
import re
import warnings

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top

ITEMS = 9868


@pytest.fixture(scope='module')
def bundled():
  """(steps of each source episode, their lengths, the trajectory spec)."""
  steps = export_data.steps_of(sources.bundled_dataset_dir())
  spec = rlds_reverb.create_trajectory_data_spec(
      rlds_reverb.load(sources.BUNDLED))
  return steps, np.array(export_data.lengths(steps)), spec


def _pushed_and_checkpointed(tmp_path, spec, chunk_length, **table_options):
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec, **table_options)],
      tmp_path / 'ckpt')
  with warnings.catch_warnings():  # That the table will evict: it will.
    warnings.simplefilter('ignore', rlds_reverb.CapacityWarning)
    pushed = rlds_reverb.push(rlds_reverb.load(sources.BUNDLED),
                              f'localhost:{server.port}', 'replay',
                              chunk_length=chunk_length)
  assert pushed.items == ITEMS
  return server


def _split(lengths, kept_items: int, newest: bool):
  """(whole episodes kept, items of the cut episode kept) when `kept_items`
  items survive: the newest ones (eviction) or the oldest (LIFO sampling).
  A T-step episode has T - 1 items."""
  items = lengths - 1
  order = items[::-1] if newest else items
  whole = int(np.searchsorted(np.cumsum(order), kept_items, side='right'))
  return whole, kept_items - int(np.sum(order[:whole]))


@pytest.fixture(scope='module')
def evicted(bundled, tmp_path_factory):
  """A checkpoint of the bundled set pushed into a table of 3,000 items."""
  server = _pushed_and_checkpointed(tmp_path_factory.mktemp('evicted'),
                                    bundled[2], 1, max_size=3000)
  directory = export_data.checkpoint(server)
  server.stop()
  return directory


def test_eviction_loses_starts_counted_exactly(bundled, evicted, tmp_path):
  steps, lengths, _ = bundled
  directory = evicted

  report = rlds_reverb.export('replay', tmp_path / 'out',
                              checkpoint=directory)

  whole, cut_items = _split(lengths, 3000, newest=True)
  assert whole == 16  # As the issue measured.
  rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / 'out'),
                                 steps[-whole:])
  assert (report.items, report.items_removed) == (3000, ITEMS - 3000)
  assert (report.episodes, report.steps) == (whole,
                                             int(lengths[-whole:].sum()))
  assert (report.missing_start.count, report.missing_start.rows) == (
      1, cut_items + 1)
  assert report.items_left_out == cut_items
  assert (report.missing_end.count, report.missing_rows.count) == (0, 0)
  assert report.loss_lines()[0] == (
      f'1 episode missing its start, left out ({cut_items + 1} steps)')
  assert report.loss_lines()[-1] == (
      f'{cut_items} items of 3,000 with a step in no exported episode')


def _sampled_away_and_exported(tmp_path, spec, chunk_length, sampler):
  """The export of a table that removes items sampled once (pushed with
  `chunk_length`), after 6,000 of them were sampled by `sampler`."""
  server = _pushed_and_checkpointed(tmp_path, spec, chunk_length,
                                    sampler=sampler, max_times_sampled=1)
  client = reverb.Client(f'localhost:{server.port}')
  for _ in client.sample('replay', num_samples=6000, emit_timesteps=False):
    pass
  assert export_data.item_count(server, 'replay') == ITEMS - 6000
  directory = export_data.checkpoint(server)
  server.stop()
  return rlds_reverb.export('replay', tmp_path / 'out', checkpoint=directory)


def test_sampled_away_items_lose_ends_counted_exactly(bundled, tmp_path):
  steps, lengths, spec = bundled

  report = _sampled_away_and_exported(tmp_path, spec, 1,
                                      'lifo')

  whole, cut_items = _split(lengths, ITEMS - 6000, newest=False)
  rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / 'out'),
                                 steps[:whole])
  assert (report.items, report.items_removed) == (ITEMS - 6000, 6000)
  assert report.episodes == whole
  assert (report.missing_end.count, report.missing_end.rows) == (
      1, cut_items + 1)
  assert report.items_left_out == cut_items
  assert (report.missing_start.count, report.missing_rows.count,
          report.rows_before) == (0, 0, 0)


def test_push_chunks_keep_the_rows_of_items_sampled_away(bundled, tmp_path):
  steps, _, spec = bundled

  report = _sampled_away_and_exported(tmp_path, spec, 32,
                                      'uniform')

  # Uniform sampling is random: a chunk that only a few items reference (the
  # stream's last, cut short at the end) can lose them all, and its episode
  # its end. What comes back is whole and equal to its source; what does not
  # is counted; with 1-step chunks most would be gone (the test above).
  got = export_data.steps_of(tmp_path / 'out')
  kept = _matching_sources(got, steps)
  rlds_dirs.assert_same_episodes(got, [steps[i] for i in kept])
  assert len(kept) + report.missing_end.count + report.missing_start.count \
      == len(steps)
  assert len(kept) >= len(steps) - 4, (len(kept), report)
  assert report.items_removed == 6000


def _matching_sources(got, steps) -> list:
  """The source episode each exported one is, by its first observation;
  in order."""
  firsts = [episode['steps']['observation'][0].tobytes() for episode in steps]
  kept = [firsts.index(episode['steps']['observation'][0].tobytes())
          for episode in got]
  assert kept == sorted(kept), kept
  return kept


def test_strict_refuses_a_loss_writing_nothing(evicted, tmp_path):
  with pytest.raises(rlds_reverb.ExportError) as raised:
    rlds_reverb.export('replay', tmp_path / 'out', checkpoint=evicted,
                       strict=True)

  assert re.fullmatch(
      r"Table 'replay' did not come back whole: [\d,]+ steps missing \(steps "
      r'0-\d+ of Reverb episode \d+\); strict export writes nothing then\.',
      str(raised.value))
  assert os.listdir(tmp_path) == []


def test_rows_past_the_last_item_are_lost_with_their_episode(tmp_path):
  """Items of 4 steps every 4 steps in chunks of 3: an episode whose last
  rows no item references is left out, never written with a hole."""
  source_episodes = [export_data.nested_episode(i, 6 + i % 6)
                     for i in range(12)]
  source = export_data.write_source(tmp_path / 'source', source_episodes)
  data = rlds_reverb.load(source)
  spec = export_data.trajectory_spec_of(data, with_policy_info=False)
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], tmp_path / 'ckpt')
  rlds_reverb.push(data, f'localhost:{server.port}', 'replay',
                   sequence_length=4, stride_length=4, chunk_length=3)
  directory = export_data.checkpoint(server)
  server.stop()

  report = rlds_reverb.export('replay', tmp_path / 'out',
                              checkpoint=directory)

  got = export_data.steps_of(tmp_path / 'out')
  want = export_data.steps_of(source)
  for episode in want:
    del episode['steps']['policy_info']
  kept = [i for i, episode in enumerate(want)
          if any(_same(episode, g) for g in got)]
  assert len(kept) == len(got) == report.episodes
  rlds_dirs.assert_same_episodes(got, [want[i] for i in kept])
  left_out = sorted(set(range(12)) - set(kept))
  assert report.missing_end.count + report.missing_start.count == len(
      left_out) > 0


def _same(a, b) -> bool:
  try:
    rlds_dirs.assert_same_episodes([a], [b])
  except AssertionError:
    return False
  return True
