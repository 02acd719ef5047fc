"""Reverb checkpoints built from RLDS data, with no server: a server then
starts holding the items a push would write, at its load speed.

    rlds_data --spec--> trajectory spec -> signature -> each table's
                        settings (`tables.settings`)         | nothing
              --read ahead (validation.validate), as push:    | written
                  malformed / flagged / empty episodes;       | if any
                  items per table -> what max_size evicts     | fails
              --convert.trajectory_blocks (one numpy block per episode)
              --checkpoints.plan.Plan: the chunks and items push's writer
                  leaves on a server (its chunk lengths, flushes, priority)
              --sink: `CheckpointWriter` (chunks, items, tables, DONE last)
              --> BuildResult

A server loads a checkpoint about 7x faster than any writer fills it
(docs/checkpoints.md). What a build leaves is all or nothing: the
checkpoint's `DONE` file is written last, and a failure (bad data, a full
disk, Ctrl-C) removes the directory, so a server started on `directory`
loads what it would have loaded before. Killed outright (SIGKILL), a build
leaves a directory without `DONE`, which Reverb skips.

A table smaller than the items (`max_size`) keeps the newest, as a push
into a FIFO table would leave it; the counts say the others were inserted
and deleted (`CapacityWarning`). The rate limiter's counters are the
table's after those inserts: a MinSize table samples at once, a
SampleToInsertRatio table samples at once and takes no insert until
samples catch up with the items.
"""

import contextlib
import dataclasses
import functools
import os
import shutil
import time
import warnings
from typing import (Any, Callable, Dict, Iterable, Iterator, List, Optional,
                    Sequence, Tuple, Union)

import tensorflow as tf

from rlds_reverb import push_options
from rlds_reverb import specs
from rlds_reverb import tables as tables_lib
from rlds_reverb import validation
from rlds_reverb._util import pipelines
from rlds_reverb._util import wording
from rlds_reverb.checked_push import frames_to_check
from rlds_reverb.checked_push import short_episodes_text
from rlds_reverb.checked_push import SkippedEpisode
from rlds_reverb.checked_push import skipped_episodes
from rlds_reverb.checkpoints import messages
from rlds_reverb.checkpoints import plan as plan_lib
from rlds_reverb.checkpoints import table_settings
from rlds_reverb.checkpoints import writer as writer_lib
from rlds_reverb.convert import encoded
from rlds_reverb.convert import nstep
from rlds_reverb.errors import CapacityWarning
from rlds_reverb.errors import DataReadError
from rlds_reverb.errors import ShortEpisodesWarning
from rlds_reverb.push_options import OnInvalid
from rlds_reverb.push_options import PushOptions
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields
from rlds_reverb.write import items as items_lib

TablesLike = Union[str, tables_lib.TableOptions,
                   Sequence[Union[str, tables_lib.TableOptions]]]


@dataclasses.dataclass(frozen=True)
class BuildProgress:
  """How far a build is: converted and planned so far."""
  episodes: int
  steps: int
  items: int  # Per table.
  bytes: int  # Written to the checkpoint's files.


@dataclasses.dataclass(frozen=True)
class BuildResult:
  """What a build wrote: a checkpoint a server loads (`path`)."""
  path: str  # The checkpoint's directory: directory/<time>.
  episodes: int
  trajectories: int  # Steps converted (transitions, for n-step).
  items: int  # Per table, made (`held(table)`: less what max_size left out).
  seconds: float
  bytes: int  # The checkpoint's size on disk.
  evicted: Tuple[Tuple[str, int], ...] = ()  # (table, oldest items left out)
  skipped_episodes: int = 0
  skipped: Tuple[SkippedEpisode, ...] = ()
  warnings: Tuple[str, ...] = ()
  notes: Tuple[str, ...] = ()

  def held(self, table: str) -> int:
    """The items `table` holds in the checkpoint."""
    return self.items - dict(self.evicted).get(table, 0)


