"""Field paths of nested structures, and the text of specs, for messages.

    'observation/pixels'         a field's path (`join`, `flatten_with_paths`)
    'uint8[?,?,3]', 'int32[]'    a spec, a dtype and a shape (`spec_text`)
    'action int64[], ...'        a nest of specs (`nest_text`)
    [(path, spec a, spec b)]     the fields where two specs differ
                                 (`spec_differences`, `difference_texts`)
"""

import operator
from typing import Any, Callable, Dict, List, Optional, Tuple

import numpy as np
import tree


def join(path: Tuple[Any, ...]) -> str:
  """'observation/pixels' for the path ('observation', 'pixels')."""
  return '/'.join(str(key) for key in path)


def flatten_with_paths(structure: Any, prefix: str = '') -> List[Tuple[str, Any]]:
  """(joined path, leaf) pairs in `tf.nest` order, each path under `prefix`."""
  pairs = []
  for path, leaf in tree.flatten_with_path(structure):
    name = join(path)
    pairs.append((f'{prefix}/{name}' if prefix and name else prefix or name, leaf))
  return pairs


# Spec text: the one way a message shows a spec, a dtype and a shape.
#   TensorSpec([None, None, 3], tf.uint8)    uint8[?,?,3]
#   TensorSpec([], tf.int32)                 int32[]
#   np.zeros((4, 2), np.float64)             float64[4,2]
#   tf.string, numpy bytes/str/object        string[...]
#   TensorSpec(None, tf.float32)             float32[...]   (unknown rank)
#   RaggedTensorSpec([None], tf.int32)       ragged int32[?]
_KINDS = {'RaggedTensorSpec': 'ragged ', 'SparseTensorSpec': 'sparse '}


def spec_text(spec: Any) -> str:
  """'float32[3]', 'uint8[?,?,3]', 'int32[]' for a TensorSpec, an array
  spec or an array; 'missing' for None; else its type's name."""
  if spec is None:
    return 'missing'
  dtype, shape = getattr(spec, 'dtype', None), getattr(spec, 'shape', None)
  if dtype is None or shape is None or callable(shape):
    return type(spec).__name__
  return _KINDS.get(type(spec).__name__, '') + dtype_shape_text(dtype, shape)


def nest_text(structure: Any) -> str:
  """'observation float32[4], action int64[]': every leaf of a nest of specs
  by path, in `tf.nest` order ('<root>' for a lone spec)."""
  return ', '.join(f'{path or "<root>"} {spec_text(leaf)}'
                   for path, leaf in flatten_with_paths(structure))


def dtype_shape_text(dtype: Any, shape: Any) -> str:
  """`spec_text` of a dtype and a shape held apart (`shape_text`)."""
  return f'{dtype_text(dtype)}{shape_text(shape)}'


def dtype_text(dtype: Any) -> str:
  """'float32'; 'string' for TensorFlow's and numpy's strings and objects."""
  if isinstance(dtype, np.dtype) or isinstance(dtype, type):
    dtype = np.dtype(dtype)
    return 'string' if dtype.kind in 'SUO' else dtype.name
  return getattr(dtype, 'name', str(dtype))


def shape_text(shape: Any) -> str:
  """'[?,?,3]' of a TensorShape or a sequence of dimensions: None is '?', a
  str names an axis ('T'); '[...]' for an unknown rank."""
  if getattr(shape, 'rank', 0) is None:
    return '[...]'
  dims = shape.as_list() if hasattr(shape, 'as_list') else shape
  return '[' + ','.join('?' if d is None else str(d) for d in dims) + ']'


# Spec diff: which fields of two specs differ, for every message comparing two.

def spec_differences(
    first: Any, second: Any,
    same: Callable[[Any, Any], bool] = operator.eq,
) -> List[Tuple[str, Optional[Any], Optional[Any]]]:
  """(path, first's leaf, second's leaf) per field where they are not `same`
  or that only one has (None on the other side), in path order; nested
  datasets' elements are compared field by field ('steps/observation')."""
  first, second = _leaves(first), _leaves(second)
  return [(path, first.get(path), second.get(path))
          for path in sorted(first.keys() | second.keys())
          if path not in first or path not in second or
          not same(first[path], second[path])]


def difference_texts(first: Any, second: Any) -> Tuple[str, str]:
  """`spec_text` of two leaves that differ; where both read alike, with what
  tells them apart (their names, else their types)."""
  texts = spec_text(first), spec_text(second)
  if texts[0] != texts[1]:
    return texts
  names = getattr(first, 'name', None), getattr(second, 'name', None)
  if names[0] != names[1]:
    return tuple(f'{text} named {name!r}' if name else f'{text} unnamed'
                 for text, name in zip(texts, names))
  return repr(first), repr(second)


def same_dtype_and_shape(first: Any, second: Any) -> bool:
  """`same` for `spec_differences` that ignores names and bounds."""
  return first.dtype == second.dtype and first.shape == second.shape


def _leaves(spec: Any, prefix: str = '') -> Dict[str, Any]:
  """Field path -> leaf, looking inside nested datasets (`steps`)."""
  flat = {}
  for path, leaf in flatten_with_paths(spec, prefix):
    element_spec = getattr(leaf, 'element_spec', None)
    if element_spec is not None and not hasattr(leaf, 'dtype'):
      flat.update(_leaves(element_spec, path))
    else:
      flat[path] = leaf
  return flat
