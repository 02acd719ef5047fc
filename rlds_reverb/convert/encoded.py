"""Image fields kept encoded (PNG/JPEG bytes) on their way to Reverb.

    ImageStorage('encoded')     (push's images='encoded')
    TFDS source, Image fields   record -> parse, `SkipDecoding` on them
                                (`whole_reads`): the dataset's own bytes,
                                never decoded
    uint8 [H, W, C] fields      whole episode [T, H, W, C] -> encode_png
    (a tf.data source, or       (or encode_jpeg) -> [T] strings
    named by its `fields`)
    then: the same conversion, checks and writer as raw frames, on a string
    per frame; the step spec names what the string holds (`specs.encoded`)

Which fields: the storage's `fields` if given, else the source's uint8 Image
features, else every uint8 [H, W, C] step field. The checks before writing
read the encoded bytes only (`whole(.., keep_encoded=True)` gives them);
frames encoded here are not encoded twice. `frame_shape` reads a PNG's or
JPEG's header (no decoding) for the check that frames fit the spec, and
`blank_frame` is the encoded frame of zeros that pads episodes.
"""

import dataclasses
import functools
import struct
from typing import Any, Dict, FrozenSet, Optional, Sequence, Tuple, Union

import numpy as np
import tensorflow as tf

from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.errors import ColumnMismatchError
from rlds_reverb.errors import ImageFieldError
from rlds_reverb.push_options import ImageStorage
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import encoded as encoded_spec
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths
from rlds_reverb.specs import step_spec as step_spec_lib

# Episodes encoded at the same time, in order.
_PARALLEL_EPISODES = 2
_ENCODERS = {'png': tf.io.encode_png, 'jpeg': tf.io.encode_jpeg}


@dataclasses.dataclass(frozen=True)
class Encoding:
  """The step fields stored encoded, and which of them are encoded here."""
  images: Dict[str, encoded_spec.EncodedImage]  # step path -> image
  at_push: FrozenSet[str]  # Raw in the source: encoded by the push.

  def named(self, step_format: step_spec_lib.StepFormat
            ) -> step_spec_lib.StepFormat:
    """`step_format` whose spec names what each encoded field holds: the
    specs of trajectories, transitions and table signatures follow."""
    spec = encoded_spec.encoded_spec(
        _with_frames(step_format.spec, self.images),
        {path: image.format for path, image in self.images.items()})
    return dataclasses.replace(step_format, spec=spec)


def prepare(rlds_data: tf.data.Dataset,
            storage: Union[str, ImageStorage] = ImageStorage()
            ) -> Tuple[tf.data.Dataset, Optional[Encoding]]:
  """The data a push writes, and its `Encoding` (None for raw images).

  Raw: `rlds_data` itself. Encoded: episodes read whole, each image field
  a [T] string tensor. `storage` may be given as its mode ('encoded').

  Raises:
    ImageFieldError: a named field that is not in the steps or not uint8
      [H, W, C]; no image field at all.
  """
  storage = ImageStorage.of(storage)
  if not storage.encoded:
    return rlds_data, None
  encoding = encoding_of(rlds_data, storage)
  kept = frozenset(encoding.images) - encoding.at_push
  data = _whole(rlds_data, kept)
  light = data  # What the checks before writing read: nothing encoded.
  if encoding.at_push:
    data = data.map(functools.partial(_encode_fields, encoding=encoding),
                    num_parallel_calls=_PARALLEL_EPISODES, deterministic=True)
  return whole_reads.remember(
      data, functools.partial(_views, encoded=data, light=light)), encoding


def mean_encoded_bytes(rlds_data: tf.data.Dataset,
                       storage: ImageStorage = ImageStorage('encoded')
                       ) -> Dict[str, float]:
  """Step path -> mean bytes of an encoded frame, in the first episode with
  steps: what a table's encoded items hold, which no spec can say."""
  data, encoding = prepare(rlds_data, storage)
  for episode in data:
    steps = dict(paths.flatten_with_paths(episode[fields.STEPS]))
    frames = {path: steps[path].numpy() for path in encoding.images}
    if all(len(values) for values in frames.values()):
      return {path: float(np.mean([len(value) for value in values]))
              for path, values in frames.items()}
  return {}


