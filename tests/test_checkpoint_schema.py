"""The checkpoint reader's field numbers are those of the protos dm-reverb
and TensorFlow ship (`checkpoints.schema` declares them itself, so that
reading a checkpoint needs protobuf alone)."""

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
