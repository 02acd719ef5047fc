"""Each batch's weights: numbers, schedules f(step), or the tables' sizes.

    weights=[1, 3]        -> [1, 3] for every batch
    weights=[1, f]        -> [1, f(start_step + k)] for batch k: f is called
                             in Python once per batch (a lambda, a Keras
                             LearningRateSchedule), as mixed_replay's schedule
    weights='size'        -> each table's current_size, read from its server
                             (server_info, with a timeout) for batch 0 and
                             again every `refresh_every` batches
      -> checked: a finite number >= 0 per source, their sum > 0
      -> rounding.Apportioner -> rows per source

With 'size' every item of every table is equally likely to fill a row: a
table twice as large gives twice the rows. A table found empty gets weight 0
(no rows) until a later reading finds items in it. If every table is empty
at a reading, the reading is repeated for up to `timeout` seconds, then the
dataset fails naming the tables: sampling would otherwise wait without end.
A server that does not answer at a reading keeps its tables' last sizes:
whether it is gone is the watchdog's to say (`watchdog`).
"""

import math
import numbers
import time
from typing import Callable, Collection, Dict, List, Sequence, Tuple

import numpy as np

from rlds_reverb.errors import MixedReplayError
from rlds_reverb.errors import ServerUnavailableError
from rlds_reverb.write import server as server_lib

SIZE = 'size'
DEFAULT_REFRESH_EVERY = 100  # Batches between two readings of the sizes.
_EMPTY_POLL_S = 0.1  # Between readings while every table is empty.

Weights = Callable[[int], List[float]]  # Batch index -> weight per source.
Lost = Callable[[], Collection[str]]  # Addresses of servers dropped so far.


def is_size(weights) -> bool:
  return isinstance(weights, str) and weights == SIZE


def check_form(weights, num_sources: int) -> None:
  """One number or schedule per source, or 'size'; numbers checked here."""
  if is_size(weights):
    return
  if (isinstance(weights, (str, bytes))
      or not isinstance(weights, (Sequence, np.ndarray))
      or len(weights) != num_sources):
    raise MixedReplayError(
        f'weights must be one number or schedule f(step) per source '
        f'({num_sources}), or {SIZE!r}; got {type(weights).__name__} '
        f'{weights!r}.')
  for index, weight in enumerate(weights):
    if callable(weight):
      continue
    if isinstance(weight, bool) or not isinstance(weight, numbers.Real):
      raise MixedReplayError(
          f'weights[{index}] must be a number >= 0 or a schedule f(step) -> '
          f'weight, got {type(weight).__name__} {weight!r}.')
    check_weight(index, float(weight), where='')


def check_weight(index: int, weight: float, where: str) -> None:
  if not (math.isfinite(weight) and weight >= 0):  # NaN fails too.
    raise MixedReplayError(
        f'weights[{index}] must be a finite number >= 0, got {weight!r}'
        f'{where}.')


def check_sum(weights: Sequence[float], where: str) -> None:
  if not sum(weights) > 0:
    raise MixedReplayError(
        f'weights must sum to more than 0, got {list(weights)}{where}.')


class Scheduled:
  """Numbers and schedules: batch k's weights are the values at
  `start_step + k`, checked."""

  def __init__(self, weights: Sequence, start_step: int):
    self._weights = list(weights)
    self._start_step = start_step

  def __call__(self, batch: int) -> List[float]:
    step = self._start_step + batch
    values = [self._value(index, weight, step)
              for index, weight in enumerate(self._weights)]
    check_sum(values, where=self._where(step))
    return values

  def _where(self, step: int) -> str:
    if any(callable(weight) for weight in self._weights):
      return f' at step {step}'
    return ''

  def _value(self, index: int, weight, step: int) -> float:
    if not callable(weight):
      return float(weight)
    value = weight(step)
    try:
      value = float(value)
    except (TypeError, ValueError) as e:
      raise MixedReplayError(
          f'weights[{index}] schedule returned {value!r} at step {step}; '
          f'expected a number >= 0.') from e
    check_weight(index, value, where=f' from its schedule at step {step}')
    return value


class TableSizes:
  """The tables' current sizes as weights, read every `refresh_every`
  batches (batch 0 first), one `server_info` per server."""

  def __init__(self, tables: Sequence[Tuple[str, str]], refresh_every: int,
               timeout: float, lost: Lost = frozenset):
    """`lost()`: addresses of servers dropped from the mixture, not read
    again (their tables count 0)."""
    self._tables = list(tables)
    self._refresh_every = refresh_every
    self._timeout = timeout
    self._lost = lost
    self._sizes: List[int] = []
    self._known: Dict[Tuple[str, str], int] = {}  # The last size read.

  def __call__(self, batch: int) -> List[float]:
    if batch % self._refresh_every == 0 or not self._sizes:
      self._sizes = self.read_until_some()
    return [float(size) for size in self._sizes]

  def read(self) -> List[int]:
    """current_size of each table. A server that does not answer keeps its
    tables' last sizes: whether it is gone is the watchdog's to say, after
    `timeout` (`watchdog`); Reverb's sampler waits for it meanwhile.

    Raises:
      As `server_lib.table_infos`, for a server never read before.
    """
    lost = self._lost()
    by_address = {}
    for address, table in self._tables:
      if address not in lost:
        by_address.setdefault(address, []).append(table)
    for address, tables in by_address.items():
      client, _ = server_lib.connect(address)
      try:
        infos = server_lib.table_infos(client, address, tables, self._timeout)
      except ServerUnavailableError:
        if all((address, table) in self._known for table in tables):
          continue
        raise
      for table, info in infos.items():
        self._known[address, table] = info.current_size
    return [0 if source[0] in lost else self._known[source]
            for source in self._tables]

  def read_until_some(self) -> List[int]:
    deadline = time.monotonic() + self._timeout
    while True:
      sizes = self.read()
      if sum(sizes) > 0:
        return sizes
      if time.monotonic() >= deadline:
        # No quotes: the dataset fails with this text in an assertion, which
        # escapes them.
        raise MixedReplayError(
            f'With size weights, every table was empty for '
            f'{self._timeout:g} s ({describe(self._tables)}); a mixture needs '
            f'items to sample.')
      time.sleep(_EMPTY_POLL_S)


class WithoutLost:
  """`per_batch`'s weights, 0 for the sources on servers dropped from the
  mixture (`on_server_loss='drop'`)."""

  def __init__(self, per_batch: Weights, addresses: Sequence[str],
               lost: Lost):
    self._per_batch = per_batch
    self._addresses = list(addresses)
    self._lost = lost

  def __call__(self, batch: int) -> List[float]:
    weights = self._per_batch(batch)
    lost = self._lost()
    if not lost:
      return weights
    kept = [0.0 if address in lost else weight
            for address, weight in zip(self._addresses, weights)]
    if not sum(kept) > 0:
      raise MixedReplayError(
          f'weights of the sources still in the mixture sum to 0 ({kept}) '
          f'since the servers at {", ".join(sorted(lost))} were dropped: '
          f'nothing is left to sample.')
    return kept


def describe(tables: Sequence[Tuple[str, str]]) -> str:
  return ', '.join(f'table {table} at {address}' for address, table in tables)
