"""`serve`'s tables: repeatable --table, and options that follow each one.

    serve --dataset D --max-size 100000 \\        before any --table: every table
        --table replay --sampler prioritized \\    options of 'replay'
        --table online --samples-per-insert 4      options of 'online'

An option applies to the --table before it; one given before the first
--table is every table's default, which a table's own overrides. No --table
serves one table, 'replay', with the defaults. Each value is checked as it is
read, and the options of a table together once all are read: an error names
the table and the option, and exits 2 before anything starts.

A table's rate limiter is MinSize(--min-size), which never blocks inserts,
or with --samples-per-insert, Reverb's SampleToInsertRatio(samples_per_insert,
min_size_to_sample=--min-size, error_buffer=--error-buffer), which blocks
inserts (a push then fails after its --timeout) while samples lag.
"""

import argparse
import dataclasses
import math
from typing import Callable, Dict, List, Optional

from rlds_reverb.cli import output

DEFAULT_TABLE = 'replay'
SELECTORS = ('uniform', 'prioritized', 'fifo', 'lifo')
# As TF-Agents' and Acme's prioritized replay examples use.
PRIORITY_EXPONENT = 0.8
# SampleToInsertRatio's error buffer unless given, or samples_per_insert
# when larger (Reverb's least).
ERROR_BUFFER = 100.0
# Reverb's tables take sizes and counts as 32-bit ints.
LARGEST = 2**31 - 1
# The largest max_size, as good as none: the memory estimate is per million.
UNBOUNDED_SIZE = LARGEST

# Where the parsed options are kept in the namespace.
_TABLES = 'table_list'
_DEFAULTS = 'table_defaults'


@dataclasses.dataclass(frozen=True)
class TableOptions:
  """One table as the options say; the defaults are `serve`'s."""
  name: str
  sampler: str = 'uniform'
  remover: str = 'fifo'
  priority_exponent: Optional[float] = None  # PRIORITY_EXPONENT if None.
  max_size: int = 1_000_000
  max_times_sampled: int = 0  # 0: no limit.
  min_size: int = 1
  samples_per_insert: Optional[float] = None  # None: MinSize.
  error_buffer: Optional[float] = None

  @property
  def exponent(self) -> float:
    return (PRIORITY_EXPONENT if self.priority_exponent is None
            else self.priority_exponent)

  @property
  def buffer(self) -> float:
    """SampleToInsertRatio's error buffer, given or defaulted."""
    if self.error_buffer is not None:
      return self.error_buffer
    return max(ERROR_BUFFER, self.samples_per_insert or 0)


# --- Values, each checked alone. ---------------------------------------------

def _int_at_least(least: int) -> Callable[[str], int]:
  """An int from `least` to Reverb's largest (its sizes are 32-bit)."""
  def convert(text: str) -> int:
    try:
      value = int(text)
    except ValueError:
      value = None
    if value is None or not least <= value <= LARGEST:
      raise ValueError(f'must be an integer from {least} to {LARGEST}, got '
                       f"'{text}'")
    return value
  return convert


def _number(least: float, strict: bool) -> Callable[[str], float]:
  relation = '>' if strict else '>='
  def convert(text: str) -> float:
    try:
      value = float(text)
    except ValueError:
      value = math.nan
    if not (math.isfinite(value) and
            (value > least if strict else value >= least)):
      raise ValueError(f"must be a finite number {relation} {least:g}, got "
                       f"'{text}'")
    return value
  return convert


def _selector_name(text: str) -> str:
  if text not in SELECTORS:
    raise ValueError(f"must be one of {', '.join(SELECTORS)}, got '{text}'")
  return text


# option: (field, convert, metavar, help)
OPTIONS = {
    '--sampler': ('sampler', _selector_name, '{' + ','.join(SELECTORS) + '}',
                  'how items are sampled (default: uniform)'),
    '--remover': ('remover', _selector_name, '{' + ','.join(SELECTORS) + '}',
                  'which item goes when the table is full (default: fifo)'),
    '--priority-exponent': (
        'priority_exponent', _number(0, strict=False), 'X',
        'exponent of a prioritized sampler or remover: items are chosen '
        f'with probability ~ priority^X (default: {PRIORITY_EXPONENT})'),
    '--max-size': ('max_size', _int_at_least(1), 'N',
                   'items kept; the remover drops one, silently, for each '
                   f'insert beyond (default: 1000000; {LARGEST}, the largest, '
                   'for no bound)'),
    '--max-times-sampled': (
        'max_times_sampled', _int_at_least(0), 'N',
        'an item is removed once sampled N times (default: 0, never)'),
    '--min-size': ('min_size', _int_at_least(1), 'N',
                   'samples wait until the table holds N items (the rate '
                   'limiter MinSize(N), or the min_size_to_sample of '
                   '--samples-per-insert; default: 1)'),
    '--samples-per-insert': (
        'samples_per_insert', _number(0, strict=True), 'R',
        'rate limiter SampleToInsertRatio: keep samples near R per insert, '
        'blocking whichever runs ahead; it blocks inserts on the server '
        'with no timeout, so a push fails after its --timeout while nothing '
        'samples (default: MinSize, never blocks inserts)'),
    '--error-buffer': (
        'error_buffer', _number(0, strict=True), 'E',
        'how far samples may run ahead of or lag behind R per insert before '
        'SampleToInsertRatio blocks; at least max(1, R) (default: '
        f'{ERROR_BUFFER:g}, or R if larger)'),
}