@dataclasses.dataclass(frozen=True)
class BuildPlan:
  """What `CheckedBuild.check` decided, before anything is written."""
  spec: Any  # Of one item's rows: a trajectory, or a transition.
  settings: Tuple[table_settings.TableSettings, ...]
  skipped: Tuple[SkippedEpisode, ...] = ()
  # Items per table; None when not read ahead.
  items: Optional[int] = None
  warnings: Tuple[str, ...] = ()
  notes: Tuple[str, ...] = ()
  short_episodes: Optional[str] = None  # One of `warnings`.
  # (position, items) of each episode kept; empty when not read ahead.
  kept: Tuple[Tuple[int, int], ...] = ()

  def evicted(self, table: str) -> int:
    """The oldest items of `table` that its max_size leaves out."""
    if self.items is None:
      return 0
    max_size = {s.name: s.max_size for s in self.settings}[table]
    return max(0, self.items - max_size)

  def of_server(self, server: int, servers: int) -> 'BuildPlan':
    """This plan for server `server` of `servers`: the episodes at
    positions I with I % servers == server, their items, what each table's
    max_size leaves out of them."""
    kept = tuple((position, items) for position, items in self.kept
                 if position % servers == server)
    return dataclasses.replace(
        self, kept=kept, items=sum(items for _, items in kept),
        skipped=tuple(e for e in self.skipped
                      if e.position % servers == server))


def build_checkpoint(
    rlds_data: tf.data.Dataset,
    directory: str,
    tables: TablesLike,
    *,
    sequence_length: int = 2,
    stride_length: int = 1,
    priority: float = 1.0,
    end_of_episode: push_options.EndOfEpisode = push_options.EndOfEpisode.DROP,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
    chunk_length: push_options.ChunkLength = None,
    on_invalid: Union[str, OnInvalid] = OnInvalid.RAISE,
    strict: bool = False,
    images: str = 'raw',
    image_format: str = 'png',
    image_fields: Optional[Sequence[str]] = None,
    options: Optional[PushOptions] = None,
    on_read: Optional[Callable[[int, int], None]] = None,
    on_built: Optional[Callable[[BuildProgress], None]] = None,
) -> BuildResult:
  """Writes `rlds_data` as a new Reverb checkpoint under `directory`: the
  items `rlds_reverb.push` with the same settings would write, in tables made
  as `tables` say, which a server loads at start as a seed:

      reverb.Server(tables, port, checkpointer=(
          reverb.checkpointers.DefaultCheckpointer(
              'own_checkpoints', fallback_checkpoint_path=result.path)))

  The server loads the build when its own root ('own_checkpoints', new or
  empty) holds no checkpoint yet, and writes its own checkpoints there,
  leaving the build as it is, to seed the next run and the next server.
  Never hand `directory` itself to a checkpointer as its root: Reverb
  deletes every other entry of its root at each checkpoint, the build
  first. The checkpoint's table settings replace the server's, whose tables
  must have the same names (`rlds_reverb.tables.table(options)` makes them).

  Args:
    rlds_data: RLDS episodes (read twice: checked, then built).
    directory: a new or empty directory (created if missing); the build
      writes `directory/<time>`, `DONE` last.
    tables: a `rlds_reverb.tables.TableOptions` (e.g. `tables.uniform(
      'replay', max_size)`), a table name (`TableOptions(name)`: `serve`'s
      default table), or a sequence of them; each item goes to each table.
    sequence_length, stride_length, priority, end_of_episode: as for `push`.
    policy_info_fn, chunk_length, strict, images, image_format: as for `push`.
    image_fields, options: as for `push`.
    on_invalid: 'raise' or 'skip' (`push`'s; 'stop' writes part of the data,
      which a build, all or nothing, does not).
    on_read: called with (episodes, steps) as the data is read ahead.
    on_built: called with a `BuildProgress` as blocks are written.

  Returns:
    A `BuildResult`: the checkpoint's path, what it holds, what the checks
    left out or warned of (also issued as `CapacityWarning`s).

  Raises:
    ValueError: a setting `PushOptions` or `on_invalid` refuses, steps that
      do not convert (`StepSpecError`); before writing.
    RldsReverbError: before writing: `TableOptionsError`, `ImageFieldError`,
      `DataReadError`, `MalformedEpisodeError`; `CheckpointWriteError`: the
      directory is not new or empty, cannot be written, or a write failed
      (the new checkpoint is removed, and the directory if the build made
      it).
    KeyboardInterrupt: Ctrl-C; the unfinished checkpoint is removed.
  """
  options = push_options.of(
      options, sequence_length=sequence_length, stride_length=stride_length,
      priority=priority, end_of_episode=end_of_episode,
      chunk_length=chunk_length, strict=strict, images=images,
      image_format=image_format, image_fields=image_fields)
  job = CheckedBuild(rlds_data, tables, options, _on_invalid(on_invalid),
                     policy_info_fn=policy_info_fn)
  writer_lib.check_root(directory)
  _warn(job.check(on_read))
  return job.write(directory, on_built=on_built)


