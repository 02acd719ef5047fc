"""Reverb checkpoint directories, read the way Reverb's checkpointer reads them.

`reverb.checkpointers.DefaultCheckpointer(root)` writes each checkpoint into a
new subdirectory named by the time, and its `DONE` file last:

    root/
      2024-05-01T10:00:00.1+00:00/   tables.tfrecord chunks.tfrecord
                                     items.tfrecord DONE
      2024-05-01T11:00:00.2+00:00/   tables.tfrecord     (no DONE: the server
                                                          died while writing)

At start Reverb loads the last subdirectory by name that has `DONE` and skips
the others without a word; after each checkpoint it deletes every entry of
`root` but the newest. This module tells the user what Reverb will do, and what a checkpoint holds
(`chunk_lengths`). Plain `os` and protobuf only: the command line imports
TensorFlow and Reverb late.
"""

from collections import Counter
import dataclasses
import os
import struct
import tempfile
from typing import Dict, Iterator, List, Optional, Tuple
import zlib

DONE = 'DONE'
_CHUNKS = 'chunks.tfrecord'


@dataclasses.dataclass(frozen=True)
class Checkpoints:
  """The checkpoint subdirectories of `root`, oldest first (names are times)."""
  root: str
  complete: Tuple[str, ...]
  incomplete: Tuple[str, ...]

  @property
  def newest(self) -> Optional[str]:
    """The subdirectory Reverb loads at start, or None: it starts empty."""
    return self.complete[-1] if self.complete else None

  def path(self, name: str) -> str:
    return os.path.join(self.root, name)


def find(root: str) -> Checkpoints:
  """The complete and incomplete checkpoints in `root` (none if missing)."""
  names = sorted(_subdirectories(root))
  complete = tuple(name for name in names if _is_complete(root, name))
  incomplete = tuple(name for name in names if name not in complete)
  return Checkpoints(root=root, complete=complete, incomplete=incomplete)


def _subdirectories(root: str):
  if not os.path.isdir(root):
    return []
  return [entry.name for entry in os.scandir(root) if entry.is_dir()]


def _is_complete(root: str, name: str) -> bool:
  return os.path.exists(os.path.join(root, name, DONE))


def writable_error(root: str) -> Optional[str]:
  """Why Reverb could not write a checkpoint under `root`, or None.

  Creates `root` if missing and a subdirectory in it, as Reverb does, so a
  bad path fails at start rather than at shutdown, when the data would be lost.
  """
  if os.path.exists(root) and not os.path.isdir(root):
    return f'{root} is not a directory'
  try:
    os.makedirs(root, exist_ok=True)
    os.rmdir(tempfile.mkdtemp(prefix='.write-test-', dir=root))
  except OSError as e:
    return f'{root} is not writable: {e.strerror or e}'
  return None


# --- What a checkpoint holds: chunk lengths per item column. -----------------
#
# Each file of a checkpoint is one zlib stream of TFRecords: `chunks.tfrecord`
# of ChunkData protos, `items.tfrecord` of PrioritizedItem protos (Reverb's
# `schema.proto`). Only the fields read here are declared; protobuf skips
# the rest.

_SCHEMA_FIELDS = {
    # message: [(name, number, type, message type of a nested field)]
    'SequenceRange': [('episode_id', 1, 'uint64', None), ('start', 2, 'int32', None),
                      ('end', 3, 'int32', None)],
    'ChunkData': [('chunk_key', 1, 'uint64', None),
                  ('sequence_range', 2, 'message', 'SequenceRange')],
    'ChunkSlice': [('chunk_key', 1, 'uint64', None), ('offset', 2, 'int32', None),
                   ('length', 3, 'int32', None)],
    'Column': [('chunk_slices', 1, 'repeated', 'ChunkSlice')],
    'FlatTrajectory': [('columns', 1, 'repeated', 'Column')],
    'PrioritizedItem': [('key', 1, 'uint64', None), ('table', 2, 'string', None),
                        ('flat_trajectory', 8, 'message', 'FlatTrajectory')],
}


