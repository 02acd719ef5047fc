"""Reaching a Reverb server and reading its tables, always with a deadline.

`reverb.Client(address)` connects lazily and most calls wait forever for a
dead server; `server_info(timeout=...)` is the call that takes a deadline, so
every check before writing goes through it, after `addresses` has turned
away a malformed address and a refused connection at once.
"""

import dataclasses
import time
from typing import Dict, List, Optional, Sequence, Tuple, Union

import reverb

from rlds_reverb import addresses
from rlds_reverb._util import wording
from rlds_reverb.errors import ServerUnavailableError
from rlds_reverb.errors import TableNotFoundError
from rlds_reverb.write import items as items_lib

ServerLike = Union[str, reverb.Client]


@dataclasses.dataclass(frozen=True)
class Target:
  """The tables of one server that a push writes to.

  `infos`: their `TableInfo`s, once asked (`asked`); a push checks the
  signatures in them before writing (`write.push.check_tables`).
  """
  client: reverb.Client
  address: str
  tables: List[str]
  infos: Optional[Dict[str, reverb.reverb_types.TableInfo]] = None

  @classmethod
  def of(cls, server: ServerLike, tables: Union[str, Sequence[str]]
         ) -> 'Target':
    """Raises AddressError or ValueError (a table named twice) at once."""
    client, address = connect(server)
    return cls(client, address, items_lib.table_names(tables))

  def asked(self, timeout_s: float) -> 'Target':
    """This target with its tables' `TableInfo`s (raises as `table_infos`)."""
    return dataclasses.replace(self, infos=table_infos(
        self.client, self.address, self.tables, timeout_s))


def connect(server: ServerLike) -> Tuple[reverb.Client, str]:
  """(client, address) for an address 'host:port' or a `reverb.Client`.

  Raises:
    AddressError: the address (a client's too) is not HOST:PORT.
  """
  if isinstance(server, reverb.Client):
    addresses.parse(server.server_address, "the reverb.Client's address")
    return server, server.server_address
  addresses.parse(server)
  return reverb.Client(server), server


def table_infos(client: reverb.Client, address: str, tables: Sequence[str],
                timeout_s: float) -> Dict[str, reverb.reverb_types.TableInfo]:
  """The `TableInfo` of each of `tables`.

  Raises:
    AddressError: `address` is not HOST:PORT.
    ServerUnavailableError: nothing listens at `address` (at once), no answer
      within `timeout_s`, or an answer that is not a Reverb server's.
    TableNotFoundError: a table is missing; names the tables there are.
  """
  deadline = time.monotonic() + timeout_s
  addresses.check_reachable(address, timeout_s)
  left_s = max(1, int(round(deadline - time.monotonic())))  # Whole seconds.
  try:
    infos = client.server_info(timeout=left_s)
  except reverb.errors.DeadlineExceededError as e:
    raise ServerUnavailableError(
        f'No Reverb server answered at {address} within {timeout_s:g} s.'
    ) from e
  except RuntimeError as e:  # An HTTP server's 404, a server shutting down.
    raise ServerUnavailableError(
        f'The server at {address} did not answer as a Reverb server: '
        f'{wording.one_line(str(e))} ({type(e).__name__}).') from e
  missing = [table for table in tables if table not in infos]
  if missing:
    raise TableNotFoundError(
        f"Reverb server at {address} has no table {missing[0]!r}; its tables "
        f'are {sorted(infos)}.')
  return {table: infos[table] for table in tables}
