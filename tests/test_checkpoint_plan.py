"""The checkpoint plan gives exactly the items and chunks a push writes.

The same episodes (an image, a string, vectors, a dict action; lengths from
1 to 400 steps, several confirmations) are pushed into the tables of a real
server, which checkpoints them, and planned (`checkpoints.plan`) into a
checkpoint written by `CheckpointWriter`, which a second real server loads.
Compared, table by table and item by item in insertion order: every chunk
slice (offset, rows, and the length and first step of its chunk), the
chunks' lengths per column (`checkpoints.chunk_lengths`), their bytes
(`checkpoints.chunk_bytes`: the stored bytes of each distinct chunk's
tensors, what the server holds in memory; within 1%), the tables' episode
counts, the items' priorities, and the items drained from both servers.
Two more sets of episodes settle after noise, as a robot arm comes to rest:
on a constant, and on zeros; snappy shrinks their later chunks only.
"""

import functools
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top
from rlds_reverb import convert  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.checkpoints import plan as plan_lib  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import nstep  # pylint: disable=g-import-not-at-top
from rlds_reverb.errors import ColumnMismatchError  # pylint: disable=g-import-not-at-top
from rlds_reverb.write import items as items_lib  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests.checkpoint_items import assert_same  # pylint: disable=g-import-not-at-top
from tests.checkpoint_items import drained_tables  # pylint: disable=g-import-not-at-top
from tests.checkpoint_items import pushed_checkpoint  # pylint: disable=g-import-not-at-top

# Steps per episode: short ones (no 5-step item fits), long ones; 5,030
# steps in all, past a confirmation (every 4,096 rows).
LENGTHS = [1, 7, 300, 2, 400, 3, 250, 11, 399, 150, 6, 350, 4, 280, 5, 390,
           222, 9, 310, 180, 8, 333, 270, 244, 185]
EndOfEpisode = items_lib.EndOfEpisode

CASES = {
    # push's keyword arguments; the tables; the episodes (a fixture's name).
    'two_step': (dict(sequence_length=2), ['replay'], 'source'),
    'stride_two_tables': (
        dict(sequence_length=5, stride_length=3,
             chunk_length={'': 7, 'observation/pixels': 2}),
        ['replay', 'second'], 'source'),
    'tile': (dict(sequence_length=4, end_of_episode=EndOfEpisode.TILE,
                  chunk_length=5), ['replay'], 'source'),
    'pad_stride': (dict(sequence_length=3, stride_length=2,
                        end_of_episode=EndOfEpisode.PAD), ['replay'],
                   'source'),
    # Strides longer than items: flushes may cut chunks across episodes.
    'stride_past_items': (dict(sequence_length=1, stride_length=3,
                               chunk_length=8, priority=0.5),
                          ['replay', 'second'], 'source'),
    # Noise, then still: a block's first rows do not shrink, later chunks do.
    'goes_still': (dict(sequence_length=2), ['replay'], 'still_source'),
    'zeros_after_noise': (dict(sequence_length=2, chunk_length=5),
                          ['replay'], 'zeros_source'),
}
# Settling episodes: float32[OBSERVATION_SIZE] observations, noise for the
# first NOISY_STEPS steps, then at rest.
SETTLING_LENGTHS = [300, 250, 64, 180, 300, 120]
OBSERVATION_SIZE = 128
NOISY_STEPS = 64
# Episodes of 3 steps, items of 1 every 2: items at steps 0 and 2, so the
# last of one episode and the first of the next are a row apart, and a
# flush (every 45 items) can find more items waiting for an open chunk than
# it keeps (1 per 2 open rows): Reverb then cuts that chunk short.
SHORT_EPISODES = 300
CUTTING = dict(sequence_length=1, stride_length=2, chunk_length=8)


@pytest.fixture(scope='module')
def source(tmp_path_factory):
  return export_data.write_source(
      tmp_path_factory.mktemp('source'),
      [export_data.nested_episode(i, n) for i, n in enumerate(LENGTHS)])


def settling_episode(index: int, length: int, rest: str):
  """Noise for NOISY_STEPS steps, then the last noisy observation held
  (rest='still') or zeros (rest='zeros')."""
  rng = np.random.default_rng(index)
  observation = rng.standard_normal((length, OBSERVATION_SIZE)).astype(
      np.float32)
  observation[NOISY_STEPS:] = (
      observation[NOISY_STEPS - 1] if rest == 'still' else 0)
  steps = {'observation': observation,
           'action': rng.uniform(-1, 1, (length, 2)).astype(np.float32),
           'reward': rng.standard_normal(length).astype(np.float32),
           'discount': np.ones(length, np.float32),
           **rlds_data.flags(length, terminal=False)}
  return {'steps': steps, 'episode_id': np.int64(index),
          'episode_return': np.float32(steps['reward'].sum())}


SETTLING_SPEC = {
    'observation': tf.TensorSpec([OBSERVATION_SIZE], tf.float32),
    'action': tf.TensorSpec([2], tf.float32),
    'reward': tf.TensorSpec([], tf.float32),
    'discount': tf.TensorSpec([], tf.float32),
    **{flag: tf.TensorSpec([], tf.bool)
       for flag in ('is_first', 'is_last', 'is_terminal')},
}


def settling_source(directory, rest: str) -> str:
  return export_data.write_source(
      directory, [settling_episode(i, n, rest)
                  for i, n in enumerate(SETTLING_LENGTHS)], SETTLING_SPEC)


