"""The servers file: where a serve of many servers says they listen.

`rlds-reverb serve --from-checkpoint BUILT` of a build of S servers writes
it (`cli/serve_many`, default CHECKPOINT_DIR/servers.json) once every
server answers, and removes it at stop:

    {"servers": [{"server": 0, "address": "localhost:8000",
                  "tables": {"replay": {"items": 4009, "max_size": ...}}},
                 ...],
     "tables": ["replay"],
     "signature": [{"field": "observation", "dtype": "float32",
                    "shape": [4]}, ...]}

Readers (the sharded replay buffer, `replay_mixture`, push --server) take
its path where they take a list of servers, as its servers in server order
(`addresses_of`, `places_of`): episode or shard I still goes to server
I % S. Plain `json`: no TensorFlow.
"""

import dataclasses
import json
import os
from typing import List, Optional, Sequence, Tuple, Union

from rlds_reverb.errors import ServersFileError

NAME = 'servers.json'


@dataclasses.dataclass(frozen=True)
class Servers:
  """What a servers file says: each server's address, in server order, and
  the tables every one of them serves."""
  path: str
  addresses: Tuple[str, ...]
  tables: Tuple[str, ...]


def is_servers_file(value) -> bool:
  """Whether `value` names a servers file (a path ending in .json)."""
  return isinstance(value, (str, os.PathLike)) and os.fspath(
      value).endswith('.json')


def read(path) -> Servers:
  """The servers file at `path`.

  Raises:
    ServersFileError: it is missing (its servers stopped, or never all
      started), or is not a servers file.
  """
  path = os.fspath(path)
  try:
    with open(path) as file:
      record = json.load(file)
  except FileNotFoundError as e:
    raise ServersFileError(
        f'{path}: no such servers file (a serve of many servers writes it '
        'once every server answers, and removes it at stop)') from e
  except (OSError, ValueError) as e:
    raise ServersFileError(f'{path} cannot be read as a servers file: '
                           f'{e}') from e
  try:
    servers = sorted(record['servers'], key=lambda server: server['server'])
    addresses = tuple(str(server['address']) for server in servers)
    tables = tuple(str(table) for table in record['tables'])
  except KeyError as e:
    raise ServersFileError(
        f'{path} is not a servers file: no {e} in it (written by rlds-reverb '
        'serve of a build of many servers)') from e
  except TypeError as e:  # A list, or servers that are not objects.
    raise ServersFileError(
        f'{path} is not a servers file: its servers and tables are not laid '
        f'out as rlds-reverb serve writes them ({e})') from e
  if not addresses or not tables:
    raise ServersFileError(f'{path} is not a servers file: it lists no '
                           f'{"servers" if not addresses else "tables"}')
  return Servers(path=path, addresses=addresses, tables=tables)


def addresses_of(servers: Union[str, os.PathLike, Sequence]) -> List[str]:
  """The addresses of `servers` ('host:port', a servers file, or a sequence
  of either), each servers file replaced by its servers in server order: so
  a file stands where its servers' addresses would, in the same order.

  Anything else (a `reverb.Client`) is kept as it is, for the caller to
  check.

  Raises:
    ServersFileError: as `read`, for a servers file among them.
  """
  if isinstance(servers, (str, os.PathLike)):
    servers = [servers]
  return [address for server in servers for address in _expanded(server)]


def _expanded(server) -> List:
  if is_servers_file(server):
    return list(read(server).addresses)
  return [server]


def places_of(path, table: Optional[str] = None) -> List[Tuple[str, str]]:
  """(address, table) on each server of the servers file at `path`, in
  server order: `table`, or the one table the file lists.

  Raises:
    ServersFileError: as `read`; no `table` named and the file lists
      several; a `table` the file does not list.
  """
  servers = read(path)
  return [(address, table_of(servers, table))
          for address in servers.addresses]


def table_of(servers: Servers, table: Optional[str] = None) -> str:
  """`table` if `servers` serve it; with none named, their one table."""
  listed = ', '.join(repr(name) for name in servers.tables)
  if table is None and len(servers.tables) > 1:
    raise ServersFileError(
        f'{servers.path} lists several tables ({listed}): name one, as '
        f'({servers.path!r}, TABLE)')
  if table is None:
    return servers.tables[0]
  if table not in servers.tables:
    raise ServersFileError(
        f'{servers.path} lists no table {table!r}: its servers serve '
        f'{listed}')
  return table
