"""Episodes checked against a dataset's features and serialized as TFDS would.

    episode {'steps': {field: [T, ...]}, **metadata}
      -> per feature leaf (a column): value found, kind and shape checked,
         cast to the feature's dtype; all steps columns of one length T
      -> flags checked (one episode: to_rlds.check_flags)
      -> each column's tf.train.Feature bytes at once (`example`); an episode's
         images in one call of TFDS's own encoder op (encode_png/jpeg), or,
         given already encoded ([T] PNG/JPEG bytes, as a table keeps them),
         as they are, their headers checked against the feature's shape
      -> tf.train.Example bytes

TFDS's writers encode an episode step by step in Python (`Dataset` feature:
one `encode_example` per step, then stacked into lists). A column of
[T, ...] values becomes the same list, so the bytes are those TFDS writes,
20-40x faster on 1,000-step vector episodes (benchmarks/rlds_write.py). Every
check runs before anything is written.
"""

import collections.abc
import dataclasses
import functools
from typing import Any, Dict, List, Mapping, Optional, Tuple

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_reverb.convert import encoded as encoded_frames
from rlds_reverb.convert import to_rlds
from rlds_reverb.errors import FeaturesError
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths
from rlds_reverb.tfds_out import example

# Value kinds (numpy `dtype.kind`) each feature kind takes.
_ACCEPTED_KINDS = {'b': 'b', 'i': 'iu', 'u': 'iu', 'f': 'fiu', 'O': 'SUO'}
_IMAGE_ENCODERS = {'png': tf.image.encode_png, 'jpeg': tf.image.encode_jpeg}


@dataclasses.dataclass(frozen=True)
class Column:
  """One feature leaf: where it is and how it is stored."""
  path: Tuple[str, ...]  # ('steps', 'observation', 'pixels')
  dtype: np.dtype  # The feature's numpy dtype (object for strings).
  shape: Tuple[Optional[int], ...]  # Of one step (steps) or of the value.
  image_format: Optional[str] = None  # 'png' or 'jpeg' for Image features
  # (what uint8 frames are encoded as; encoded ones are written as they are).

  @functools.cached_property  # Read per column per episode.
  def name(self) -> str:
    return '/'.join(self.path)

  @functools.cached_property
  def per_step(self) -> bool:
    return self.path[0] == fields.STEPS

  @functools.cached_property
  def kind(self) -> str:
    return 'O' if self.dtype == np.object_ else self.dtype.kind


def columns_of(features: tfds.features.FeaturesDict) -> List[Column]:
  """The columns of RLDS features, in TFDS's serialization order.

  Raises:
    FeaturesError: no `steps` Dataset of dicts, RLDS flags that are not
      bool scalars, or a feature other than a plain Tensor, a Text without
      vocabulary or a uint8 Image.
  """
  steps = features[fields.STEPS] if fields.STEPS in features else None
  if not (isinstance(steps, tfds.features.Dataset) and
          isinstance(steps.feature, tfds.features.FeaturesDict)):
    raise FeaturesError(
        f"The features have no '{fields.STEPS}' Dataset of dicts: "
        f'{type(steps).__name__}.')
  columns = list(_columns(features, ()))
  _check_flag_columns(columns)
  return columns


def _check_flag_columns(columns: List[Column]) -> None:
  """The RLDS flags are bool scalars per step: the episode checks read them."""
  by_path = {column.path: column for column in columns}
  for name in fields.FLAGS:
    column = by_path.get((fields.STEPS, name))
    if column is None or column.dtype != np.bool_ or column.shape:
      found = _text(column.dtype, column.shape) if column else 'missing'
      raise FeaturesError(
          f'{fields.STEPS}/{name} is {found}; an RLDS step flag is a bool '
          f'scalar.')


def _columns(feature, path):
  if isinstance(feature, tfds.features.FeaturesDict):
    for key, child in feature.items():
      yield from _columns(child, path + (key,))
  elif isinstance(feature, tfds.features.Dataset) and path == (fields.STEPS,):
    yield from _columns(feature.feature, path)
  else:
    yield _column(feature, path)


def _column(feature, path) -> Column:
  name = '/'.join(path)
  if type(feature) is tfds.features.Image and feature.np_dtype == np.uint8:  # pylint: disable=unidiomatic-typecheck
    return Column(path, np.dtype(np.uint8), tuple(feature.shape),
                  feature.encoding_format or 'png')
  if _is_plain(feature):
    return Column(path, np.dtype(feature.np_dtype), tuple(feature.shape))
  raise FeaturesError(
      f'{name} is a {type(feature).__name__} feature ({feature!r}); the '
      f'writer stores plain Tensor, Text and uint8 Image features (see '
      f'features_from_specs).')


