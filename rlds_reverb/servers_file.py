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
its path where they take a list of servers. Plain `json`: no TensorFlow.
"""

import dataclasses
import json
import os
from typing import Optional, Tuple

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
  except (KeyError, TypeError) as e:
    raise ServersFileError(
        f'{path} is not a servers file: no {e} in it (written by rlds-reverb '
        'serve of a build of many servers)') from e
  if not addresses or not tables:
    raise ServersFileError(f'{path} is not a servers file: it lists no '
                           f'{"servers" if not addresses else "tables"}')
  return Servers(path=path, addresses=addresses, tables=tables)


def places(path, table: Optional[str] = None) -> Tuple[Tuple[str, str], ...]:
  """(address, table) of each server of the servers file at `path`, in
  server order: `table`, or the one table the file lists.

  Raises:
    ServersFileError: as `read`; several tables listed and none named.
  """
  listed = read(path)
  if table is None:
    if len(listed.tables) > 1:
      raise ServersFileError(
          f'{listed.path} lists tables {", ".join(listed.tables)}: name one.')
    table = listed.tables[0]
  return tuple((address, table) for address in listed.addresses)
