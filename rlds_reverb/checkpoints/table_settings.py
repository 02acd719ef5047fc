"""A table as a checkpoint describes it: the settings that replace the
server's at load, and the counters its items imply.

    TableSettings            name, sampler, remover, max_size,
      (plain values,           max_times_sampled, rate limits, signature
       `TableSettings.of(reverb.Table)`, or
       `rlds_reverb.tables.settings(TableOptions)`)
    + TableCounts            inserts, samples, deletes, deleted episodes,
      (default: the items      unique samples
       written)
    -> PriorityTableCheckpoint record (`table_record`; `read_record` back)

Reverb's loader builds the table from this record alone: the sampler and
remover from their options, a rate limiter from its checkpoint (counters
included), and the items are then inserted without touching the rate
limiter. So the counters must say what the items are: with `inserts = items`
and no samples, a MinSize(n) or SampleToInsertRatio table of at least n items
samples at once. Values the loader would crash on, rather than refuse
(`REVERB_CHECK`: min_size_to_sample or samples_per_insert <= 0, no selector),
are refused here.

Plain `dataclasses` and protobuf: TensorFlow only to encode a signature given
as specs (`encode_signature`), Reverb only to read a `reverb.Table`.
"""

import dataclasses
import math
from typing import Any, Optional, Tuple

from rlds_reverb.checkpoints import schema
from rlds_reverb.errors import CheckpointWriteError

KINDS = ('fifo', 'lifo', 'uniform', 'prioritized', 'min_heap', 'max_heap')
# Reverb's Python selectors mark these deterministic (KeyDistributionOptions).
_DETERMINISTIC = ('fifo', 'lifo', 'min_heap', 'max_heap')


@dataclasses.dataclass(frozen=True)
class Selector:
  """How a table picks the items it samples or removes: Reverb's selectors
  (`reverb.selectors.Fifo()` is `Selector('fifo')`, `Prioritized(0.8)` is
  `Selector('prioritized', 0.8)`, `MinHeap()` is `Selector('min_heap')`)."""
  kind: str  # One of KINDS.
  priority_exponent: float = 0.0  # For 'prioritized'.


@dataclasses.dataclass(frozen=True)
class RateLimits:
  """A rate limiter's settings (`reverb.rate_limiters`): `MinSize(n)` is
  (1.0, n, -max float, max float); `SampleToInsertRatio(r, n, e)` is (r, n,
  r * n - e, r * n + e); `Queue(size)` is (1.0, 1, 0.0, size)."""
  samples_per_insert: float
  min_size_to_sample: int
  min_diff: float
  max_diff: float


@dataclasses.dataclass(frozen=True)
class TableSettings:
  """What a checkpoint says of a table besides its items and counters."""
  name: str
  sampler: Selector
  remover: Selector
  max_size: int
  rate_limits: RateLimits
  max_times_sampled: int = 0  # < 1: no limit.
  signature: Optional[bytes] = None  # A serialized tensorflow.StructuredValue.

  @classmethod
  def of(cls, table) -> 'TableSettings':
    """The settings of a `reverb.Table` (its signature kept byte for byte)."""
    from reverb.cc import schema_pb2  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    info = schema_pb2.TableInfo.FromString(table.internal_table.info())
    limits = info.rate_limiter_info
    return cls(
        name=info.name, sampler=_selector(info.sampler_options),
        remover=_selector(info.remover_options), max_size=info.max_size,
        rate_limits=RateLimits(limits.samples_per_insert,
                               limits.min_size_to_sample, limits.min_diff,
                               limits.max_diff),
        max_times_sampled=info.max_times_sampled,
        signature=(info.signature.SerializeToString()
                   if info.HasField('signature') else None))


@dataclasses.dataclass(frozen=True)
class TableCounts:
  """A table's life so far, as its rate limiter and counters keep it."""
  inserted: int  # Items ever inserted (the items held, plus those deleted).
  sampled: int = 0
  deleted: int = 0  # Evicted, or sampled max_times_sampled times.
  deleted_episodes: int = 0
  unique_samples: int = 0


