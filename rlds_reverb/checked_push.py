"""The checked push, the same for every entry point.

`rlds_reverb.push`, `rlds-reverb push` (with or without `--shard`),
`push_shards` and `--workers` (one per shard) all run `CheckedPush`:

    rlds_data --spec--> chunk lengths; server answers, tables exist and
                        their signatures are the data's           | nothing
              --read ahead (validation.validate)-->               | written
                  malformed / flagged / empty episodes;           | if any
                  items per table -> capacity warnings            | fails
              --[resume file: skip the episodes it says were confirmed,
                 and the items of the next one an interrupted run confirmed]
              --write.write_trajectories, progress saved at each confirmation
              --> PushResult: what the write layer wrote (`Written`), with
                  what the checks found: skipped, resumed, warnings

`push_nstep_transitions` checks and writes n-step transitions the same way,
reading the data once (what it writes is not known ahead: no read-ahead
checks, only the server's tables and what they hold).

What it writes is one `PushOptions` (items, priority, chunk lengths, image
storage, strictness, timeout), passed down whole to the write layer; what
its checks do is its own `CheckOptions` (on_invalid, resume, resume_anyway).
What a malformed episode does (`on_invalid`, an `OnInvalid`):
  'raise'  the data is read ahead; the push fails before writing anything
  'skip'   read ahead; malformed episodes are left out and listed
  'stop'   read once, while writing: the push stops at the first malformed
           episode, confirming what it wrote before (TF-Agents' way)
Read ahead, episodes flagged invalid in their metadata ('invalid' or
'is_invalid') and empty episodes are left out as well. The Beam transforms
(`rlds_reverb.beam`) cannot read a whole dataset ahead; they apply the same
rules to each episode as it comes (`skip_reason`).
"""

import dataclasses
import functools
import sys
import warnings
from typing import Any, Callable, Dict, Optional, Sequence, Tuple, Union

import tensorflow as tf

from rlds_reverb import _resume as resume_lib
from rlds_reverb import held as held_lib
from rlds_reverb import push_options
from rlds_reverb import sources
from rlds_reverb import specs
from rlds_reverb import validation
from rlds_reverb._util import wording
from rlds_reverb.convert import encoded
from rlds_reverb.convert import nstep
from rlds_reverb.errors import CapacityWarning
from rlds_reverb.errors import DataReadError
from rlds_reverb.errors import MalformedEpisodeError
from rlds_reverb.errors import ResumeStateError
from rlds_reverb.errors import RldsReverbError
from rlds_reverb.errors import ShortEpisodesWarning
from rlds_reverb.errors import TableNotEmptyWarning
from rlds_reverb.push_options import CheckOptions
from rlds_reverb.push_options import OnInvalid
from rlds_reverb.push_options import PushOptions
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields
from rlds_reverb.write import capacity
from rlds_reverb.write import chunks
from rlds_reverb.write import columns
from rlds_reverb.write import items as items_lib
from rlds_reverb.write import push as write_push
from rlds_reverb.write import server as server_lib
from rlds_reverb.write import writer as writer_lib

FLAGGED = 'flagged_invalid'
EMPTY = 'empty'


@dataclasses.dataclass(frozen=True)
class SkippedEpisode:
  """An episode a push left out, and why."""
  position: int  # 0-based, in the data the push was given (a shard's own).
  kind: str  # 'flagged_invalid', 'empty', or a problem ('terminal_not_last').
  message: str
  step: Optional[int] = None  # The first malformed step, for problems.
  shard: Optional[str] = None  # 'I/N' when `push_shards` pushed it.