def _is_plain(feature) -> bool:
  """A Tensor stored as its own values (no bytes or zlib encoding) of a
  fixed shape, or a Text without a vocabulary: the values are what TFDS
  stores."""
  if type(feature) is tfds.features.Text:  # pylint: disable=unidiomatic-typecheck
    return feature.encoder is None
  if type(feature) is not tfds.features.Tensor:  # pylint: disable=unidiomatic-typecheck
    return False
  serialized = feature.get_serialized_info()
  return (serialized.np_dtype == feature.np_dtype and
          tuple(serialized.shape) == tuple(feature.shape) and
          None not in feature.shape)


class EpisodeEncoder:
  """Turns episodes into the serialized examples of a dataset's features."""

  def __init__(self, features: tfds.features.FeaturesDict):
    self.columns = columns_of(features)
    self._names = {column.name for column in self.columns}

  def encode(self, episode: Mapping[str, Any], where: str) -> bytes:
    """The serialized `tf.train.Example` of `episode`.

    `where` starts error messages ('Episode 12').

    Raises:
      FeaturesError: the episode is not a dict, lacks a field or has one the
        features do not, a value of another kind or shape, steps fields of
        different lengths, or no steps.
      MalformedEpisodeError: flags that are not one episode's.
    """
    values = self._values(episode, where)
    steps = {column.path[-1]: values[column.name] for column in self.columns
             if column.path[:1] == (fields.STEPS,) and len(column.path) == 2}
    to_rlds.check_flags(steps, where)
    return example.example(
        (column.name, _feature(column, values[column.name]))
        for column in self.columns)

  def _values(self, episode: Any, where: str) -> Dict[str, np.ndarray]:
    """Every column's value, checked and cast to its feature's dtype."""
    episode = to_rlds.as_dicts(episode)
    if not isinstance(episode, collections.abc.Mapping):
      raise FeaturesError(
          f'{where} is a {type(episode).__name__}; expected a dict '
          f"{{'{fields.STEPS}': {{field: [T, ...] values}}, **metadata}}.")
    given = dict(_leaves(episode, ()))
    extra = sorted(set(given) - self._names)
    if extra:
      raise FeaturesError(
          f'{where} has {", ".join(extra)}, which the features do not.')
    values, length = {}, None
    for column in self.columns:
      if column.name not in given:
        raise FeaturesError(f'{where} has no {column.name}.')
      value, length = _checked(column, given[column.name], length, where)
      values[column.name] = value
    if length is None or length == 0:
      raise FeaturesError(f'{where} has no steps: an episode has one or more.')
    return values


def _leaves(structure: Mapping[str, Any], path: Tuple[str, ...]):
  """('steps/observation/pixels', value) for each non-dict value."""
  for key, value in structure.items():
    if isinstance(value, collections.abc.Mapping):
      yield from _leaves(value, path + (str(key),))
    else:
      yield '/'.join(path + (str(key),)), value


def _checked(column: Column, value: Any, length: Optional[int], where: str):
  """(`value` as an array of the column's dtype, the episode's length).

  The first steps column sets the length; the others must have it.
  """
  array = np.asarray(value, dtype=object if _is_text(value) else None)
  if column.image_format and array.dtype.kind in 'SO':
    return _checked_encoded(column, array, length, where)
  expected_shape = column.shape
  if column.per_step:
    expected_shape = (length,) + column.shape
  kind_ok = array.dtype.kind in _ACCEPTED_KINDS[column.kind] and (
      column.image_format is None or array.dtype == np.uint8)
  if not kind_ok or not _fits(array.shape, expected_shape):
    raise FeaturesError(
        f'{where}: {column.name} is {_text(array.dtype, array.shape)}; '
        f'expected {_text(column.dtype, expected_shape, column.per_step)}.')
  if column.per_step and length is None:
    length = array.shape[0]
  if column.kind == 'O':
    return _as_bytes(array, column, where), length
  return array.astype(column.dtype, copy=False), length


