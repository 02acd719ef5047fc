"""Replay mixtures: every batch holds exactly its share of each source.

A table too large for one server is split across servers; training on
several datasets (as Octo and OpenVLA mix Open X-Embodiment sets) samples
several tables. `tf.data.Dataset.sample_from_datasets` mixes them only on
average, with fixed weights. Here:

    sources 0..N-1: ReverbReplayBuffers or (address, table), on any servers
      | sources.as_sources: settings read, specs compared, removers refused
      v
    per source: buffer.as_dataset(B, num_steps).prefetch(1).unbatch()
                                                          -> item streams
                          |
    weights (numbers, schedules, 'size': weights.py)
      -> batch k's weights -> rounding.Apportioner -> rows [n_0, ..., n_N-1]
      -> choices: n_0 zeros, n_1 ones, ... (a list built for batch k,
         choices.py)
                          |
                          v  choose_from_datasets(streams, choices).batch(B)
                          |  watchdog.guarded: a server silent, or a table
                          v  due rows empty, for `timeout` s fails it (with
                             on_server_loss='drop' a silent server is left
                             out, until the last: dropping.py)
    (Trajectory [B, num_steps, ...], SampleInfo [B, num_steps]): rows
    0..n_0-1 from source 0, the next n_1 from source 1, ..., in every batch

Batch k takes its B items, in order, from the choice list made for it, so it
holds n_i items of source i exactly, not n_i on average. The weights are
computed in Python once per batch, when tf.data builds it (a batch or more
ahead of its use); prefetching does not shift them: batch k is the k-th
batch of the iterator.

`mixed_replay` is the two-source case with its own rounding (each batch alone,
halves up). Reverb's uniform sampler is not seeded: which items a batch holds
differs between runs; how many come from each source does not.
"""

import functools
import math
from typing import (Collection, Iterator, List, Optional, Sequence, Tuple,
                    Union)

import tensorflow as tf

from rlds_reverb.errors import MixedReplayError
from rlds_reverb.mixture import choices
from rlds_reverb.mixture import dropping
from rlds_reverb.mixture import rounding
from rlds_reverb.mixture import sources as sources_lib
from rlds_reverb.mixture import watchdog
from rlds_reverb.mixture import weights as weights_lib

DEFAULT_TIMEOUT_S = 30.0
ReplayLike = sources_lib.ReplayLike
ServersFileLike = sources_lib.ServersFileLike