@dataclasses.dataclass(frozen=True)
class PushResult:
  """What a push wrote; every item counted here was confirmed by the server."""
  episodes: int
  trajectories: int
  items: int
  seconds: float
  skipped_episodes: int = 0
  # Trajectories of the skipped episodes (TF-Agents' count includes them).
  skipped_trajectories: int = 0
  # Episodes a resume file said were confirmed by earlier runs (not counted
  # in `episodes`).
  resumed_after_episodes: int = 0
  # The episodes the checks left out (`skipped_episodes` counts them too).
  skipped: Tuple[SkippedEpisode, ...] = ()
  # What the checks warned of before writing (a table too small, a limiter).
  warnings: Tuple[str, ...] = ()
  # Fields read otherwise than the data stores them: a default for a missing
  # `discount` or `reward`, one-element fields as scalars (`StepFormat`).
  notes: Tuple[str, ...] = ()

  @classmethod
  def of(cls, written: write_push.Written, *, resumed_after_episodes: int = 0,
         skipped: Tuple[SkippedEpisode, ...] = (),
         warnings: Tuple[str, ...] = (),  # pylint: disable=redefined-outer-name
         notes: Optional[Tuple[str, ...]] = None) -> 'PushResult':
    """What the write layer wrote, with what the checks found: episodes a
    resume file skipped, the episodes they left out, their warnings, and
    their notes on the data (else the write layer's)."""
    return cls(written.episodes, written.trajectories, written.items,
               written.seconds,
               skipped_episodes=written.bypassed_episodes + len(skipped),
               skipped_trajectories=written.bypassed_trajectories,
               resumed_after_episodes=resumed_after_episodes,
               skipped=skipped, warnings=warnings,
               notes=written.notes if notes is None else notes)


@dataclasses.dataclass(frozen=True)
class Source:
  """A dataset by name (what `load` opens): for messages and resume files."""
  dataset: Union[str, Sequence[str]]
  split: str = 'train'
  data_dir: Optional[str] = None
  shard: Optional[sources.Shard] = None

  def load(self) -> tf.data.Dataset:
    return sources.load(self.dataset, split=self.split,
                        data_dir=self.data_dir, shard=self.shard)

  def shard_text(self) -> Optional[str]:
    return None if self.shard is None else '/'.join(map(str, self.shard))

  def key(self) -> Dict[str, Any]:
    return {'dataset': sources.display_name(self.dataset, self.data_dir),
            'split': self.split, 'shard': self.shard_text()}

  def __str__(self) -> str:
    shard = '' if self.shard is None else f' shard {self.shard_text()}'
    return f'{sources.display_name(self.dataset, self.data_dir)}{shard}'


@dataclasses.dataclass(frozen=True)
class Plan:
  """What the checks found, before anything was written."""
  skipped: Tuple[SkippedEpisode, ...]
  # Steps still to write (after those confirmed before); None if not known.
  steps: Optional[int]
  warnings: Tuple[str, ...]
  state: resume_lib.State
  # Fields read otherwise than stored (`StepFormat.notes`).
  notes: Tuple[str, ...] = ()
  # The warning of `warnings` about episodes that give no item, if any.
  short_episodes: Optional[str] = None
  # The positions of the episodes kept (not skipped); None: all of them.
  kept: Optional[Tuple[int, ...]] = None
  # What each table held before writing, and the warnings of `warnings`
  # about items already there (`held`).
  held: Tuple[held_lib.Held, ...] = ()
  held_warnings: Tuple[str, ...] = ()

  def position(self, index: int) -> int:
    """The position in the data of the `index`-th episode kept."""
    return index if self.kept is None else self.kept[index]

  def state_text(self) -> str:
    """'815 whole episodes (124,881 items) and 314 items of episode 815'."""
    state = self.state
    partial = state.partial_items
    return writer_lib.contents_text(
        state.confirmed_episodes, state.confirmed_items, partial,
        self.position(state.confirmed_episodes) if partial else None)


