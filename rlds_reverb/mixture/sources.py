"""Sources of a mixture: buffers or (address, table), checked to fit.

    ReverbReplayBuffer | (address, table), one per source, named in messages
    ('source 2'; mixed_replay's 'offline', 'online'); a servers file
    ('servers.json', or (servers.json, table)) stands for (address, table)
    on each of its servers, in server order (`expanded`)
      -> each table's TableInfo, read with a timeout (ServerUnavailableError,
         TableNotFoundError: naming the server and the table)
      -> one data spec: the first buffer's, else the first table's signature
         (decoded if it holds encoded images); every other source's compared
         field by field (MixedReplayError naming the field and the source)
      -> tables that remove items once sampled refused, unless allowed
      -> a ReverbReplayBuffer per source (`reading.ReplayBuffer`, or
         `decoded.EncodedReplayBuffer` for a table of encoded images), each
         reading through 32 / N streams (at least 1)

Why 32 / N streams: `as_dataset(B)` interleaves min(B, 32) Reverb streams
(TF-Agents' `max_cycle_length`), and the learner's CPU per item grows with
the streams it keeps: three tables read with 32 streams each sampled
0.80-0.87x the items per learner CPU-second of one table's 32; with 11 each
(and `num_parallel_calls` shared out, `replay.per_source_calls`) 0.91-0.99x
(`benchmarks/mixture_throughput.py`). Buffers given as such keep their own.
"""

import dataclasses
import math
import os
from typing import Any, Collection, List, Sequence, Tuple, Union

import tensorflow as tf
from tf_agents.replay_buffers import reverb_replay_buffer

from rlds_reverb import _reading as reading
from rlds_reverb import decoded
from rlds_reverb import servers_file
from rlds_reverb._util import wording
from rlds_reverb.errors import MixedReplayError
from rlds_reverb.specs import encoded as encoded_spec
from rlds_reverb.specs import paths
from rlds_reverb.write import server as server_lib

ReplayLike = Union[reverb_replay_buffer.ReverbReplayBuffer, Tuple[str, str]]
# A servers file, or one with the table to read on each of its servers.
ServersFileLike = Union[str, os.PathLike, Tuple[Union[str, os.PathLike], str]]
# Reverb streams a table's `as_dataset` interleaves at most (TF-Agents').
MAX_STREAMS = 32


@dataclasses.dataclass(frozen=True)
class Source:
  """One source of a mixture, checked: `buffer` samples it."""
  name: str
  address: str
  table: str
  info: Any  # reverb TableInfo, as read when the mixture was built.
  buffer: reverb_replay_buffer.ReverbReplayBuffer


def expanded(replays) -> list:
  """`replays` as a list of sources, each servers file (as `replays` itself,
  or as one of them) replaced by (address, table) on each of its servers,
  in server order: the sources of a table spread over a serve of many
  servers.

  Raises:
    ServersFileError: a servers file missing or unreadable; one of several
      tables given without a table; a table it does not list.
  """
  if is_servers_file_source(replays):
    replays = [replays]
  return [place for replay in replays for place in _places(replay)]


def is_servers_file_source(value) -> bool:
  """A servers file's path, or (its path, a table)."""
  if isinstance(value, tuple) and len(value) == 2:
    return (servers_file.is_servers_file(value[0])
            and isinstance(value[1], str))
  return servers_file.is_servers_file(value)


def _places(replay) -> list:
  if not is_servers_file_source(replay):
    return [replay]
  if isinstance(replay, tuple):
    return servers_file.places_of(*replay)
  return servers_file.places_of(replay)


def as_sources(replays: Sequence[ReplayLike], names: Sequence[str],
               num_steps: int, timeout: float) -> List[Source]:
  """The replays as checked `Source`s with one data spec.

  Raises:
    MixedReplayError: a replay that is neither a buffer nor (address,
      table), a table without signature given as (address, table), data
      specs that differ.
    AddressError, ServerUnavailableError, TableNotFoundError: reading a
      table's settings.
  """
  for name, replay in zip(names, replays, strict=True):
    if not (is_buffer(replay) or is_address_and_table(replay)):
      raise MixedReplayError(
          f'{name} must be a ReverbReplayBuffer or (address, table), got '
          f'{type(replay).__name__} {replay!r}.')
  where = [buffer_place(replay) if is_buffer(replay) else replay
           for replay in replays]
  infos = [table_info(address, table, timeout) for address, table in where]
  for replay, info, (address, table) in zip(replays, infos, where):
    if not is_buffer(replay) and info.signature is None:
      raise MixedReplayError(
          f'Table {table!r} at {address} has no signature, so its data spec '
          f'is unknown; pass a ReverbReplayBuffer for it instead.')
  check_specs(replays, infos, names)
  streams = max(1, math.ceil(MAX_STREAMS / len(replays)))
  return [Source(name, address, table, info,
                 replay if is_buffer(replay)
                 else buffer_for(address, table, info, num_steps, timeout,
                                 streams))
          for name, replay, info, (address, table)
          in zip(names, replays, infos, where)]


