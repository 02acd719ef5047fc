"""The checkpoint schema's field numbers and types are those of the protos
dm-reverb and TensorFlow ship (`checkpoints.schema` declares them itself, so
that reading and writing a checkpoint need protobuf alone)."""

import pytest
from google.protobuf import timestamp_pb2
from reverb.cc import schema_pb2
from reverb.cc.checkpointing import checkpoint_pb2
from tensorflow.core.framework import tensor_pb2
from tensorflow.core.framework import tensor_shape_pb2

from rlds_reverb.checkpoints import schema

SHIPPED = {
    'SequenceRange': schema_pb2.SequenceRange,
    'ChunkData': schema_pb2.ChunkData,
    'ChunkTensors': schema_pb2.ChunkData.Data,
    'ChunkSlice': schema_pb2.FlatTrajectory.ChunkSlice,
    'Column': schema_pb2.FlatTrajectory.Column,
    'FlatTrajectory': schema_pb2.FlatTrajectory,
    'PrioritizedItem': schema_pb2.PrioritizedItem,
    'KeyDistributionOptions': schema_pb2.KeyDistributionOptions,
    'Prioritized': schema_pb2.KeyDistributionOptions.Prioritized,
    'Heap': schema_pb2.KeyDistributionOptions.Heap,
    'TableInfo': schema_pb2.TableInfo,
    'RateLimiterCheckpoint': checkpoint_pb2.RateLimiterCheckpoint,
    'PriorityTableCheckpoint': checkpoint_pb2.PriorityTableCheckpoint,
    'Timestamp': timestamp_pb2.Timestamp,
    'Dim': tensor_shape_pb2.TensorShapeProto.Dim,
    'TensorShapeProto': tensor_shape_pb2.TensorShapeProto,
    'TensorProto': tensor_pb2.TensorProto,
}


def test_every_declared_message_is_checked():
  assert sorted(SHIPPED) == sorted(schema.FIELDS)


@pytest.mark.parametrize('message', sorted(schema.FIELDS))
def test_field_numbers_and_names_match_the_shipped_protos(message):
  shipped = SHIPPED[message].DESCRIPTOR.fields_by_number
  for name, number, _, _ in schema.FIELDS[message]:
    assert number in shipped, (message, name, number)
    assert shipped[number].name == name, (message, name, number)


# Declared kinds and the shipped types they stand for ('bytes' may hold a
# message, parsed or built elsewhere: ChunkData.data, the signature).
_TYPES = {'uint64': ['TYPE_UINT64'], 'int64': ['TYPE_INT64'],
          'int32': ['TYPE_INT32', 'TYPE_ENUM'], 'bool': ['TYPE_BOOL'],
          'double': ['TYPE_DOUBLE'], 'string': ['TYPE_STRING'],
          'bytes': ['TYPE_BYTES', 'TYPE_MESSAGE'],
          'repeated_bytes': ['TYPE_BYTES'], 'message': ['TYPE_MESSAGE'],
          'repeated': ['TYPE_MESSAGE']}


@pytest.mark.parametrize('message', sorted(schema.FIELDS))
def test_field_types_and_labels_match_the_shipped_protos(message):
  """A writer puts bytes on the wire by these kinds: a changed type or label
  in dm-reverb would make its records unreadable to Reverb."""
  shipped = SHIPPED[message].DESCRIPTOR.fields_by_number
  for name, number, kind, _ in schema.FIELDS[message]:
    field = shipped[number]
    type_names = [n for n, v in field.__class__.__dict__.items()
                  if n.startswith('TYPE_') and v == field.type]
    assert set(type_names) & set(_TYPES[kind]), (message, name, type_names)
    repeated = field.label == field.LABEL_REPEATED
    assert repeated == kind.startswith('repeated'), (message, name)
