"""TFDS features for RLDS episodes, from step and episode metadata specs.

    step spec (dicts/namedtuples of tf.TensorSpec or TF-Agents array specs)
      -> checked as RLDS steps (specs.step_spec: the flags, observation, ...)
      -> each leaf: uint8 [H, W, C], C in 1/3/4 -> Image (PNG by default)
                    a frame stored encoded      -> Image of its format: its
                      (specs.encoded names it)     bytes are written as they are
                    anything else               -> Tensor (fixed shape)
      -> FeaturesDict({'steps': Dataset({...}), **metadata})

Images matter: a plain uint8 Tensor feature is stored as an int64 list
(31.7 KB per 84x84x3 step); PNG is lossless, JPEG smaller and lossy.
A field a Reverb table holds encoded (a tf.string spec named by
`specs.encoded`, e.g. 'rlds_reverb_image.png.uint8.72x96x3') is an Image of
that format and shape: the stored PNG/JPEG bytes go into the dataset as they
are, never decoded or encoded again, and the dataset reads as uint8 frames.
Namedtuples become dicts (TFDS has no tuples: a dataset gives them back as
dicts anyway). Only Tensor and Image features are made, the two that
`encode.EpisodeEncoder` writes.
"""

import enum
from typing import Any, Dict, Mapping, Optional, Tuple, Union

import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_reverb.convert import to_rlds
from rlds_reverb.errors import FeaturesError
from rlds_reverb.specs import dtypes
from rlds_reverb.specs import encoded as encoded_spec
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths
from rlds_reverb.specs import step_spec as step_spec_lib


class ImageEncoding(enum.Enum):
  """How a uint8 [H, W, C] field is stored in the RLDS dataset written
  (`RldsRecorder(image_encoding=...)`, `export(image_encoding=...)`)."""
  PNG = 'png'  # Lossless; TFDS's default.
  JPEG = 'jpeg'  # Lossy (quality 95), smaller.
  NONE = 'none'  # A plain Tensor: an int64 per value, large.


# One encoding for every image field, or {field path: encoding}.
ImageEncodings = Union[str, ImageEncoding,
                       Mapping[str, Union[str, ImageEncoding]]]
# An image field's feature: encoded from uint8 frames, or kept as stored.
_Encoding = Union[ImageEncoding, encoded_spec.EncodedImage]
# A stored format as TFDS's Image names it. 'image' (PNG or JPEG: the source
# did not say) is None, as the source's was: TFDS decodes either
# (`decode_image`), and a push of the export with images='encoded' names the
# field 'image' again, as its table did. Sniffing the bytes instead would
# choose after the features are written, one format for what may be both.
_TFDS_FORMATS = {'png': 'png', 'jpeg': 'jpeg', encoded_spec.ANY_FORMAT: None}

# Dtypes a tf.train.Example holds without loss of meaning (uint64 does not
# fit its int64 lists).
_DTYPES = (tf.bool, tf.int8, tf.int16, tf.int32, tf.int64, tf.uint8,
           tf.uint16, tf.uint32, tf.float16, tf.float32, tf.float64,
           tf.string)
_IMAGE_CHANNELS = (1, 3, 4)


def features_from_specs(
    step_spec: Any,
    metadata_spec: Optional[Mapping[str, Any]] = None,
    *,
    image_encoding: ImageEncodings = ImageEncoding.PNG,
) -> tfds.features.FeaturesDict:
  """The features of RLDS episodes with steps of `step_spec`.

  Args:
    step_spec: one step's spec, a dict (or namedtuple) of specs with the RLDS
      fields; nested dicts and namedtuples are fine, tuples are not.
    metadata_spec: the spec of each episode's metadata (e.g. episode_id).
    image_encoding: how uint8 [H, W, C] fields (C in 1, 3, 4) are stored: one
      `ImageEncoding` (or 'png', 'jpeg', 'none') for all, or a mapping from
      field path ('steps/observation/pixels') to encoding, PNG for the rest.
      Fields whose spec says they are stored encoded (`specs.encoded`) are
      Images of their own format whatever `image_encoding` says: their
      bytes are written as they are.

  Raises:
    StepSpecError: `step_spec` lacks an RLDS field, or has flags that are not
      bool scalars.
    FeaturesError: a leaf that is no spec (a tuple), a dtype or unknown
      dimension TFDS cannot store, metadata named 'steps', `image_encoding`
      naming a field that is no image or an unknown encoding, or asking
      another encoding of a field stored encoded; a field stored encoded
      with more than one frame per step.
  """
  step_spec = to_rlds.as_dicts(step_spec)
  metadata_spec = to_rlds.as_dicts(metadata_spec or {})
  kept = _stored_encoded({fields.STEPS: step_spec, **(
      metadata_spec if isinstance(metadata_spec, Mapping) else {})})
  if kept:  # Their frames' specs: uint8 [H, W, C], image fields as others.
    step_spec = encoded_spec.decoded_spec(step_spec)
    metadata_spec = encoded_spec.decoded_spec(metadata_spec)
  steps = _tensor_specs(step_spec, fields.STEPS)
  step_spec_lib.format_of(steps)
  metadata = _tensor_specs(metadata_spec, '')
  if fields.STEPS in metadata:
    raise FeaturesError(
        f"Episode metadata cannot be named '{fields.STEPS}': the steps are.")
  encodings = _encodings(image_encoding, {fields.STEPS: steps, **metadata},
                         kept)
  return tfds.features.FeaturesDict({
      fields.STEPS: tfds.features.Dataset(
          _features(steps, encodings, fields.STEPS)),
      **_features(metadata, encodings, ''),
  })