# --- Reading the command line in order. ---------------------------------------

class _Table(argparse.Action):
  """--table NAME: a new table; the options after it are its own."""

  def __call__(self, parser, namespace, values, option_string=None):
    tables = _list(namespace)
    if not values:
      raise argparse.ArgumentError(self, 'a table name must not be empty')
    if any(table['name'] == values for table in tables):
      raise argparse.ArgumentError(
          self, f'table {values!r} is given twice: table names must differ')
    tables.append({'name': values})


class _TableOption(argparse.Action):
  """An option of the last --table, or of every table before any --table."""

  def __init__(self, *args, convert=None, **kwargs):
    super().__init__(*args, **kwargs)
    self._convert = convert

  def __call__(self, parser, namespace, values, option_string=None):
    tables = _list(namespace)
    if tables:
      target, where = tables[-1], f"table {tables[-1]['name']!r}: "
    else:
      target, where = _defaults(namespace), ''
    if self.dest in target:
      raise argparse.ArgumentError(
          self, f'{where}given twice' + (
              '' if tables else ' before any --table (where it applies to '
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


# --- The options of each table, together. --------------------------------------

def table_options(args: argparse.Namespace) -> List[TableOptions]:
  """Every table's options, checked together; a conflict exits 2."""
  defaults = getattr(args, _DEFAULTS, None) or {}
  given = getattr(args, _TABLES, None) or [{'name': DEFAULT_TABLE}]
  result = []
  for table in given:
    options = TableOptions(**{**_applying(defaults, table), **table})
    problem = _conflict(options)
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


def _conflict(options: TableOptions) -> Optional[str]:
  """Why these options cannot make a table that serves, or None."""
  prioritized = 'prioritized' in (options.sampler, options.remover)
  if options.priority_exponent is not None and not prioritized:
    return (f'--priority-exponent is for a prioritized sampler or remover, '
            f'and this table has --sampler {options.sampler} --remover '
            f'{options.remover}')
  if options.error_buffer is not None and options.samples_per_insert is None:
    return ('--error-buffer is for the SampleToInsertRatio rate limiter: '
            'give --samples-per-insert too')
  if options.min_size > options.max_size:
    return (f'--min-size {options.min_size} is more than --max-size '
            f'{options.max_size}: the table never holds enough items to '
            'sample')
  if (options.samples_per_insert is not None and
      options.buffer < max(1.0, options.samples_per_insert)):
    return (f'--error-buffer {options.buffer:g} is less than max(1, '
            f'--samples-per-insert {options.samples_per_insert:g}): '
            'SampleToInsertRatio would block both inserts and samples')
  return None


# --- Reverb's objects. ----------------------------------------------------------

def make_table(reverb, options: TableOptions, signature):
  """The `reverb.Table` that `options` describe, signed with `signature`."""
  return reverb.Table(
      name=options.name, sampler=_selector(reverb, options.sampler, options),
      remover=_selector(reverb, options.remover, options),
      max_size=options.max_size, max_times_sampled=options.max_times_sampled,
      rate_limiter=_rate_limiter(reverb, options), signature=signature)


def _selector(reverb, name: str, options: TableOptions):
  if name == 'prioritized':
    return reverb.selectors.Prioritized(options.exponent)
  return {'uniform': reverb.selectors.Uniform, 'fifo': reverb.selectors.Fifo,
          'lifo': reverb.selectors.Lifo}[name]()


def _rate_limiter(reverb, options: TableOptions):
  if options.samples_per_insert is None:
    return reverb.rate_limiters.MinSize(options.min_size)
  return reverb.rate_limiters.SampleToInsertRatio(
      samples_per_insert=options.samples_per_insert,
      min_size_to_sample=options.min_size, error_buffer=options.buffer)

