"""`serve`'s tables: repeatable --table, and options that follow each one.

    serve --dataset D --max-size 100000 \\        before any --table: every table
        --table replay --sampler prioritized \\    options of 'replay'
        --table online --samples-per-insert 4      options of 'online'

An option applies to the --table before it; one given before the first
--table is every table's default, which a table's own overrides. No --table
serves one table, 'replay', with the defaults. Each value is checked as it is
read, and the options of a table together once all are read: an error names
the table and the option, and exits 2 before anything starts. The rules and
the messages are the library's (`rlds_reverb.tables`), the options named as
flags here; building the tables is the library's too.

A table's rate limiter is MinSize(--min-size), which never blocks inserts,
or with --samples-per-insert, Reverb's SampleToInsertRatio(samples_per_insert,
min_size_to_sample=--min-size, error_buffer=--error-buffer), which blocks
inserts (a push then fails after its --timeout) while samples lag.
"""

import argparse
import math
from typing import Any, Callable, Dict, List

from rlds_reverb import tables
from rlds_reverb.cli import output

DEFAULT_TABLE = 'replay'

# Where the parsed options are kept in the namespace.
_TABLES = 'table_list'
_DEFAULTS = 'table_defaults'


def _flag(field: str) -> str:
  return '--' + field.replace('_', '-')


# How messages name the options here: '--min-size 11 is more than ...'.
FLAGS = tables.Spelling(_flag, ' ')


# --- Values, each checked alone (by the library's rules). --------------------

def _value(field: str, parse: Callable[[str], Any]) -> Callable[[str], Any]:
  """argparse's conversion of one option's text: parsed, then checked."""
  def convert(text: str) -> Any:
    try:
      value = parse(text)
    except ValueError:
      value = math.nan  # Wrong for every field.
    problem = tables.value_problem(field, value)
    if problem:
      raise ValueError(f"{problem}, got '{text}'")
    return value
  return convert


_CHOICES = '{' + ','.join(tables.SELECTORS) + '}'
# option: (field, convert, metavar, help)
OPTIONS = {
    '--sampler': ('sampler', _value('sampler', str), _CHOICES,
                  'how items are sampled (default: uniform)'),
    '--remover': ('remover', _value('remover', str), _CHOICES,
                  'which item goes when the table is full (default: fifo)'),
    '--priority-exponent': (
        'priority_exponent', _value('priority_exponent', float), 'X',
        'exponent of a prioritized sampler or remover: items are chosen '
        'with probability ~ priority^X (default: '
        f'{tables.PRIORITY_EXPONENT})'),
    '--max-size': ('max_size', _value('max_size', int), 'N',
                   'items kept; the remover drops one, silently, for each '
                   f'insert beyond (default: {tables.DEFAULT_MAX_SIZE}; '
                   f'{tables.LARGEST}, the largest, for no bound)'),
    '--max-times-sampled': (
        'max_times_sampled', _value('max_times_sampled', int), 'N',
        'an item is removed once sampled N times (default: 0, never)'),
    '--min-size': ('min_size', _value('min_size', int), 'N',
                   'samples wait until the table holds N items (the rate '
                   'limiter MinSize(N), or the min_size_to_sample of '
                   '--samples-per-insert; default: 1)'),
    '--samples-per-insert': (
        'samples_per_insert', _value('samples_per_insert', float), 'R',
        'rate limiter SampleToInsertRatio: keep samples near R per insert, '
        'blocking whichever runs ahead; it blocks inserts on the server '
        'with no timeout, so a push fails after its --timeout while nothing '
        'samples (default: MinSize, never blocks inserts)'),
    '--error-buffer': (
        'error_buffer', _value('error_buffer', float), 'E',
        'how far samples may run ahead of or lag behind R per insert before '
        'SampleToInsertRatio blocks; at least max(1, R) (default: '
        f'{tables.ERROR_BUFFER:g}, or R if larger)'),
}


# --- Reading the command line in order. --------------------------------------

