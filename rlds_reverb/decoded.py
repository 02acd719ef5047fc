"""Tables of encoded images read back decoded: what the learner samples.

    table (signature: 'observation' tf.string[2], named
           'rlds_reverb_image.png.uint8.72x96x3')
      -> reverb.TrajectoryDataset: strings [L]
      -> decode each sequence (TensorFlow's `decode_image`, as TFDS decodes
         its Image features): uint8 [L, 72, 96, 3]
      -> batch: (Trajectory [B, L, ...], SampleInfo [B, L]), as
         `ReverbReplayBuffer.as_dataset` gives from a raw table

`EncodedReplayBuffer` is a `ReverbReplayBuffer` whose `data_spec` is the
decoded spec: `agent.train` takes its datasets unchanged. It decodes each
sequence in the interleaved Reverb streams (`num_parallel_calls` of them at
once). `decode_images` wraps any dataset of stored elements (a
`reverb.TrajectoryDataset` of your own, batched or not).
"""

import functools
from typing import Any, Optional

import tensorflow as tf
from tf_agents.specs import tensor_spec

from rlds_reverb import _reading as reading
from rlds_reverb.errors import ImageFieldError
from rlds_reverb.specs import encoded as encoded_spec
from rlds_reverb.specs import paths

DEFAULT_TIMEOUT_S = reading.DEFAULT_TIMEOUT_S


def decode_images(dataset: tf.data.Dataset, stored_spec_or_signature: Any,
                  num_parallel_calls: Optional[int] = None
                  ) -> tf.data.Dataset:
  """`dataset` with the encoded image fields decoded to uint8 frames.

  Args:
    dataset: elements of the stored structure (a table's items, with any
      leading axes: time, batch), or tuples whose first part is (as
      `(trajectory, SampleInfo)` or a `reverb.ReplaySample`'s `data`).
    stored_spec_or_signature: the table signature or the stored item spec
      (`specs.encoded`); only its structure and names are used.
    num_parallel_calls: for the decoding `map` (None: sequential;
      `tf.data.AUTOTUNE`).

  Raises:
    ImageFieldError: the elements do not have the spec's structure.
  """
  decode = decoder(stored_spec_or_signature)
  element = dataset.element_spec
  if _same_structure(element, stored_spec_or_signature):
    fn = decode
  elif isinstance(element, tuple) and element and _same_structure(
      element[0], stored_spec_or_signature):
    fn = functools.partial(_decode_first, decode=decode)
  elif hasattr(element, 'data') and _same_structure(
      element.data, stored_spec_or_signature):
    fn = functools.partial(_decode_data, decode=decode)
  else:
    raise ImageFieldError(
        f'The dataset elements ({paths.nest_text(element)}) do not have the '
        f'structure of the stored spec '
        f'({paths.nest_text(stored_spec_or_signature)}), nor does their '
        f'first part.')
  return dataset.map(fn, num_parallel_calls=num_parallel_calls,
                     deterministic=True)


def decoder(stored_spec: Any):
  """A function decoding a structure of the stored spec's (any leading
  axes) into the decoded spec's."""
  images = [encoded_spec.image_of(spec) for spec in tf.nest.flatten(
      stored_spec)]
  return functools.partial(_decode_structure, images=images)


def _decode_structure(structure, images):
  leaves = tf.nest.flatten(structure)
  decoded = [leaf if image is None else decode_frames(leaf, image)
             for leaf, image in zip(leaves, images, strict=True)]
  return tf.nest.pack_sequence_as(structure, decoded)


def _decode_first(first, *rest, decode):
  return (decode(first),) + rest


def _decode_data(sample, decode):
  return sample._replace(data=decode(sample.data))


def decode_frames(strings: tf.Tensor, image: encoded_spec.EncodedImage
                  ) -> tf.Tensor:
  """[...] encoded frames -> [..., H, W, C], decoded as TFDS decodes."""
  flat = tf.reshape(strings, [-1])
  frame = image.frame
  decoded = tf.map_fn(
      functools.partial(_decode_one, image=image), flat,
      fn_output_signature=tf.TensorSpec(frame.shape, frame.dtype))
  frame_shape = tf.shape(decoded)[1:]
  result = tf.reshape(decoded, tf.concat([tf.shape(strings), frame_shape], 0))
  return tf.ensure_shape(result, strings.shape.concatenate(frame.shape))