def build_nstep_checkpoint(
    rlds_data: tf.data.Dataset,
    directory: str,
    tables: TablesLike,
    *,
    n: int,
    discount: float,
    priority: float = 1.0,
    chunk_length: push_options.ChunkLength = None,
    strict: bool = False,
    images: str = 'raw',
    image_format: str = 'png',
    image_fields: Optional[Sequence[str]] = None,
    options: Optional[PushOptions] = None,
    on_read: Optional[Callable[[int, int], None]] = None,
    on_built: Optional[Callable[[BuildProgress], None]] = None,
) -> BuildResult:
  """A checkpoint of one item per n-step transition: the items
  `push_nstep_transitions` writes (its settings; `build_checkpoint`'s
  directory and tables). Read ahead as `build_checkpoint` reads: a
  malformed episode fails the build before anything is written, and a table
  whose max_size the transitions pass keeps the newest, as a FIFO push
  leaves it (`CapacityWarning`).
  """
  options = push_options.of(
      options, priority=priority, chunk_length=chunk_length, strict=strict,
      images=images, image_format=image_format, image_fields=image_fields)
  from rlds_reverb import checked_push  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  checked_push._check_nstep_options(options)  # pylint: disable=protected-access
  nstep.check_parameters(n, discount)
  job = CheckedBuild(rlds_data, tables, options, OnInvalid.RAISE,
                     nstep=(n, discount))
  writer_lib.check_root(directory)
  _warn(job.check(on_read))
  return job.write(directory, on_built=on_built)


def _on_invalid(value: Union[str, OnInvalid]) -> OnInvalid:
  on_invalid = OnInvalid(value)
  if on_invalid is OnInvalid.STOP:
    raise ValueError(
        "on_invalid='stop' writes the episodes before a malformed one; a "
        "build is all or nothing: use 'raise' or 'skip'.")
  return on_invalid


def _warn(plan: BuildPlan) -> None:
  for message in plan.warnings:
    category = (ShortEpisodesWarning if message == plan.short_episodes
                else CapacityWarning)
    warnings.warn(message, category, stacklevel=3)


def table_options(tables: TablesLike) -> Tuple[tables_lib.TableOptions, ...]:
  """`tables` as TableOptions: a name is `TableOptions(name)`."""
  if isinstance(tables, (str, tables_lib.TableOptions)):
    tables = [tables]
  made = tuple(tables_lib.TableOptions(t) if isinstance(t, str) else t
               for t in tables)
  for options in made:
    if not isinstance(options, tables_lib.TableOptions):
      raise TypeError(f'tables: a name or rlds_reverb.tables.TableOptions, '
                      f'or a sequence of them; got {options!r}.')
  names = [options.name for options in made]
  if not names or len(set(names)) != len(names):
    raise ValueError(f'tables: at least one, each name once; got {names}.')
  return made


@dataclasses.dataclass(frozen=True)
class ItemKind:
  """What a build's items are, in one place for every way of building (one
  process, local workers, Beam): trajectories (with `policy_info_fn`), or
  n-step transitions (`nstep` = (n, discount)); their spec, signature, item
  plan, and the rows of converted episodes the plan takes."""
  options: PushOptions = PushOptions()
  policy_info_fn: Optional[fields.PolicyInfoFn] = None
  nstep: Optional[Tuple[int, float]] = None

  @property
  def item_plan(self):
    if self.nstep is not None:
      return items_lib.TransitionItems()
    return items_lib.SequenceItems.of(self.options)

  def spec(self, step_spec) -> Any:
    if self.nstep is not None:
      return nstep.transition_spec(step_spec)
    return specs.trajectory_spec(step_spec, self.policy_info_fn)

  def signature(self, step_spec) -> Any:
    """The tables' signature: transitions are signed as they are."""
    spec = self.spec(step_spec)
    return spec if self.nstep is not None else specs.table_signature(spec)

  def rows(self, rlds_data: tf.data.Dataset
           ) -> Iterator[Tuple[int, Tuple[Any, ...]]]:
    """(index in `rlds_data`, the item spec's leaves [T, ...]) of each
    episode, converted as push converts it."""
    if self.nstep is not None:
      blocks = nstep.nstep_transition_blocks(rlds_data, *self.nstep,
                                             self.options.strict)
      return pipelines.numpy_of(blocks.map(_flat_transitions))
    return episode_rows(rlds_data, self.policy_info_fn, self.options.strict)

  def items_of(self, steps: int) -> int:
    """The items an episode of `steps` steps gives: an n-step transition
    per step but the last, or the sequence items of `item_plan`."""
    if self.nstep is not None:
      return max(steps - 1, 0)
    return len(self.item_plan.plan(steps).item_ends)


