"""A damaged or incomplete checkpoint: one line naming the file, and nothing
left where the dataset would have gone (no OUT, no staging directory)."""

import os
import re
import shutil

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='module')
def good_checkpoint(tmp_path_factory):
  """A checkpoint of 8 bundled episodes in table 'replay'."""
  data = rlds_reverb.load(sources.BUNDLED).take(8)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  root = tmp_path_factory.mktemp('good')
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], root / 'ckpt')
  rlds_reverb.push(data, f'localhost:{server.port}', 'replay')
  directory = export_data.checkpoint(server)
  server.stop()
  return directory


def truncate(path: str) -> None:
  with open(path, 'r+b') as f:
    f.truncate(os.path.getsize(path) // 2)


def flip_middle(path: str) -> None:
  """Inverts 64 bytes in the middle of the compressed stream."""
  with open(path, 'r+b') as f:
    f.seek(os.path.getsize(path) // 2)
    data = f.read(64)
    f.seek(os.path.getsize(path) // 2)
    f.write(bytes(b ^ 0xFF for b in data))


def remove(path: str) -> None:
  os.remove(path)


CASES = {
    'chunks cut short': (
        'chunks.tfrecord', truncate,
        '{file} ends before its zlib stream does: the file is cut short (a '
        'checkpoint being written, or a copy that stopped).'),
    'items cut short': (
        'items.tfrecord', truncate,
        '{file} ends before its zlib stream does: the file is cut short (a '
        'checkpoint being written, or a copy that stopped).'),
    'tables cut short': (
        'tables.tfrecord', truncate,
        '{file} ends before its zlib stream does: the file is cut short (a '
        'checkpoint being written, or a copy that stopped).'),
    'chunks damaged': (
        'chunks.tfrecord', flip_middle,
        '{file} is not a readable zlib-compressed TFRecord file ('),
    'no DONE': (
        'DONE', remove,
        '{directory} has no DONE file: the checkpoint is incomplete (being '
        'written, or its server died while writing).'),
}


@pytest.mark.parametrize('case', CASES)
def test_damaged_checkpoint_is_one_line_naming_the_file(
    good_checkpoint, tmp_path, case):
  name, damage, message = CASES[case]
  directory = os.fspath(tmp_path / 'checkpoint')
  shutil.copytree(good_checkpoint, directory)
  damage(os.path.join(directory, name))

  with pytest.raises(rlds_reverb.CheckpointError) as raised:
    rlds_reverb.export('replay', tmp_path / 'out', checkpoint=directory)

  text = str(raised.value)
  expected = message.format(file=os.path.join(directory, name),
                            directory=directory)
  assert text.startswith(expected), text
  assert '\n' not in text
  assert os.listdir(tmp_path) == ['checkpoint']


def test_empty_out_directory_is_left_empty_after_a_failure(good_checkpoint,
                                                           tmp_path):
  directory = os.fspath(tmp_path / 'checkpoint')
  shutil.copytree(good_checkpoint, directory)
  truncate(os.path.join(directory, 'chunks.tfrecord'))
  (tmp_path / 'out').mkdir()

  with pytest.raises(rlds_reverb.CheckpointError):
    rlds_reverb.export('replay', tmp_path / 'out', checkpoint=directory)

  assert sorted(os.listdir(tmp_path)) == ['checkpoint', 'out']
  assert os.listdir(tmp_path / 'out') == []


def test_chunk_that_does_not_fit_the_signature_names_chunk_and_column(
    tmp_path):
  """Reverb's server does not check signatures on insert: a writer that does
  not validate puts float64 observations into a float32 table."""
  import numpy as np  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tf_agents.trajectories import trajectory  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  scalar = lambda dtype: tf.TensorSpec([], dtype)  # pylint: disable=unnecessary-lambda-assignment
  spec = trajectory.Trajectory(
      step_type=scalar(tf.int32), observation=tf.TensorSpec([3], tf.float32),
      action=scalar(tf.int64), policy_info=(), next_step_type=scalar(tf.int32),
      reward=scalar(tf.float32), discount=scalar(tf.float32))
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], tmp_path / 'ckpt')
  client = reverb.Client(f'localhost:{server.port}')
  with client.trajectory_writer(num_keep_alive_refs=2,
                                validate_items=False) as writer:
    for step_type, next_step_type in ((0, 2), (2, 0)):
      writer.append(trajectory.Trajectory(
          step_type=np.int32(step_type), observation=np.zeros(3, np.float64),
          action=np.int64(1), policy_info=(),
          next_step_type=np.int32(next_step_type), reward=np.float32(0),
          discount=np.float32(1)))
    writer.create_item('replay', 1.0, tf.nest.map_structure(
        lambda column: column[-2:], writer.history))
    writer.flush()
  directory = export_data.checkpoint(server)
  server.stop()

  with pytest.raises(rlds_reverb.CheckpointError) as raised:
    rlds_reverb.export('replay', tmp_path / 'out', checkpoint=directory)

  assert re.fullmatch(
      rf'{re.escape(directory)}/chunks.tfrecord: chunk \d+ holds float64'
      r'\[1,3\]; column 1 of the signature is float32\[3\] and its range '
      r'says 1 step\.', str(raised.value)), str(raised.value)
  assert sorted(os.listdir(tmp_path)) == ['ckpt']