def _decode_one(data: tf.Tensor, image: encoded_spec.EncodedImage):
  frame = tf.image.decode_image(data, channels=image.channels,
                                dtype=image.frame.dtype,
                                expand_animations=False)
  return tf.ensure_shape(frame, image.frame.shape)


def _same_structure(a, b) -> bool:
  try:
    tf.nest.assert_same_structure(a, b, check_types=False)
  except (TypeError, ValueError):
    return False
  return True


def stored_item_spec(signature: Any) -> Any:
  """A table signature's item spec without the time axis, names and
  bounds kept (the data spec the table was made from)."""
  return tensor_spec.remove_outer_dims_nest(signature, 1)


class EncodedReplayBuffer(reading.ReplayBuffer):
  """A `ReverbReplayBuffer` of a table of encoded images, sampled decoded.

  `data_spec` is the decoded spec (what a raw table's buffer has), and
  `as_dataset` yields the elements a raw table's buffer yields, frames
  decoded. Without `data_spec`, the stored spec comes from the table's
  signature on the server. A table that removes sampled items is read as
  `reading.ReplayBuffer` reads it (one stream, a bounded wait).
  """

  def __init__(self, data_spec: Any = None, table_name: str = '',
               sequence_length: Optional[int] = None,
               server_address: Optional[str] = None,
               local_server: Any = None,
               timeout: float = DEFAULT_TIMEOUT_S, **kwargs):
    """As `ReverbReplayBuffer`; `data_spec` is the stored spec (names say
    what is encoded), or None to read it from the table's signature. The
    table's settings are read within `timeout` seconds, which is also how
    long a table that removes sampled items is waited for (see
    `reading.ReplayBuffer`).

    Raises:
      ImageFieldError: the table has no signature and no spec is given.
      ServerUnavailableError, TableNotFoundError: reading the table settings.
    """
    address = (server_address if local_server is None
               else f'localhost:{local_server.port}')
    info = reading.table_info(address, table_name, timeout)
    if data_spec is None:
      data_spec = _signed_item_spec(info, address)
    self._stored_spec = data_spec
    self._decoded_spec = encoded_spec.decoded_spec(data_spec)
    self._decode = decoder(data_spec)
    super().__init__(data_spec, table_name, sequence_length,
                     server_address=server_address,
                     local_server=local_server, timeout=timeout, info=info,
                     **kwargs)

  @property
  def data_spec(self):
    """The decoded spec: what `as_dataset` yields, per step."""
    return self._decoded_spec

  @property
  def stored_spec(self):
    """The spec of what the table holds (strings for encoded frames)."""
    return self._stored_spec

  def _decoded_first(self, sequence_preprocess_fn):
    if sequence_preprocess_fn is None:
      return self._decode
    return lambda data: sequence_preprocess_fn(self._decode(data))

  def _as_dataset(self, sample_batch_size=None, num_steps=None,
                  sequence_preprocess_fn=None, num_parallel_calls=None):
    return super()._as_dataset(
        sample_batch_size, num_steps,
        self._decoded_first(sequence_preprocess_fn), num_parallel_calls)

  def _single_deterministic_pass_dataset(
      self, sample_batch_size=None, num_steps=None,
      sequence_preprocess_fn=None, num_parallel_calls=None):
    return super()._single_deterministic_pass_dataset(
        sample_batch_size, num_steps,
        self._decoded_first(sequence_preprocess_fn), num_parallel_calls)


def _signed_item_spec(info, address: str) -> Any:
  if info.signature is None:
    raise ImageFieldError(
        f'Table {info.name!r} at {address} has no signature: pass the stored '
        f'data_spec to EncodedReplayBuffer.')
  return stored_item_spec(info.signature)
