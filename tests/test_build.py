"""`rlds_reverb.build_checkpoint`: a checkpoint a real server loads holding
exactly what a push writes, or nothing at all.

Each build is loaded by a real `reverb.Server` (its own tables, made by
`rlds_reverb.tables`, whose settings the checkpoint's replace), and
compared with a push of the same data into a server that then checkpoints:
every item's chunk slices, the chunk lengths per column, the episode counts
and the items drained (`tests.checkpoint_items`). Equal chunks and slices
mean equal server memory per item (Reverb holds chunks and items, nothing
else; `benchmarks/build_throughput.py` measures it).
"""

import dataclasses
import os
import warnings

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import nstep  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top
from tests.checkpoint_items import assert_same  # pylint: disable=g-import-not-at-top
from tests.checkpoint_items import drained_tables  # pylint: disable=g-import-not-at-top
from tests.checkpoint_items import pushed_checkpoint  # pylint: disable=g-import-not-at-top
from tests import warned as warned_lib  # pylint: disable=g-import-not-at-top

# Steps per episode: past a confirmation (4,096 rows), short ones too.
LENGTHS = [1, 7, 300, 2, 400, 3, 250, 11, 399, 150, 6, 350, 4, 280, 5, 390,
           222, 9, 310, 180, 8, 333, 270, 244, 185]


@pytest.fixture(scope='module')
def source(tmp_path_factory):
  return export_data.write_source(
      tmp_path_factory.mktemp('source'),
      [export_data.nested_episode(i, n) for i, n in enumerate(LENGTHS)])


def drainable(name: str) -> tables.TableOptions:
  """A FIFO table whose items go once sampled: drained in insertion order."""
  return tables.fifo(name, max_size=100_000)


def signature_of(data):
  spec = specs.trajectory_spec(specs.step_format(data).spec)
  return specs.table_signature(spec)


def served(options_list, signature, root):
  """A server with `options_list`'s tables that starts from the build in
  `root` as a seed (`fallback_checkpoint_path`), with a root of its own."""
  found = checkpoints.find(os.fspath(root))
  own = os.path.join(os.fspath(root) + '-own')
  return reverb.Server(
      [tables.table(options, signature) for options in options_list],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          own, fallback_checkpoint_path=found.path(found.newest)))


def category_of(text: str) -> str:
  return 'short' if 'give no item' in text else text


def push_and_build(source, tmp_path, options_list, **settings):
  data = rlds_reverb.load(source)
  signature = signature_of(data)
  names = [options.name for options in options_list]

  def made_tables():
    return [tables.table(options, signature) for options in options_list]

  pushed = pushed_checkpoint(
      made_tables, tmp_path / 'pushed',
      lambda address: rlds_reverb.push(data, address, names, **settings))
  with warnings.catch_warnings(record=True) as warned:
    warnings.simplefilter('always')
    result = rlds_reverb.build_checkpoint(data, tmp_path / 'built',
                                          options_list, **settings)
  assert warned_lib.ours(warned) == list(result.warnings)
  server = served(options_list, signature, tmp_path / 'built')
  return pushed, (result.path, drained_tables(server, made_tables)), result


@pytest.mark.parametrize('settings, names', [
    (dict(), ['replay']),
    (dict(sequence_length=5, stride_length=3, priority=0.5,
          chunk_length={'': 7, 'observation/pixels': 2},
          end_of_episode='pad'), ['replay', 'second']),
])
def test_build_holds_what_push_writes(source, tmp_path, settings, names):
  pushed, built, result = push_and_build(
      source, tmp_path, [drainable(name) for name in names], **settings)

  assert_same(pushed, built)
  found = checkpoints.find(os.fspath(tmp_path / 'built'))
  assert result.path == found.path(found.newest)
  assert result.episodes == len(LENGTHS)
  assert result.trajectories == sum(LENGTHS)
  assert result.items == len(built[1][names[0]][1])
  assert result.bytes == sum(
      os.path.getsize(os.path.join(result.path, name))
      for name in os.listdir(result.path))


@pytest.mark.slow  # Also shown for the plan: tests/test_checkpoint_plan.py.
def test_nstep_build_holds_what_push_writes(source, tmp_path):
  data = rlds_reverb.load(source)
  spec = nstep.transition_spec(specs.step_format(data).spec)

  def made_tables():
    return [tables.table(drainable('replay'), spec)]

  pushed = pushed_checkpoint(
      made_tables, tmp_path / 'pushed',
      lambda address: rlds_reverb.push_nstep_transitions(
          data, address, 'replay', n=3, discount=0.9))
  result = rlds_reverb.build_nstep_checkpoint(
      data, tmp_path / 'built', drainable('replay'), n=3, discount=0.9)
  server = served([drainable('replay')], spec, tmp_path / 'built')

  assert_same(pushed, (result.path, drained_tables(server, made_tables)))
  assert result.items == sum(n - 1 for n in LENGTHS)


