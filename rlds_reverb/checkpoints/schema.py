"""The parts of Reverb's and TensorFlow's protos that a checkpoint's readers and
writers need.

Declared here, by field number, instead of importing Reverb's generated
modules: reading a checkpoint then needs protobuf alone, and protobuf skips
the fields left out. Sources (dm-reverb 0.14.0): `reverb/cc/schema.proto`
(ChunkData, SequenceRange, FlatTrajectory, PrioritizedItem,
KeyDistributionOptions, and TableInfo for `reverb_native`),
`reverb/cc/checkpointing/checkpoint.proto` (PriorityTableCheckpoint,
RateLimiterCheckpoint); TensorFlow's `tensor.proto`, `tensor_shape.proto`;
protobuf's `timestamp.proto`. `tests/test_checkpoint_schema.py` checks each
number against the descriptors dm-reverb ships.

Three fields are declared as `bytes`, to be parsed later or never:
`ChunkData.data` (only the chunks a table needs are decoded),
`PriorityTableCheckpoint.signature` (a TensorFlow `StructuredValue`, decoded
and encoded by TensorFlow) and `PrioritizedItem.deprecated_sequence_range`
(present only in checkpoints older than 2021, which this reader refuses).
`KeyDistributionOptions` declares its oneof's members as plain fields: a
writer sets exactly one (Reverb's loader aborts the server on none).
"""

import functools

# message: [(name, number, kind, message type of a nested field)]; a kind
# 'repeated' is a repeated message field.
FIELDS = {
    # reverb/cc/schema.proto
    'SequenceRange': [('episode_id', 1, 'uint64', None),
                      ('start', 2, 'int32', None), ('end', 3, 'int32', None),
                      ('sparse', 4, 'bool', None)],
    'ChunkData': [('chunk_key', 1, 'uint64', None),
                  ('sequence_range', 2, 'message', 'SequenceRange'),
                  ('delta_encoded', 4, 'bool', None),
                  ('data', 5, 'bytes', None),
                  ('data_tensors_len', 6, 'int32', None),
                  ('data_uncompressed_size', 7, 'int64', None)],
    'ChunkTensors': [('tensors', 1, 'repeated', 'TensorProto')],  # ChunkData.Data
    'ChunkSlice': [('chunk_key', 1, 'uint64', None),
                   ('offset', 2, 'int32', None), ('length', 3, 'int32', None),
                   ('index', 4, 'int32', None)],
    'Column': [('chunk_slices', 1, 'repeated', 'ChunkSlice'),
               ('squeeze', 2, 'bool', None)],
    'FlatTrajectory': [('columns', 1, 'repeated', 'Column')],
    'PrioritizedItem': [('key', 1, 'uint64', None),
                        ('table', 2, 'string', None),
                        ('deprecated_sequence_range', 4, 'bytes', None),
                        ('priority', 5, 'double', None),
                        ('times_sampled', 6, 'int32', None),
                        ('inserted_at', 7, 'message', 'Timestamp'),
                        ('flat_trajectory', 8, 'message', 'FlatTrajectory')],
    'KeyDistributionOptions': [
        ('fifo', 1, 'bool', None), ('uniform', 2, 'bool', None),
        ('prioritized', 3, 'message', 'Prioritized'),
        ('heap', 4, 'message', 'Heap'), ('lifo', 6, 'bool', None),
        ('is_deterministic', 7, 'bool', None)],
    'Prioritized': [('priority_exponent', 1, 'double', None)],
    'Heap': [('min_heap', 1, 'bool', None)],
    'TableInfo': [('max_size', 3, 'int64', None),  # What a server answers.
                  ('current_size', 7, 'int64', None),
                  ('name', 8, 'string', None)],
    # reverb/cc/checkpointing/checkpoint.proto
    'RateLimiterCheckpoint': [('samples_per_insert', 2, 'double', None),
                              ('min_diff', 3, 'double', None),
                              ('max_diff', 4, 'double', None),
                              ('min_size_to_sample', 5, 'int64', None),
                              ('sample_count', 6, 'int64', None),
                              ('insert_count', 7, 'int64', None),
                              ('delete_count', 8, 'int64', None)],
    'PriorityTableCheckpoint': [
        ('table_name', 1, 'string', None),
        ('rate_limiter', 3, 'message', 'RateLimiterCheckpoint'),
        ('sampler', 4, 'message', 'KeyDistributionOptions'),
        ('remover', 5, 'message', 'KeyDistributionOptions'),
        ('max_size', 6, 'int64', None),
        ('max_times_sampled', 7, 'int32', None),
        ('num_deleted_episodes', 8, 'int64', None),
        ('signature', 9, 'bytes', None),
        ('num_unique_samples', 10, 'int64', None)],
    # google/protobuf/timestamp.proto
    'Timestamp': [('seconds', 1, 'int64', None), ('nanos', 2, 'int32', None)],
    # tensorflow/core/framework/tensor_shape.proto, tensor.proto
    'Dim': [('size', 1, 'int64', None)],  # TensorShapeProto.Dim
    'TensorShapeProto': [('dim', 2, 'repeated', 'Dim')],
    'TensorProto': [('dtype', 1, 'int32', None),  # enum DataType
                    ('tensor_shape', 2, 'message', 'TensorShapeProto'),
                    ('tensor_content', 4, 'bytes', None),
                    ('string_val', 8, 'repeated_bytes', None)],
}

_PACKAGE = 'rlds_reverb_checkpoint'


@functools.lru_cache(maxsize=None)
def classes():
  """{message name: message class} for `FIELDS`, built once."""
  from google.protobuf import descriptor_pb2  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from google.protobuf import descriptor_pool  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from google.protobuf import message_factory  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  field = descriptor_pb2.FieldDescriptorProto
  types = {'uint64': field.TYPE_UINT64, 'int64': field.TYPE_INT64,
           'int32': field.TYPE_INT32, 'bool': field.TYPE_BOOL,
           'double': field.TYPE_DOUBLE,
           'string': field.TYPE_STRING, 'bytes': field.TYPE_BYTES,
           'repeated_bytes': field.TYPE_BYTES}
  file = descriptor_pb2.FileDescriptorProto(
      name=f'{_PACKAGE}.proto', package=_PACKAGE, syntax='proto3')
  for message_name, message_fields in FIELDS.items():
    message = file.message_type.add(name=message_name)
    for name, number, kind, type_name in message_fields:
      repeated = kind in ('repeated', 'repeated_bytes')
      proto = message.field.add(
          name=name, number=number,
          label=field.LABEL_REPEATED if repeated else field.LABEL_OPTIONAL)
      if type_name:
        proto.type = field.TYPE_MESSAGE
        proto.type_name = f'.{_PACKAGE}.{type_name}'
      else:
        proto.type = types[kind]
  pool = descriptor_pool.DescriptorPool()
  pool.Add(file)
  return {name: message_factory.GetMessageClass(
      pool.FindMessageTypeByName(f'{_PACKAGE}.{name}')) for name in FIELDS}


def parse(message: str, data: bytes):
  """`data` parsed as the message `message` of `FIELDS`."""
  return classes()[message].FromString(data)
