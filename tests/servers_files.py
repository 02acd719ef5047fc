"""Servers files written by the tests, as a serve of many servers writes them
(`cli/serve_many._write_servers_file`), pointing at servers the tests run."""

import json
import pathlib
from typing import Sequence


def write(path, addresses: Sequence[str], tables: Sequence[str] = ('a',),
          shuffled: bool = False) -> str:
  """A servers file at `path` naming `addresses` as servers 0, 1, ...;
  `shuffled` lists them last first (readers order them by 'server')."""
  servers = [{'server': index, 'address': address,
              'tables': {table: {'items': 0, 'max_size': 100_000}
                         for table in tables}}
             for index, address in enumerate(addresses)]
  if shuffled:
    servers.reverse()
  record = {'servers': servers, 'tables': list(tables),
            'signature': [{'field': 'observation', 'dtype': 'float32',
                           'shape': [3]}]}
  pathlib.Path(path).write_text(json.dumps(record, indent=1))
  return str(path)