def encode_signature(signature: Any) -> bytes:
  """A nest of `tf.TensorSpec`s (as `reverb.Table(signature=...)` takes)
  serialized as the table's StructuredValue."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return tf.__internal__.saved_model.encode_structure(
      signature).SerializeToString()


def table_record(settings: TableSettings, counts: TableCounts) -> bytes:
  """The table's PriorityTableCheckpoint record.

  Raises:
    CheckpointWriteError: settings Reverb's loader would crash or fail on.
  """
  check(settings, counts)
  message = schema.classes()['PriorityTableCheckpoint'](
      table_name=settings.name, max_size=settings.max_size,
      max_times_sampled=settings.max_times_sampled,
      num_deleted_episodes=counts.deleted_episodes,
      num_unique_samples=counts.unique_samples)
  limits = settings.rate_limits
  limiter = message.rate_limiter
  limiter.samples_per_insert = limits.samples_per_insert
  limiter.min_diff = limits.min_diff
  limiter.max_diff = limits.max_diff
  limiter.min_size_to_sample = limits.min_size_to_sample
  limiter.sample_count = counts.sampled
  limiter.insert_count = counts.inserted
  limiter.delete_count = counts.deleted
  _set_selector(message.sampler, settings.sampler)
  _set_selector(message.remover, settings.remover)
  if settings.signature is not None:
    message.signature = settings.signature
  return message.SerializeToString()


def read_record(record: bytes) -> Tuple[TableSettings, TableCounts]:
  """A PriorityTableCheckpoint record's settings and counts (a server's, or
  `table_record`'s)."""
  message = schema.parse('PriorityTableCheckpoint', record)
  limiter = message.rate_limiter
  settings = TableSettings(
      name=message.table_name, sampler=_selector(message.sampler),
      remover=_selector(message.remover), max_size=message.max_size,
      rate_limits=RateLimits(limiter.samples_per_insert,
                             limiter.min_size_to_sample, limiter.min_diff,
                             limiter.max_diff),
      max_times_sampled=message.max_times_sampled,
      signature=message.signature or None)
  counts = TableCounts(
      inserted=limiter.insert_count, sampled=limiter.sample_count,
      deleted=limiter.delete_count,
      deleted_episodes=message.num_deleted_episodes,
      unique_samples=message.num_unique_samples)
  return settings, counts


def check(settings: TableSettings,
          counts: Optional[TableCounts] = None) -> None:
  """Raises CheckpointWriteError for what a server would not load (counts
  too, if given)."""
  where = f"Table '{settings.name}'"
  limits = settings.rate_limits
  problems = []
  if not settings.name:
    problems.append('it has no name')
  if settings.max_size < 1:
    problems.append(f'max_size is {settings.max_size}; at least 1')
  for role, selector in (('sampler', settings.sampler),
                         ('remover', settings.remover)):
    if selector.kind not in KINDS:
      problems.append(f'its {role} is {selector.kind!r}; one of '
                      f'{", ".join(KINDS)}')
    elif not math.isfinite(selector.priority_exponent) or (
        selector.priority_exponent < 0):
      problems.append(f'its {role} has priority exponent '
                      f'{selector.priority_exponent}; finite, >= 0')
  if not limits.samples_per_insert > 0:
    problems.append(f'samples_per_insert is {limits.samples_per_insert}; '
                    f'above 0 (Reverb aborts the server otherwise)')
  if limits.min_size_to_sample < 1:
    problems.append(f'min_size_to_sample is {limits.min_size_to_sample}; at '
                    f'least 1 (Reverb aborts the server otherwise)')
  if not limits.min_diff <= limits.max_diff:
    problems.append(f'min_diff {limits.min_diff} is above max_diff '
                    f'{limits.max_diff}')
  if counts is not None:
    negative = [f'{field.name} {getattr(counts, field.name)}'
                for field in dataclasses.fields(counts)
                if getattr(counts, field.name) < 0]
    if negative:
      problems.append(f'negative counts: {", ".join(negative)}')
  if problems:
    raise CheckpointWriteError(f'{where}: {"; ".join(problems)}.')


def _set_selector(options, selector: Selector) -> None:
  """KeyDistributionOptions as Reverb's Python selectors set them."""
  kind = selector.kind
  if kind == 'prioritized':
    options.prioritized.priority_exponent = selector.priority_exponent
    options.prioritized.SetInParent()
  elif kind in ('min_heap', 'max_heap'):
    options.heap.min_heap = kind == 'min_heap'
    options.heap.SetInParent()
  else:
    setattr(options, kind, True)
  options.is_deterministic = kind in _DETERMINISTIC


def _selector(options) -> Selector:
  """The Selector of KeyDistributionOptions (Reverb's proto, or the schema's:
  the set member of the oneof)."""
  if options.HasField('prioritized'):
    return Selector('prioritized', options.prioritized.priority_exponent)
  if options.HasField('heap'):
    return Selector('min_heap' if options.heap.min_heap else 'max_heap')
  for kind in ('fifo', 'lifo', 'uniform'):
    if getattr(options, kind):
      return Selector(kind)
  return Selector('')
