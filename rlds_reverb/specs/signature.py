"""Reverb table signatures for trajectory specs, and why one does not match."""

from typing import Any, List, Optional

from tf_agents.specs import tensor_spec

from rlds_reverb.errors import SignatureMismatchError
from rlds_reverb.specs import encoded
from rlds_reverb.specs import paths

# TF-Agents' message, kept verbatim so that code matching it keeps working.
MISMATCH_MESSAGE = (
    'Replay buffer table signature spec should match RLDS data spec.')


def table_signature(trajectory_spec: Any) -> Any:
  """The signature of a table of items of whole trajectories: a time axis added."""
  return tensor_spec.add_outer_dim(trajectory_spec)


def check_table_signature(
    signature: Optional[Any], trajectory_spec: Any, table: str = '') -> None:
  """Raises unless `signature` is None (unsigned table) or matches the spec.

  The comparison is TF-Agents' (`signature != add_outer_dim(spec)`); the error
  carries one PEP 678 note per differing field, with both specs.
  """
  check_item_signature(signature, table_signature(trajectory_spec), table)


def check_item_signature(
    signature: Optional[Any], item_spec: Any, table: str = '') -> None:
  """Raises unless `signature` is None or equals `item_spec` exactly."""
  if signature is None:
    return
  expected = item_spec
  if signature != expected:
    error = SignatureMismatchError(MISMATCH_MESSAGE)
    where = f"table '{table}'" if table else 'table'
    for difference in spec_differences(signature, expected):
      error.add_note(f'{where}: {difference}')
    raise error


def spec_differences(table_spec: Any, data_spec: Any) -> List[str]:
  """One line per field whose specs differ, or that only one side has."""
  lines = []
  for path, table, data in paths.spec_differences(table_spec, data_spec):
    name = path or '<root>'
    table_text, data_text = paths.difference_texts(table, data)
    if data is None:
      lines.append(f'{name}: table has {table_text}, data has no field')
    elif table is None:
      lines.append(f'{name}: table has no field, data has {data_text}')
    else:
      lines.append(f'{name}: table has {table_text}, data has {data_text}'
                   f'{_images_hint(table, data)}')
  return lines


def _images_hint(table_spec: Any, data_spec: Any) -> str:
  """What to change when one side stores a field's frames encoded."""
  table_encoded = encoded.image_of(table_spec) is not None
  data_encoded = encoded.image_of(data_spec) is not None
  if data_encoded and not table_encoded:
    return (' (the push keeps frames encoded and the table holds them raw: '
            "push without images='encoded', or serve the table with "
            '--images encoded)')
  if table_encoded and not data_encoded:
    return (' (the table holds frames encoded: push them with '
            "images='encoded', --images encoded)")
  return ''
