"""Episodes read whole from TFDS record files: steps as [T, ...] tensors.

    TFDS's as_dataset   record -> parse -> steps: from_tensor_slices, then a
                        decode function per step; the conversion batches the
                        steps back into [T, ...]         ~2.4 µs a step here
    whole, here         record -> parse, `SkipDecoding` on `steps`: already
                        [T, ...] -> decode only the fields that need it
                        (images: TFDS's own decoder, field by field)
                                                          ~0.3 µs a step

`sources.load` returns the standard RLDS dataset (`steps` a Dataset) and
remembers, on it, how to read the same episodes whole. The conversion, the
checks and the statistics ask `whole(rlds_data)`: given exactly the dataset
`load` returned, they read it the faster way; anything else (a dataset a user
built, or `load`'s transformed by `take`, `map`...) reads the standard way.
The episodes, their order and their values are the same either way.

`keep_encoded=True` keeps image fields as their encoded bytes: what the
checks before a push read, which need the flags only. `keep_encoded` may also
be a set of step field paths ('observation/pixels'): those are kept encoded,
the other images decoded (a push of encoded images, `convert.encoded`).
"""

import functools
from typing import Any, Callable, Dict, FrozenSet, List, Optional, Union

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_reverb.specs import fields

# The attribute of a dataset `load` returned: (KeepEncoded) -> Dataset.
_WHOLE = '_rlds_reverb_whole'
# ... and its image fields: {step field path: encoding format or None}.
_IMAGES = '_rlds_reverb_images'

# The image fields read as their encoded bytes: True every one, False none
# (all decoded), or the step field paths in a set.
KeepEncoded = Union[bool, FrozenSet[str]]
Reader = Callable[[KeepEncoded], tf.data.Dataset]

# Episodes decoded at once (images: PNG decoding is most of a push's reading);
# a fixed number, not AUTOTUNE, so that at most this many whole episodes are
# held decoded beside the one being written.
_PARALLEL_EPISODES = 2


def whole(rlds_data: tf.data.Dataset, keep_encoded: KeepEncoded = False
          ) -> tf.data.Dataset:
  """`rlds_data` read whole if `load` made it, else `rlds_data` itself."""
  reader = getattr(rlds_data, _WHOLE, None)
  return rlds_data if reader is None else reader(keep_encoded)


def remember(rlds_data: tf.data.Dataset, reader: Reader,
             image_fields: Optional[Dict[str, Optional[str]]] = None
             ) -> tf.data.Dataset:
  """Marks `rlds_data` as readable whole by `reader(keep_encoded)`;
  `image_fields` are its `tfds.features.Image` step fields, {path: 'png',
  'jpeg' or None}."""
  setattr(rlds_data, _WHOLE, reader)
  setattr(rlds_data, _IMAGES, dict(image_fields or {}))
  return rlds_data


def image_fields(rlds_data: tf.data.Dataset) -> Dict[str, Optional[str]]:
  """{step field path: format} of the uint8 `tfds.features.Image` fields
  of data `load` made (readable whole), with their encoding format ('png',
  'jpeg'; None where the builder does not say); {} for other data."""
  if getattr(rlds_data, _WHOLE, None) is None:
    return {}
  return dict(getattr(rlds_data, _IMAGES, {}))


def images_of(builder) -> Dict[str, Optional[str]]:
  """The uint8 Image step fields of a TFDS builder, with their formats."""
  if not _has_steps(builder):
    return {}
  steps = builder.info.features[fields.STEPS]
  if not (isinstance(steps, tfds.features.Dataset) and
          isinstance(steps.feature, tfds.features.FeaturesDict)):
    return {}
  return dict(_images(steps.feature, ''))


def _images(feature, path: str):
  if isinstance(feature, tfds.features.FeaturesDict):
    for name in feature.keys():
      yield from _images(feature[name], f'{path}/{name}' if path else name)
  elif (isinstance(feature, tfds.features.Image) and
        feature.np_dtype == np.uint8):
    yield path, feature.encoding_format


