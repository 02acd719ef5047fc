"""What `statistics` finds, as numpy arrays, and its JSON file.

    DatasetStatistics
      fields['observation/position']   FieldStatistics: per element of the
                                        field's shape ([3]) and `whole` (the
                                        field's elements pooled, scalars)
      length, returns                   Summary of episode lengths / returns
      skipped                           {path: why} (images, strings, bools)
    .nest('mean', 'observation')        {'position': array}: tf.nest-ready
    .save(path) / DatasetStatistics.load(path)
    unsaveable_reason(path)             why save(path) would fail, asked first

The JSON file nests fields by path ({"observation": {"position": {...}}});
a value that does not exist (the mean of no values) is null.
"""

import dataclasses
import json
import math
import os
from typing import Any, Dict, Optional, Tuple

import numpy as np

from rlds_reverb._util import files

FORMAT = 'rlds_reverb.statistics/1'
# The numbers of a Summary, each an array (of the field's shape, or a scalar).
NUMBERS = ('mean', 'std', 'min', 'max')
COUNTS = ('count', 'nonfinite')


@dataclasses.dataclass(frozen=True)
class Summary:
  """Statistics of numbers: arrays of one shape (a field's, or () pooled).

  `count` finite values and `nonfinite` NaN or infinite ones, left out of
  the rest; `std` is the population standard deviation (ddof=0), 0 for a
  constant; `percentiles[q]` is within `relative_accuracy` * |x| of x, the
  exact value of rank floor(q/100 * (count - 1)) (`sketch`), or None where
  not kept (fields of more than `max_sketched_elements` elements, per
  element). Where an element has no finite value, its numbers are NaN.
  """
  count: np.ndarray
  nonfinite: np.ndarray
  mean: np.ndarray
  std: np.ndarray
  min: np.ndarray
  max: np.ndarray
  percentiles: Dict[float, Optional[np.ndarray]]

  def to_json(self) -> Dict[str, Any]:
    value = {name: _listed(getattr(self, name)) for name in COUNTS + NUMBERS}
    value['percentiles'] = {f'{q:g}': _listed(found)
                            for q, found in self.percentiles.items()}
    return value

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'Summary':
    return cls(**_summary_arrays(value))


@dataclasses.dataclass(frozen=True)
class FieldStatistics(Summary):
  """`Summary` of each element of a step field (arrays of `shape`), and of
  the field's elements pooled (`whole`, scalars)."""
  dtype: str = ''
  shape: Tuple[int, ...] = ()
  whole: Optional[Summary] = None

  def to_json(self) -> Dict[str, Any]:
    return {'dtype': self.dtype, 'shape': list(self.shape),
            **super().to_json(), 'whole': self.whole.to_json()}

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'FieldStatistics':
    return cls(**_summary_arrays(value), dtype=value['dtype'],
               shape=tuple(value['shape']),
               whole=Summary.from_json(value['whole']))


