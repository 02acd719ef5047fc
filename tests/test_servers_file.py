"""The servers file's reader: `read`, and a file standing for its servers
where a list of servers is taken (`addresses_of`, `places_of`).

Plain files written by the test; the readers that use them against real
servers: test_cli_push, test_shards, test_beam, test_replay_mixture.
"""

import pathlib

import pytest

from rlds_reverb import servers_file
from rlds_reverb.errors import ServersFileError
from tests import servers_files

ADDRESSES = ['localhost:8000', 'localhost:8001', 'localhost:8002']


def test_read_gives_servers_in_server_order(tmp_path):
  path = servers_files.write(tmp_path / 'servers.json', ADDRESSES,
                             tables=('a', 'b'), shuffled=True)
  assert servers_file.read(pathlib.Path(path)) == servers_file.Servers(
      path=path, addresses=tuple(ADDRESSES), tables=('a', 'b'))


NO_SERVE = '(written by rlds-reverb serve of a build of many servers)'
# name: (the file's text, or None for no file; the message after the path)
READ_ERRORS = {
    'missing': (None, ': no such servers file (a serve of many servers '
                      'writes it once every server answers, and removes it '
                      'at stop)'),
    'not_json': ('{"servers": [', ' cannot be read as a servers file: '
                 'Expecting value: line 1 column 14 (char 13)'),
    'no_servers': ('{"tables": ["a"]}',
                   f" is not a servers file: no 'servers' in it {NO_SERVE}"),
    'no_address': ('{"servers": [{"server": 0}], "tables": ["a"]}',
                   f" is not a servers file: no 'address' in it {NO_SERVE}"),
    'no_tables': ('{"servers": [{"server": 0, "address": "h:1"}]}',
                  f" is not a servers file: no 'tables' in it {NO_SERVE}"),
    'a_list': ('[]', ' is not a servers file: its servers and tables are not '
                     'laid out as rlds-reverb serve writes them (list indices '
                     'must be integers or slices, not str)'),
    'empty_servers': ('{"servers": [], "tables": ["a"]}',
                      ' is not a servers file: it lists no servers'),
    'empty_tables': ('{"servers": [{"server": 0, "address": "h:1"}], '
                     '"tables": []}',
                     ' is not a servers file: it lists no tables'),
}


@pytest.mark.parametrize('text, message', READ_ERRORS.values(),
                         ids=READ_ERRORS.keys())
def test_read_errors_are_one_line_naming_the_file(tmp_path, text, message):
  path = tmp_path / 'servers.json'
  if text is not None:
    path.write_text(text)
  with pytest.raises(ServersFileError) as error:
    servers_file.read(path)
  assert str(error.value) == f'{path}{message}'


def test_a_file_among_addresses_stands_for_its_servers_in_order(tmp_path):
  """Addresses and files, concatenated as given: server I % S as before."""
  path = servers_files.write(tmp_path / 'servers.json', ADDRESSES[1:],
                             shuffled=True)
  assert servers_file.addresses_of('h:1') == ['h:1']
  assert servers_file.addresses_of(pathlib.Path(path)) == ADDRESSES[1:]
  assert servers_file.addresses_of(('h:1', path, 'h:2')) == [
      'h:1', *ADDRESSES[1:], 'h:2']


def test_a_missing_file_among_addresses_is_named(tmp_path):
  with pytest.raises(ServersFileError,
                     match=f'^{tmp_path}/gone.json: no such servers file'):
    servers_file.addresses_of(['h:1', str(tmp_path / 'gone.json')])


def test_places_are_the_one_table_or_the_named_one_on_every_server(tmp_path):
  one = servers_files.write(tmp_path / 'one.json', ADDRESSES[:2])
  two = servers_files.write(tmp_path / 'two.json', ADDRESSES[:2],
                            tables=('a', 'b'))
  assert servers_file.places_of(one) == [(ADDRESSES[0], 'a'),
                                         (ADDRESSES[1], 'a')]
  assert servers_file.places_of(two, 'b') == [(ADDRESSES[0], 'b'),
                                              (ADDRESSES[1], 'b')]


def test_places_need_a_table_the_file_lists(tmp_path):
  path = servers_files.write(tmp_path / 'servers.json', ADDRESSES[:2],
                             tables=('a', 'b'))
  with pytest.raises(ServersFileError) as several:
    servers_file.places_of(path)
  assert str(several.value) == (
      f"{path} lists several tables ('a', 'b'): name one, as ({path!r}, "
      f'TABLE)')
  with pytest.raises(ServersFileError) as unlisted:
    servers_file.places_of(path, 'c')
  assert str(unlisted.value) == (
      f"{path} lists no table 'c': its servers serve 'a', 'b'")
