"""Reverb tables as data: options, the recipes people use, one builder.

    recipe (uniform, fifo, prioritized, sample_to_insert_ratio, offline_online)
      -> TableOptions: frozen plain values, `check`ed
           -> table(options, signature)     -> reverb.Table, for reverb.Server
           -> settings(options, signature)  -> checkpoints.TableSettings: what a
                                               checkpoint holds; compared across
                                               servers; no Reverb needed

A recipe is a table as TF-Agents' and Acme's examples build it by hand:

    recipe                          sampler/remover   uses up  rate limiter
    uniform(name, max_size)         uniform/fifo      never    MinSize(min_size)
    fifo(name, max_size)            fifo/fifo         at 1     MinSize(1)
    prioritized(name, max_size)     prioritized/fifo  never    MinSize(min_size)
    sample_to_insert_ratio(name, R) uniform/fifo      never    SampleToInsert-
                                                               Ratio(R,
                                                               min_size,
                                                               error_buffer)
    offline_online(online_max_size) -> (uniform('offline', LARGEST),
                                        uniform('online', online_max_size))

("uses up": `max_times_sampled`, the samples after which an item is removed.)

Anything else is `TableOptions(...)`, or a recipe changed with
`dataclasses.replace`. `TableOptions(name)` is `serve`'s default table, and
its fields are `serve`'s table options (`rlds_reverb/cli/tables.py` reads
them). The checks Reverb would make, and those it would not (sizes beyond
its 32-bit ints, a prioritized exponent on a uniform table), raise
`TableOptionsError` with one line naming the table and the option.

Nothing heavy is imported here: `table` imports Reverb when called and
`settings` the checkpoint records, so the command line reads and checks
options before TensorFlow loads.
"""

import dataclasses
import math
import numbers
import sys
from typing import Any, Callable, NamedTuple, Optional, Tuple

from rlds_reverb.errors import TableOptionsError

__all__ = [
    'TableOptions', 'uniform', 'fifo', 'prioritized', 'sample_to_insert_ratio',
    'offline_online', 'table', 'settings', 'check', 'problem',
    'value_problem', 'Spelling', 'KEYWORDS', 'SELECTORS', 'LARGEST',
    'UNBOUNDED_SIZE', 'DEFAULT_MAX_SIZE', 'PRIORITY_EXPONENT', 'ERROR_BUFFER',
]

SELECTORS = ('uniform', 'prioritized', 'fifo', 'lifo')
# Reverb's tables take sizes and counts as 32-bit ints.
LARGEST = 2**31 - 1
# The largest max_size, as good as none (Reverb allocates per item, not up
# front); `serve`'s memory estimate is then per million items.
UNBOUNDED_SIZE = LARGEST
DEFAULT_MAX_SIZE = 1_000_000
# As TF-Agents' and Acme's prioritized replay examples use.
PRIORITY_EXPONENT = 0.8
# SampleToInsertRatio's error buffer unless given, or samples_per_insert
# when larger (Reverb's least).
ERROR_BUFFER = 100.0

# Options that are counts: their least value (LARGEST the most).
_COUNTS = {'max_size': 1, 'max_times_sampled': 0, 'min_size': 1}
# Options that are numbers, or None: (least, whether the least is refused).
_NUMBERS = {'priority_exponent': (0.0, False),
            'samples_per_insert': (0.0, True),
            'error_buffer': (0.0, True)}


@dataclasses.dataclass(frozen=True)
class TableOptions:
  """One Reverb table as plain values; the defaults are `serve`'s table.

  Attributes:
    name: the table's name.
    sampler: how items are sampled: one of SELECTORS.
    remover: which item goes when the table is full: one of SELECTORS.
    priority_exponent: of a prioritized sampler or remover (an item is chosen
      with probability ~ priority^X); None: PRIORITY_EXPONENT. Only for a
      table with one.
    max_size: items kept; each insert beyond evicts one, silently.
    max_times_sampled: an item is removed once sampled this often; 0: never.
    min_size: samples wait until the table holds this many items (the rate
      limiter `MinSize(min_size)`, or SampleToInsertRatio's
      `min_size_to_sample`).
    samples_per_insert: None: the rate limiter is MinSize, which never blocks
      inserts. A number R: `SampleToInsertRatio(R, min_size, error_buffer)`,
      which blocks inserts on the server, with no timeout, while samples lag.
    error_buffer: SampleToInsertRatio's; None: ERROR_BUFFER, or R if larger.
  """
  name: str
  sampler: str = 'uniform'
  remover: str = 'fifo'
  priority_exponent: Optional[float] = None
  max_size: int = DEFAULT_MAX_SIZE
  max_times_sampled: int = 0
  min_size: int = 1
  samples_per_insert: Optional[float] = None
  error_buffer: Optional[float] = None

  @property
  def exponent(self) -> float:
    """The prioritized selectors' exponent, given or defaulted."""
    return (PRIORITY_EXPONENT if self.priority_exponent is None
            else self.priority_exponent)

  @property
  def buffer(self) -> float:
    """SampleToInsertRatio's error buffer, given or defaulted."""
    if self.error_buffer is not None:
      return self.error_buffer
    return max(ERROR_BUFFER, self.samples_per_insert or 0)

  @property
  def removes_sampled_items(self) -> bool:
    """Whether sampling uses items up (mixed replay's offline table must
    not, and such a table is read through one stream: `reading`)."""
    return self.max_times_sampled > 0