class CheckedBuild:
  """One build: `check()` reads ahead and decides, `write()` builds."""

  def __init__(self, rlds_data: tf.data.Dataset, tables: TablesLike,
               options: PushOptions = PushOptions(),
               on_invalid: OnInvalid = OnInvalid.RAISE, *,
               policy_info_fn: Optional[fields.PolicyInfoFn] = None,
               nstep: Optional[Tuple[int, float]] = None):  # pylint: disable=redefined-outer-name
    self._tables = table_options(tables)
    for table in self._tables:
      tables_lib.check(table)
    self._data, self._encoding = encoded.prepare(rlds_data,
                                                 options.image_storage)
    self._options = options
    self._on_invalid = on_invalid
    self._nstep = nstep
    self.kind = ItemKind(options, policy_info_fn, nstep)
    self._plan: Optional[BuildPlan] = None

  @property
  def item_plan(self):
    return self.kind.item_plan

  def check(self, on_read: Optional[Callable[[int, int], None]] = None
            ) -> BuildPlan:
    """Everything before writing; raises if the build must not start."""
    try:
      return self._check(on_read)
    except KeyboardInterrupt as e:
      e.add_note('Nothing was written.')
      raise

  def _check(self, on_read) -> BuildPlan:
    step_format = specs.step_format(self._data, self._options.strict)
    if self._encoding is not None:
      step_format = self._encoding.named(step_format)
    spec = self.kind.spec(step_format.spec)
    signature = self.kind.signature(step_format.spec)
    settings = tuple(tables_lib.settings(table, signature)
                     for table in self._tables)
    # The plan checks chunk_length against the columns, before any read.
    self._new_planner(spec)
    plan = BuildPlan(spec, settings, notes=tuple(step_format.notes()))
    plan = self._read_ahead(plan, on_read)
    self._plan = plan
    return plan

  @property
  def names(self) -> List[str]:
    return [table.name for table in self._tables]

  def _read_ahead(self, plan: BuildPlan, on_read) -> BuildPlan:
    """The checks of push's read-ahead, and what max_size leaves out."""
    try:
      report = validation.validate(self._data, on_read=on_read,
                                   frames=frames_to_check(self._encoding))
    except tf.errors.OpError as e:
      raise DataReadError(
          f'Cannot read the data: {e.message.splitlines()[0]}; nothing was '
          f'written.') from e
    skipped = skipped_episodes(report, self._on_invalid)
    left_out = {episode.position for episode in skipped}
    positions = [position for position in range(len(report.lengths))
                 if position not in left_out]
    kept = [report.lengths[position] for position in positions]
    items_of = [self._items_of(length) for length in kept]
    plan = dataclasses.replace(plan, skipped=skipped, items=sum(items_of),
                               kept=tuple(zip(positions, items_of)))
    short = None
    if kept and not all(items_of) and self._nstep is None:
      short = short_episodes_text(
          items_of.count(0), len(kept), max(kept),
          self._options.sequence_length)
    texts = capacity_warnings(plan) + ((short,) if short else ())
    return dataclasses.replace(plan, warnings=texts, short_episodes=short)

  def _items_of(self, steps: int) -> int:
    return self.kind.items_of(steps)

  def write(self, directory: str, *,
            on_built: Optional[Callable[[BuildProgress], None]] = None
            ) -> BuildResult:
    """Builds the checkpoint `check` planned; returns what it holds."""
    plan = self._plan or self.check()
    started = time.perf_counter()
    writer = writer_lib.CheckpointWriter(directory, plan.settings)
    try:
      with writer:
        sink = EvictingSink(writer, {name: plan.evicted(name)
                                     for name in self.names})
        built = self._build(plan, sink, on_built)
        path = writer.close(sink.counts(built.items))
    except KeyboardInterrupt as e:
      e.add_note(f'Nothing was written: the unfinished checkpoint '
                 f'{writer.path} was removed.')
      raise
    return self._result(path, plan, built, time.perf_counter() - started,
                        plan.warnings)

  def _build(self, plan: BuildPlan, sink, on_built) -> BuildProgress:
    return plan_blocks(self._kept_rows(plan), self._new_planner(plan.spec),
                       sink, kept_positions(plan.skipped), on_built)

  def _new_planner(self, spec) -> plan_lib.Plan:
    """A plan of the chunks and items push's writer would leave, for items
    of `spec` (it checks chunk_length against the columns)."""
    return plan_lib.Plan(spec, self.item_plan, self.names,
                         self._options.priority, self._options.chunk_length)

  def _kept_rows(self, plan: BuildPlan):
    """(index among the episodes kept, rows) of each episode kept."""
    data = whole_reads.whole(self._data)
    data = validation.without_episodes(
        data, [episode.position for episode in plan.skipped])
    return self.kind.rows(data)

  def write_servers(self, directory: str, servers: int) -> List[BuildResult]:
    """One checkpoint per server, in this process: episode I goes to server
    I % `servers` (as `build_shards` and a push into many servers send
    them), each under `checkpoints.parts.server_root(directory, k, S)`,
    holding what `write` of its episodes alone would. No parts, no merge:
    the data is read and converted once, as for one server. All or
    nothing: a failure (Ctrl-C too) removes every server's checkpoint."""
    from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    plan = self._plan or self.check()
    started = time.perf_counter()
    plans = [plan.of_server(k, servers) for k in range(servers)]
    done: List[str] = []
    try:
      with contextlib.ExitStack() as stack:
        writers = [stack.enter_context(writer_lib.CheckpointWriter(
            parts.server_root(directory, k, servers), plan.settings))
                   for k in range(servers)]
        sinks = [EvictingSink(writer, {name: plans[k].evicted(name)
                                       for name in self.names})
                 for k, writer in enumerate(writers)]
        built = self._build_servers(plan, sinks)
        for writer, sink, progress in zip(writers, sinks, built):
          done.append(writer.close(sink.counts(progress.items)))
    except BaseException:
      for path in done:  # Closed before the failure: no server gets one.
        shutil.rmtree(path, ignore_errors=True)
      raise
    seconds = time.perf_counter() - started
    return [self._result(path, plans[k], progress, seconds, tuple(
        f'server {k} of {servers}: {text}'
        for text in capacity_warnings(plans[k])))
            for k, (path, progress) in enumerate(zip(done, built))]

  def _build_servers(self, plan: BuildPlan, sinks) -> List[BuildProgress]:
    """Plans each kept episode with its server's plan, into its sink."""
    servers = len(sinks)
    planners = [self._new_planner(plan.spec) for _ in sinks]
    steps = [0] * servers
    positions = kept_positions(plan.skipped)
    for index, rows in self._kept_rows(plan):
      position = positions(int(index))
      server = position % servers
      steps[server] += len(rows[0])
      for planned in planners[server].add(rows, position):
        plan_lib.write(sinks[server], planned)
    for planner, sink in zip(planners, sinks):
      for planned in planner.close():
        plan_lib.write(sink, planned)
    return [BuildProgress(planner.episodes, count, planner.items, sink.bytes)
            for planner, count, sink in zip(planners, steps, sinks)]

  def _result(self, path: str, plan: BuildPlan, built: BuildProgress,
              seconds: float, warnings_: Tuple[str, ...]) -> BuildResult:
    """What the checkpoint at `path` holds, `plan`'s skips and notes."""
    size = sum(os.path.getsize(os.path.join(path, name))
               for name in os.listdir(path))
    evicted = tuple((name, plan.evicted(name)) for name in self.names
                    if plan.evicted(name))
    return BuildResult(
        path=path, episodes=built.episodes, trajectories=built.steps,
        items=built.items, seconds=seconds, bytes=size, evicted=evicted,
        skipped_episodes=len(plan.skipped), skipped=plan.skipped,
        warnings=warnings_, notes=plan.notes)


