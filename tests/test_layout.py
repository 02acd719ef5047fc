"""The package's imports point one way: docs/development.md's layout map.

Each layer imports only the layers below it (modules of one layer may
import each other); every top-level module and subpackage has its layer, so
a new one is placed here and on the map, in sight of review. Imports are
read from the sources (every `import`, at module level or inside a
function), nothing is imported.
"""

import ast
import pathlib

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / 'rlds_reverb'

# Top to bottom, as docs/development.md draws them.
LAYERS = [
    ('entry points', {'cli', 'beam', 'dask_worker', 'reverb_native',
                      '__main__', '__init__'}),
    ('features', {'parallel', 'build', 'build_parts', 'checked_push',
                  '_resume', 'mixed', 'mixture', 'sharded_buffer', 'decoded',
                  '_reading', 'record', 'exporter', 'validation', 'stats',
                  'step_stats'}),
    ('tables', {'tables'}),
    ('checkpoints', {'checkpoints'}),
    ('write', {'write'}),
    ('tfds_out', {'tfds_out'}),
    ('convert', {'convert'}),
    ('sources', {'sources'}),
    ('specs', {'specs'}),
    ('servers', {'addresses', 'held', 'servers_file'}),
    ('known lines', {'known_lines'}),
    ('used by all', {'push_options', 'errors', '_util', 'data'}),
]
LAYER_OF = {unit: index for index, (_, units) in enumerate(LAYERS)
            for unit in units}


def unit_of(path: pathlib.Path) -> str:
  """The top-level module or subpackage a source file belongs to."""
  return path.relative_to(PACKAGE).parts[0].removesuffix('.py')


def imported_units(path: pathlib.Path):
  """The package's top-level units that `path` imports (anywhere in it)."""
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.ImportFrom) and node.module and (
        node.module.split('.')[0] == 'rlds_reverb'):
      parts = node.module.split('.')
      yield from ([alias.name for alias in node.names] if len(parts) == 1
                  else [parts[1]])
    elif isinstance(node, ast.Import):
      yield from (alias.name.split('.')[1] for alias in node.names
                  if alias.name.startswith('rlds_reverb.'))


SOURCES = sorted(PACKAGE.rglob('*.py'))


def test_every_unit_has_a_layer():
  units = {unit_of(path) for path in SOURCES}
  assert sorted(units - set(LAYER_OF)) == []


@pytest.mark.parametrize('path', SOURCES,
                         ids=lambda path: str(path.relative_to(PACKAGE)))
def test_imports_point_down(path):
  unit = unit_of(path)
  upward = sorted(
      f'{name} ({LAYERS[LAYER_OF[name]][0]})'
      for name in set(imported_units(path))
      if name in LAYER_OF and LAYER_OF[name] < LAYER_OF[unit])
  assert upward == [], (
      f'{path.relative_to(PACKAGE)} ({LAYERS[LAYER_OF[unit]][0]}) imports '
      f'a layer above it: {upward}')