def encoding_of(rlds_data: tf.data.Dataset,
                storage: ImageStorage = ImageStorage('encoded')) -> Encoding:
  """Which step fields `prepare` stores encoded (`storage`'s), and how."""
  step_spec = _stored_step_spec(rlds_data)
  flat = dict(paths.flatten_with_paths(step_spec))
  source = whole_reads.image_fields(rlds_data)
  if storage.fields is None:
    chosen = list(source) or [path for path, spec in flat.items()
                              if _is_frame(spec)]
    if not chosen:
      raise ImageFieldError(
          "images='encoded', but the steps have no image field (a uint8 "
          '[H, W, C] field or a tfds.features.Image); name them with '
          'image_fields (--image-field).')
  else:
    chosen = [path.strip('/') for path in storage.fields]
  images, at_push = {}, set()
  for path in chosen:
    if path not in flat:
      raise ImageFieldError(
          f"Image field '{path}' is no field of the steps; they are "
          f'{", ".join(sorted(flat))}.')
    frame = encoded_spec.check_frame_spec(flat[path], path)
    if path in source:
      images[path] = encoded_spec.EncodedImage(
          source[path] or encoded_spec.ANY_FORMAT, frame)
    else:
      images[path] = encoded_spec.EncodedImage(storage.format, frame)
      at_push.add(path)
  return Encoding(images, frozenset(at_push))


def _stored_step_spec(rlds_data: tf.data.Dataset) -> Dict[str, Any]:
  spec = rlds_data.element_spec
  steps = spec.get(fields.STEPS) if isinstance(spec, dict) else None
  if isinstance(steps, tf.data.DatasetSpec):
    return steps.element_spec
  # Raises the step format's own error for data without steps.
  return step_spec_lib.step_format(rlds_data).stored


def _is_frame(spec: Any) -> bool:
  return (isinstance(spec, tf.TensorSpec) and spec.dtype == tf.uint8 and
          spec.shape.rank == 3 and spec.shape[-1] in (1, 3, 4))


def _with_frames(step_spec, images):
  """The step spec with each image field's frame spec (for `encoded_spec`)."""
  flat = paths.flatten_with_paths(step_spec)
  leaves = [images[path].frame if path in images else spec
            for path, spec in flat]
  return tf.nest.pack_sequence_as(step_spec, leaves)


def _views(keep_encoded: whole_reads.KeepEncoded, encoded, light
           ) -> tf.data.Dataset:
  """`whole(data, keep_encoded)`: the checks (True) read no encoding."""
  return encoded if keep_encoded is False else light


def _whole(rlds_data: tf.data.Dataset, kept: FrozenSet[str]
           ) -> tf.data.Dataset:
  """Episodes with steps as [T, ...] tensors, the `kept` images encoded."""
  if _can_read_whole(rlds_data):
    return whole_reads.whole(rlds_data, keep_encoded=kept)
  if episodes_lib.is_whole(rlds_data):
    return rlds_data
  empty = episodes_lib.zero_steps(_stored_step_spec(rlds_data), 0)
  return rlds_data.interleave(
      functools.partial(_batched_episode, empty=empty),
      cycle_length=_PARALLEL_EPISODES, num_parallel_calls=_PARALLEL_EPISODES,
      deterministic=True)


def _can_read_whole(rlds_data) -> bool:
  return whole_reads.whole(rlds_data, keep_encoded=True) is not rlds_data


def _batched_episode(episode, empty) -> tf.data.Dataset:
  """One element: the episode with its steps batched whole ([0, ...] when
  it has none, so that positions stay those of the data)."""
  steps = episode[fields.STEPS].batch(episodes_lib.WHOLE_EPISODE)
  one = steps.concatenate(tf.data.Dataset.from_tensors(empty)).take(1)
  metadata = {name: value for name, value in episode.items()
              if name != fields.STEPS}
  return one.map(functools.partial(_with_metadata, metadata=metadata))


def _with_metadata(steps, metadata):
  return {**metadata, fields.STEPS: steps}


def _encode_fields(episode, encoding: Encoding):
  """The `at_push` fields of a whole episode, [T, H, W, C] -> [T] strings."""
  episode = dict(episode)
  steps = episode[fields.STEPS]
  for path in sorted(encoding.at_push):
    encode = _ENCODERS[encoding.images[path].format]
    steps = _replaced(steps, path.split('/'), functools.partial(
        tf.map_fn, encode, fn_output_signature=tf.TensorSpec([], tf.string)))
  episode[fields.STEPS] = steps
  return episode


