"""Reaching a Reverb server and reading its tables, always with a deadline.

`reverb.Client(address)` connects lazily and most calls wait forever for a
dead server; `server_info(timeout=...)` is the call that takes a deadline, so
every check before writing goes through it.
"""

from typing import Dict, Sequence, Tuple, Union

import reverb

from rlds_reverb.errors import ServerUnavailableError
from rlds_reverb.errors import TableNotFoundError

ServerLike = Union[str, reverb.Client]


def connect(server: ServerLike) -> Tuple[reverb.Client, str]:
  """(client, address) for an address 'host:port' or a `reverb.Client`."""
  if isinstance(server, reverb.Client):
    return server, server.server_address
  return reverb.Client(server), server


def table_infos(client: reverb.Client, address: str, tables: Sequence[str],
                timeout_s: float) -> Dict[str, reverb.reverb_types.TableInfo]:
  """The `TableInfo` of each of `tables`.

  Raises:
    ServerUnavailableError: no answer from `address` within `timeout_s`.
    TableNotFoundError: a table is missing; names the tables there are.
  """
  try:
    infos = client.server_info(timeout=max(1, int(round(timeout_s))))
  except (reverb.errors.DeadlineExceededError, RuntimeError) as e:
    raise ServerUnavailableError(
        f'No Reverb server answered at {address} within {timeout_s:g} s '
        f'({type(e).__name__}).') from e
  missing = [table for table in tables if table not in infos]
  if missing:
    raise TableNotFoundError(
        f"Reverb server at {address} has no table {missing[0]!r}; its tables "
        f'are {sorted(infos)}.')
  return {table: infos[table] for table in tables}
