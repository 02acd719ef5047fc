"""Field paths of nested structures, for error messages: 'observation/pixels'."""

from typing import Any, List, Tuple

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


def spec_text(spec: Any) -> str:
  """'float32[3]', 'uint8[?,?,3]' for a TensorSpec; else its type's name."""
  shape = getattr(getattr(spec, 'shape', None), 'rank', None)
  if shape is None or not hasattr(spec, 'dtype'):
    return type(spec).__name__
  dims = ','.join('?' if d is None else str(d) for d in spec.shape.as_list())
  return f'{spec.dtype.name}[{dims}]'