class _Table(argparse.Action):
  """--table NAME: a new table; the options after it are its own."""

  def __call__(self, parser, namespace, values, option_string=None):
    listed = _list(namespace)
    if not values:
      raise argparse.ArgumentError(self, 'a table name must not be empty')
    if any(table['name'] == values for table in listed):
      raise argparse.ArgumentError(
          self, f'table {values!r} is given twice: table names must differ')
    listed.append({'name': values})


class _TableOption(argparse.Action):
  """An option of the last --table, or of every table before any --table."""

  def __init__(self, *args, convert=None, **kwargs):
    super().__init__(*args, **kwargs)
    self._convert = convert

  def __call__(self, parser, namespace, values, option_string=None):
    listed = _list(namespace)
    if listed:
      target, where = listed[-1], f"table {listed[-1]['name']!r}: "
    else:
      target, where = _defaults(namespace), ''
    if self.dest in target:
      raise argparse.ArgumentError(
          self, f'{where}given twice' + (
              '' if listed else ' before any --table (where it applies to '
              'every table)'))
    try:
      target[self.dest] = self._convert(values)
    except ValueError as e:
      raise argparse.ArgumentError(self, f'{where}{e}') from e


def _list(namespace) -> List[Dict]:
  if getattr(namespace, _TABLES, None) is None:
    setattr(namespace, _TABLES, [])
  return getattr(namespace, _TABLES)


def _defaults(namespace) -> Dict:
  if getattr(namespace, _DEFAULTS, None) is None:
    setattr(namespace, _DEFAULTS, {})
  return getattr(namespace, _DEFAULTS)


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """--table and the options of each table, in a group of their own."""
  group = parser.add_argument_group('tables', output.wrapped(
      'Each option below applies to the --table before it; given before any '
      '--table, to every table that does not set it.'))
  group.add_argument(
      '--table', action=_Table, dest=_TABLES, metavar='NAME',
      help=('a table to serve; repeat for several, each signed for the '
            f"dataset (default: one table, '{DEFAULT_TABLE}')"))
  for flag, (field, convert, metavar, text) in OPTIONS.items():
    group.add_argument(flag, action=_TableOption, dest=field, convert=convert,
                       metavar=metavar, help=text, default=argparse.SUPPRESS)
  parser.set_defaults(**{_TABLES: None, _DEFAULTS: None})


# --- The options of each table, together. ------------------------------------

def table_options(args: argparse.Namespace) -> List[tables.TableOptions]:
  """Every table's options, checked together; a conflict exits 2."""
  defaults = getattr(args, _DEFAULTS, None) or {}
  given = getattr(args, _TABLES, None) or [{'name': DEFAULT_TABLE}]
  result = []
  for table in given:
    options = tables.TableOptions(**{**_applying(defaults, table), **table})
    problem = tables.problem(options, FLAGS)
    if problem:
      raise output.CliError(f'Table {options.name!r}: {problem}',
                            output.EXIT_USAGE)
    result.append(options)
  return result


def _applying(defaults: Dict, table: Dict) -> Dict:
  """The defaults that apply to `table`: an exponent only if it has a
  prioritized selector, an error buffer only if it has a ratio limiter."""
  merged = {**defaults, **table}
  applying = dict(defaults)
  if 'prioritized' not in (merged.get('sampler'), merged.get('remover')):
    applying.pop('priority_exponent', None)
  if merged.get('samples_per_insert') is None:
    applying.pop('error_buffer', None)
  return applying


def given_options(args: argparse.Namespace) -> Dict[str, Dict[str, Any]]:
  """Per table name, the options the command line gave it (itself or before
  any --table), as {field: value}; {} for a table given only its name."""
  defaults = getattr(args, _DEFAULTS, None) or {}
  given = getattr(args, _TABLES, None) or [{'name': DEFAULT_TABLE}]
  result = {}
  for table in given:
    options = {**_applying(defaults, table), **table}
    options.pop('name')
    result[table['name']] = options
  return result


def flag_text(field: str, value: Any) -> str:
  """'--max-size 100' for messages."""
  return f'{_flag(field)} {value:g}' if isinstance(value, float) else (
      f'{_flag(field)} {value}')