def push(
    rlds_data: tf.data.Dataset,
    server: server_lib.ServerLike,
    tables: Union[str, Sequence[str]],
    *,
    sequence_length: int = 2,
    stride_length: int = 1,
    priority: float = 1.0,
    end_of_episode: push_options.EndOfEpisode = push_options.EndOfEpisode.DROP,
    policy_info_fn: Optional[fields.PolicyInfoFn] = None,
    timeout: float = push_options.DEFAULT_TIMEOUT_S,
    chunk_length: push_options.ChunkLength = None,
    on_invalid: Union[str, OnInvalid] = OnInvalid.RAISE,
    resume: Optional[str] = None,
    on_confirmed: Optional[Callable[[Any], None]] = None,
    strict: bool = False,
    resume_anyway: bool = False,
    images: str = 'raw',
    image_format: str = 'png',
    image_fields: Optional[Sequence[str]] = None,
    options: Optional[PushOptions] = None,
) -> PushResult:
  """Checks, then writes `rlds_data` as fixed-length trajectory items.

  The items are those `ReverbAddTrajectoryObserver(sequence_length,
  stride_length, priority, pad/tile per end_of_episode)` would write, without
  a TF-Agents observer; the push returns once the server confirmed them all.
  Capacity problems (a table that would evict, a limiter that would block)
  are also issued as `CapacityWarning`s, and a table that already holds
  items (not this push's own, which a resume file names) as a
  `TableNotEmptyWarning`: the push adds to them.

  Args:
    rlds_data: RLDS episodes (read twice, unless on_invalid='stop').
    server: 'host:port' or a `reverb.Client`.
    tables: the table name(s); each item goes to every table.
    sequence_length: steps per item.
    stride_length: steps between the starts of consecutive items.
    priority: every item's priority.
    end_of_episode: what happens at an episode's end (`EndOfEpisode`).
    policy_info_fn: optional `fn(current_step, next_step)` -> policy_info.
    timeout: seconds to wait for the server at any one point.
    chunk_length: steps per chunk on the server: None (by each column's
      bytes per step, `write.chunks`), one int for every column, or ints by
      field path or prefix ({'observation/pixels': 2}); the items are the same.
    on_invalid: 'raise', 'skip' or 'stop' (`OnInvalid`).
    resume: a JSON file where progress is saved after each confirmation; run
      again with the same data and arguments, the push skips the episodes it
      says were confirmed (after Ctrl-C, also the items of the next episode
      it confirmed: the rerun continues inside that episode). It must be
      writable (checked first), and the tables must still hold what it says
      was confirmed (they count their inserts, a checkpoint restores the
      count).
    resume_anyway: continue after the episodes the resume file names even
      when a table has lost them (a server restarted empty).
    on_confirmed: called with the writer's `Progress` after each confirmation.
    strict: refuse data without `discount` or `reward`, or with a discount
      or flag of shape (1,), as TF-Agents does; else they are read with
      defaults (1.0, 0.0) and as scalars, and `notes` says so.
    images: 'raw' (decoded uint8 frames, TF-Agents' way) or 'encoded': image
      fields go to Reverb as PNG/JPEG bytes, a string per step, which the
      reader decodes (`EncodedReplayBuffer`, `decode_images`); the table
      signature says so (`specs.encoded`). A TFDS dataset's Image fields
      keep their own bytes, never decoded; raw uint8 [H, W, C] fields are
      encoded here.
    image_format: 'png' (lossless) or 'jpeg': how raw fields are encoded.
    image_fields: the step fields to store encoded ('observation/pixels');
      None: the source's Image features, else every uint8 [H, W, C] field.
    options: a `PushOptions`: the settings above that say what is written
      (all but policy_info_fn, on_invalid, resume, resume_anyway and
      on_confirmed) at once; then leave their keywords out.

  Returns:
    A `PushResult` of confirmed counts, with the episodes left out
    (`skipped`), the capacity warnings, what a resume file skipped, and
    `notes` on fields read otherwise than stored.

  Raises:
    ValueError: before writing: a bad chunk_length, on_invalid, priority or
      images (any value `PushOptions` refuses), a setting given both as a
      keyword and in options, a table named twice, or steps that do not
      convert (`StepSpecError`).
    RldsReverbError: before writing: `ImageFieldError`,
      `ServerUnavailableError`, `TableNotFoundError`,
      `SignatureMismatchError`, `DataReadError`, `MalformedEpisodeError`,
      `ResumeStateError`.
    ReverbTimeoutError: the server stopped confirming; says what was.
    tf.errors.InvalidArgumentError: on_invalid='stop' and an episode is
      malformed; a note says what was confirmed before.
    KeyboardInterrupt: Ctrl-C; a note says exactly what is in the tables
      ('815 whole episodes (124,881 items) and 314 items of episode 815').
  """
  options = push_options.of(
      options, sequence_length=sequence_length, stride_length=stride_length,
      priority=priority, end_of_episode=end_of_episode, timeout=timeout,
      chunk_length=chunk_length, strict=strict, images=images,
      image_format=image_format, image_fields=image_fields)
  checks = CheckOptions(on_invalid=on_invalid, resume=resume,
                        resume_anyway=resume_anyway)
  job = CheckedPush(rlds_data, server, tables, options, checks,
                    policy_info_fn=policy_info_fn)
  plan = job.check()
  for message in plan.warnings:
    if message == plan.short_episodes:
      category = ShortEpisodesWarning
    elif message in plan.held_warnings:
      category = TableNotEmptyWarning
    else:
      category = CapacityWarning
    warnings.warn(message, category, stacklevel=2)
  return job.write(on_confirmed)


