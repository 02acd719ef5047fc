"""`rlds-reverb export`, run as users run it (a subprocess per command).

Each run starts TensorFlow (~5 s): one checkpoint with losses serves the
JSON and --strict runs; --server runs against a real server in this
process, and against a real `rlds-reverb serve` without --checkpoint-dir
(whose checkpoint export removes). The errors of a server without a
checkpointer (a C++ server: a `reverb.Server` always has one) or unreachable
are checked through the API.
"""

import json
import os
import re
import tempfile

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import portpicker  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from reverb import pybind  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import checkpoints  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests.cli_data import CLEAN  # pylint: disable=g-import-not-at-top
from tests.cli_data import write_tfds  # pylint: disable=g-import-not-at-top
from tests.cli_runs import error_lines  # pylint: disable=g-import-not-at-top
from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top
from tests.serve_command import Serve  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='module')
def evicted(tmp_path_factory):
  """A checkpoint of 10 bundled episodes in a table of 500 items, one step
  per chunk: the oldest episodes are evicted, one keeps only its end."""
  data = rlds_reverb.load(sources.BUNDLED).take(10)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  root = tmp_path_factory.mktemp('evicted')
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec, max_size=500)], root / 'ckpt')
  with pytest.warns(rlds_reverb.CapacityWarning):
    rlds_reverb.push(data, f'localhost:{server.port}', 'replay',
                     chunk_length=1)
  export_data.checkpoint(server)
  server.stop()
  return root / 'ckpt'


def test_json_counts_what_came_back_and_what_did_not(evicted, tmp_path):
  result = run_cli_here('export', '--checkpoint', evicted, '--table', 'replay',
                        '--out', tmp_path / 'out', '--json')

  assert result.returncode == 0, result.stderr
  report = json.loads(result.stdout)
  assert report['lost'] is True
  assert report['items'] == 500 and report['items_removed'] > 0
  assert report['missing_start']['count'] == 1
  assert report['items_left_out'] == report['missing_start']['rows'] - 1
  exported = export_data.steps_of(tmp_path / 'out')
  assert len(exported) == report['episodes'] > 0
  assert sum(export_data.lengths(exported)) == report['steps']


def test_strict_loss_is_one_line_exit_1_nothing_written(evicted, tmp_path):
  result = run_cli_here('export', '--checkpoint', evicted, '--table', 'replay',
                        '--out', tmp_path / 'out', '--strict')

  assert result.returncode == 1
  [line] = error_lines(result.stderr)
  assert line.startswith(
      "rlds-reverb: error: Table 'replay' did not come back whole: ")
  assert line.endswith('strict export writes nothing then.')
  assert os.listdir(tmp_path) == []


def test_out_that_is_not_empty_is_one_line_exit_2(evicted, tmp_path):
  (tmp_path / 'out').mkdir()
  (tmp_path / 'out' / 'keep.txt').write_text('mine')

  result = run_cli_here('export', '--checkpoint', evicted, '--table', 'replay',
                        '--out', tmp_path / 'out')

  assert result.returncode == 2
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: {tmp_path / "out"} is not empty: it holds files '
      'other than a dataset.']
  assert os.listdir(tmp_path / 'out') == ['keep.txt']


@pytest.fixture(scope='module')
def framed(tmp_path_factory):
  """A checkpoint of 2 nested episodes with a uint8 [6, 5, 3] frame field."""
  root = tmp_path_factory.mktemp('framed')
  data = rlds_reverb.load(export_data.write_source(
      root / 'source', [export_data.nested_episode(i, 4) for i in range(2)]))
  spec = export_data.trajectory_spec_of(data, with_policy_info=False)
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], root / 'ckpt')
  rlds_reverb.push(data, f'localhost:{server.port}', 'replay')
  export_data.checkpoint(server)
  server.stop()
  return root / 'ckpt'


@pytest.mark.parametrize('flag, encoding', [('--image-encoding', 'jpeg'),
                                            ('--images', 'none')])
