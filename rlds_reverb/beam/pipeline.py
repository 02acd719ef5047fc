"""`push` on Beam: one pipeline over parts of the data, records back;
`build`: the same parts into a checkpoint per server.

    push(SRC, servers, tables, runner='DirectRunner', options=[(key, value)])
      -> Pipeline(runner, --key=value ...)
           | Create(ReadEpisodes(SRC).parts)  record-file ranges
           | PushParts: each part read, written, confirmed; its record
           | Records: on a local runner, also a file per record
      -> run, wait -> the records (files, or DaskRunner's results; counters
         on other remote runners) -> every episode once? -> one PushResult
    build(SRC, DIR, tables, servers=S)
      -> Create(parts) | BuildParts: a part file per server and a record
         -> GroupByKey(server) -> merge: every position I % S == k once,
            or no checkpoint; DONE last; a record per server in DIR/.parts
      -> the records -> a BuildResult per server
Before it runs, on a local runner, a table that already holds items is
warned of (`rlds_reverb.held`). Runners differ (`runners`): nothing here
rests on finish_bundle outputs, tagged outputs or metrics.

What `rlds-reverb push --runner` runs. A failed pipeline is one
`PipelineFailedError` line naming the runner and the first error a worker
raised (the runner's own message is a page of tracebacks).
"""

import dataclasses
import json
import os
import re
import tempfile
import time
from typing import Optional, Sequence, Tuple, Union
import warnings

import apache_beam as beam
from apache_beam.metrics.metric import MetricsFilter
from apache_beam.options.pipeline_options import PipelineOptions

from rlds_reverb import addresses
from rlds_reverb import held as held_lib
from rlds_reverb import push_options as push_options_lib
from rlds_reverb import servers_file
from rlds_reverb.beam import read
from rlds_reverb.beam import results as results_lib
from rlds_reverb.beam import runners
from rlds_reverb.beam import write
from rlds_reverb.checked_push import PushResult
from rlds_reverb.checked_push import SkippedEpisode
from rlds_reverb.errors import PipelineFailedError
from rlds_reverb.errors import RldsReverbError
from rlds_reverb.errors import TableNotEmptyWarning
from rlds_reverb.push_options import PushOptions
from rlds_reverb.write import items as items_lib
from rlds_reverb.write import server as server_lib

LOCAL_RUNNERS = runners.LOCAL_RUNNERS
_COUNTS = ('episodes', 'trajectories', 'items')
# 'module.SomeError: message [while running 'Step']': a traceback's last line.
_ERROR_LINE = re.compile(
    r"^(?:[\w.]+\.)?(\w+(?:Error|Exception|Exit)): (.*?)"
    r"(?: \[while running '.*'\])?$")
_WHILE_RUNNING = re.compile(r" \[while running '.*'\]$")