def image_paths(specs: Mapping[str, Any]) -> Tuple[str, ...]:
  """Paths of the leaves of `specs` (tf.TensorSpecs) that can be images."""
  return tuple(path for path, spec in paths.flatten_with_paths(specs)
               if _is_image(spec))


def _tensor_specs(structure: Any, prefix: str) -> Dict[str, Any]:
  """Dicts of `tf.TensorSpec`, checked; `prefix` names the top in errors."""
  if not isinstance(structure, Mapping):
    raise FeaturesError(
        f'The {prefix or "metadata"} spec is a {type(structure).__name__}; '
        f'expected a dict (or namedtuple) of specs.')
  return {key: (_tensor_specs(value, _join(prefix, key))
                if isinstance(value, Mapping)
                else _tensor_spec(value, _join(prefix, key)))
          for key, value in structure.items()}


def _tensor_spec(leaf: Any, path: str) -> tf.TensorSpec:
  """A spec with `shape` and `dtype` (TF or numpy) as a `tf.TensorSpec`."""
  if isinstance(leaf, tuple):
    raise FeaturesError(
        f'{path} is a tuple: TFDS features have no tuples (use a dict or a '
        f'namedtuple).')
  if not hasattr(leaf, 'dtype') or not hasattr(leaf, 'shape'):
    raise FeaturesError(f'{path} is a {type(leaf).__name__}, not a spec.')
  spec = tf.TensorSpec(tf.TensorShape(leaf.shape), tf.as_dtype(leaf.dtype))
  if spec.dtype not in _DTYPES:
    raise FeaturesError(
        f'{path} is {paths.spec_text(spec)}; TFDS stores '
        f'{", ".join(d.name for d in _DTYPES)}.')
  if spec.shape.rank is None or (
      not spec.shape.is_fully_defined() and not _is_image(spec)):
    raise FeaturesError(
        f'{path} is {paths.spec_text(spec)}; a TFDS Tensor feature needs a '
        f'known shape (only an image may have unknown height and width).')
  return spec


def _is_image(spec: tf.TensorSpec) -> bool:
  return (spec.dtype == tf.uint8 and spec.shape.rank == 3 and
          spec.shape[-1] in _IMAGE_CHANNELS)


def _stored_encoded(specs: Dict[str, Any]
                    ) -> Dict[str, encoded_spec.EncodedImage]:
  """{path: EncodedImage} of the leaves stored encoded, one frame each."""
  leaves = dict(paths.flatten_with_paths(specs))
  kept = encoded_spec.encoded_fields(specs)
  for path, image in kept.items():
    stored = leaves[path]
    if stored.shape.rank != 0:
      raise FeaturesError(
          f'{path} is {paths.spec_text(stored)} of encoded {image.format} '
          f'frames; an Image feature holds one frame per '
          f'{"step" if path.startswith(fields.STEPS + "/") else "value"}.')
  return kept


def _encodings(image_encoding: ImageEncodings, specs: Dict[str, Any],
               kept: Mapping[str, encoded_spec.EncodedImage]
               ) -> Dict[str, _Encoding]:
  """The encoding of every image path of `specs`: `image_encoding` for uint8
  frames, the stored image itself for those `kept` encoded."""
  candidates = image_paths(specs)
  if not isinstance(image_encoding, Mapping):
    encoding = _encoding(image_encoding, 'image_encoding')
    return {path: kept.get(path, encoding) for path in candidates}
  encodings = {path: kept.get(path, ImageEncoding.PNG) for path in candidates}
  for path, value in image_encoding.items():
    if path not in encodings:
      raise FeaturesError(
          f"image_encoding names '{path}', which is no image field (uint8 "
          f'[H, W, C], C in 1, 3, 4); image fields: '
          f'{", ".join(candidates) or "none"}.')
    encoding = _encoding(value, f"image_encoding['{path}']")
    if path in kept and encoding.value != kept[path].format:
      raise FeaturesError(
          f"image_encoding['{path}'] is {encoding.value!r}, but {path} is "
          f'stored encoded as {kept[path].format}: its bytes are written as '
          f'they are, never encoded again.')
    encodings[path] = kept.get(path, encoding)
  return encodings


def _encoding(value: Union[str, ImageEncoding], where: str) -> ImageEncoding:
  try:
    return ImageEncoding(value)
  except ValueError:
    raise FeaturesError(
        f'{where} is {value!r}; expected one of '
        f'{", ".join(repr(e.value) for e in ImageEncoding)}.') from None


def _features(specs: Dict[str, Any], encodings: Dict[str, _Encoding],
              prefix: str) -> Dict[str, Any]:
  return {key: (_features(spec, encodings, _join(prefix, key))
                if isinstance(spec, dict)
                else _feature(spec, encodings.get(_join(prefix, key))))
          for key, spec in specs.items()}


def _feature(spec: tf.TensorSpec, encoding: Optional[_Encoding]):
  shape = tuple(spec.shape.as_list())
  if isinstance(encoding, encoded_spec.EncodedImage):
    return tfds.features.Image(shape=shape,
                               encoding_format=_TFDS_FORMATS[encoding.format])
  if encoding is None or encoding is ImageEncoding.NONE:
    return tfds.features.Tensor(shape=shape,
                                dtype=dtypes.numpy_dtype(spec.dtype))
  return tfds.features.Image(shape=shape, encoding_format=encoding.value)


def _join(prefix: str, key: str) -> str:
  return f'{prefix}/{key}' if prefix else key