class EvictingSink:
  """Passes planned chunks and items to `writer`, leaving out the first
  `evicted[table]` items of each table: what a full FIFO table removes."""

  def __init__(self, writer, evicted: Dict[str, int]):
    self._writer = writer
    self._to_leave_out = dict(evicted)
    self._evicted = dict(evicted)

  def add_chunks(self, chunks: messages.Chunks) -> None:
    self._writer.add_chunks(chunks)

  def add_items(self, table: str, items: messages.Items) -> None:
    leave_out = min(self._to_leave_out.get(table, 0), len(items))
    if leave_out:
      self._to_leave_out[table] -= leave_out
      items = messages.item_part(items, leave_out, len(items))
    if len(items):
      self._writer.add_items(table, items)

  @property
  def bytes(self) -> int:
    return sum(self._writer.sizes.values())

  def counts(self, items: int) -> Dict[str, table_settings.TableCounts]:
    """Per table: `items` inserted, those left out deleted."""
    return {table: table_settings.TableCounts(inserted=items, deleted=evicted)
            for table, evicted in self._evicted.items()}


def plan_blocks(blocks: Iterable[Tuple[int, Sequence[Any]]],
                planner: plan_lib.Plan, sink,
                positions: Optional[Callable[[int], int]] = None,
                on_built: Optional[Callable[[BuildProgress], None]] = None
                ) -> BuildProgress:
  """Plans each converted episode, (its index, its rows: the item spec's
  leaves flattened, each [T, ...], numpy), and writes what the plan
  completes to `sink` (`add_chunks`, `add_items`).

  `positions(i)`: the position in the whole data of the i-th episode, for
  messages. Returns what was planned (every item written to `sink`).
  """
  steps = 0
  positions = positions or (lambda index: index)
  for index, rows in blocks:
    steps += len(rows[0])
    done = planner.add(rows, positions(int(index)))
    _write(sink, done, planner, steps, on_built)
  _write(sink, planner.close(), planner, steps, on_built)
  return BuildProgress(planner.episodes, steps, planner.items,
                       getattr(sink, 'bytes', 0))


