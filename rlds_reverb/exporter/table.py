"""A table of a checkpoint: its settings, counters and the spec of its items.

`tables.tfrecord` holds one PriorityTableCheckpoint per table. The signature
says what each item column is: an exported table must be signed with a
TF-Agents `Trajectory` whose every field has a time axis, as TF-Agents'
observers, `rlds_reverb.push` and `serve` sign tables. Anything else is
refused, saying why: an unsigned table has no names for its columns (which
is the step type, which the reward), and an n-step transition has no step
types to cut episodes with.
"""

import dataclasses
import os
from typing import Any, List, Optional

from google.protobuf import message as message_lib
import tensorflow as tf
from tf_agents.trajectories import trajectory as trajectory_lib

from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import schema
from rlds_reverb.errors import CheckpointReadError
from rlds_reverb.errors import ExportError
from rlds_reverb.errors import TableNotFoundError
from rlds_reverb.specs import paths


@dataclasses.dataclass(frozen=True)
class Table:
  """What a checkpoint says of one table, besides its items."""
  name: str
  max_size: int
  max_times_sampled: int
  inserted: int  # Items inserted over the table's life (rate limiter).
  deleted: int  # Items removed: evicted or sampled max_times_sampled times.
  deleted_episodes: int  # Reverb episodes no item references any more.
  signature: Optional[Any]  # The decoded signature, or None.


def read(checkpoint: str, name: str) -> Table:
  """The table `name` of the checkpoint directory `checkpoint`.

  Raises:
    TableNotFoundError: no such table; names the tables there are.
    CheckpointReadError: tables.tfrecord is missing, cut short or damaged.
  """
  path = os.path.join(checkpoint, directories.TABLES)
  names: List[str] = []
  for record in records.read_records(path):
    table = _parse(record, path)
    if table.table_name == name:
      return _table(table, path)
    names.append(table.table_name)
  raise TableNotFoundError(
      f"The checkpoint {checkpoint} has no table {name!r}; its tables are "
      f'{sorted(names)}.')


def _parse(record: bytes, path: str):
  try:
    return schema.parse('PriorityTableCheckpoint', record)
  except message_lib.DecodeError as e:
    raise CheckpointReadError(
        f'{path} holds a record that is not a table checkpoint ({e}).') from e


def _table(table, path: str) -> Table:
  return Table(
      name=table.table_name, max_size=table.max_size,
      max_times_sampled=table.max_times_sampled,
      inserted=table.rate_limiter.insert_count,
      deleted=table.rate_limiter.delete_count,
      deleted_episodes=table.num_deleted_episodes,
      signature=_signature(table.signature, table.table_name, path))


def _signature(serialized: bytes, name: str, path: str) -> Optional[Any]:
  """The table's signature (specs with a leading time axis), or None."""
  if not serialized:
    return None
  from tensorflow.core.protobuf import struct_pb2  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    return tf.__internal__.saved_model.decode_proto(
        struct_pb2.StructuredValue.FromString(serialized))
  except (message_lib.DecodeError, ValueError, TypeError) as e:
    raise CheckpointReadError(
        f"{path}: the signature of table '{name}' cannot be decoded ({e})."
    ) from e


def trajectory_spec(table: Table) -> trajectory_lib.Trajectory:
  """The spec of one row of the table's items: the signature without its time
  axis, as a TF-Agents `Trajectory`.

  Raises:
    ExportError: the table is unsigned, or its signature is not a Trajectory
      whose every field has a leading time axis (n-step transitions, items
      of single steps, other structures).
  """
  signature = table.signature
  where = f"Table '{table.name}'"
  if signature is None:
    raise ExportError(
        f'{where} has no signature, so nothing says which column is the step '
        f'type, the observation or the reward: only tables signed with '
        f'TF-Agents trajectories can be exported (TF-Agents, '
        f'rlds_reverb.push and serve sign them).')
  fields = getattr(signature, '_fields', None)
  if tuple(fields or ()) != trajectory_lib.Trajectory._fields:
    kind = type(signature).__name__
    raise ExportError(
        f'{where} holds {kind} items'
        f'{" (" + ", ".join(fields) + ")" if fields else ""}, not TF-Agents '
        f'Trajectories: without step types its items cannot be cut back into '
        f'episodes (n-step transitions and other items are not steps).')
  _check_time_axis(signature, where)
  return trajectory_lib.Trajectory(*[
      tf.nest.map_structure(_without_time_axis, field) for field in signature])


def _without_time_axis(spec):
  """`spec` for one row: its shape without the first (time) dimension."""
  if hasattr(spec, 'minimum'):  # A BoundedTensorSpec keeps its bounds.
    return type(spec)(spec.shape[1:], spec.dtype, minimum=spec.minimum,
                      maximum=spec.maximum, name=spec.name)
  return tf.TensorSpec(spec.shape[1:], spec.dtype, spec.name)


def _check_time_axis(signature, where: str) -> None:
  for path, spec in paths.flatten_with_paths(signature._asdict()):
    if spec.shape.rank is None or spec.shape.rank == 0:
      raise ExportError(
          f'{where}: field {path} is {paths.spec_text(spec)}, without a '
          f'leading time axis: its items are single steps, not sequences of '
          f'trajectories.')



def columns(spec: trajectory_lib.Trajectory) -> List[Any]:
  """The row spec of each item column, in Reverb's column order (the
  signature flattened)."""
  return tf.nest.flatten(spec)


def column_of(spec: trajectory_lib.Trajectory, field: str) -> int:
  """The item column of a top-level scalar field ('step_type', ...)."""
  before = trajectory_lib.Trajectory._fields.index(field)
  return sum(len(tf.nest.flatten(spec[i])) for i in range(before))
