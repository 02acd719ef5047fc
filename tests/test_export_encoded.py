"""Export of a table that holds encoded frames (issue 31, item 1).

    PNG/JPEG frames --push images='encoded'--> table 'source' (stored bytes)
      --export (--server, --checkpoint)--> RLDS dir: Image features holding
        those bytes as they are; it reads as uint8 frames
      --push --images encoded--> table 'again': every item equal to
        'source''s, byte for byte
      --push (raw)--> table 'raw_again': every item equal to the raw push
        of the source ('raw_source'), frame for frame

The command line runs as users run it (in the test's process:
`run_cli_here`), against a real `rlds-reverb serve --images encoded` process
with a checkpoint directory; the raw tables, which only hold what the raw
pushes leave for comparison, are served in the test's process
(`ServerHere`, signed for the source as `serve` signs them). The formats (PNG, JPEG, 'image': a
source that does not say which, nested fields encoded at push time) go
through the API on in-process servers.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top
from tests.image_data import C  # pylint: disable=g-import-not-at-top
from tests.image_data import H  # pylint: disable=g-import-not-at-top
from tests.image_data import W  # pylint: disable=g-import-not-at-top
from tests.image_data import plain_dataset  # pylint: disable=g-import-not-at-top
from tests.image_data import tables_for  # pylint: disable=g-import-not-at-top
from tests.image_data import write_image_dir  # pylint: disable=g-import-not-at-top
from tests.serve_command import Serve  # pylint: disable=g-import-not-at-top
from tests.server_process import ServerHere  # pylint: disable=g-import-not-at-top

LENGTHS = (5, 2, 7, 3)  # Every episode gives 2-step items.


def image_feature(directory, path='observation'):
  feature = tfds.builder_from_directory(os.fspath(directory)).info.features
  feature = feature['steps']
  for key in path.split('/'):
    feature = feature[key]
  return feature


def assert_tables_equal(address, got, want):
  """Every item of the fifo tables `got` and `want`, drained, equal leaf for
  leaf (strings byte for byte), in order."""
  reverb_tables.assert_same_flat_items(
      reverb_tables.drain_flat(address, got),
      reverb_tables.drain_flat(address, want))


# ------------------------------------------------ the command line ------

ENCODED = ('source', 'from_server', 'from_checkpoint')
RAW = ('raw_source', 'raw_from_server', 'raw_from_checkpoint')


def serve_args(names, *more):
  """Drainable tables: each item sampled once, oldest first."""
  tables = [arg for name in names for arg in ('--table', name)]
  return ('--sampler', 'fifo', '--max-times-sampled', '1', *tables, *more)


def push(dataset, address, table, *more):
  result = run_cli_here('push', '--dataset', dataset, '--server', address,
                        '--table', table, *more)
  assert result.returncode == 0, result.stderr
  return result


def test_an_encoded_table_exports_frames_that_push_back_byte_for_byte(
    tmp_path):
  source = write_image_dir(tmp_path / 'tfds', lengths=LENGTHS)
  checkpoints = tmp_path / 'checkpoints'
  with Serve(source, tmp_path / 'encoded.err', checkpoint_dir=checkpoints,
             table_args=serve_args(ENCODED, '--images', 'encoded'),
             names=ENCODED) as encoded, ServerHere(
                 [{'name': name, 'kind': 'fifo', 'signed_for': source}
                  for name in RAW]) as raw:
    push(source, encoded.address, 'source', '--images', 'encoded')
    push(source, raw.address, 'raw_source')

    from_server = run_cli_here(
        'export', '--server', encoded.address, '--table', 'source', '--out',
        tmp_path / 'from_server')
    from_checkpoint = run_cli_here(
        'export', '--checkpoint', checkpoints, '--table', 'source', '--out',
        tmp_path / 'from_checkpoint')

    for result in (from_server, from_checkpoint):
      assert result.returncode == 0, result.stderr
      assert 'nothing lost: every step in the checkpoint came back' in (
          result.stdout.splitlines())
    for name in ('from_server', 'from_checkpoint'):
      out = tmp_path / name
      inspected = run_cli_here('inspect', '--dataset', out)
      assert inspected.returncode == 0, inspected.stderr
      assert f'observation uint8[{H},{W},{C}]' in inspected.stdout
      feature = image_feature(out)
      assert type(feature) is tfds.features.Image  # pylint: disable=unidiomatic-typecheck
      assert feature.encoding_format == 'png'
      validated = run_cli_here('validate', '--dataset', out)
      assert validated.returncode == 0, validated.stdout + validated.stderr
      push(out, encoded.address, name, '--images', 'encoded')
      push(out, raw.address, f'raw_{name}')

    source_items = reverb_tables.drain_flat(encoded.address, 'source')
    assert source_items[0][1].dtype == object  # The observation's bytes.
    for name in ('from_server', 'from_checkpoint'):
      reverb_tables.assert_same_flat_items(
          reverb_tables.drain_flat(encoded.address, name), source_items)
    raw_items = reverb_tables.drain_flat(raw.address, 'raw_source')
    assert raw_items[0][1].dtype == np.uint8
    for name in ('raw_from_server', 'raw_from_checkpoint'):
      reverb_tables.assert_same_flat_items(
          reverb_tables.drain_flat(raw.address, name), raw_items)


# ------------------------------------------------ formats, in process ---

def png_source(directory):
  return rlds_reverb.load(write_image_dir(directory, 'png', LENGTHS)), {}


def jpeg_source(directory):
  return rlds_reverb.load(write_image_dir(directory, 'jpeg', LENGTHS)), {
      'format': 'jpeg'}


def unsaid_source(directory):
  """tfds.features.Image without encoding_format: the table says 'image'."""
  return rlds_reverb.load(write_image_dir(directory, None, LENGTHS)), {
      'format': 'image'}


def nested_plain_source(directory):
  """Raw uint8 frames in a nested observation, encoded by the push."""
  del directory
  return plain_dataset(LENGTHS), {'fields': ['observation/pixels']}


# name: (source, the exported field, its Image's encoding_format)
FORMATS = {
    'png': (png_source, 'observation', 'png'),
    'jpeg': (jpeg_source, 'observation', 'jpeg'),
    'format_unsaid': (unsaid_source, 'observation', None),
    'nested_encoded_at_push': (nested_plain_source, 'observation/pixels',
                               'png'),
}


@pytest.mark.parametrize('case', list(FORMATS))
def test_stored_bytes_come_back_as_they_are(tmp_path, case):
  make_source, path, tfds_format = FORMATS[case]
  data, encoding = make_source(tmp_path / 'tfds')
  raw_signature, stored_signature = tables_for(data, **encoding)
  server = export_data.checkpointed_server(
      [reverb_tables.fifo_table(name, signature) for name, signature in (
          ('source', stored_signature), ('again', stored_signature),
          ('raw_source', raw_signature), ('raw_again', raw_signature))],
      tmp_path / 'checkpoints')
  address = reverb_tables.address(server)
  try:
    rlds_reverb.push(data, address, 'source', images='encoded')
    rlds_reverb.push(data, address, 'raw_source')

    report = rlds_reverb.export('source', tmp_path / 'out', server=address)

    assert not report.lost
    feature = image_feature(tmp_path / 'out', path)
    assert type(feature) is tfds.features.Image  # pylint: disable=unidiomatic-typecheck
    assert (feature.shape, feature.encoding_format) == ((H, W, C),
                                                        tfds_format)
    exported = rlds_reverb.load(os.fspath(tmp_path / 'out'))
    rlds_reverb.push(exported, address, 'again', images='encoded')
    rlds_reverb.push(exported, address, 'raw_again')
    assert_tables_equal(address, 'again', 'source')
    assert_tables_equal(address, 'raw_again', 'raw_source')
  finally:
    server.stop()