def replay_mixture(sources: Union[Sequence[ReplayLike], ServersFileLike],
                   weights, sample_batch_size: int, num_steps: int = 2, *,
                   start_step: int = 0,
                   refresh_sizes_every: int = weights_lib.DEFAULT_REFRESH_EVERY,
                   allow_removal: Collection[int] = (),
                   num_parallel_calls: Optional[int] = None,
                   timeout: float = DEFAULT_TIMEOUT_S,
                   on_server_loss: str = 'raise') -> tf.data.Dataset:
  """Batches of `sample_batch_size` items, each source's share in each one.

  Like `ReverbReplayBuffer.as_dataset(sample_batch_size, num_steps)`: the
  elements are `(Trajectory [B, num_steps, ...], SampleInfo [B, num_steps])`,
  ready for `agent.train`, with rows ordered by source: the first n_0 rows
  from `sources[0]`, the next n_1 from `sources[1]`, and so on.

  Batch k holds n_i = floor(s_i) or floor(s_i) + 1 rows of source i, where
  s_i = w_i / sum(w) * B: largest-remainder rounding with the remainders
  carried from batch to batch, so that over many batches each source gets
  its share to within one row (`mixture.rounding`).

  Args:
    sources: the tables, each a `ReverbReplayBuffer` or `(address, table)`
      (then the data spec comes from the first buffer given, or from the
      table's signature), on one server or many. A servers file
      ('servers.json', written by a serve of many servers; as `sources`
      itself or as one of them) stands for `(address, table)` on each of
      its servers, in server order, with the one table it lists, or the
      table named as `(path, table)`; weigh them with `'size'`, or give a
      weight per server.
    weights: one per source, each a number >= 0 or a schedule
      `f(step) -> weight` called once per batch with `start_step + k`; or
      `'size'`: each table's current number of items, so that every item of
      every table is equally likely, read from the servers for the first
      batch and every `refresh_sizes_every` batches after (a table found
      empty gets no rows until a later reading finds items in it). Weights
      are computed as tf.data builds each batch, which with prefetching
      and parallel maps is a batch or a few ahead of its use.
    sample_batch_size: B, the rows per batch.
    num_steps: steps per item; the tables' items must have this length (as
      `push(sequence_length=num_steps)` and TF-Agents' observers write them).
    start_step: the step the first batch is drawn for (e.g. the agent's
      train step), passed to the schedules.
    refresh_sizes_every: with `'size'`, batches between two readings of the
      sizes (one `server_info` per server, within `timeout`).
    allow_removal: indices of sources whose tables may remove items once
      sampled (an online queue). The others must keep them
      (`max_times_sampled` 0), or sampling would drain the dataset.
    num_parallel_calls: for the sources' `as_dataset`s together: each gets
      num_parallel_calls / N, at least 1 (None or AUTOTUNE: each its own).
    timeout: seconds a server may leave unanswered, and a table that
      batches take rows from may stay empty, before the dataset fails
      (Reverb's sampler would wait for both without end). When building:
      each server's answer. While sampling, a watchdog asks every server
      every 0.5 s (`watchdog`): a server that has not answered for `timeout`
      seconds, or a table of weight above 0 empty for `timeout` seconds, its
      server answering, fails the next `next()` with
      `tf.errors.InvalidArgumentError`, naming the server, the table and the
      source (a server: unless `on_server_loss='drop'`); a server back
      sooner is waited for. With `'size'`, also how
      long every table may stay empty at a reading. A table given as
      `(address, table)` that removes sampled items is waited for as long
      for an item (`reading.ReplayBuffer`), and not checked for emptiness.
    on_server_loss: what a server that has not answered for `timeout`
      seconds while sampling does: 'raise' (the default) fails the next
      `next()`, as `timeout` says; 'drop' leaves it out: its sources get
      weight 0 from then on (numbers, schedules and `'size'` alike), the
      batches go on with the other sources' shares and B rows each (the
      few being built, which wait for its rows, are dropped: a schedule's
      steps then run that many batches ahead), and one `ServerLostWarning`
      names it and its tables (raised on the watchdog's thread; Python's
      warning filters apply: one that makes it an error fails the dataset
      with its text). A server that comes back is not sampled again. The
      last server lost fails the dataset as with 'raise'; other sources
      whose weights sum to 0 fail it naming the servers dropped. Cost: none
      measured (`mixture.dropping`: 'drop' sampled 1.25-1.43x the items/s
      of 'raise', two servers, B = 64).

  Raises:
    MixedReplayError: no sources; `allow_removal` not source indices;
      weights of the wrong form, negative, not finite or summing to 0 (with
      `'size'`: every table empty; a schedule's value at `start_step` too, a
      later one fails that batch with `tf.errors.InvalidArgumentError`
      carrying the same text); a batch size or `refresh_sizes_every` below
      1; a source that is neither a buffer nor `(address, table)`; an
      unsigned table; data specs that differ (naming the field and the
      source); a table that removes sampled items, not in `allow_removal`;
      an `on_server_loss` other than 'raise' or 'drop'; with 'drop', a
      field whose shape is not known (filler rows need it).
    AddressError, ServerUnavailableError, TableNotFoundError: a server that
      does not answer or lacks the table, naming it.
    ServersFileError: a servers file missing or unreadable, listing several
      tables when none is named, or not listing the table named.

  While iterating, errors come as `tf.errors.InvalidArgumentError` whose
  text is one line of ours (no Python traceback): a schedule's bad value, a
  server gone or a table starved for `timeout` seconds. `next()` waits in
  C++, so Ctrl-C takes effect when it returns: at once while batches flow,
  and when the watchdog fails the dataset at the latest.
  """
  sources = sources_lib.expanded(sources)
  if not sources:
    raise MixedReplayError('replay_mixture needs at least one source.')
  check_batch_size(sample_batch_size)
  weights_lib.check_form(weights, len(sources))
  check_refresh(refresh_sizes_every)
  allowed = check_allowed(allow_removal, len(sources))
  drop = dropping.check_on_server_loss(on_server_loss) == dropping.DROP
  names = [f'source {index}' for index in range(len(sources))]
  checked = sources_lib.as_sources(sources, names, num_steps, timeout)
  sources_lib.check_keep(checked, allowed)
  lost = dropping.Lost(watchdog.places_of(checked)) if drop else None
  if weights_lib.is_size(weights):
    places = [(source.address, source.table) for source in checked]
    check_sizes(checked, places)
    per_batch = weights_lib.TableSizes(places, refresh_sizes_every, timeout,
                                       frozenset if lost is None else lost)
  else:
    per_batch = weights_lib.Scheduled(weights, start_step)
    per_batch(0)  # Fails early.
  if lost is not None:
    per_batch = weights_lib.WithoutLost(
        per_batch, [source.address for source in checked], lost)
  counts = functools.partial(batch_counts, per_batch, len(checked),
                             sample_batch_size)
  return mixture_dataset(checked, counts, sample_batch_size, num_steps,
                         per_source_calls(num_parallel_calls, len(checked)),
                         timeout, lost)