def push_nstep_transitions(
    rlds_data: tf.data.Dataset,
    server: server_lib.ServerLike,
    tables: Union[str, Sequence[str]],
    *,
    n: int,
    discount: float,
    priority: float = 1.0,
    timeout: float = push_options.DEFAULT_TIMEOUT_S,
    chunk_length: push_options.ChunkLength = None,
    on_confirmed: Optional[Callable[[writer_lib.Progress], None]] = None,
    strict: bool = False,
    images: str = 'raw',
    image_format: str = 'png',
    image_fields: Optional[Sequence[str]] = None,
    options: Optional[PushOptions] = None,
) -> PushResult:
  """Writes one item per n-step transition (`convert.nstep`), as Acme does.

  Items have no time axis; a signed table's signature must equal
  `create_nstep_transition_spec(rlds_data)` (with images='encoded', that
  spec with its image fields stored encoded, `specs.encoded`).
  `trajectories` in the result counts transitions; `chunk_length`,
  `strict`, `images`, `image_format` and `image_fields` are as for `push`;
  `options` gives them all at once (a `PushOptions` whose sequence settings
  are left at their defaults: they do not apply). A table that already holds
  items is warned of before writing (`TableNotEmptyWarning`, and in the
  result's `warnings`). Raises as `push`.
  """
  options = push_options.of(
      options, priority=priority, timeout=timeout, chunk_length=chunk_length,
      strict=strict, images=images, image_format=image_format,
      image_fields=image_fields)
  _check_nstep_options(options)
  nstep.check_parameters(n, discount)
  target = server_lib.Target.of(server, tables)
  rlds_data, encoding = encoded.prepare(rlds_data, options.image_storage)
  step_format = specs.step_format(rlds_data, options.strict)
  if encoding is not None:
    step_format = encoding.named(step_format)
  spec = nstep.transition_spec(step_format.spec)
  target = _checked_target(target, options, spec, spec,
                           items_lib.TransitionItems.stride_length)
  held = held_lib.warnings_for(held_lib.look(target.infos))
  for message in held:  # The data is read once: what it adds is not known.
    warnings.warn(message, TableNotEmptyWarning, stacklevel=2)
  written = write_push.write_transitions(
      rlds_data, target, options, n=n, discount=discount, encoding=encoding,
      on_confirmed=on_confirmed)
  return PushResult.of(written, warnings=held)


def _check_nstep_options(options: PushOptions) -> None:
  """n-step items are transitions: the options' item settings do not apply."""
  given = options.keywords()
  defaults = PushOptions().keywords()
  for name in ('sequence_length', 'stride_length', 'end_of_episode'):
    if given[name] != defaults[name]:
      value = getattr(given[name], 'value', given[name])  # 'pad', not PAD.
      raise ValueError(
          f'push_nstep_transitions writes one item per transition: {name} '
          f'does not apply (options has {name}={value!r}).')


def _checked_target(target: server_lib.Target, options: PushOptions,
                    spec: Any, item_spec: Any,
                    stride_length: int) -> server_lib.Target:
  """`target`, asked: before anything is written, the chunk lengths fit the
  items' columns, the server answers, the tables exist, and each signed
  table's signature is `item_spec` (`write_push.check_tables`)."""
  chunks.check_option(
      options.chunk_length, columns.columns_of(spec),
      chunks.max_chunk_length(len(target.tables), stride_length))
  return write_push.check_tables(target, item_spec, options.timeout)


def source_job(source: Source, server: server_lib.ServerLike,
               tables: Sequence[str], options: PushOptions,
               checks: CheckOptions) -> 'CheckedPush':
  """The `CheckedPush` of a dataset by name (a shard of it), for the workers
  of `push_shards`; the resume file also records the dataset, split and
  shard."""
  try:
    return CheckedPush(source.load(), server, tables, options, checks,
                       source=source)
  except KeyboardInterrupt as e:  # Opening the data, checking the server.
    e.add_note('Nothing was written.')
    raise