def _write(sink, done: List[plan_lib.Planned], planner: plan_lib.Plan,
           steps: int, on_built) -> None:
  for planned in done:
    plan_lib.write(sink, planned)
  if done and on_built is not None:
    on_built(BuildProgress(planner.episodes, steps, planner.items,
                           getattr(sink, 'bytes', 0)))


def episode_rows(rlds_data: tf.data.Dataset,
                 policy_info_fn: Optional[fields.PolicyInfoFn] = None,
                 strict: bool = False) -> Iterator[Tuple[int, Tuple[Any, ...]]]:
  """(index in `rlds_data`, the trajectory's leaves [T, ...] as numpy) of each
  episode, converted as push converts it: what `plan_blocks` takes."""
  from rlds_reverb import convert  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  blocks = convert.trajectory_blocks(rlds_data, policy_info_fn, strict)
  return pipelines.numpy_of(blocks.map(_flat_trajectory))


def _flat_trajectory(block):
  """(episode index, the trajectory's leaves): tf.data packs a flat tuple
  per element far faster than a nest of namedtuples and dicts (~1 ms an
  episode here), and the plan takes leaves."""
  return block.episode_index, tuple(tf.nest.flatten(block.trajectory))


def _flat_transitions(block):
  return block.episode_index, tuple(tf.nest.flatten(block.transitions))


def kept_positions(skipped: Tuple[SkippedEpisode, ...]
                    ) -> Callable[[int], int]:
  """The position in the whole data of the i-th episode built."""
  left_out = sorted(episode.position for episode in skipped)
  return functools.partial(_position_after, left_out)


def _position_after(left_out: List[int], index: int) -> int:
  position = index
  for skipped_position in left_out:
    if skipped_position <= position:
      position += 1
  return position


def capacity_warnings(plan: BuildPlan) -> Tuple[str, ...]:
  """What a server would evict (max_size), and a table that would not
  sample at once (fewer items than its min_size)."""
  texts = []
  for settings in plan.settings:
    evicted = plan.evicted(settings.name)
    if evicted:
      texts.append(
          f"table '{settings.name}' holds at most "
          f"{wording.count(settings.max_size, 'item')}; this build makes "
          f'{wording.number(plan.items)}, so the checkpoint keeps the newest '
          f'{wording.number(settings.max_size)} and counts '
          f'{wording.number(evicted)} of the oldest as removed, as a push '
          f'into a {settings.remover.kind} remover table would '
          f'{_remover_note(settings.remover.kind)}')
    min_size = settings.rate_limits.min_size_to_sample
    if plan.items is not None and plan.items < min_size:
      texts.append(
          f"table '{settings.name}' samples once it holds "
          f"{wording.count(min_size, 'item')} (min_size); this build makes "
          f'{wording.number(plan.items)}: a server loading it waits for '
          f'more inserts before it samples.')
  return tuple(texts)


def _remover_note(kind: str) -> str:
  if kind == 'fifo':
    return 'leave it.'
  return (f'not: a {kind} remover would have removed other items (the '
          f'checkpoint keeps the newest).')
