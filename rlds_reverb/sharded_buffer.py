"""One replay buffer over many Reverb servers, for TF-Agents scripts written
for `ReverbReplayBuffer`.

    ShardedReplayBuffer(servers)   servers: a servers file (what a serve of
                                   many servers writes), or [(address,
                                   table), ...], or [address, ...] with
                                   table_name
      -> every server checked at once (answers, has the table, the same
         signature; one line naming the one that does not: `replay_mixture`'s
         checks, `mixture.sources`)
      .data_spec                   one step of the tables' items
      .as_dataset(B, num_steps)    `replay_mixture(servers, 'size', B)`: each
                                   batch takes from each server its share of
                                   all items, exactly, so every item of the
                                   sharded table is equally likely; a server
                                   lost fails it, or with on_server_loss=
                                   'drop' is left out (a warning)
      .num_frames()                items on all servers together
      .observer(sequence_length)   a TF-Agents observer writing whole episode
                                   I to server I % S, as `build --servers S`
                                   spread the offline episodes

A script swaps `ReverbReplayBuffer(spec, table, sequence_length, local_server)`
for `ShardedReplayBuffer('served/servers.json')` and its
`ReverbAddTrajectoryObserver(buffer.py_client, ...)` for
`buffer.observer(...)`; `as_dataset` and `num_frames` are used as before.
"""

import dataclasses
from typing import List, Optional, Sequence, Tuple

import reverb
from tf_agents.replay_buffers import reverb_utils

from rlds_reverb import servers_file
from rlds_reverb.errors import MixedReplayError
from rlds_reverb.mixture import dropping
from rlds_reverb.mixture import replay
from rlds_reverb.mixture import sources as sources_lib
from rlds_reverb.mixture import weights as weights_lib


class ShardedReplayBuffer:
  """A table split over servers, read and written as one replay buffer."""

  def __init__(self, servers, table_name: Optional[str] = None,
               sequence_length: int = 2,
               timeout: float = replay.DEFAULT_TIMEOUT_S,
               on_server_loss: str = 'raise'):
    """Checks every server at once.

    Args:
      servers: a servers file's path (`rlds-reverb serve --from-checkpoint`
        of a build of many servers writes it), a sequence of `(address,
        table)`, or of addresses (then `table_name` names the table).
      table_name: the table; needed with bare addresses, and with a servers
        file that lists several tables.
      sequence_length: `as_dataset`'s `num_steps` when not given (as
        `ReverbReplayBuffer`'s).
      timeout: seconds a server may leave unanswered: when building, and
        while sampling (`replay_mixture`'s `timeout`).
      on_server_loss: what `as_dataset`'s datasets do with a server that has
        not answered for `timeout` seconds while sampling: 'raise' fails
        the next `next()` with one line naming it
        (`tf.errors.InvalidArgumentError`); 'drop' goes on with the other
        servers' shares (batches keep B rows), warns once with a
        `ServerLostWarning` naming it, and never samples it again, even if
        it comes back; the last server lost fails as 'raise' does.
        `replay_mixture`'s `on_server_loss` says what it costs. Given here,
        not to `as_dataset`, so that code that calls `as_dataset` as
        `ReverbReplayBuffer`'s (TF-Agents' learners) gets it too.

    Raises:
      ServersFileError: a servers file missing or unreadable, or listing
        several tables when `table_name` names none.
      MixedReplayError: no servers, a table not named, servers whose tables
        differ in signature (naming the server and the field), an
        `on_server_loss` other than 'raise' or 'drop'.
      AddressError, ServerUnavailableError, TableNotFoundError: a server that
        does not answer or lacks the table, naming it.
    """
    self._places = places_of(servers, table_name)
    self._sequence_length = sequence_length
    self._timeout = timeout
    self._on_server_loss = dropping.check_on_server_loss(on_server_loss)
    checked = sources_lib.as_sources(self._places, self.names,
                                     sequence_length, timeout)
    self._data_spec = checked[0].buffer.data_spec

  @property
  def names(self) -> List[str]:
    """How messages name the servers: 'server K of S (ADDRESS)'."""
    count = len(self._places)
    return [f'server {index} of {count} ({address})'
            for index, (address, _) in enumerate(self._places)]

  @property
  def places(self) -> Tuple[Tuple[str, str], ...]:
    """(address, table) of each server, in server order."""
    return self._places

  @property
  def data_spec(self):
    return self._data_spec

  def as_dataset(self, sample_batch_size: int,
                 num_steps: Optional[int] = None,
                 num_parallel_calls: Optional[int] = None, *,
                 refresh_sizes_every: int = (
                     weights_lib.DEFAULT_REFRESH_EVERY)):
    """Batches `(Trajectory [B, num_steps, ...], SampleInfo)` as
    `ReverbReplayBuffer.as_dataset` gives them, each holding every server's
    share of B by its table's size (rows of server 0 first). A server
    lost while sampling fails the dataset or is dropped, as the buffer's
    `on_server_loss` says."""
    return replay.replay_mixture(
        self._places, 'size', sample_batch_size,
        num_steps or self._sequence_length,
        refresh_sizes_every=refresh_sizes_every,
        num_parallel_calls=num_parallel_calls, timeout=self._timeout,
        on_server_loss=self._on_server_loss)

  def num_frames(self) -> int:
    """The items of every server's table together."""
    total = 0
    for address, table in self._places:
      info = sources_lib.table_info(address, table, self._timeout)
      total += int(info.current_size)
    return total

  def observer(self, sequence_length: Optional[int] = None,
               stride_length: int = 1, pad_end_of_episodes: bool = False,
               tile_end_of_episodes: bool = False) -> 'ShardedObserver':
    """A TF-Agents observer (for a `PyDriver`) that writes whole episode I
    to server I % S, each server through a `ReverbAddTrajectoryObserver`
    of its own with these settings."""
    return ShardedObserver([
        reverb_utils.ReverbAddTrajectoryObserver(
            reverb.Client(address), table,
            sequence_length or self._sequence_length,
            stride_length=stride_length,
            pad_end_of_episodes=pad_end_of_episodes,
            tile_end_of_episodes=tile_end_of_episodes)
        for address, table in self._places])