class CheckedPush:
  """One push: `check()` reads ahead and decides, `write()` writes.

  The command line prints what `check()` found (warnings, skipped episodes,
  a resumed state) before it calls `write()`.
  """

  def __init__(self, rlds_data: tf.data.Dataset,
               server: server_lib.ServerLike,
               tables: Union[str, Sequence[str]],
               options: PushOptions = PushOptions(),
               checks: CheckOptions = CheckOptions(), *,
               source: Optional[Source] = None,
               policy_info_fn: Optional[fields.PolicyInfoFn] = None):
    self._data, self._encoding = encoded.prepare(rlds_data,
                                                 options.image_storage)
    self._target = server_lib.Target.of(server, tables)
    self._options = options
    self._checks = checks
    self._source = source
    self._policy_info_fn = policy_info_fn
    self._plan = None

  def check(self, on_read: Optional[Callable[[int, int], None]] = None
            ) -> Plan:
    """Everything before writing; raises if the push must not start.

    `on_read(episodes, steps)` is called as the data is read ahead.
    """
    try:
      return self._check(on_read)
    except KeyboardInterrupt as e:
      e.add_note('Nothing was written.')
      raise

  def _check(self, on_read) -> Plan:
    options = self._options
    if self._checks.resume:
      resume_lib.check_writable(self._checks.resume)
    step_format = specs.step_format(self._data, options.strict)
    if self._encoding is not None:
      step_format = self._encoding.named(step_format)
    spec = specs.trajectory_spec(step_format.spec, self._policy_info_fn)
    self._target = _checked_target(self._target, options, spec,
                                   specs.table_signature(spec),
                                   options.stride_length)
    if self._checks.on_invalid is OnInvalid.STOP:
      plan = self._with_held(Plan((), None, (), self._state(None)), None)
    else:
      plan = self._plan_from(self._read_ahead(on_read))
    self._check_confirmed_kept(plan.state)
    self._plan = dataclasses.replace(plan, notes=tuple(step_format.notes()))
    return self._plan

  def _plan_from(self, report: validation.Report) -> Plan:
    """What to leave out and write, and what to warn of, from a read-ahead."""
    skipped = self._skipped(report)
    left_out = {episode.position for episode in skipped}
    kept = [i for i in range(report.episodes) if i not in left_out]
    state = self._state(len(kept))
    to_write = kept[state.confirmed_episodes:]
    item_plan = items_lib.SequenceItems.of(self._options)
    items_of = [len(item_plan.plan(report.lengths[i]).item_ends)
                for i in to_write]
    warnings = capacity.warnings_for(
        self._target.infos, sum(items_of) - self._from_item(state))
    without_items = sum(1 for count in items_of if not count)
    short = None
    if without_items:
      short = short_episodes_text(
          without_items, len(items_of),
          max(report.lengths[i] for i in to_write),
          self._options.sequence_length)
      warnings.append(short)
    plan = Plan(skipped, sum(report.lengths[i] for i in to_write),
                tuple(warnings), state, short_episodes=short,
                kept=None if len(kept) == report.episodes else tuple(kept))
    return self._with_held(plan, sum(items_of) - self._from_item(state))

  def _from_item(self, state: resume_lib.State) -> int:
    """Items per table of the next episode that earlier runs confirmed."""
    return state.partial_items // len(self._target.tables)

  def _with_held(self, plan: Plan, adds: Optional[int]) -> Plan:
    """The plan with what the tables hold now, and a warning per table that
    holds items not from this push (`held`); `adds` items per table."""
    if plan.state.complete:
      adds = 0
    ours = plan.state.confirmed_items // len(self._target.tables)
    helds = held_lib.look(self._target.infos, ours, adds)
    texts = held_lib.warnings_for(helds)
    return dataclasses.replace(plan, warnings=texts + plan.warnings,
                               held=helds, held_warnings=texts)

  def _check_confirmed_kept(self, state: resume_lib.State) -> None:
    """Raises if a table lost what a resume file says was confirmed there.

    A table counts every insert since it was made (a checkpoint restores the
    count); fewer than this push confirmed means the server was restarted
    without them (or the table reset), and resuming would leave them out.
    """
    if not state.confirmed_items or self._checks.resume_anyway:
      return
    target, resume = self._target, self._checks.resume
    confirmed = state.confirmed_items // len(target.tables)
    for table, info in target.infos.items():
      inserts = info.rate_limiter_info.insert_stats.completed
      if inserts < confirmed:
        raise ResumeStateError(
            f'Resume file {resume} says '
            f'{wording.count(confirmed, "item")} of this push were confirmed '
            f'into table {table!r} at {target.address}, but that table has '
            f'taken {wording.count(inserts, "insert")} since it was made: '
            f'they are gone (a server restarted without a checkpoint that '
            f'holds them, or the table was reset). Nothing was written. '
            f'Delete {resume} to push everything again, or continue '
            f'after the episodes it names with --resume-anyway (Python: '
            f'resume_anyway=True).')

  def write(self, on_confirmed: Optional[Callable[[Any], None]] = None
            ) -> PushResult:
    """Writes what `check` kept, from the first episode not yet confirmed."""
    plan = self._plan or self.check()
    done = plan.state.confirmed_episodes
    found = dict(resumed_after_episodes=done, skipped=plan.skipped,
                 warnings=plan.warnings, notes=plan.notes)
    if plan.state.complete:
      return PushResult.of(write_push.Written(0, 0, 0, 0.0), **found)
    resume = self._checks.resume
    recorder = resume_lib.Recorder(resume, plan.state) if resume else None
    callbacks = [] if on_confirmed is None else [on_confirmed]
    if recorder is not None:
      callbacks.append(recorder.on_confirmed)
    start = write_push.Start(
        positions=_positions_from(plan.kept, done),
        from_item=self._from_item(plan.state))
    try:  # Building the pipeline too: an interrupt there wrote nothing.
      remaining = validation.without_episodes(
          whole_reads.whole(self._data),
          [episode.position for episode in plan.skipped]).skip(done)
      written = write_push.write_trajectories(
          remaining, self._target, self._options,
          policy_info_fn=self._policy_info_fn, encoding=self._encoding,
          on_confirmed=functools.partial(_call_each, callbacks), start=start)
    except (RldsReverbError, tf.errors.OpError, ValueError,
            KeyboardInterrupt) as e:
      self._note_progress(e, recorder, done)
      raise
    if recorder is not None:
      recorder.finish(written.episodes, written.items)
    return PushResult.of(written, **found)

  def _read_ahead(self, on_read) -> validation.Report:
    """Reads every episode before writing: a corrupt record fails here."""
    try:
      return validation.validate(self._data, on_read=on_read,
                                 frames=self._frames_to_check())
    except tf.errors.OpError as e:
      source = self._source or Source(None)
      reason = sources.read_error_text(e, source.dataset, source.data_dir)
      raise DataReadError(
          f'Cannot read {self._name()}: {reason}; nothing was written.'
      ) from e

  def _frames_to_check(self):
    return frames_to_check(self._encoding)

  def _skipped(self, report: validation.Report) -> Tuple[SkippedEpisode, ...]:
    return skipped_episodes(report, self._checks.on_invalid)

  def _state(self, num_episodes: Optional[int]) -> resume_lib.State:
    """What earlier runs confirmed, if a resume file says so."""
    key = {**(self._source.key() if self._source else {}),
           'server': self._target.address, 'tables': self._target.tables,
           **self._options.key(),
           'on_invalid': self._checks.on_invalid.value,
           'episodes_to_write': num_episodes}
    if self._checks.resume is None:
      return resume_lib.State(key)
    return resume_lib.load(self._checks.resume, key)

  def _note_progress(self, error: Exception, recorder, done: int) -> None:
    if isinstance(error, KeyboardInterrupt) and not getattr(
        error, '__notes__', None):  # Before the writer had a row.
      error.add_note('Nothing was written.')
    if recorder is not None:
      saved = dataclasses.replace(self._plan, state=recorder.state)
      error.add_note(
          f'Progress is saved in {self._checks.resume}: {saved.state_text()} '
          f'confirmed in all; run the same push again to continue.')
    if isinstance(error, tf.errors.InvalidArgumentError) and done:
      error.add_note(f'The episode number counts from episode {done}, the '
                     f'first not confirmed before.')

  def _name(self) -> str:
    return str(self._source) if self._source else 'the data'


