"""`rlds-reverb export`, run as users run it (a subprocess per command).

Each run starts TensorFlow (~5 s): one checkpoint with losses serves the
JSON and --strict runs; --server runs against a real server in this
process. The errors of a server without a checkpointer (a C++ server: a
`reverb.Server` always has one) or unreachable are checked through the API.
"""

import json
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import portpicker  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
from reverb import pybind  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import sources  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests.test_cli import error_lines  # pylint: disable=g-import-not-at-top
from tests.test_cli import run_cli_here  # pylint: disable=g-import-not-at-top


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
      'nothing lost: every step in the checkpoint came back']
  assert export_data.item_count(server, 'replay') == pushed.items
  server.stop()


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