def mixture_dataset(sources: Sequence[sources_lib.Source],
                    counts: choices.BatchCounts, sample_batch_size: int,
                    num_steps: int, num_parallel_calls: Optional[int],
                    timeout: float,
                    lost: Optional[dropping.Lost] = None) -> tf.data.Dataset:
  """Batches of B rows: `counts()`'s k-th value says how many of batch k come
  from each source, in source order; guarded by `watchdog` (a server silent,
  or a table due rows empty, for `timeout` seconds fails it). With `lost`
  (`on_server_loss='drop'`), a silent server is dropped instead
  (`dropping`), unless it is the last."""
  demand = watchdog.Demand(len(sources))
  guard = watchdog.Watchdog(watchdog.places_of(sources), timeout, demand,
                            lost)
  sampled = [source.buffer.as_dataset(
      sample_batch_size=sample_batch_size, num_steps=num_steps,
      num_parallel_calls=num_parallel_calls) for source in sources]
  if lost is None:
    items = [ahead(rows).unbatch() for rows in sampled]
  else:
    items = [dropping.answered(rows, index, source.name, sample_batch_size,
                               lost)
             for index, (rows, source) in enumerate(zip(sampled, sources))]
  batches = tf.data.Dataset.choose_from_datasets(
      items, choices.choices(counts, demand, len(sources))).batch(
          sample_batch_size, drop_remainder=True)
  if lost is not None:
    batches = dropping.whole(batches)
  return watchdog.guarded(batches, guard)


def ahead(sampled: tf.data.Dataset) -> tf.data.Dataset:
  """A source's batches, sampled on a thread of their own, one ahead: the
  rows of a batch then come out of memory while the next is sampled. With
  `num_parallel_calls=2` this took the learner's items per CPU-second over
  2 and 4 servers from 0.77x of one table's `as_dataset` to 1.02-1.08x
  (benchmarks/sharded_throughput.py, 2026-11-29)."""
  return sampled.prefetch(1)


def batch_counts(per_batch: weights_lib.Weights, num_sources: int,
                 batch_size: int) -> Iterator[Tuple[List[int], List[bool]]]:
  """(rows per source, which sources are due rows) of batch 0, 1, 2, ...:
  each batch's weights, rounded with the remainders carried (a fresh carry
  for each iterator); a source is due rows while its weight is above 0."""
  apportioner = rounding.Apportioner(num_sources, batch_size)
  batch = 0
  while True:
    weights = per_batch(batch)
    yield apportioner.counts(weights), [weight > 0 for weight in weights]
    batch += 1


def per_source_calls(num_parallel_calls: Optional[int],
                     num_sources: int) -> Optional[int]:
  """The learner's parallel calls shared out among the sources: each
  source's stream adds threads of its own, and more threads cost the learner
  CPU per item (`sources` says the same of streams)."""
  if not num_parallel_calls or num_parallel_calls < 0:  # None, AUTOTUNE.
    return num_parallel_calls
  return max(1, math.ceil(num_parallel_calls / num_sources))


def check_batch_size(sample_batch_size) -> None:
  if (isinstance(sample_batch_size, bool)
      or not isinstance(sample_batch_size, int) or sample_batch_size < 1):
    raise MixedReplayError(
        f'sample_batch_size must be a positive int, got {sample_batch_size!r}.')


def check_refresh(refresh_sizes_every) -> None:
  if (isinstance(refresh_sizes_every, bool)
      or not isinstance(refresh_sizes_every, int) or refresh_sizes_every < 1):
    raise MixedReplayError(
        f'refresh_sizes_every must be a positive int (batches), got '
        f'{refresh_sizes_every!r}.')


def check_allowed(allow_removal, num_sources: int) -> set:
  """`allow_removal` as a set of source indices, each in range."""
  allowed = set(allow_removal)
  wrong = sorted((index for index in allowed
                  if isinstance(index, bool) or not isinstance(index, int)
                  or not 0 <= index < num_sources), key=repr)
  if wrong:
    raise MixedReplayError(
        f'allow_removal must hold source indices 0..{num_sources - 1}, got '
        f'{wrong[0]!r}.')
  return allowed


def check_sizes(checked, places) -> None:
  """With 'size', some table must hold items when the mixture is built."""
  if sum(source.info.current_size for source in checked) == 0:
    raise MixedReplayError(
        f"weights='size' must sum to more than 0, but every table is empty "
        f'({weights_lib.describe(places)}).')