# --- Recipes. ----------------------------------------------------------------

def uniform(name: str, max_size: int = DEFAULT_MAX_SIZE, *,
            min_size: int = 1) -> TableOptions:
  """Uniform replay, as TF-Agents' DQN and SAC examples build it: items
  sampled uniformly and never used up; at `max_size` each insert evicts the
  oldest; samples wait for `min_size` items."""
  return _checked(TableOptions(name, max_size=max_size, min_size=min_size))


def fifo(name: str, max_size: int = DEFAULT_MAX_SIZE) -> TableOptions:
  """Each item sampled once, oldest first, as TF-Agents' PPO examples build
  it. Inserts never block: at `max_size` the oldest item is evicted unsampled
  (Reverb's `Table.queue` blocks inserts into a full table instead)."""
  return _checked(TableOptions(name, sampler='fifo', max_size=max_size,
                               max_times_sampled=1))


def prioritized(name: str, max_size: int = DEFAULT_MAX_SIZE, *,
                priority_exponent: float = PRIORITY_EXPONENT,
                min_size: int = 1) -> TableOptions:
  """Prioritized replay, as Acme's and TF-Agents' examples build it: items
  sampled with probability ~ priority^priority_exponent (a push's `priority`,
  then the learner's `update_priorities`), the oldest evicted first."""
  return _checked(TableOptions(name, sampler='prioritized', max_size=max_size,
                               priority_exponent=priority_exponent,
                               min_size=min_size))


def sample_to_insert_ratio(name: str, samples_per_insert: float,
                           max_size: int = DEFAULT_MAX_SIZE, *,
                           min_size: int = 1,
                           error_buffer: Optional[float] = None
                           ) -> TableOptions:
  """Uniform replay kept near `samples_per_insert` samples per insert, as
  Acme's agents build it: once the table holds `min_size` items, whichever
  side runs ahead by more than `error_buffer` waits. It blocks inserts on the
  server with no timeout: a push into it fails after its timeout while
  nothing samples."""
  return _checked(TableOptions(name, max_size=max_size, min_size=min_size,
                               samples_per_insert=samples_per_insert,
                               error_buffer=error_buffer))


def offline_online(online_max_size: int, *, offline: str = 'offline',
                   online: str = 'online',
                   offline_max_size: int = UNBOUNDED_SIZE
                   ) -> Tuple[TableOptions, TableOptions]:
  """(offline, online): two uniform tables for mixed replay (`mixed_replay`).

  The offline one keeps what is pushed into it: sampling removes nothing and
  nothing evicts it below `offline_max_size`. The online one is FIFO: at
  `online_max_size` each new item evicts the oldest.
  """
  return (uniform(offline, offline_max_size),
          uniform(online, online_max_size))


# --- Reverb's objects. -------------------------------------------------------

def table(options: TableOptions, signature: Any = None):
  """The `reverb.Table` that `options` describe, signed with `signature` (a
  nest of `tf.TensorSpec`s, e.g. `specs.table_signature(spec)`; None:
  unsigned).

  Raises:
    TableOptionsError: options that cannot make a table (`check`).
  """
  check(options)
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return reverb.Table(
      name=options.name, sampler=_selector(options.sampler, options),
      remover=_selector(options.remover, options), max_size=options.max_size,
      max_times_sampled=options.max_times_sampled,
      rate_limiter=_rate_limiter(options), signature=signature)


def _selector(kind: str, options: TableOptions):
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  if kind == 'prioritized':
    return reverb.selectors.Prioritized(options.exponent)
  return {'uniform': reverb.selectors.Uniform, 'fifo': reverb.selectors.Fifo,
          'lifo': reverb.selectors.Lifo}[kind]()


def _rate_limiter(options: TableOptions):
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  if options.samples_per_insert is None:
    return reverb.rate_limiters.MinSize(options.min_size)
  return reverb.rate_limiters.SampleToInsertRatio(
      samples_per_insert=options.samples_per_insert,
      min_size_to_sample=options.min_size, error_buffer=options.buffer)