def frames_to_check(encoding: Optional[encoded.Encoding]):
  """The fields stored as the source's own bytes: their headers are checked
  ahead (frames encoded here fit by construction); None for raw images."""
  if encoding is None:
    return None
  return {path: image for path, image in encoding.images.items()
          if path not in encoding.at_push}


def skipped_episodes(report: validation.Report, on_invalid: OnInvalid
                     ) -> Tuple[SkippedEpisode, ...]:
  """The episodes a read-ahead leaves out: malformed, flagged invalid,
  empty; raises on the first malformed one if `on_invalid` is 'raise'."""
  malformed = report.malformed_episodes
  if malformed and on_invalid is OnInvalid.RAISE:
    raise malformed_error(report.problems[0], len(malformed))
  first_problems = {}
  for problem in report.problems:
    first_problems.setdefault(problem.episode, problem)
  flagged, empty = set(report.flagged_invalid), set(report.empty_episodes)
  return tuple(
      skipped_episode(position, first_problems.get(position),
                      position in flagged)
      for position in sorted(set(first_problems) | flagged | empty))


def short_episodes_text(short: int, episodes: int, longest: int,
                        sequence_length: int) -> str:
  """Episodes shorter than an item give none (TF-Agents' observer too)."""
  what = ('no episode gives an item: nothing will be written'
          if short == episodes else
          f'{wording.number(short)} of {wording.count(episodes, "episode")} '
          f'give no item')
  return (f'{what}; an item has {wording.count(sequence_length, "step")} '
          f'and the longest episode {wording.count(longest, "step")}. '
          f"Padding (end_of_episode='pad', --pad-end-of-episodes) gives each "
          f'episode shorter than an item one item.')