def _checked_encoded(column: Column, array: np.ndarray,
                     length: Optional[int], where: str):
  """(Image bytes as an object array, the episode's length): one PNG or
  JPEG per step (per value), each header fitting the feature's shape.

  Headers are read, frames are not decoded (`convert.encoded.frame_shape`).
  """
  steps = (length,) if column.per_step else ()
  if not _fits(array.shape, steps):
    frames = _text(column.dtype, steps + column.shape, column.per_step)
    raise FeaturesError(
        f'{where}: {column.name} is {_text(array.dtype, array.shape)}; '
        f'expected {frames} frames or '
        f'{_text(np.dtype(object), steps, column.per_step)} of their PNG/JPEG '
        f'bytes.')
  if column.per_step and length is None:
    length = array.shape[0]
  encoded = _as_bytes(array, column, where)
  for step, data in enumerate(encoded.ravel().tolist()):
    problem = encoded_frames.frame_problem(data, column.shape)
    if problem:
      at = f', step {step}' if column.per_step else ''
      raise FeaturesError(
          f'{where}: {column.name}{at}: {problem}; the feature holds '
          f'{_dims(column.shape)} frames.')
  return encoded, length


def _dims(shape: Tuple[Optional[int], ...]) -> str:
  return 'x'.join('?' if d is None else str(d) for d in shape)


def _is_text(value: Any) -> bool:
  """str or bytes, alone or in (nested) lists: kept as Python objects."""
  while isinstance(value, (list, tuple)) and value:
    value = value[0]
  return isinstance(value, (str, bytes))


def _fits(shape: Tuple[int, ...], expected: Tuple[Optional[int], ...]) -> bool:
  return len(shape) == len(expected) and all(
      want is None or got == want for got, want in zip(shape, expected))


def _text(dtype: np.dtype, shape, per_step: bool = False) -> str:
  """'float32[20,3]'; 'float32[T,3]' for a step column of unknown length."""
  dims = ['T' if per_step and i == 0 and d is None else d
          for i, d in enumerate(shape)]
  return paths.dtype_shape_text(dtype, dims)


def _as_bytes(array: np.ndarray, column: Column, where: str) -> np.ndarray:
  """Strings as an object array of bytes (str as UTF-8), as TFDS stores."""
  flat = [item.encode('utf-8') if isinstance(item, str) else item
          for item in array.ravel().tolist()]
  if not all(isinstance(item, bytes) for item in flat):
    wrong = next(item for item in flat if not isinstance(item, bytes))
    raise FeaturesError(
        f'{where}: {column.name} holds {wrong!r} ({type(wrong).__name__}); '
        f'expected str or bytes.')
  result = np.empty(len(flat), dtype=object)
  result[:] = flat
  return result.reshape(array.shape)


def _feature(column: Column, values: np.ndarray) -> bytes:
  """The tf.train.Feature TFDS writes for the column's whole value."""
  if column.image_format:
    if values.dtype == object:  # Encoded already: written as they are.
      return example.bytes_feature(values.ravel().tolist())
    return example.bytes_feature(_encoded_images(values, column))
  if column.kind == 'O':
    return example.bytes_feature(values.ravel().tolist())
  if column.kind == 'f':
    return example.float_feature(values)
  return example.int64_feature(values)


def _encoded_images(values: np.ndarray, column: Column) -> List[bytes]:
  """Each image (all steps' of a steps column) encoded as TFDS encodes it:
  the same TensorFlow op with its default options."""
  images = values if column.per_step else values[np.newaxis]
  return list(_image_encoder().encode(images, column.image_format))


class _ImageEncoder:
  """TensorFlow's PNG and JPEG encoders in a graph, run on numpy batches.

  Not eagerly: in TF 2.15 every eager tensor leaves 16 bytes behind (RSS
  grew 32 B per `tf.image.encode_png(array)`), which a recorder of frames
  would pile up by the million. A session fed numpy creates none, and
  encodes a whole episode's images in one call.
  """

  def __init__(self):
    graph = tf.Graph()
    with graph.as_default():
      self._images = tf.compat.v1.placeholder(tf.uint8, [None] * 4)
      self._encoded = {
          image_format: tf.map_fn(encode, self._images,
                                  fn_output_signature=tf.string)
          for image_format, encode in _IMAGE_ENCODERS.items()}
    graph.finalize()
    self._session = tf.compat.v1.Session(graph=graph)

  def encode(self, images: np.ndarray, image_format: str) -> np.ndarray:
    """[T, H, W, C] uint8 -> [T] encoded bytes."""
    return self._session.run(self._encoded[image_format],
                             {self._images: images})


@functools.lru_cache(maxsize=None)
def _image_encoder() -> _ImageEncoder:
  """One graph and session for the process, made on first use."""
  return _ImageEncoder()