def reader_of(builder, split) -> Optional[Reader]:
  """How to read `split` of a TFDS builder whole; None if it cannot be.

  Steps must be a `Dataset` of a `FeaturesDict` (RLDS); any leaf feature
  decodes field by field with its own `decode_batch_example`.
  """
  steps = builder.info.features[fields.STEPS] if _has_steps(builder) else None
  if not (isinstance(steps, tfds.features.Dataset) and
          isinstance(steps.feature, tfds.features.FeaturesDict)):
    return None
  return _WholeReader(builder, split, steps.feature)


class _WholeReader:
  """`_read_whole` of one split, each dataset made once per image fields
  kept encoded: a push's check and write read the same one where the data
  has no images to keep (a dataset is read anew by each iterator; making
  one costs TFDS's reader functions, ~30 ms)."""

  def __init__(self, builder, split, steps_feature):
    self._builder = builder
    self._split = split
    self._steps_feature = steps_feature
    self._made: Dict[FrozenSet[str], tf.data.Dataset] = {}

  def __call__(self, keep_encoded: KeepEncoded) -> tf.data.Dataset:
    kept = _kept_paths(self._steps_feature, keep_encoded)
    if kept not in self._made:
      self._made[kept] = _read_whole(self._builder, self._split,
                                     self._steps_feature, kept)
    return self._made[kept]


def join(readers: List[Optional[Reader]],
         combine: Callable[[List[tf.data.Dataset]], tf.data.Dataset]
         ) -> Optional[Reader]:
  """A reader of several sources, their datasets joined by `combine`."""
  if any(reader is None for reader in readers):
    return None
  return functools.partial(_joined, readers, combine)


def _joined(readers, combine, keep_encoded: KeepEncoded) -> tf.data.Dataset:
  return combine([reader(keep_encoded) for reader in readers])


def _has_steps(builder) -> bool:
  features = builder.info.features
  return isinstance(features, tfds.features.FeaturesDict) and (
      fields.STEPS in features)


def _read_whole(builder, split, steps_feature, keep_encoded: KeepEncoded
                ) -> tf.data.Dataset:
  episodes = builder.as_dataset(
      split=split, shuffle_files=False,
      decoders={fields.STEPS: tfds.decode.SkipDecoding()})
  return episodes.map(
      functools.partial(_decode_steps, feature=steps_feature,
                        keep_encoded=keep_encoded),
      num_parallel_calls=_PARALLEL_EPISODES, deterministic=True)


def _kept_paths(steps_feature, keep_encoded: KeepEncoded) -> FrozenSet[str]:
  """The image fields `keep_encoded` keeps encoded, as a set of paths."""
  return frozenset(path for path in _image_paths(steps_feature, '')
                   if _kept_encoded(keep_encoded, path))


def _image_paths(feature, path: str):
  """Every `tfds.features.Image` field's path: those `_decode` may keep."""
  if isinstance(feature, tfds.features.FeaturesDict):
    for name in feature.keys():
      yield from _image_paths(feature[name], f'{path}/{name}' if path else name)
  elif isinstance(feature, tfds.features.Image):
    yield path


def _decode_steps(episode, feature, keep_encoded: KeepEncoded):
  episode = dict(episode)
  episode[fields.STEPS] = _decode(feature, episode[fields.STEPS],
                                  keep_encoded, '')
  return episode


def _decode(feature, value: Any, keep_encoded: KeepEncoded, path: str) -> Any:
  """Each leaf of `value` ([T, ...], as parsed) decoded by its feature."""
  if isinstance(feature, tfds.features.FeaturesDict):
    return {name: _decode(feature[name], value[name], keep_encoded,
                          f'{path}/{name}' if path else name)
            for name in value}
  if isinstance(feature, tfds.features.Image) and _kept_encoded(
      keep_encoded, path):
    return value
  return feature.decode_batch_example(value)


def _kept_encoded(keep_encoded: KeepEncoded, path: str) -> bool:
  if isinstance(keep_encoded, bool):
    return keep_encoded
  return path in keep_encoded