@dataclasses.dataclass(frozen=True)
class DatasetStatistics:
  """Per-field step statistics of an RLDS dataset (`statistics`).

  `fields` by path ('observation/position'), in the step spec's order;
  `length` and `returns` summarize the episodes (a return sums every part of
  an episode's rewards; an empty episode has length and return 0; `returns`
  is None without a reward field); `skipped` says which fields have no
  statistics and why.
  """
  episodes: int
  steps: int
  fields: Dict[str, FieldStatistics]
  length: Summary
  returns: Optional[Summary]
  skipped: Dict[str, str]
  relative_accuracy: float

  def __getitem__(self, path: str) -> FieldStatistics:
    if path not in self.fields:
      why = self.skipped.get(path)
      known = ', '.join(self.fields) or 'none'
      raise KeyError(f'{path!r} has no statistics: ' + (
          f'skipped ({why})' if why else f'the fields with some are {known}'))
    return self.fields[path]

  def nest(self, name: str, prefix: str = '') -> Any:
    """The statistic `name` ('mean', 'std', 'min', 'max', 'p1', 'p99') of
    every field under `prefix`, nested as the steps are: a dict of arrays,
    or the array itself when `prefix` is a field ('observation' of a vector
    observation). Normalize with tf.nest.map_structure over it."""
    nested = {}
    for path, field in self.fields.items():
      if prefix and path != prefix and not path.startswith(f'{prefix}/'):
        continue
      value = _named(field, name)
      if path == prefix:
        return value
      keys = path[len(prefix) + 1 if prefix else 0:].split('/')
      node = nested
      for key in keys[:-1]:
        node = node.setdefault(key, {})
      node[keys[-1]] = value
    if not nested:
      raise KeyError(f'no step field with statistics under {prefix!r}; those '
                     f'with some are {", ".join(self.fields) or "none"}')
    return nested

  def to_json(self) -> Dict[str, Any]:
    nested = {}
    for path, field in self.fields.items():
      *parents, name = path.split('/')
      node = nested
      for key in parents:
        node = node.setdefault(key, {})
      node[name] = field.to_json()
    return {
        'format': FORMAT,
        'episodes': self.episodes,
        'steps': self.steps,
        'relative_accuracy': self.relative_accuracy,
        'fields': nested,
        'length': self.length.to_json(),
        'return': None if self.returns is None else self.returns.to_json(),
        'skipped': dict(self.skipped),
    }

  @classmethod
  def from_json(cls, value: Dict[str, Any]) -> 'DatasetStatistics':
    if value.get('format') != FORMAT:
      raise ValueError(f'not a statistics file of format {FORMAT!r} '
                       f'(format: {value.get("format")!r})')
    return cls(
        episodes=value['episodes'], steps=value['steps'],
        fields=dict(_leaves(value['fields'], '')),
        length=Summary.from_json(value['length']),
        returns=(None if value['return'] is None
                 else Summary.from_json(value['return'])),
        skipped=dict(value['skipped']),
        relative_accuracy=value['relative_accuracy'])

  def save(self, path: str) -> None:
    """Writes the JSON file whole (a reader never sees half of it): a new
    file beside it, renamed over it (`unsaveable_reason` checks ahead)."""
    files.replace_atomically(path, json.dumps(self.to_json(), indent=1) + '\n')

  @classmethod
  def load(cls, path: str) -> 'DatasetStatistics':
    with open(path, encoding='utf-8') as f:
      return cls.from_json(json.load(f))


def unsaveable_reason(path: str) -> Optional[str]:
  """Why `DatasetStatistics.save(path)` would fail, naming what is at fault,
  or None; changes nothing. `save` makes a new file in the path's directory
  and renames it over the path, so that directory must take a new file
  (/proc does not, and says 'No such file or directory')."""
  directory = os.path.dirname(path) or '.'
  if os.path.isdir(path):
    return 'it is a directory'
  if not os.path.exists(directory):
    return f'its directory {directory} does not exist'
  if not os.path.isdir(directory):
    return f'{directory} is not a directory'
  probe = files.temporary_path(path)
  existed = os.path.exists(probe)
  try:
    with open(probe, 'ab'):
      pass
    if not existed:
      os.remove(probe)
  except OSError as e:
    return f'the directory {directory} takes no new file ({e.strerror})'
  return None


def _named(field: FieldStatistics, name: str) -> np.ndarray:
  if name in NUMBERS + COUNTS:
    return getattr(field, name)
  if name.startswith('p'):
    for q, found in field.percentiles.items():
      if f'p{q:g}' == name and found is not None:
        return found
  names = list(NUMBERS + COUNTS) + [f'p{q:g}' for q in field.percentiles]
  raise KeyError(f'no statistic {name!r} of a field; there are '
                 f'{", ".join(names)}')


def _leaves(tree: Dict[str, Any], prefix: str):
  for key, value in tree.items():
    path = f'{prefix}/{key}' if prefix else key
    if _is_field(value):
      yield path, FieldStatistics.from_json(value)
    else:
      yield from _leaves(value, path)


def _is_field(value: Dict[str, Any]) -> bool:
  return {'dtype', 'shape', 'whole', 'mean'} <= set(value)


def _summary_arrays(value: Dict[str, Any]) -> Dict[str, Any]:
  arrays = {name: np.asarray(value[name], np.int64) for name in COUNTS}
  arrays.update({name: _array(value[name]) for name in NUMBERS})
  arrays['percentiles'] = {float(q): None if found is None else _array(found)
                           for q, found in value['percentiles'].items()}
  return arrays


def _array(value) -> np.ndarray:
  """JSON's nulls back to NaN."""
  return np.asarray(_nans(value), np.float64)


def _nans(value):
  if isinstance(value, list):
    return [_nans(item) for item in value]
  return math.nan if value is None else value


def _listed(value):
  """An array as JSON: nested lists, NaN as null, whole counts as ints."""
  if value is None:
    return None
  array = np.asarray(value)
  if array.dtype.kind in 'iu':
    return array.tolist()
  return _nulls(array.astype(np.float64).tolist())


def _nulls(value):
  if isinstance(value, list):
    return [_nulls(item) for item in value]
  return value if math.isfinite(value) else None