@dataclasses.dataclass
class ShardedObserver:
  """Whole episodes to the servers in turn: the trajectories of episode I,
  up to and with the boundary that ends it, go to `observers[I % S]`."""
  observers: Sequence[reverb_utils.ReverbAddTrajectoryObserver]
  episode: int = 0  # The episode being written, counted from 0.

  def __call__(self, trajectory) -> None:
    self.observers[self.episode % len(self.observers)](trajectory)
    if trajectory.is_boundary():
      self.episode += 1

  def flush(self) -> None:
    for observer in self.observers:
      observer.flush()

  def reset(self, write_cached_steps: bool = True) -> None:
    for observer in self.observers:
      observer.reset(write_cached_steps=write_cached_steps)

  def close(self) -> None:
    for observer in self.observers:
      observer.close()


def places_of(servers, table_name: Optional[str]) -> Tuple[Tuple[str, str],
                                                             ...]:
  """`servers` as (address, table) pairs, in server order."""
  if servers_file.is_servers_file(servers):
    return tuple(servers_file.places_of(servers, table_name))
  if isinstance(servers, str):
    raise MixedReplayError(
        f'servers must be a servers file (.json) or a sequence of (address, '
        f'table) or of addresses, got {servers!r}.')
  places = tuple(_place(server, table_name) for server in servers)
  if not places:
    raise MixedReplayError('ShardedReplayBuffer needs at least one server.')
  return places


def _place(server, table_name: Optional[str]) -> Tuple[str, str]:
  if isinstance(server, str):
    if table_name is None:
      raise MixedReplayError(
          f'server {server!r} is given without a table: pass table_name=..., '
          'or (address, table) pairs.')
    return server, table_name
  if sources_lib.is_address_and_table(server):
    return tuple(server)
  raise MixedReplayError(f'a server must be an address or (address, table), '
                         f'got {server!r}.')
