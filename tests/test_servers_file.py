"""The servers file a serve of many servers writes, read back
(rlds_reverb/servers_file.py), and `push --server` taking it."""

import json

import pytest

from rlds_reverb import servers_file
from rlds_reverb.errors import ServersFileError
from tests import reverb_tables
from tests.cli_runs import run_cli_here
from tests.serve_command import TABLE
from tests.serve_command import dataset  # pylint: disable=unused-import

LISTED = {
    'servers': [{'server': 1, 'address': 'localhost:8001'},
                {'server': 0, 'address': 'localhost:8000'}],
    'tables': ['replay'], 'signature': []}


def test_read_gives_the_servers_in_server_order(tmp_path):
  path = tmp_path / 'servers.json'
  path.write_text(json.dumps(LISTED))
  assert servers_file.read(path) == servers_file.Servers(
      str(path), ('localhost:8000', 'localhost:8001'), ('replay',))
  assert servers_file.places(path) == (('localhost:8000', 'replay'),
                                       ('localhost:8001', 'replay'))


BAD = {
    'missing': (None, '{path}: no such servers file (a serve of many servers '
                      'writes it once every server answers, and removes it '
                      'at stop)'),
    'not_json': ('{"servers": [', '{path} cannot be read as a servers file: '
                                  'Expecting value: line 1 column 14 (char '
                                  '13)'),
    'no_tables': (json.dumps({'servers': []}),
                  "{path} is not a servers file: no 'tables' in it (written "
                  'by rlds-reverb serve of a build of many servers)'),
    'no_servers': (json.dumps({'servers': [], 'tables': ['replay']}),
                   '{path} is not a servers file: it lists no servers'),
}


@pytest.mark.parametrize('text, message', BAD.values(), ids=BAD.keys())
def test_a_bad_servers_file_is_one_line_naming_it(tmp_path, text, message):
  path = tmp_path / 'servers.json'
  if text is not None:
    path.write_text(text)
  with pytest.raises(ServersFileError) as raised:
    servers_file.read(path)
  assert str(raised.value) == message.format(path=path)


def test_push_takes_a_servers_file_as_its_servers(dataset, make_server,  # pylint: disable=redefined-outer-name
                                                  tmp_path):
  """One server listed: the push writes into it. Two listed: as two --server
  (which need --workers or --runner). A missing file: exit 2."""
  server = make_server([reverb_tables.fifo_table(
      TABLE, reverb_tables.signature_for(_clean()))])
  one = tmp_path / 'one.json'
  one.write_text(json.dumps({
      'servers': [{'server': 0, 'address': reverb_tables.address(server)}],
      'tables': [TABLE]}))
  result = run_cli_here('push', '--dataset', dataset, '--server', one,
                        '--table', TABLE)
  assert result.returncode == 0, result.stderr
  assert reverb_tables.table_size(reverb_tables.client_of(server), TABLE) == 6

  two = tmp_path / 'two.json'
  two.write_text(json.dumps(LISTED))
  result = run_cli_here('push', '--dataset', dataset, '--server', two,
                        '--table', TABLE)
  assert (result.returncode, result.stdout) == (2, '')
  assert result.stderr.splitlines() == [
      'rlds-reverb: error: Several --server need --workers or --runner, which '
      'spread the data over them']

  result = run_cli_here('push', '--dataset', dataset, '--server',
                        tmp_path / 'gone.json', '--table', TABLE)
  assert result.returncode == 2
  assert (f'argument --server: {tmp_path}/gone.json: no such servers file'
          in result.stderr), result.stderr


def _clean():
  from tests import rlds_data  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tests.cli_data import CLEAN  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return rlds_data.as_rlds(CLEAN)
