"""push -> checkpoint -> export gives back the source dataset.

Real Reverb servers with a checkpointer write checkpoints into tmp dirs;
`rlds_reverb.export` writes RLDS directories that TFDS reads back, compared
field by field with the source (bundled CartPole; nested observations with
PNG images, vectors and strings, dict actions and policy_info) for several
sequence lengths and chunk lengths (strides: test_export_losses). Tables
whose items are not trajectories are refused in one line.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from rlds_reverb import tables  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='module')
def nested_source(tmp_path_factory):
  """A TFDS dir of 12 nested episodes of 6-11 steps, terminal or not."""
  episodes = [export_data.nested_episode(i, 6 + i % 6) for i in range(12)]
  return export_data.write_source(
      tmp_path_factory.mktemp('nested_source'), episodes)


def bundled_server(tmp_path, tables):
  """(the bundled set, a checkpointed server with `tables` signed for it,
  its address)."""
  data = rlds_reverb.load(sources.BUNDLED)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  server = export_data.checkpointed_server(
      [export_data.signed_table(table, spec) for table in tables],
      tmp_path / 'ckpt')
  return data, server, f'localhost:{server.port}'


def test_bundled_set_comes_back_and_pushes_the_same_items(tmp_path):
  data, server, address = bundled_server(tmp_path, ['replay', 'again'])
  pushed = rlds_reverb.push(data, address, 'replay')

  report = rlds_reverb.export('replay', tmp_path / 'out', server=address)

  source = export_data.steps_of(sources.bundled_dataset_dir())
  rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / 'out'),
                                 source)
  assert (report.episodes, report.steps, report.items) == (
      64, pushed.trajectories, pushed.items)
  assert not report.lost and report.loss_lines() == []
  builder = tfds.builder_from_directory(os.fspath(tmp_path / 'out'))
  assert builder.info.splits['train'].num_examples == 64
  again = rlds_reverb.push(rlds_reverb.load(os.fspath(tmp_path / 'out')),
                           address, 'again')
  assert again.items == pushed.items == 9868
  server.stop()


@pytest.mark.parametrize('sequence_length, stride_length, chunk_length', [
    (2, 1, None),   # TF-Agents' observer's items, push's own chunks.
    (4, 1, 3),      # Longer items, chunks across item boundaries.
])
def test_nested_images_and_strings_come_back(
    nested_source, tmp_path, sequence_length, stride_length, chunk_length):
  data = rlds_reverb.load(nested_source)
  spec = export_data.trajectory_spec_of(data, with_policy_info=True)
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], tmp_path / 'ckpt')
  rlds_reverb.push(data, f'localhost:{server.port}', 'replay',
                   sequence_length=sequence_length,
                   stride_length=stride_length,
                   policy_info_fn=export_data.policy_info,
                   chunk_length=chunk_length)
  directory = export_data.checkpoint(server)
  server.stop()

  report = rlds_reverb.export('replay', tmp_path / 'out',
                              checkpoint=directory)

  rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / 'out'),
                                 export_data.steps_of(nested_source))
  assert (report.episodes, report.lost) == (12, False)
  features = tfds.builder_from_directory(
      os.fspath(tmp_path / 'out')).info.features['steps']
  assert isinstance(features['observation']['pixels'], tfds.features.Image)
  assert features['observation']['pixels'].encoding_format == 'png'


def test_checkpoint_root_means_its_newest_checkpoint(nested_source, tmp_path):
  data = rlds_reverb.load(nested_source).take(3)
  spec = export_data.trajectory_spec_of(data, with_policy_info=False)
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], tmp_path / 'ckpt')
  export_data.checkpoint(server)  # Empty: Reverb deletes it at the next.
  rlds_reverb.push(data, f'localhost:{server.port}', 'replay')
  export_data.checkpoint(server)
  server.stop()

  report = rlds_reverb.export('replay', tmp_path / 'out',
                              checkpoint=tmp_path / 'ckpt')

  assert report.episodes == 3
  assert export_data.lengths(export_data.steps_of(tmp_path / 'out')) == [
      6, 7, 8]


def _transition_table(data):
  spec = rlds_reverb.create_nstep_transition_spec(data)
  return tables.table(
      tables.TableOptions('nstep', sampler='fifo', max_size=1000),
      tf.nest.map_structure(lambda s: tf.TensorSpec(s.shape, s.dtype), spec))


def _refused(tmp_path, tables, table):
  server = export_data.checkpointed_server(tables, tmp_path / 'ckpt')
  directory = export_data.checkpoint(server)
  server.stop()
  with pytest.raises(rlds_reverb.ExportError) as raised:
    rlds_reverb.export(table, tmp_path / 'out', checkpoint=directory)
  assert not os.path.exists(tmp_path / 'out')
  assert os.listdir(tmp_path) == ['ckpt']
  return str(raised.value)


def test_nstep_table_is_refused_saying_why(nested_source, tmp_path):
  data = rlds_reverb.load(nested_source)
  message = _refused(tmp_path, [_transition_table(data)], 'nstep')
  assert message.startswith("Table 'nstep' holds NStepTransition items (")
  assert 'not TF-Agents Trajectories: without step types' in message
  assert '\n' not in message


def test_unsigned_table_is_refused_saying_why(tmp_path):
  message = _refused(tmp_path, [reverb.Table.queue('plain', 10)], 'plain')
  assert message == (
      "Table 'plain' has no signature, so nothing says which column is the "
      'step type, the observation or the reward: only tables signed with '
      'TF-Agents trajectories can be exported (TF-Agents, rlds_reverb.push '
      'and serve sign them).')


def test_dict_signature_is_refused_saying_why(tmp_path):
  table = reverb.Table.queue(
      'dicts', 10, signature={'x': tf.TensorSpec([2, 3], tf.float32)})
  message = _refused(tmp_path, [table], 'dicts')
  assert message.startswith("Table 'dicts' holds dict items, not TF-Agents "
                            'Trajectories')


def test_unknown_table_names_the_tables_there(tmp_path):
  server = export_data.checkpointed_server(
      [reverb.Table.queue('a', 10), reverb.Table.queue('b', 10)],
      tmp_path / 'ckpt')
  directory = export_data.checkpoint(server)
  server.stop()
  with pytest.raises(rlds_reverb.TableNotFoundError) as raised:
    rlds_reverb.export('replay', tmp_path / 'out', checkpoint=directory)
  assert str(raised.value) == (
      f"The checkpoint {directory} has no table 'replay'; its tables are "
      "['a', 'b'].")


def test_out_is_refused_as_the_dataset_writer_refuses_a_directory(tmp_path):
  """One type and one message for a directory that cannot take a new
  dataset, whoever writes it (export, `EpisodeWriter`, `RldsRecorder`)."""
  (tmp_path / 'out').mkdir()
  (tmp_path / 'out' / 'keep.txt').write_text('mine')
  (tmp_path / 'file').write_text('mine')
  dataset = export_data.write_source(tmp_path / 'dataset',
                                     [rlds_dirs.episode(0)])
  for out, holds in [(tmp_path / 'out', 'is not empty: it holds files other '
                                        'than a dataset.'),
                     (dataset, 'is not empty: it holds a dataset.'),
                     (tmp_path / 'file', 'is a file: a dataset is written '
                                         'into a directory.')]:
    with pytest.raises(rlds_reverb.DatasetDirectoryError) as raised:
      rlds_reverb.export('replay', out, checkpoint=tmp_path)
    assert str(raised.value) == f'{out} {holds}'
  assert os.listdir(tmp_path / 'out') == ['keep.txt']


def test_each_table_of_a_checkpoint_gives_its_own_episodes(tmp_path):
  """Two tables of one server, names of one length: each its own items."""
  data, server, address = bundled_server(tmp_path, ['aa', 'bb'])
  rlds_reverb.push(data.take(3), address, 'aa')
  rlds_reverb.push(data.skip(3).take(5), address, 'bb')
  directory = export_data.checkpoint(server)
  server.stop()

  source = export_data.steps_of(sources.bundled_dataset_dir())
  for table, want in (('aa', source[:3]), ('bb', source[3:8])):
    rlds_reverb.export(table, tmp_path / table, checkpoint=directory)
    rlds_dirs.assert_same_episodes(export_data.steps_of(tmp_path / table),
                                   want)