def push(src: Union[str, Sequence[str]], server: Union[str, Sequence[str]],
         tables: Union[str, Sequence[str]], *, split: str = 'train',
         data_dir: Optional[str] = None, runner: str = 'DirectRunner',
         options: Sequence[Tuple[str, str]] = (), on_invalid: str = 'raise',
         parts_per_file: Optional[int] = None, strict: bool = False,
         images: str = 'raw', image_format: str = 'png',
         image_fields: Optional[Sequence[str]] = None,
         push_options: Optional[PushOptions] = None,
         **settings) -> PushResult:
  """Pushes `src` with a Beam pipeline on `runner`; the counters' sums.

  Args:
    src, split, data_dir: as for `rlds_reverb.load`.
    server: 'host:port', or several: episode I goes to server I % S. A
      servers file ('servers.json', written by a serve of many servers)
      stands for its servers' addresses, in server order.
    tables: as for `rlds_reverb.push`.
    runner: a Beam runner's name ('DirectRunner', 'DataflowRunner', ...).
    options: pipeline options as (key, value): ('direct_num_workers', '2').
    on_invalid: 'raise' or 'skip' (`WriteToReverb`).
    parts_per_file: `ReadEpisodes`' parts per record file.
    strict, images, image_format, image_fields: as for `rlds_reverb.push`.
    push_options: `rlds_reverb.push`'s settings at once (`PushOptions`;
      `options` are the pipeline's); then leave their keywords out.
    **settings: sequence_length, stride_length, end_of_episode, priority,
      timeout, chunk_length.

  Returns:
    A `PushResult` of the committed counters (a retried bundle counts once,
    though the table may hold its first attempt's items too); `seconds` is
    the pipeline's wall time; `skipped` the episodes left out; `notes` the
    fields read otherwise than stored; `warnings` the tables that held
    items before (on a local runner; also `TableNotEmptyWarning`s).

  Raises:
    AddressError: a server address is not HOST:PORT; ServerUnavailableError:
      on a local runner (DirectRunner, ...), nothing listens at one. Both
      before the pipeline is built. ServersFileError: a servers file that
      is missing or unreadable.
    SourceError, StepSpecError: while building the pipeline.
    PipelineFailedError: the pipeline failed; says why.
  """
  push_options = push_options_lib.of(
      push_options, strict=strict, images=images, image_format=image_format,
      image_fields=image_fields, **settings)
  runner = runners.name(runner)
  runners.check_scheduler(runner, options)
  server = servers_file.addresses_of(server)  # Read here, not on workers.
  _check_servers(server, runner, push_options.timeout)
  held = _held_warnings(server, tables, runner, push_options.timeout)
  for message in held:
    warnings.warn(message, TableNotEmptyWarning, stacklevel=2)
  episodes = read.ReadEpisodes(src, split, data_dir,
                               parts_per_file=parts_per_file,
                               options=push_options)
  writer = write.WriteToReverb(server, tables, push_options,
                               on_invalid=on_invalid,
                               step_spec=episodes.step_spec)
  pipeline = _pipeline(runner, options)
  with tempfile.TemporaryDirectory(prefix='rlds_reverb_push_') as local:
    records_dir = local if runners.is_local(runner) else None
    _ = (pipeline
         | 'Parts' >> beam.Create(episodes.parts)
         | 'Write' >> beam.ParDo(writer.parts_dofn(episodes.image_storage))
         | 'Records' >> beam.Map(recorded, records_dir))
    start = time.perf_counter()
    result, gathered = run(pipeline, runner)
    records = (gathered if gathered is not None
               else results_lib.read(records_dir) if records_dir else None)
  seconds = time.perf_counter() - start
  if records is None:  # A remote runner other than Dask: its counters.
    pushed = _result_of(result.metrics(), seconds)
  else:
    pushed = pushed_of(records, episodes.episodes, runner, seconds)
    if runners.is_local(runner):
      _check_counters(result.metrics(), pushed, runner)
  return dataclasses.replace(
      pushed, notes=tuple(episodes.step_format.notes()), warnings=held)


def recorded(record, directory: Optional[str]):
  """The part's record, also as a file on a local runner (`results`)."""
  if directory is not None:
    results_lib.write(directory, f'part-{record["first"]:012d}', record)
  return record


def pushed_of(records, episodes: int, runner: str,
               seconds: float) -> PushResult:
  """The parts' records as one PushResult, once every episode is there."""
  counts = results_lib.totals(records, _COUNTS)
  results_lib.check_complete(
      range(episodes), results_lib.seen_positions(records),
      f'The Beam push on {runners.short(runner)}',
      f'the tables hold what its parts confirmed ({counts["items"]:,} '
      f'items, {counts["episodes"]:,} episodes)')
  skipped = results_lib.skipped_of(records)
  return PushResult(counts['episodes'], counts['trajectories'],
                    counts['items'], seconds, skipped_episodes=len(skipped),
                    skipped=skipped)


def _check_counters(metrics, pushed: PushResult, runner: str) -> None:
  """Where a runner has counters, they agree with the records."""
  counted = _result_of(metrics, pushed.seconds)
  names = (*_COUNTS, 'skipped_episodes')
  if any(getattr(counted, n) != getattr(pushed, n) for n in names):
    raise PipelineFailedError(
        f'The Beam push on {runners.short(runner)}: its counters say '
        f'{_counts_text(counted, names)}, its parts\' records '
        f'{_counts_text(pushed, names)}.')


def _counts_text(result, names) -> str:
  return ', '.join(f'{getattr(result, n):,} {n}' for n in names)


def _pipeline(runner: str, options: Sequence[Tuple[str, str]]
              ) -> beam.Pipeline:
  return beam.Pipeline(runner=runner, options=PipelineOptions(
      [f'--{key}={value}' for key, value in runners.options(runner,
                                                             options)]))