def chunk_lengths(path: str) -> Dict[str, List[Counter]]:
  """Per table, per item column: a Counter of the lengths of its chunks.

  `path` is one checkpoint's directory, or the directory Reverb checkpoints
  into (`serve --checkpoint-dir`, `DefaultCheckpointer(path)`): then its
  newest complete checkpoint, the one Reverb would load, is read. A chunk's
  length is the number of steps it holds; each chunk counts once per table.

  Raises:
    FileNotFoundError: `path` is neither, naming what it holds instead.
  """
  checkpoint = checkpoint_path(path)
  classes = _schema_classes()
  chunks = {}
  for record in read_records(os.path.join(checkpoint, _CHUNKS)):
    chunk = classes['ChunkData'].FromString(record)
    chunks[chunk.chunk_key] = chunk.sequence_range.end - chunk.sequence_range.start + 1
  result: Dict[str, List[Counter]] = {}
  seen = set()
  for record in read_records(os.path.join(checkpoint, 'items.tfrecord')):
    item = classes['PrioritizedItem'].FromString(record)
    columns = item.flat_trajectory.columns
    counters = result.setdefault(item.table, [Counter() for _ in columns])
    for counter, column in zip(counters, columns):
      for chunk_slice in column.chunk_slices:
        if (item.table, chunk_slice.chunk_key) not in seen:
          seen.add((item.table, chunk_slice.chunk_key))
          counter[chunks[chunk_slice.chunk_key]] += 1
  return result


def checkpoint_path(path: str) -> str:
  """`path` if it is one checkpoint, else its newest complete checkpoint."""
  if os.path.isfile(os.path.join(path, _CHUNKS)):
    return path
  found = find(path)
  if found.newest:
    return found.path(found.newest)
  if not os.path.isdir(path):
    raise FileNotFoundError(f'No Reverb checkpoint at {path}: no such '
                            'directory')
  raise FileNotFoundError(
      f'No Reverb checkpoint at {path}: it holds no {_CHUNKS}, and no '
      f'checkpoint directory with a {DONE} file'
      f'{_listed(found.incomplete)}')


def _listed(names: Tuple[str, ...], most: int = 3) -> str:
  """' (among a, b, c and 2 more)' for messages; '' for none."""
  if not names:
    return ''
  more = f' and {len(names) - most} more' if len(names) > most else ''
  return f' (among {", ".join(names[:most])}{more})'


def read_records(path: str) -> Iterator[bytes]:
  """The records of a zlib-compressed TFRecord file (CRCs not checked).

  Raises:
    ValueError: the file is cut short or not zlib (a checkpoint being
      written, or damaged), naming it.
  """
  with open(path, 'rb') as f:
    try:
      data = zlib.decompress(f.read())
    except zlib.error as e:
      raise ValueError(f'{path} is not a complete zlib-compressed TFRecord '
                       f'file ({e})') from e
  position = 0
  while position < len(data):
    start = position + 12  # length, its CRC
    length = (struct.unpack_from('<Q', data, position)[0]
              if start <= len(data) else 0)
    if start + length + 4 > len(data):  # data, its CRC
      raise ValueError(f'{path} ends inside a record: the one at byte '
                       f'{position} of {len(data)} (decompressed)')
    yield data[start:start + length]
    position = start + length + 4


def _schema_classes():
  """Message classes for `_SCHEMA_FIELDS` (deepmind.reverb field numbers)."""
  from google.protobuf import descriptor_pb2  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from google.protobuf import descriptor_pool  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from google.protobuf import message_factory  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  field = descriptor_pb2.FieldDescriptorProto
  types = {'uint64': field.TYPE_UINT64, 'int32': field.TYPE_INT32,
           'string': field.TYPE_STRING}
  file = descriptor_pb2.FileDescriptorProto(
      name='rlds_reverb_checkpoint_schema.proto',
      package='rlds_reverb_checkpoint', syntax='proto3')
  for message_name, message_fields in _SCHEMA_FIELDS.items():
    message = file.message_type.add(name=message_name)
    for name, number, kind, type_name in message_fields:
      proto = message.field.add(name=name, number=number,
                                label=(field.LABEL_REPEATED if kind == 'repeated'
                                       else field.LABEL_OPTIONAL))
      if type_name:
        proto.type = field.TYPE_MESSAGE
        proto.type_name = f'.rlds_reverb_checkpoint.{type_name}'
      else:
        proto.type = types[kind]
  pool = descriptor_pool.DescriptorPool()
  pool.Add(file)
  return {name: message_factory.GetMessageClass(
      pool.FindMessageTypeByName(f'rlds_reverb_checkpoint.{name}'))
          for name in _SCHEMA_FIELDS}
