"""The columns of a table, checked before any row reaches a Reverb writer.

A Reverb writer fixes each column's dtype and shape at its first append and
rejects any later row that differs ("Tensor of wrong dtype provided for column
1. Got int64 but expected string."), by then with earlier items in the table.
So rows are checked here against the item spec (a signed table's signature is
checked to equal it) before they are appended:

    writer start   a pad row made by `rows.pad_columns` from the spec alone
                   (the rows every padded episode ends with): before anything
                   is written, whatever episode is the first to need padding
    every episode  its rows, pad rows included, before its first append

Dimensions the spec leaves unknown (an image of any size) are not checked:
the writer's first rows fix them, and rows of another shape go to a new
writer (`shapes`).
"""

import dataclasses
from typing import Any, List, Optional, Sequence, Tuple

import numpy as np
import tree

from rlds_reverb.errors import ColumnMismatchError
from rlds_reverb.specs import paths

Shape = Tuple[Optional[int], ...]


@dataclasses.dataclass(frozen=True)
class Column:
  """One leaf of the item spec: what every row of that column must be."""
  path: str  # 'observation/pixels'
  dtype: np.dtype  # strings: object, as tf.data gives them
  shape: Shape  # one row's shape; None where the spec leaves it unknown


def columns_of(item_spec: Any) -> List[Column]:
  """The columns of `item_spec`, in `tree.flatten` order (the rows' order)."""
  return [Column(path, np.dtype(spec.dtype.as_numpy_dtype),
                 tuple(spec.shape.as_list()))
          for path, spec in paths.flatten_with_paths(item_spec)]


def empty_block(item_spec: Any) -> Any:
  """`item_spec` as numpy arrays of 0 rows (unknown dimensions 0)."""
  return tree.map_structure(
      lambda spec: np.zeros(
          [0] + [d or 0 for d in spec.shape.as_list()],
          spec.dtype.as_numpy_dtype), item_spec)


def check_rows(columns: Sequence[Column], arrays: Sequence[np.ndarray],
               where: str) -> None:
  """Raises unless each array is rows [T, ...] of its column's dtype and shape.

  Args:
    columns: the item spec's columns.
    arrays: one [T, ...] array per column, in the same order.
    where: the rows' place for the message, e.g. 'episode 7'.

  Raises:
    ColumnMismatchError: naming the field, both dtypes or shapes, and `where`.
  """
  if len(arrays) != len(columns):
    raise ColumnMismatchError(
        f'{where} has {len(arrays)} columns, the table {len(columns)}.')
  for column, array in zip(columns, arrays):
    problem = _mismatch(column, array)
    if problem:
      raise ColumnMismatchError(
          f"Column '{column.path}' of {where}: {problem}; Reverb's writer "
          f'would reject it.')


def shapes(arrays: Sequence[np.ndarray]) -> Tuple[Shape, ...]:
  """The row shape of each array: what a writer's first append fixes."""
  return tuple(array.shape[1:] for array in arrays)


def _mismatch(column: Column, array: np.ndarray) -> Optional[str]:
  if array.dtype != column.dtype:
    return (f'rows of dtype {paths.dtype_text(array.dtype)}, the table '
            f'expects {paths.dtype_text(column.dtype)}')
  row_shape = array.shape[1:]
  if len(row_shape) != len(column.shape) or any(
      want is not None and want != got
      for want, got in zip(column.shape, row_shape)):
    return (f'rows of shape {paths.shape_text(row_shape)}, the table '
            f'expects {paths.shape_text(column.shape)}')
  return None