def check_specs(replays, infos, names) -> None:
  """Every source's data spec equals the reference's (the first buffer's,
  else the first table's)."""
  specs = [replay.data_spec if is_buffer(replay)
           else encoded_spec.decoded_spec(unbatched(info.signature))
           for replay, info in zip(replays, infos)]
  buffers = [i for i, replay in enumerate(replays) if is_buffer(replay)]
  reference = buffers[0] if buffers else 0
  order = buffers + [i for i in range(len(replays)) if i not in buffers]
  for i in order:
    if i == reference:
      continue
    what = (f'{names[i]} data spec' if is_buffer(replays[i])
            else f'{names[i]} table {infos[i].name!r} signature')
    check_same_spec(specs[reference], specs[i], what, names[reference])


def check_keeps_items(source: Source, advice: str) -> None:
  """Sampling must not remove the source's items, or its data drains away."""
  info = source.info
  if info.max_times_sampled > 0:
    raise MixedReplayError(
        f'The {source.name} table {info.name!r} removes an item after '
        f'{wording.count(info.max_times_sampled, "sample")}, so {advice}')


def check_keep(sources: Sequence[Source], allowed: Collection[int]) -> None:
  """`check_keeps_items` for every source not in `allowed` (indices)."""
  for index, source in enumerate(sources):
    if index not in allowed:
      check_keeps_items(
          source, f'the mixture would drain it; use max_times_sampled=0, or '
          f'pass allow_removal=[{index}] if it is an online table that may.')


def is_buffer(replay) -> bool:
  return isinstance(replay, reverb_replay_buffer.ReverbReplayBuffer)


def is_address_and_table(replay) -> bool:
  return (isinstance(replay, tuple) and len(replay) == 2
          and all(isinstance(part, str) for part in replay))


def buffer_place(buffer) -> Tuple[str, str]:
  """(address, table) of a `ReverbReplayBuffer`: the attributes its
  constructor sets (TF-Agents 0.19), 'localhost:PORT' for a local server."""
  return buffer._server_address, buffer._table_name  # pylint: disable=protected-access


def table_info(address: str, table: str, timeout: float):
  """The table's `TableInfo`, within `timeout` seconds."""
  client, _ = server_lib.connect(address)
  return server_lib.table_infos(client, address, [table], timeout)[table]


def unbatched(signature):
  """A table signature's item spec without its leading time dimension."""
  return tf.nest.map_structure(
      lambda spec: tf.TensorSpec(spec.shape[1:], spec.dtype, spec.name),
      signature)


def buffer_for(address: str, table: str, info, num_steps: int,
               timeout: float, streams: int = MAX_STREAMS):
  """A buffer of the table, reading through at most `streams` Reverb
  streams; one that decodes if it holds encoded images. Both read a table
  that removes sampled items through one stream, without stranding them, and
  wait `timeout` seconds for its items (`reading.ReplayBuffer`)."""
  stored_spec = unbatched(info.signature)
  options = dict(sequence_length=num_steps, server_address=address,
                 timeout=timeout)
  if not reading.removes_items(info):
    options['max_cycle_length'] = streams
  if encoded_spec.is_encoded(stored_spec):
    return decoded.EncodedReplayBuffer(stored_spec, table, **options)
  return reading.ReplayBuffer(stored_spec, table, info=info, **options)


def check_same_spec(expected, actual, what: str, reference: str) -> None:
  """Same structure, and the same dtype and shape at every field."""
  try:
    tf.nest.assert_same_structure(expected, actual, check_types=False)
  except (TypeError, ValueError) as e:
    raise MixedReplayError(
        f'The {what} has another structure than the {reference} data spec: '
        f'{paths.nest_text(actual)} vs {paths.nest_text(expected)}.') from e
  actual = tf.nest.pack_sequence_as(expected, tf.nest.flatten(actual))
  differing = [
      f'{path}: {paths.spec_text(a)} vs {paths.spec_text(e)}'
      for path, e, a in paths.spec_differences(
          expected, actual, paths.same_dtype_and_shape)]
  if differing:
    raise MixedReplayError(
        f'The {what} differs from the {reference} data spec: '
        + '; '.join(differing) + '.')