def _replaced(structure, keys, fn):
  structure = dict(structure)
  key = keys[0]
  structure[key] = (fn(structure[key]) if len(keys) == 1
                    else _replaced(structure[key], keys[1:], fn))
  return structure


# --- Frames as bytes: header dimensions and the blank frame. ---

_PNG_SIGNATURE = b'\x89PNG\r\n\x1a\n'
# PNG colour type -> channels (3, palette: as decoded, RGB or RGBA).
_PNG_CHANNELS = {0: 1, 2: 3, 3: None, 4: 2, 6: 4}
# JPEG start-of-frame markers (baseline, progressive, ...), not DHT/JPG/DAC.
_JPEG_SOF = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


def frame_shape(data: bytes) -> Optional[Tuple[int, int, Optional[int]]]:
  """(height, width, channels) from a PNG's or JPEG's header; None if the
  bytes are neither. Channels are None for a palette PNG (it decodes to 3
  or 4)."""
  if data[:8] == _PNG_SIGNATURE and len(data) >= 26:
    width, height = struct.unpack('>II', data[16:24])
    return height, width, _PNG_CHANNELS.get(data[25], -1)
  if data[:2] == b'\xff\xd8':
    return _jpeg_shape(data)
  return None


def _jpeg_shape(data: bytes) -> Optional[Tuple[int, int, int]]:
  position = 2
  while position + 4 <= len(data):
    if data[position] != 0xFF:
      return None
    marker = data[position + 1]
    if marker == 0xFF:  # Fill byte.
      position += 1
      continue
    if marker in (0xD8, 0x01) or 0xD0 <= marker <= 0xD7:
      position += 2
      continue
    (length,) = struct.unpack('>H', data[position + 2:position + 4])
    if marker in _JPEG_SOF and position + 10 <= len(data):
      height, width = struct.unpack('>HH', data[position + 5:position + 9])
      return height, width, data[position + 9]
    position += 2 + length
  return None


def check_frames(path: str, image: encoded_spec.EncodedImage,
                 frames: np.ndarray, where: str,
                 first_step: int = 0) -> None:
  """Raises unless every frame's header fits `image`'s frame spec.

  Args:
    path: the field, for the message.
    image: what the table says the field holds.
    frames: [T] bytes (numpy object array) of one episode.
    where: e.g. 'episode 7'.
    first_step: the step of frames[0] in the episode.

  Raises:
    ColumnMismatchError: naming `where`, the step and the field: bytes that
      are no PNG or JPEG, or a frame of other dimensions or channels.
  """
  expected = tuple(image.frame.shape.as_list())
  for step, data in enumerate(frames.ravel(), start=first_step):
    problem = frame_problem(bytes(data), expected)
    if problem:
      raise ColumnMismatchError(
          f"Field '{path}' of {where}, step {step}: {problem}, the table "
          f'holds {image.format} frames of {_dims(expected)}; nothing of the '
          f'episode was written.')


def frame_problem(data: bytes, expected: Sequence[Optional[int]]
                  ) -> Optional[str]:
  """What is wrong with the frame `data` for the frame shape `expected`
  ([H, W, C], None: any), read from its header: 'the bytes are no PNG or
  JPEG image', 'a frame of 8x8x3', ...; None if it fits."""
  found = frame_shape(data)
  if found is None:
    return 'the bytes are no PNG or JPEG image'
  height, width, channels = found
  if channels == -1:
    return 'a PNG of an unknown colour type'
  differs = [want is not None and got is not None and want != got
             for want, got in zip(expected, found)]
  return f'a frame of {_dims(found)}' if any(differs) else None


def _dims(shape) -> str:
  return 'x'.join('?' if d is None else str(d) for d in shape)


@functools.lru_cache(maxsize=64)
def blank_frame(image_format: str, shape: Tuple[int, int, int]) -> bytes:
  """The encoded frame of zeros of `shape`: what pads episodes (TF-Agents
  pads with zeros; this decodes to them)."""
  encode = _ENCODERS.get(image_format, tf.io.encode_png)
  return encode(tf.zeros(shape, tf.uint8)).numpy()