def test_image_encoding_and_its_older_name_images(framed, tmp_path, flag,
                                                  encoding):
  result = run_cli_here('export', '--checkpoint', framed, '--table', 'replay',
                        '--out', tmp_path / 'out', flag, encoding)

  assert result.returncode == 0, result.stderr
  pixels = tfds.builder_from_directory(os.fspath(tmp_path / 'out')).info
  pixels = pixels.features['steps']['observation']['pixels']
  if encoding == 'none':
    assert type(pixels) is tfds.features.Tensor  # pylint: disable=unidiomatic-typecheck
  else:
    assert pixels.encoding_format == encoding


def test_server_is_checkpointed_and_exported(tmp_path):
  data = rlds_reverb.load(sources.BUNDLED).take(3)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], tmp_path / 'ckpt')
  pushed = rlds_reverb.push(data, f'localhost:{server.port}', 'replay')

  result = run_cli_here('export', '--server', f'localhost:{server.port}',
                        '--table', 'replay', '--out', tmp_path / 'out')

  assert result.returncode == 0, result.stderr
  lines = result.stdout.splitlines()
  assert lines[0].startswith(
      f"exported 3 episodes ({pushed.trajectories} steps) of table 'replay' "
      f'to {tmp_path / "out"} in ')
  assert lines[1].startswith(f'from checkpoint {tmp_path / "ckpt"}/')
  assert lines[1].endswith(f': {pushed.items} items; the table had removed 0 '
                           'before it (evicted or sampled away)')
  assert lines[2:] == [
      'nothing lost: every step in the checkpoint came back',
      "that checkpoint stays, the newest in the server's checkpoint "
      'directory: Reverb loads it at a restart']
  [kept] = os.listdir(tmp_path / 'ckpt')
  assert lines[1].startswith(f'from checkpoint {tmp_path / "ckpt" / kept}: ')
  assert os.path.isfile(tmp_path / 'ckpt' / kept / checkpoints.DONE)
  assert export_data.item_count(server, 'replay') == pushed.items
  server.stop()


def checkpoint_of(stdout: str) -> str:
  """The checkpoint an export's text says it read."""
  [path] = re.findall(r'^from checkpoint (.+): \S+ items?;', stdout,
                      re.MULTILINE)
  return path


def test_a_checkpoint_in_reverbs_temporary_directory_is_removed(
    tmp_path, monkeypatch):
  """`serve` without --checkpoint-dir: Reverb checkpoints into a new
  `mkdtemp()` directory that no server ever loads. What export had written
  there is gone after it, whether it wrote a dataset or failed."""
  temporary = tmp_path / 'tmp'
  temporary.mkdir()
  monkeypatch.setenv('TMPDIR', os.fspath(temporary))  # The server's, ours.
  monkeypatch.setattr(tempfile, 'tempdir', None)
  dataset = write_tfds(tmp_path / 'tfds', 'clean_rlds', CLEAN)
  with Serve(dataset, tmp_path / 'serve.err',
             table_args=('--table', 'replay', '--table', 'small',
                         '--max-size', '3'),
             names=('replay', 'small')) as serve:
    for table in ('replay', 'small'):  # 'small' loses the first steps.
      pushed = run_cli_here('push', '--dataset', dataset, '--server',
                            serve.address, '--table', table,
                            '--chunk-length', '1')
      assert pushed.returncode == 0, pushed.stderr

    exported = run_cli_here('export', '--server', serve.address, '--table',
                            'replay', '--out', tmp_path / 'out')

    assert exported.returncode == 0, exported.stderr
    written = checkpoint_of(exported.stdout)
    root = os.path.dirname(written)
    assert os.path.dirname(root) == os.fspath(temporary)
    assert os.listdir(root) == []  # The root is Reverb's, made at start.
    assert exported.stdout.splitlines()[-1] == (
        'removed that checkpoint: the server has no checkpoint directory of '
        'its own (Reverb wrote it to a temporary one)')

    strict = run_cli_here('export', '--server', serve.address, '--table',
                          'small', '--strict', '--out', tmp_path / 'lost')

    assert strict.returncode == 1
    assert "Table 'small' did not come back whole" in strict.stderr
    assert os.listdir(root) == []
    assert len(export_data.steps_of(tmp_path / 'out')) == len(CLEAN)
    assert not os.path.exists(tmp_path / 'lost')