def settings(options: TableOptions, signature: Any = None):
  """The `checkpoints.TableSettings` of `table(options, signature)`, made
  without Reverb: what a checkpoint holds of the table, and what tables on
  several servers compare by. Equal to `TableSettings.of(table(options,
  signature))`.

  Raises:
    TableOptionsError: options that cannot make a table (`check`).
  """
  check(options)
  from rlds_reverb.checkpoints import table_settings  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return table_settings.TableSettings(
      name=options.name, sampler=_selector_settings(options.sampler, options),
      remover=_selector_settings(options.remover, options),
      max_size=options.max_size, rate_limits=_rate_limits(options),
      max_times_sampled=options.max_times_sampled,
      signature=(table_settings.encode_signature(signature) if signature
                 else None))  # As `reverb.Table`: an empty nest is none.


def _selector_settings(kind: str, options: TableOptions):
  from rlds_reverb.checkpoints import table_settings  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return table_settings.Selector(
      kind, float(options.exponent) if kind == 'prioritized' else 0.0)


def _rate_limits(options: TableOptions):
  """The rate limiter's settings, as Reverb's `MinSize` and
  `SampleToInsertRatio` compute them."""
  from rlds_reverb.checkpoints import table_settings  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  if options.samples_per_insert is None:
    return table_settings.RateLimits(1.0, options.min_size,
                                     -sys.float_info.max, sys.float_info.max)
  ratio, buffer = float(options.samples_per_insert), float(options.buffer)
  offset = ratio * options.min_size
  return table_settings.RateLimits(ratio, options.min_size, offset - buffer,
                                   offset + buffer)


# --- Checks. -----------------------------------------------------------------

class Spelling(NamedTuple):
  """How a message names the options: Python's keywords (`KEYWORDS`), or a
  command line's flags (`serve`'s '--min-size')."""
  name: Callable[[str], str]  # A field's name as the user wrote it.
  separator: str  # Between two options the message lists together.


def _keyword(field: str) -> str:
  return field


KEYWORDS = Spelling(_keyword, ', ')


def check(options: TableOptions) -> None:
  """Raises TableOptionsError if `options` cannot make a table that serves:
  "Table 'replay': min_size 11 is more than max_size 10: the table never
  holds enough items to sample." The recipes, `table` and `settings` check."""
  wrong = problem(options)
  if wrong:
    raise TableOptionsError(f'Table {options.name!r}: {wrong}.')


def problem(options: TableOptions,
            spelling: Spelling = KEYWORDS) -> Optional[str]:
  """The first thing wrong with `options`, as a clause naming the option as
  `spelling` does ('max_size must be an integer from 1 to 2147483647, got
  0'), or None: a value alone, then the values together."""
  for field in dataclasses.fields(options):
    value = getattr(options, field.name)
    wrong = value_problem(field.name, value)
    if wrong:
      return f'{spelling.name(field.name)} {wrong}, got {value!r}'
  return _conflict(options, spelling)


def value_problem(field: str, value: Any) -> Optional[str]:
  """What is wrong with one option's value on its own ('must be an integer
  from 1 to 2147483647'), or None."""
  if field in ('sampler', 'remover'):
    return None if value in SELECTORS else (
        f'must be one of {", ".join(SELECTORS)}')
  if field in _COUNTS:
    least = _COUNTS[field]
    fits = (isinstance(value, numbers.Integral) and
            not isinstance(value, bool) and least <= value <= LARGEST)
    return None if fits else f'must be an integer from {least} to {LARGEST}'
  if field in _NUMBERS:
    least, strict = _NUMBERS[field]
    fits = value is None or (
        isinstance(value, numbers.Real) and not isinstance(value, bool) and
        math.isfinite(value) and (value > least if strict else value >= least))
    return None if fits else (
        f'must be a finite number {">" if strict else ">="} {least:g}')
  if field == 'name':
    fits = isinstance(value, str) and bool(value)
    return None if fits else 'must be a non-empty string'
  raise KeyError(f'no table option {field!r}')


def _conflict(options: TableOptions, spelling: Spelling) -> Optional[str]:
  """Why these values, each fine alone, cannot make a table that serves."""
  name = spelling.name
  prioritized = 'prioritized' in (options.sampler, options.remover)
  if options.priority_exponent is not None and not prioritized:
    return (f'{name("priority_exponent")} is for a prioritized sampler or '
            f'remover, and this table has {name("sampler")} '
            f'{options.sampler}{spelling.separator}{name("remover")} '
            f'{options.remover}')
  if options.error_buffer is not None and options.samples_per_insert is None:
    return (f'{name("error_buffer")} is for the SampleToInsertRatio rate '
            f'limiter: give {name("samples_per_insert")} too')
  if options.min_size > options.max_size:
    return (f'{name("min_size")} {options.min_size} is more than '
            f'{name("max_size")} {options.max_size}: the table never holds '
            'enough items to sample')
  if (options.samples_per_insert is not None and
      options.buffer < max(1.0, options.samples_per_insert)):
    return (f'{name("error_buffer")} {options.buffer:g} is less than max(1, '
            f'{name("samples_per_insert")} {options.samples_per_insert:g}): '
            'SampleToInsertRatio would block both inserts and samples')
  return None


def _checked(options: TableOptions) -> TableOptions:
  check(options)
  return options
