"""Specs of image fields stored encoded: what a table holds, and what it means.

A field kept encoded (PNG or JPEG bytes, one per step) is stored as a
tf.string tensor; its TensorSpec's name records the decoded frame, so that a
reader given only the table signature (`client.server_info()`, a checkpoint:
Reverb keeps TensorSpec names in both) can decode it back:

    decoded   TensorSpec([2, 72, 96, 3], tf.uint8)           (time axis, frame)
    stored    TensorSpec([2], tf.string,
                         name='rlds_reverb_image.png.uint8.72x96x3')

The name is a valid TensorFlow op name (TF-Agents and Reverb may use spec
names as op names); a dimension the spec leaves unknown is written 'N'. The
format is 'png', 'jpeg', or 'image' when a source does not say (TensorFlow's
`decode_image` reads both). Everything before the frame's three dimensions
(time, batch) is the stored spec's own shape.
"""

import dataclasses
import re
from typing import Any, Dict, Mapping, Optional, Sequence, Union

import tensorflow as tf

from rlds_reverb.errors import ImageFieldError
from rlds_reverb.specs import paths

PREFIX = 'rlds_reverb_image'
FORMATS = ('png', 'jpeg')
ANY_FORMAT = 'image'  # A source that does not say which: PNG or JPEG.
_DTYPES = {'uint8': tf.uint8}
_NAME = re.compile(
    rf'^{PREFIX}\.(png|jpeg|image)\.(\w+)\.((?:\d+|N)x(?:\d+|N)x(?:\d+|N))$')

Formats = Union[str, Mapping[str, str]]


@dataclasses.dataclass(frozen=True)
class EncodedImage:
  """One encoded field: its format and the spec of one decoded frame."""
  format: str  # 'png', 'jpeg' or 'image' (either).
  frame: tf.TensorSpec  # uint8 [H, W, C]; H, W may be None.

  @property
  def channels(self) -> int:
    return self.frame.shape[-1]

  def name(self) -> str:
    dims = 'x'.join('N' if d is None else str(d)
                    for d in self.frame.shape.as_list())
    return f'{PREFIX}.{self.format}.{self.frame.dtype.name}.{dims}'

  def stored(self, outer_shape: Sequence[Optional[int]] = ()
             ) -> tf.TensorSpec:
    """The stored spec: one string per frame, with the given outer axes."""
    return tf.TensorSpec(outer_shape, tf.string, name=self.name())

  def decoded(self, outer_shape: Sequence[Optional[int]] = ()
              ) -> tf.TensorSpec:
    return tf.TensorSpec(
        tf.TensorShape(outer_shape).concatenate(self.frame.shape),
        self.frame.dtype)


def image_of(spec: Any) -> Optional[EncodedImage]:
  """The `EncodedImage` a stored spec names; None for any other spec."""
  name = getattr(spec, 'name', None)
  match = _NAME.match(name) if isinstance(name, str) else None
  if match is None or getattr(spec, 'dtype', None) != tf.string:
    return None
  image_format, dtype, dims = match.groups()
  if dtype not in _DTYPES:
    return None
  shape = [None if d == 'N' else int(d) for d in dims.split('x')]
  return EncodedImage(image_format, tf.TensorSpec(shape, _DTYPES[dtype]))


def check_frame_spec(spec: Any, path: str) -> tf.TensorSpec:
  """`spec` if it can be stored encoded: uint8 [H, W, C], C in 1, 3, 4."""
  ok = (isinstance(spec, tf.TensorSpec) and spec.dtype == tf.uint8 and
        spec.shape.rank == 3 and spec.shape[-1] in (1, 3, 4))
  if not ok:
    raise ImageFieldError(
        f"Field '{path}' cannot be stored as an encoded image: it is "
        f'{paths.spec_text(spec)}, an image must be uint8[H,W,C] with C 1, 3 '
        f'or 4.')
  return tf.TensorSpec(spec.shape, spec.dtype)


def check_format(image_format: str) -> str:
  if image_format not in FORMATS:
    raise ImageFieldError(
        f'image_format must be one of {list(FORMATS)}, got {image_format!r}.')
  return image_format


def encoded_spec(decoded_spec: Any, fields: Union[Sequence[str], Formats],
                 format: Formats = 'png') -> Any:  # pylint: disable=redefined-builtin
  """`decoded_spec` with the image `fields` as stored encoded.

  Args:
    decoded_spec: a step spec, trajectory spec or table signature whose
      image fields are uint8 [..., H, W, C] (leading axes are kept).
    fields: field paths ('observation/pixels'), or {path: format}.
    format: 'png' or 'jpeg' for every field, or {path: format}; a field's
      format in `fields` (a mapping) wins.

  Raises:
    ImageFieldError: a path that is no field, a field that is no uint8 image, an
      unknown format.
  """
  formats = _formats_by_path(fields, format)
  flat = paths.flatten_with_paths(decoded_spec)
  present = {path for path, _ in flat}
  for path in formats:
    if path not in present:
      raise ImageFieldError(
          f"'{path}' is no field of the spec; the fields are "
          f'{", ".join(sorted(present))}.')
  leaves = []
  for path, spec in flat:
    if path not in formats:
      leaves.append(spec)
      continue
    if not (isinstance(spec, tf.TensorSpec) and spec.shape.rank is not None
            and spec.shape.rank >= 3):
      check_frame_spec(spec, path)  # Raises.
    frame = check_frame_spec(tf.TensorSpec(spec.shape[-3:], spec.dtype), path)
    leaves.append(EncodedImage(formats[path], frame).stored(spec.shape[:-3]))
  return tf.nest.pack_sequence_as(decoded_spec, leaves)


def decoded_spec(stored_signature: Any) -> Any:
  """The spec a reader gets after decoding: each encoded field uint8 again.

  Works on a table signature (a time axis first), an item spec, or a step
  spec; fields not stored encoded are returned as they are.
  """
  def decode(spec):
    image = image_of(spec)
    return spec if image is None else image.decoded(spec.shape)
  return tf.nest.map_structure(decode, stored_signature)


def encoded_fields(stored_spec: Any) -> Dict[str, EncodedImage]:
  """{field path: EncodedImage} of the fields stored encoded."""
  found = {}
  for path, spec in paths.flatten_with_paths(stored_spec):
    image = image_of(spec)
    if image is not None:
      found[path] = image
  return found


def is_encoded(stored_spec: Any) -> bool:
  return bool(encoded_fields(stored_spec))


def _formats_by_path(fields, image_format: Formats) -> Dict[str, str]:
  if isinstance(fields, str):
    fields = [fields]
  if isinstance(fields, Mapping):
    formats = dict(fields)
  else:
    formats = {path: (image_format.get(path, 'png')
                      if isinstance(image_format, Mapping) else image_format)
               for path in fields}
  for path, value in formats.items():
    if value != ANY_FORMAT:
      check_format(value)
  return {path.strip('/'): value for path, value in formats.items()}