# name: (checkpoint directory relative to the temporary directory, removed)
TEMPORARY_ROOTS = {
    'reverbs_default': ('tmpk2_x9qa0/2026-01-01T00:00:00+00:00', True),
    'a_chosen_directory': ('ckpt/2026-01-01T00:00:00+00:00', False),
    'deeper_than_mkdtemp': ('run/tmpk2_x9qa0/2026-01-01T00:00:00+00:00',
                            False),
    'not_mkdtemps_name': ('tmp_checkpoints/2026-01-01T00:00:00+00:00', False),
}


@pytest.mark.parametrize('case', list(TEMPORARY_ROOTS))
def test_only_reverbs_own_temporary_root_is_temporary(case, tmp_path,
                                                      monkeypatch):
  relative, temporary = TEMPORARY_ROOTS[case]
  monkeypatch.setattr(tempfile, 'tempdir', os.fspath(tmp_path))
  assert checkpoints.in_temporary_root(
      os.fspath(tmp_path / relative)) is temporary
  assert not checkpoints.in_temporary_root(
      os.path.join('/data', relative))


def test_server_without_checkpointer_is_one_line(tmp_path):
  port = portpicker.pick_unused_port()
  server = pybind.Server([reverb.Table.queue('replay', 10).internal_table],
                         port, None)  # reverb.Server always adds one.
  try:
    with pytest.raises(rlds_reverb.ExportError) as raised:
      rlds_reverb.export('replay', tmp_path / 'out',
                         server=f'localhost:{port}')
  finally:
    server.Stop()

  assert str(raised.value) == (
      f'The Reverb server at localhost:{port} has no checkpointer ("no '
      'Checkpointer configured for the replay service"): start it with one '
      '(rlds-reverb serve --checkpoint-dir DIR) to export without sampling '
      'the table.')
  assert os.listdir(tmp_path) == []


def test_unreachable_server_is_one_line(refused_address, tmp_path):
  with pytest.raises(rlds_reverb.ServerUnavailableError) as raised:
    rlds_reverb.export('replay', tmp_path / 'out', server=refused_address)
  assert refused_address in str(raised.value)
  assert '\n' not in str(raised.value)
  assert os.listdir(tmp_path) == []


def test_an_http1_server_is_not_reverb_at_once(http1_address, tmp_path):
  result = run_cli_here('export', '--server', http1_address, '--table',
                        'replay', '--out', tmp_path / 'out')
  assert result.returncode == 1, result.stderr
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: The server at {http1_address} did not answer as a '
      "Reverb server: it answered gRPC's HTTP/2 preface with "
      "'<!DOCTYPE HTML>', not HTTP/2 (an HTTP/1 server, or another "
      'protocol?).']
  assert not os.path.exists(tmp_path / 'out')


def test_truncated_checkpoint_is_one_line_exit_2(evicted, tmp_path):
  directory = tmp_path / 'ckpt'
  [name] = os.listdir(evicted)
  os.makedirs(directory)
  for entry in os.listdir(evicted / name):
    with open(evicted / name / entry, 'rb') as source:
      data = source.read()
    if entry == 'chunks.tfrecord':
      data = data[:len(data) // 3]
    (directory / entry).write_bytes(data)

  result = run_cli_here('export', '--checkpoint', directory, '--table',
                        'replay', '--out', tmp_path / 'out')

  assert result.returncode == 2
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: {directory / "chunks.tfrecord"} ends before its '
      'zlib stream does: the file is cut short (a checkpoint being written, '
      'or a copy that stopped).']
  assert sorted(os.listdir(tmp_path)) == ['ckpt']