@pytest.fixture(scope='module')
def still_source(tmp_path_factory):
  return settling_source(tmp_path_factory.mktemp('still'), 'still')


@pytest.fixture(scope='module')
def zeros_source(tmp_path_factory):
  return settling_source(tmp_path_factory.mktemp('zeros'), 'zeros')


@pytest.fixture(scope='module')
def short_source(tmp_path_factory):
  return export_data.write_source(
      tmp_path_factory.mktemp('short'),
      [export_data.nested_episode(i, 3) for i in range(SHORT_EPISODES)])


def built_checkpoint(blocks, spec, item_plan, tables, root, **options):
  """Plans `blocks` into a new checkpoint under `root`; a server loads it."""
  plan = plan_lib.Plan(spec, item_plan, [t.name for t in tables()],
                       **options)
  settings = [checkpoints.TableSettings.of(t) for t in tables()]
  with checkpoints.CheckpointWriter(root, settings) as writer:
    for block in blocks:
      for planned in plan.add(block):
        plan_lib.write(writer, planned)
    for planned in plan.close():
      plan_lib.write(writer, planned)
    path = writer.close()
  server = reverb.Server(tables(), checkpointer=(
      reverb.checkpointers.DefaultCheckpointer(os.fspath(root))))
  return path, drained_tables(server, tables)


@pytest.fixture(scope='module')
def read_blocks():
  """`source_blocks` kept per source for the module: five cases plan the
  same 5,030 steps of 'source', read and converted once."""
  return functools.lru_cache(maxsize=None)(source_blocks)


def source_blocks(source):
  """The trajectory blocks (numpy) of `source`'s episodes, as push makes
  them: what a plan is given. Read-only: planning only reads them, so that
  the cases that share them cannot see each other's writes."""
  return tuple(tf.nest.map_structure(read_only, block.trajectory)
               for block in convert.trajectory_blocks(
                   rlds_reverb.load(source)).as_numpy_iterator())


def read_only(array: np.ndarray) -> np.ndarray:
  array.setflags(write=False)
  return array


def push_and_build(source, tmp_path, options, names, read=source_blocks):
  """(pushed, built): `options`' items of `source` pushed into tables
  `names` and checkpointed; planned (from `read(source)`'s blocks) into a
  checkpoint. Both loaded."""
  data = rlds_reverb.load(source)
  spec = specs.trajectory_spec(specs.step_format(data).spec)

  def tables():
    return [export_data.signed_table(name, spec, max_times_sampled=1)
            for name in names]

  pushed = pushed_checkpoint(
      tables, tmp_path / 'pushed',
      lambda address: rlds_reverb.push(data, address, names, **options))
  item_plan = items_lib.SequenceItems(
      options['sequence_length'], options.get('stride_length', 1),
      options.get('end_of_episode', EndOfEpisode.DROP))
  built = built_checkpoint(
      read(source), spec, item_plan, tables, tmp_path / 'built',
      priority=options.get('priority', 1.0),
      chunk_length=options.get('chunk_length'))
  return pushed, built


@pytest.mark.parametrize('case', sorted(CASES))
def test_plan_gives_the_items_and_chunks_push_writes(request, tmp_path, case,
                                                    read_blocks):
  options, names, episodes = CASES[case]

  pushed, built = push_and_build(request.getfixturevalue(episodes), tmp_path,
                                 options, names, read_blocks)

  assert_same(pushed, built)


def test_plan_cuts_chunks_where_a_flush_does(short_source, tmp_path):
  pushed, built = push_and_build(short_source, tmp_path, CUTTING, ['replay'])

  assert_same(pushed, built)
  lengths = checkpoints.chunk_lengths(pushed[0])['replay'][0]
  # Without cuts, only the last chunk would be shorter than 8 rows.
  assert sum(n for length, n in lengths.items() if length < 8) > 1


def test_plan_gives_the_nstep_transitions_push_writes(source, tmp_path):
  data = rlds_reverb.load(source)
  spec = nstep.transition_spec(specs.step_format(data).spec)

  def tables():
    return [reverb_tables.fifo_table('replay', None),
            reverb_tables.fifo_table('second', None)]

  pushed = pushed_checkpoint(
      tables, tmp_path / 'pushed',
      lambda address: rlds_reverb.push_nstep_transitions(
          data, address, ['replay', 'second'], n=3, discount=0.9))
  blocks = [block.transitions for block in
            nstep.nstep_transition_blocks(data, 3, 0.9).as_numpy_iterator()]
  built = built_checkpoint(blocks, spec, items_lib.TransitionItems(), tables,
                           tmp_path / 'built')

  assert_same(pushed, built)


def test_rows_a_push_would_reject_are_refused_naming_the_episode(source):
  data = rlds_reverb.load(source)
  spec = specs.trajectory_spec(specs.step_format(data).spec)
  plan = plan_lib.Plan(spec, items_lib.SequenceItems(2), ['replay'])
  block = next(convert.trajectory_blocks(data).as_numpy_iterator())
  trajectory = block.trajectory._replace(
      reward=block.trajectory.reward.astype(np.float64))

  with pytest.raises(ColumnMismatchError,
                     match="Column 'reward' of episode 7: rows of dtype "
                           'float64, the table expects float32'):
    plan.add(trajectory, episode=7)