def test_an_nstep_table_too_small_keeps_the_newest_as_a_fifo_push_leaves_it(
    source, tmp_path):
  """As the sequence build's case below; the n-step build read the data
  once and failed with the writer's own instruction before (issue 39)."""
  data = rlds_reverb.load(source).take(6)
  small = dataclasses.replace(drainable('replay'), max_size=300)
  spec = nstep.transition_spec(specs.step_format(data).spec)
  pushed_server = reverb.Server([tables.table(small, spec)])
  rlds_reverb.push_nstep_transitions(
      data, f'localhost:{pushed_server.port}', 'replay', n=3, discount=0.9)
  pushed_items = reverb_tables.drain_flat(pushed_server, 'replay')
  pushed_server.stop()

  with pytest.warns(rlds_reverb.CapacityWarning) as warned:
    result = rlds_reverb.build_nstep_checkpoint(
        data, tmp_path / 'ckpt', small, n=3, discount=0.9)
  server = served([small], spec, tmp_path / 'ckpt')

  made = sum(max(n - 1, 0) for n in LENGTHS[:6])
  assert warned_lib.ours(warned) == [
      f"table 'replay' holds at most 300 items; this build makes {made:,}, "
      f'so the checkpoint keeps the newest 300 and counts {made - 300:,} of '
      f'the oldest as removed, as a push into a fifo remover table would '
      f'leave it.']
  assert result.evicted == (('replay', made - 300),)
  assert result.held('replay') == 300
  reverb_tables.assert_same_flat_items(
      reverb_tables.drain_flat(server, 'replay'), pushed_items)
  server.stop()


def test_a_uniform_table_samples_at_once_and_a_ratio_table_too(source,
                                                              tmp_path):
  data = rlds_reverb.load(source).take(4)
  options = [tables.uniform('replay', min_size=100),
             tables.sample_to_insert_ratio('ratio', 2.0, min_size=100)]
  result = rlds_reverb.build_checkpoint(data, tmp_path / 'ckpt', options)
  server = served(options, signature_of(data), tmp_path / 'ckpt')
  client = reverb.Client(f'localhost:{server.port}')

  for name in ('replay', 'ratio'):
    sampled = list(client.sample(name, num_samples=3))
    assert len(sampled) == 3
  info = client.server_info(timeout=10)
  assert info['replay'].current_size == result.items == 306
  assert info['ratio'].rate_limiter_info.insert_stats.completed == 306
  server.stop()


def test_a_table_too_small_keeps_the_newest_as_a_fifo_push_leaves_it(
    source, tmp_path):
  data = rlds_reverb.load(source)
  small = dataclasses.replace(drainable('replay'), max_size=1000)
  signature = signature_of(data)
  pushed_server = reverb.Server([tables.table(small, signature)])
  rlds_reverb.push(data, f'localhost:{pushed_server.port}', 'replay')
  pushed_items = reverb_tables.drain_flat(pushed_server, 'replay')
  pushed_server.stop()

  with pytest.warns(rlds_reverb.CapacityWarning) as warned:
    result = rlds_reverb.build_checkpoint(data, tmp_path / 'ckpt', small)
  server = served([small], signature, tmp_path / 'ckpt')
  info = reverb.Client(f'localhost:{server.port}').server_info(timeout=10)

  made = sum(max(n - 1, 0) for n in LENGTHS)
  assert str(warned[0].message) == (
      f"table 'replay' holds at most 1,000 items; this build makes "
      f'{made:,}, so the checkpoint keeps the newest 1,000 and counts '
      f'{made - 1000:,} of the oldest as removed, as a push into a fifo '
      f'remover table would leave it.')
  assert result.evicted == (('replay', made - 1000),)
  assert result.held('replay') == info['replay'].current_size == 1000
  assert info['replay'].rate_limiter_info.insert_stats.completed == made
  reverb_tables.assert_same_flat_items(
      reverb_tables.drain_flat(server, 'replay'), pushed_items)
  server.stop()


def test_a_directory_that_is_not_new_or_empty_is_refused_before_reading(
    source, tmp_path):
  """A build goes into a new or empty directory: a second build there would
  hide the first (a server loads the newest), and a build's directory must
  hold nothing a server's checkpointer would delete (issue 39)."""
  data = rlds_reverb.load(source).take(3)
  built = tmp_path / 'built'
  first = rlds_reverb.build_checkpoint(data, built, 'replay')
  name = os.path.basename(first.path)
  unfinished = tmp_path / 'unfinished' / '2026-01-01T00:00:00+00:00'
  unfinished.mkdir(parents=True)
  (unfinished / checkpoints.directories.BUILD_MARK).write_text('{}')
  (unfinished / checkpoints.CHUNKS).write_bytes(b'x' * 2048)
  project = tmp_path / 'project'
  (project / 'src').mkdir(parents=True)
  (project / 'README.md').write_text('mine')
  (project / 'zz_results.csv').write_text('mine')

  def never_read(episodes, steps):
    raise AssertionError('the directory is checked before the data is read')

  cases = [
      (built, f'{built} already holds a checkpoint ({name}), which a '
              f'server loads instead of any other there'),
      (built / name, f'{built / name} is itself a checkpoint'),
      (unfinished.parent,
       f'{unfinished.parent} holds an unfinished build ({unfinished.name}, '
       f'2.0 KB without a DONE file, left by a build that was killed; '
       f'remove it to use {unfinished.parent})'),
      (project, f'{project} is not empty: it holds README.md, src, '
                f'zz_results.csv'),
  ]
  for directory, problem in cases:
    before = sorted(os.walk(directory))
    with pytest.raises(rlds_reverb.CheckpointWriteError) as raised:
      rlds_reverb.build_checkpoint(data, directory, 'replay',
                                   on_read=never_read)
    assert str(raised.value) == (
        f'Cannot write a checkpoint: {problem}; a build writes into a new or '
        f'empty directory.')
    assert sorted(os.walk(directory)) == before