def build(src: Union[str, Sequence[str]], directory: str, tables, *,
          servers: int = 1, split: str = 'train',
          data_dir: Optional[str] = None, runner: str = 'DirectRunner',
          options: Sequence[Tuple[str, str]] = (), on_invalid: str = 'raise',
          parts_per_file: Optional[int] = None,
          n: Optional[int] = None, discount: Optional[float] = None,
          policy_info_fn=None,
          push_options: Optional[PushOptions] = None, **settings) -> list:
  """Builds one checkpoint per server from `src` with a Beam pipeline on
  `runner`: each part of the data into a part file per server, merged per
  server once each of its episodes arrived (episode I -> server I % S).

  Args:
    src, split, data_dir, runner, options, parts_per_file: as for `push`.
    directory: server k's checkpoint goes to directory/server-k-of-S
      (`directory` itself for one server); on a remote runner, storage
      every worker shares as a file system.
    tables: as for `rlds_reverb.build_checkpoint`.
    servers: S.
    on_invalid: 'raise' or 'skip' ('raise' with `n`).
    n, discount: n-step transitions, as `build_nstep_checkpoint` writes
      them, instead of trajectories.
    policy_info_fn: as for `build_checkpoint`; picklable (it runs on the
      workers).
    push_options, **settings: what is written, as for `push`.

  Returns:
    A `BuildResult` per server, in server order, from the records its merge
    wrote; `seconds` is the pipeline's wall time.

  Raises:
    CheckpointWriteError: `directory` is not new or empty.
    SourceError, StepSpecError, TableOptionsError: while building the
      pipeline. PipelineFailedError: it failed; says why (a server whose
      merge had finished keeps its new checkpoint).
  """
  from rlds_reverb.beam import build_checkpoints as build_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.checkpoints import writer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  writer.check_root(directory)  # New or empty, before the pipeline runs.
  push_options = push_options_lib.of(push_options, **settings)
  nstep = _nstep_of(n, discount, push_options)
  runner = runners.name(runner)
  runners.check_scheduler(runner, options)
  episodes = read.ReadEpisodes(src, split, data_dir,
                               parts_per_file=parts_per_file,
                               options=push_options)
  builder = build_lib.BuildCheckpoints(
      directory, tables, episodes.step_spec, servers=servers,
      options=push_options, on_invalid=on_invalid,
      policy_info_fn=policy_info_fn, nstep=nstep,
      episodes=episodes.episodes)
  pipeline = _pipeline(runner, options)
  _ = builder.merged(
      pipeline
      | 'Parts' >> beam.Create(episodes.parts)
      | 'Build' >> beam.ParDo(builder.parts_dofn()))
  start = time.perf_counter()
  made = not os.path.exists(builder.directory)
  try:
    run(pipeline, runner)
    records = results_lib.read(build_lib.results_directory(
        builder.directory))
  except BaseException:
    parts.remove_unfinished(builder.directory, servers, made)
    raise
  parts.remove_parts(builder.directory)  # Left by retried parts.
  return _built_of(records, servers, time.perf_counter() - start,
                   tuple(episodes.step_format.notes()), runner)


def _nstep_of(n: Optional[int], discount: Optional[float],
              push_options: PushOptions) -> Optional[Tuple[int, float]]:
  """(n, discount), checked as `build_nstep_checkpoint` checks them; or
  None for trajectories."""
  if n is None and discount is None:
    return None
  if n is None or discount is None:
    raise ValueError('n-step transitions need both n and discount.')
  from rlds_reverb import checked_push  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.convert import nstep  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  checked_push._check_nstep_options(push_options)  # pylint: disable=protected-access
  nstep.check_parameters(n, discount)
  return n, discount


def _built_of(records, servers: int, seconds: float, notes,
              runner: str) -> list:
  """A `BuildResult` per server, from the merges' records."""
  from rlds_reverb.build import BuildResult  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  by_server = {record['server']: record for record in records}
  missing = [k for k in range(servers) if k not in by_server]
  if missing:
    raise PipelineFailedError(
        f'The Beam build on {runners.short(runner)} ended without the '
        f'merge of server(s) {", ".join(map(str, missing))} of {servers}: '
        f'the runner lost it; no checkpoint of theirs is complete.')
  built = []
  for server in range(servers):
    record = by_server[server]
    skipped = results_lib.skipped_of([record])
    built.append(BuildResult(
        path=record['path'], episodes=record['episodes'],
        trajectories=record['trajectories'], items=record['items'],
        seconds=seconds, bytes=_size(record['path']),
        evicted=tuple(map(tuple, record['evicted_per_table'])),
        skipped_episodes=len(skipped), skipped=skipped, notes=notes))
  return built