def malformed_error(problem: validation.StepProblem,
                    count: Optional[int] = None) -> MalformedEpisodeError:
  """The error of on_invalid='raise': the problem, and how many in all.

  `count` is known when the data was read ahead (then nothing was written).
  """
  where = f'{problem.message} (episode {problem.episode}, step {problem.step})'
  if count is None:
    error = MalformedEpisodeError(where)
  else:
    error = MalformedEpisodeError(
        f'{where}; {wording.count(count, "malformed episode")} in all, '
        f'nothing was written')
    error.add_note('validation.validate lists them all.')
  error.add_note("on_invalid='skip' leaves malformed episodes out.")
  return error


def skipped_episode(position: int,
                    problem: Optional[validation.StepProblem],
                    flagged: bool) -> SkippedEpisode:
  """Why an episode is left out: its first problem, its flag, or no steps."""
  if problem is not None:
    return SkippedEpisode(position, problem.kind, problem.message,
                          problem.step)
  if flagged:
    return SkippedEpisode(position, FLAGGED, 'flagged invalid in its metadata')
  return SkippedEpisode(position, EMPTY, 'no steps')


def skip_reason(position: int, episode: Dict[str, Any],
                on_invalid: OnInvalid) -> Optional[SkippedEpisode]:
  """Why one numpy episode is left out (None: write it), by `check`'s rules.

  For streams that cannot be read ahead (Beam): a malformed episode raises
  `MalformedEpisodeError` if on_invalid is 'raise', before it is written.
  """
  steps = episode[fields.STEPS]
  problems = validation.episode_problems(position, steps)
  if problems and on_invalid is OnInvalid.RAISE:
    raise malformed_error(problems[0])
  flagged = validation.is_flagged_invalid(episode)
  empty = not len(steps[fields.IS_FIRST])  # pylint: disable=g-explicit-length-test
  if not (problems or flagged or empty):
    return None
  return skipped_episode(position, problems[0] if problems else None, flagged)


def _positions_from(kept: Optional[Tuple[int, ...]],
                    first: int) -> Sequence[int]:
  """The positions of the kept episodes from the `first`-th on."""
  if kept is None:
    return range(first, sys.maxsize)
  return kept[first:]


def _call_each(callbacks, progress) -> None:
  for callback in callbacks:
    callback(progress)