def test_malformed_data_writes_nothing_and_skip_leaves_it_out(tmp_path):
  episode = rlds_data.flat_episode_with
  # 0 fine, 1 flagged invalid, 2 malformed, 3 empty, 4 fine.
  mixed = [episode(3, 0), episode(4, 1),
           episode(4, 2, is_terminal={1: True}), episode(0, 3),
           episode(5, 4)]
  data = rlds_data.as_rlds(
      mixed, [{'invalid': np.bool_(i == 1)} for i in range(len(mixed))])

  with pytest.raises(rlds_reverb.MalformedEpisodeError,
                     match=r'^Terminal step must be the last step of an episode. \(episode 2, step 1\)'):
    rlds_reverb.build_checkpoint(data, tmp_path / 'ckpt', 'replay')
  assert not (tmp_path / 'ckpt').exists()  # Checked, never made.
  result = rlds_reverb.build_checkpoint(data, tmp_path / 'ckpt', 'replay',
                                        on_invalid='skip')

  assert [(e.position, e.kind) for e in result.skipped] == [
      (1, 'flagged_invalid'), (2, 'terminal_not_last'), (3, 'empty')]
  assert (result.episodes, result.items) == (2, 2 + 4)
  with pytest.raises(ValueError, match='a build is all or nothing'):
    rlds_reverb.build_checkpoint(data, tmp_path / 'other', 'replay',
                                 on_invalid='stop')


def test_an_interrupted_build_leaves_nothing_a_server_loads(source, tmp_path):
  data = rlds_reverb.load(source)

  def interrupt(progress):
    raise KeyboardInterrupt

  with pytest.raises(KeyboardInterrupt) as raised:
    rlds_reverb.build_checkpoint(data, tmp_path / 'ckpt', 'replay',
                                 on_built=interrupt)

  assert 'Nothing was written' in raised.value.__notes__[0]
  assert not (tmp_path / 'ckpt').exists()  # Made by the build, removed.


@pytest.mark.slow
def test_encoded_build_keeps_the_sources_png_bytes(source, tmp_path):
  data = rlds_reverb.load(source)
  options = rlds_reverb.PushOptions(image_storage='encoded')
  pushed_root = tmp_path / 'pushed'
  from rlds_reverb.convert import encoded  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  prepared, encoding = encoded.prepare(data, options.image_storage)
  spec = specs.trajectory_spec(
      encoding.named(specs.step_format(prepared)).spec)
  signature = specs.table_signature(spec)

  def made_tables():
    return [tables.table(drainable('replay'), signature)]

  pushed = pushed_checkpoint(
      made_tables, pushed_root,
      lambda address: rlds_reverb.push(data, address, 'replay',
                                       options=options))
  result = rlds_reverb.build_checkpoint(data, tmp_path / 'built',
                                        drainable('replay'), options=options)
  server = reverb.Server(made_tables(), checkpointer=(
      reverb.checkpointers.DefaultCheckpointer(os.fspath(tmp_path / 'built'))))
  built_items = drained_tables(server, made_tables)

  assert_same(pushed, (result.path, built_items))


@pytest.mark.slow
def test_export_of_a_built_checkpoint_equals_the_source(source, tmp_path):
  data = rlds_reverb.load(source)
  result = rlds_reverb.build_checkpoint(
      data, tmp_path / 'ckpt', 'replay',
      policy_info_fn=export_data.policy_info)

  rlds_reverb.export('replay', tmp_path / 'out', checkpoint=result.path)

  rlds_dirs.assert_same_episodes(
      export_data.steps_of(tmp_path / 'out'),
      [e for e in export_data.steps_of(source) if len(e['steps']['is_first'])
       > 1])


def test_bad_tables_are_refused_before_reading(source, tmp_path):
  data = rlds_reverb.load(source)
  with pytest.raises(rlds_reverb.TableOptionsError):
    rlds_reverb.build_checkpoint(
        data, tmp_path / 'ckpt', tables.TableOptions('replay', max_size=0))
  with pytest.raises(ValueError, match='each name once'):
    rlds_reverb.build_checkpoint(data, tmp_path / 'ckpt',
                                 ['replay', 'replay'])
  assert not os.path.exists(tmp_path / 'ckpt')