def _size(path: Optional[str]) -> int:
  if not path or not os.path.isdir(path):
    return 0
  return sum(os.path.getsize(os.path.join(path, name))
             for name in os.listdir(path))


def _check_servers(server: Union[str, Sequence[str]], runner: str,
                   timeout_s: float) -> None:
  """Addresses are HOST:PORT; on a local runner, something listens there.

  Before the pipeline is built: a runner starts its workers in seconds. A
  remote runner's workers may reach servers this machine cannot (a private
  network): there, each worker's `setup` checks them.
  """
  servers = [server] if isinstance(server, str) else list(server)
  for address in servers:
    addresses.parse(address)
  if runner in LOCAL_RUNNERS:
    for address in dict.fromkeys(servers):
      addresses.check_reachable(address, timeout_s)


def _held_warnings(server: Union[str, Sequence[str]],
                   tables: Union[str, Sequence[str]], runner: str,
                   timeout_s: float) -> Tuple[str, ...]:
  """A warning per table that already holds items, looked at once, before
  the pipeline starts (`rlds_reverb.held`).

  On a local runner only (a remote runner's servers may be out of reach
  here); a server or table that does not answer is left to the workers'
  `setup`, which says why in the pipeline's error.
  """
  if runner not in LOCAL_RUNNERS:
    return ()
  servers = list(dict.fromkeys([server] if isinstance(server, str)
                               else server))
  texts = []
  for address in servers:
    try:
      client, _ = server_lib.connect(address)
      infos = server_lib.table_infos(client, address,
                                     items_lib.table_names(tables), timeout_s)
    except RldsReverbError:
      continue
    texts += held_lib.warnings_for(held_lib.look(infos),
                                   address if len(servers) > 1 else None)
  return tuple(texts)


def run(pipeline: beam.Pipeline, runner: str):
  """Runs `pipeline` to its end; a failure is one line. The result, and
  the last collection's elements where the runner hands them over
  (`runners.gathered`), else None."""
  result = None
  try:
    result = pipeline.run()
    state = result.wait_until_finish()
  except KeyboardInterrupt:
    runners.close(result, cancel=True)
    raise
  except Exception as e:  # pylint: disable=broad-except
    runners.close(result)
    raise PipelineFailedError(
        f'The Beam pipeline failed on {runners.short(runner)}: '
        f'{_first_error(e)}') from e
  try:
    check_finished(state, runner)
  except PipelineFailedError:
    runners.close(result)
    raise
  return result, runners.gathered(result)


def check_finished(state: str, runner: str) -> None:
  """A pipeline that ended otherwise than done (cancelled) counts nothing."""
  if state != beam.runners.runner.PipelineState.DONE:
    raise PipelineFailedError(
        f'The Beam pipeline ended on {runner} in state {state}, not DONE: '
        f'its counts would be partial.')


def _first_error(error: Exception) -> str:
  """'Type: message' of the error a worker raised, from the runner's text.

  Runners raise either a page with the worker's traceback, or the worker's
  error itself, its message followed by "[while running 'Step']".
  """
  matches = [_ERROR_LINE.match(line.strip())
             for line in str(error).splitlines()]
  matches = [m for m in matches if m]
  if matches:
    kind, text = matches[-1][1], matches[-1][2]
  else:
    kind, text = type(error).__name__, str(error).strip().splitlines()[-1]
  return f'{kind}: {_WHILE_RUNNING.sub("", text)}'


def _result_of(metrics, seconds: float) -> PushResult:
  """The committed counters (attempted where a runner commits none)."""
  found = metrics.query(MetricsFilter().with_namespace(write.NAMESPACE))
  counts = dict.fromkeys(write.COUNTERS, 0)
  for counter in found[metrics.COUNTERS]:
    if counter.key.metric.name in counts:  # Not `build`'s per server.
      counts[counter.key.metric.name] += _value(counter)
  skipped = set()
  for string_set in found[metrics.STRINGSETS]:
    if string_set.key.metric.name == write.SKIPPED:
      skipped |= set(_value(string_set) or ())
  return PushResult(
      counts['episodes'], counts['trajectories'], counts['items'], seconds,
      skipped_episodes=counts['skipped_episodes'],
      skipped=tuple(sorted((SkippedEpisode(**json.loads(text))
                            for text in skipped),
                           key=lambda episode: episode.position)))


def _value(metric_result):
  committed = metric_result.committed
  return metric_result.attempted if committed is None else committed
