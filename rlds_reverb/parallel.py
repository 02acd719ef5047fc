"""A push split over local processes, one shard each: `push_shards`, `--workers`.

    push_shards(source, 'host:port', 'replay', workers=N)
      -> PushOptions and CheckOptions made once, checked here, pickled to
      -> N spawned processes; process i runs the checked push of shard i/N
         (`checked_push.source_job`, what `rlds-reverb push --shard i/N`
         runs), into server i % S when given S servers (or a servers
         file of S)
      -> one PushResult, the sum of theirs; or ShardsFailedError naming each
         failed shard, after every shard ran to its end; or, interrupted
         (Ctrl-C), KeyboardInterrupt with a note per shard saying what it
         confirmed

Each process has its own interpreter, TensorFlow and Reverb writer (threads
would share one GIL), so it takes a source that can be opened again by name
(what `load` accepts), not a `tf.data.Dataset`. For a dataset you build
yourself, run `push` in your own processes on `rlds_data.shard(N, i)` (every
process then reads all episodes and keeps every N-th: N reads of the data
instead of one). Processes are spawned, so a script calling this needs the
usual `if __name__ == '__main__':` guard: a worker imports the script
again, and a script that calls this at import gets ShardsFailedError saying
so (the worker ends at the call, quietly, with `IMPORTING_MAIN_EXIT`).

Workers end when the process that started them dies, however it dies
(`_util.lifeline`): a parent killed with SIGKILL leaves no idle worker.

A pool of plain processes, not Beam's DirectRunner: it needs no Beam, starts
no pipeline, and keeps a resume file per shard. The parent imports neither
TensorFlow nor Reverb (workers send back plain dicts), so it takes no CPU
from the workers while they start.
"""

import concurrent.futures
import contextlib
import dataclasses
import multiprocessing
import os
import shutil
import signal
import sys
import threading
import time
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union
import warnings

from rlds_reverb import _resume as resume_lib
from rlds_reverb import addresses
from rlds_reverb import held as held_lib
from rlds_reverb import push_options
from rlds_reverb import servers_file
from rlds_reverb._util import lifeline
from rlds_reverb._util import wording
from rlds_reverb.errors import CapacityWarning
from rlds_reverb.errors import OptionsError
from rlds_reverb.errors import ShardsFailedError
from rlds_reverb.errors import TableNotEmptyWarning
from rlds_reverb.push_options import CheckOptions
from rlds_reverb.push_options import PushOptions

# `push`'s default (from a module without TensorFlow).
DEFAULT_TIMEOUT_S = push_options.DEFAULT_TIMEOUT_S
# The counts of a `PushResult` that add up over shards.
SUMMED = ('episodes', 'trajectories', 'items', 'skipped_episodes',
          'skipped_trajectories', 'resumed_after_episodes')
# The status of a worker that found its script calling us while it imported
# it (no `if __name__ == '__main__':`); its parent reads it.
IMPORTING_MAIN_EXIT = 87


@dataclasses.dataclass(frozen=True)
class ShardOutcome:
  """One shard's process: its `PushResult` as a dict, or its error."""
  shard: str  # 'I/N'
  result: Optional[Dict[str, Any]] = None
  error: Optional[str] = None  # The error's message, one line.
  error_type: Optional[str] = None
  notes: Tuple[str, ...] = ()  # The error's notes (PEP 678), a line each.
  # What its tables held when it checked them (`held.Held` as dicts).
  held: Tuple[Dict[str, Any], ...] = ()

  @property
  def interrupted(self) -> bool:
    return self.error_type == 'KeyboardInterrupt'


def push_shards(dataset: Union[str, Sequence[str]],
                server: Union[str, Sequence[str]],
                tables: Union[str, Sequence[str]], *, workers: int,
                split: str = 'train', data_dir: Optional[str] = None,
                on_invalid: str = 'raise', resume: Optional[str] = None,
                resume_anyway: bool = False, images: str = 'raw',
                image_format: str = 'png',
                image_fields: Optional[Sequence[str]] = None,
                options: Optional[PushOptions] = None, **settings):
  """Pushes the `workers` shards of `dataset` at once; sums their results.

  Args:
    dataset: what `rlds_reverb.load` opens (directory, catalog name, ...).
    server: 'host:port' (a `reverb.Client` cannot cross processes), or
      several: shard i goes to server i % len(server). A servers file
      ('servers.json', written by a serve of many servers) stands for its
      servers' addresses, in server order.
    tables: as for `push`.
    workers: number of processes and shards.
    split, data_dir: as for `load`.
    on_invalid: as for `push`, in each shard.
    resume: as for `push`; shard i of N keeps its own file,
      'STATE.json' -> 'STATE.i-of-N.json'.
    resume_anyway: as for `push`, in each shard.
    images, image_format, image_fields: as for `push` (encoded images).
    options: `push`'s settings at once (`PushOptions`), as for `push`.
    **settings: `push`'s item and timeout settings (sequence_length,
      stride_length, priority, end_of_episode, timeout, chunk_length,
      strict), checked here, before any process starts.

  Returns:
    A `PushResult` whose counts are the sums over shards, whose `seconds` is
    the wall time of the whole run, and whose skipped episodes and warnings
    name their shard. A table that held items before (not from earlier runs
    of this push) is warned of once (`TableNotEmptyWarning`, and first in
    `warnings`).

  Raises:
    OptionsError: a setting `PushOptions` refuses; before any process starts.
    ServersFileError: a servers file that is missing or unreadable.
    AddressError, ServerUnavailableError: a server address is not HOST:PORT,
      or nothing listens there; before any process starts.
    KeyboardInterrupt: interrupted (Ctrl-C); a note per shard says what it
      confirmed (`interrupted_notes`).
    ShardsFailedError: some shard failed; names each, with its error, and
      what the others confirmed. The others ran to their end. Or the
      calling script lacks `if __name__ == '__main__':` (says so).
  """
  _exit_if_importing_main()
  start = time.perf_counter()
  options = push_options.of(options, images=images, image_format=image_format,
                            image_fields=image_fields, **settings)
  checks = CheckOptions(on_invalid=on_invalid, resume=resume,
                        resume_anyway=resume_anyway)
  servers = servers_file.addresses_of(server)  # Read once, for both.
  outcomes = run_shards(dataset, servers, tables, workers=workers,
                        split=split, data_dir=data_dir, options=options,
                        checks=checks)
  held = held_warnings(outcomes, servers)
  for message in held:
    warnings.warn(message, TableNotEmptyWarning, stacklevel=2)
  if any(outcome.interrupted for outcome in outcomes):
    error = KeyboardInterrupt()
    for note in interrupted_notes(outcomes):
      error.add_note(note)
    raise error
  failed = [outcome for outcome in outcomes if outcome.result is None]
  if failed:
    done = [outcome.result for outcome in outcomes if outcome.result]
    raise ShardsFailedError(
        f'{len(failed)} of {workers} shards failed: '
        f'{" | ".join(failure_text(o, with_type=True) for o in failed)} '
        f'| the {wording.count(len(done), "other")} confirmed '
        f'{wording.count(sum(r["episodes"] for r in done), "episode")}.')
  total = summed(outcomes)
  # TensorFlow in this process only now: the workers had the cores to start.
  from rlds_reverb.checked_push import PushResult  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.checked_push import SkippedEpisode  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return PushResult(
      seconds=time.perf_counter() - start,
      **{name: total[name] for name in SUMMED},
      skipped=tuple(SkippedEpisode(**episode) for episode in total['skipped']),
      warnings=tuple(held) + tuple(total['warnings']),
      notes=tuple(total['notes']))


def run_shards(dataset, server, tables, *, workers: int, split: str = 'train',
               data_dir: Optional[str] = None,
               options: PushOptions = PushOptions(),
               checks: CheckOptions = CheckOptions()) -> List[ShardOutcome]:
  """Each shard's outcome, in shard order; every shard runs to its end.

  Arguments as for `push_shards`; `options` and `checks` go to every shard
  as they are (but for the resume file, one per shard). Interrupted
  (Ctrl-C, SIGINT), every shard is interrupted, and each says what it
  confirmed.
  """
  _exit_if_importing_main()
  if workers < 1:
    raise OptionsError(f'workers must be >= 1, got {workers}.')
  servers = servers_file.addresses_of(server)
  check_servers(servers, options.timeout)
  with _spawned_pool(workers) as (pool, interrupted):
    return _run(pool, interrupted, 'push_shards', [
        (_push_shard, dataset, split, data_dir, (index, workers),
         servers[index % len(servers)], tables, options,
         _shard_checks(checks, index, workers))
        for index in range(workers)])


@contextlib.contextmanager
def _spawned_pool(workers: int):
  """A pool of `workers` spawned processes that end with this one, and the
  event that tells them Ctrl-C came while they started.

  Processes are started by the thread that submits (Python 3.11 spawns on
  demand): the thread running `run_shards` or `build_shards`, which waits
  for them, so their parent-death signal fires only when this process dies.
  """
  context = multiprocessing.get_context('spawn')
  interrupted = context.Event()
  with concurrent.futures.ProcessPoolExecutor(
      workers, mp_context=context, initializer=_start_worker,
      initargs=(interrupted, os.getpid())) as pool:
    yield pool, interrupted


def _run(pool, interrupted, caller: str, tasks) -> List[ShardOutcome]:
  """Runs `tasks` (fn, *args) in the pool; their outcomes, in order, every
  task run to its end. Interrupted (Ctrl-C, SIGINT), every task is
  interrupted, and each says what it confirmed.

  Raises:
    ShardsFailedError: the workers died importing the main script, which
      calls `caller` at import (no `if __name__ == '__main__':`).
  """
  with _sigint_ignored():  # Inherited: workers start deaf to Ctrl-C.
    futures = [_submit(pool, task) for task in tasks]
  processes = _processes(pool)
  try:
    _wait_noting_ctrl_c(futures)
  except KeyboardInterrupt:
    interrupted.set()  # For workers still starting: they look at it.
    _interrupt(pool)  # A terminal's Ctrl-C reached them; `kill` may not.
    concurrent.futures.wait(futures)  # Each confirms and says so.
  outcomes = [_outcome(future, index, len(tasks))
              for index, future in enumerate(futures)]
  if any(o.error_type == 'BrokenProcessPool' for o in outcomes):
    pool.shutdown(wait=True)  # Joins the workers: their exit codes are known.
    if any(p.exitcode == IMPORTING_MAIN_EXIT for p in processes):
      raise ShardsFailedError(_main_guard_text(caller))
  return outcomes


def _wait_noting_ctrl_c(futures) -> None:
  """`concurrent.futures.wait(futures)`; KeyboardInterrupt on Ctrl-C, even
  one Python lost (raised while a finalizer ran: "Exception ignored"), as
  the handler notes it before raising."""
  noted = []
  previous = signal.getsignal(signal.SIGINT)
  watching = (previous is signal.default_int_handler and
              threading.current_thread() is threading.main_thread())
  if watching:
    def note(signum, frame):
      noted.append(signum)
      signal.default_int_handler(signum, frame)
    signal.signal(signal.SIGINT, note)
  try:
    while concurrent.futures.wait(futures, timeout=_CTRL_C_POLL_S).not_done:
      if noted:
        raise KeyboardInterrupt
  finally:
    if watching:
      signal.signal(signal.SIGINT, previous)


def _submit(pool, task) -> concurrent.futures.Future:
  """`pool.submit(*task)`; a pool broken already (a worker died while the
  others were spawned) gives a future failed as the running ones fail."""
  try:
    return pool.submit(*task)
  except concurrent.futures.BrokenExecutor as e:
    future = concurrent.futures.Future()
    future.set_exception(e)
    return future


def _main_guard_text(caller: str) -> str:
  """What to do when the workers found the script calling `caller` as they
  imported it."""
  main = sys.modules.get('__main__')
  script = getattr(main, '__file__', None) or 'the main script'
  return (f'{caller} was called again in its worker processes, which import '
          f"{script} anew: put the call under `if __name__ == '__main__':` "
          f'in {script}.')


def _exit_if_importing_main() -> None:
  """In a spawned worker that is still importing the main script (which
  called us at import): ends the worker, at once and quietly, with
  `IMPORTING_MAIN_EXIT` for its parent to read, instead of starting workers
  of its own (multiprocessing would refuse, with a traceback per worker).

  `_inheriting` is multiprocessing's own mark of it (`spawn._main` sets it
  while it prepares the process; `spawn._check_not_importing_main` reads it).
  """
  if getattr(multiprocessing.current_process(), '_inheriting', False):
    os._exit(IMPORTING_MAIN_EXIT)  # Unflushed: its output is the parent's.


def _processes(pool: concurrent.futures.ProcessPoolExecutor) -> list:
  """The pool's processes (`_processes`, pid -> Process, as in `_interrupt`)."""
  return list((getattr(pool, '_processes', None) or {}).values())


def _outcome(future: concurrent.futures.Future, index: int,
             workers: int) -> ShardOutcome:
  """The shard's outcome, also when its process raised before its push
  began (Ctrl-C while it imported TensorFlow) or died: the shard is named
  with what happened, never lost in the parent's own error."""
  try:
    return future.result()
  except (Exception, KeyboardInterrupt) as e:  # pylint: disable=broad-except
    if isinstance(e, KeyboardInterrupt):  # Between its push and its report.
      e.add_note('Interrupted before it reported what it wrote.')
    return _failed(f'{index}/{workers}', e, plan=None)


def check_servers(servers: Sequence[str], timeout_s: float) -> None:
  """Every address is HOST:PORT and something listens there: before spawning.

  A worker would find out too, after starting TensorFlow and reading its
  shard ahead; here it costs a TCP connect per server.

  Raises:
    AddressError, ServerUnavailableError: as `addresses.check_reachable`.
  """
  if not servers:
    raise OptionsError('push_shards needs at least one server.')
  for address in servers:
    addresses.parse(address)
  for address in dict.fromkeys(servers):
    addresses.check_reachable(address, timeout_s)


@contextlib.contextmanager
def _sigint_ignored():
  """SIGINT ignored while workers are spawned, so that they inherit it.

  A worker that takes Ctrl-C while Python starts it (before its task runs)
  dies, and the pool then kills every other worker, confirmed or not. So
  workers start ignoring SIGINT and listen once their task begins
  (`_listen_for_ctrl_c`); a Ctrl-C in the few milliseconds of spawning is
  lost.
  """
  previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
  try:
    yield
  finally:
    signal.signal(signal.SIGINT, previous)


_interrupted = None  # In a worker: the parent's event, set on Ctrl-C.
_CTRL_C_POLL_S = 0.2  # How often the parent looks for a lost Ctrl-C.


def _start_worker(interrupted, parent_pid: int) -> None:
  """In a worker, before any task: it ends with its parent, and keeps the
  parent's Ctrl-C event."""
  lifeline.end_with_parent(parent_pid)
  global _interrupted  # pylint: disable=global-statement
  _interrupted = interrupted
  from rlds_reverb.write import interrupts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  interrupts.also_interrupted_when(interrupted.is_set)


@contextlib.contextmanager
def _listen_for_ctrl_c():
  """In a worker, around its task: Ctrl-C raises KeyboardInterrupt, also
  one that came while the worker still started (the parent's event); idle
  again, it ignores SIGINT, so a late one cannot kill it."""
  if _interrupted is None:  # In the calling process (one worker): as is.
    yield
    return
  from rlds_reverb.write import interrupts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  signal.signal(signal.SIGINT, interrupts.raise_and_record)
  try:
    if _interrupted.is_set():
      raise KeyboardInterrupt
    yield
  finally:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def _as_interruption(error: BaseException) -> BaseException:
  """A worker's error after Ctrl-C reached it, as the interruption it is.

  A KeyboardInterrupt raised inside TensorFlow's C++ (a worker still
  tracing its pipeline) can come out as another error: CI saw "shard 1/2:
  AttributeError: 'Trajectory' object has no attribute '_type_spec'" after
  a Ctrl-C. After a SIGINT (here, or the parent's event) any error is the
  interruption; its notes (what was confirmed) are kept.
  """
  from rlds_reverb.write import interrupts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  came = interrupts.taken() or (_interrupted is not None and
                                _interrupted.is_set())
  if isinstance(error, KeyboardInterrupt) or not came:
    return error
  interruption = KeyboardInterrupt()
  for note in getattr(error, '__notes__', None) or ['Nothing was written.']:
    interruption.add_note(note)
  return interruption


def _interrupt(pool: concurrent.futures.ProcessPoolExecutor) -> None:
  """SIGINT to the pool's running processes.

  The executor has no public handle on them (`_processes`, pid -> Process,
  the same from Python 3.8 to 3.13).
  """
  for process in _processes(pool):
    if process.is_alive():
      os.kill(process.pid, signal.SIGINT)


def _shard_checks(checks: CheckOptions, index: int,
                  count: int) -> CheckOptions:
  """Shard `index` of `count` keeps its own resume file."""
  if checks.resume is None:
    return checks
  return dataclasses.replace(
      checks, resume=resume_lib.shard_path(checks.resume, index, count))


def _push_shard(dataset, split, data_dir, shard, server, tables,
                options: PushOptions, checks: CheckOptions) -> ShardOutcome:
  """In a worker: the shard's checked push; its error as one line.

  What its tables held is for the parent to warn of, once for all shards:
  its own warning of it is left out.
  """
  shard_text = '/'.join(map(str, shard))
  plan = result = None
  try:  # The import too: Ctrl-C while it loads TensorFlow wrote nothing.
    with _listen_for_ctrl_c():
      from rlds_reverb import checked_push  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      job = checked_push.source_job(
          checked_push.Source(dataset, split, data_dir, shard), server,
          tables, options, checks)
      plan = job.check()
      result = job.write()
  except (Exception, KeyboardInterrupt) as e:  # pylint: disable=broad-except
    if result is None:
      return _failed(shard_text, e, plan)
  result = dataclasses.replace(result, warnings=tuple(
      message for message in result.warnings
      if message not in plan.held_warnings))
  return ShardOutcome(shard_text, result=dataclasses.asdict(result),
                      held=_held_of(plan))


def _failed(shard_text: str, error: BaseException, plan) -> ShardOutcome:
  """A shard's error as one line, with its notes (what it confirmed)."""
  error = _as_interruption(error)
  interrupted = isinstance(error, KeyboardInterrupt)
  return ShardOutcome(
      shard_text,
      error=wording.one_line(str(error)) or ('interrupted.' if interrupted
                                             else type(error).__name__),
      error_type=type(error).__name__,
      notes=tuple(wording.one_line(note)
                  for note in getattr(error, '__notes__', ())),
      held=_held_of(plan))


def _held_of(plan) -> Tuple[Dict[str, Any], ...]:
  if plan is None:
    return ()
  return tuple(dataclasses.asdict(held) for held in plan.held)


def held_warnings(outcomes: Sequence[ShardOutcome],
                  servers: Sequence[str]) -> List[str]:
  """One warning per table (of each server) that held items before any
  shard wrote, from the shards' looks (`held.earliest`)."""
  looks = {}
  for index, outcome in enumerate(outcomes):
    server = servers[index % len(servers)]
    for held in outcome.held:
      looks.setdefault((server, held['table']), []).append(
          held_lib.Held(**held))
  named = len(set(servers)) > 1
  texts = [held_lib.warning_text(held_lib.earliest(table_looks),
                                 server if named else None)
           for (server, _), table_looks in looks.items()]
  return [text for text in texts if text]


def interrupted_notes(outcomes: Sequence[ShardOutcome]) -> List[str]:
  """A line per shard after Ctrl-C: what it confirmed before the
  interruption, or that it had finished, or its error."""
  notes = []
  for outcome in outcomes:
    if outcome.interrupted:
      text = ' '.join(outcome.notes) or 'Nothing was written.'
    elif outcome.result is not None:
      result = outcome.result
      text = (f'finished before the interruption: '
              f'{wording.count(result["episodes"], "episode")} '
              f'({wording.count(result["items"], "item")}) confirmed.')
    else:
      text = f'{outcome.error_type}: {outcome.error}'
      text = ' '.join([text, *outcome.notes])
    notes.append(f'shard {outcome.shard}: {text}')
  return notes


def summed(outcomes: Sequence[ShardOutcome]) -> Dict[str, Any]:
  """The counts of the shards that succeeded, added; skips and warnings
  (as dicts and strings) name their shard; notes on the data's fields, the
  same for every shard, once."""
  done = [o for o in outcomes if o.result is not None]
  total = {name: sum(o.result[name] for o in done) for name in SUMMED}
  total['skipped'] = [{**episode, 'shard': o.shard}
                      for o in done for episode in o.result['skipped']]
  total['warnings'] = [f'shard {o.shard}: {message}'
                       for o in done for message in o.result['warnings']]
  total['notes'] = list(dict.fromkeys(
      note for o in done for note in o.result['notes']))
  return total


def failure_text(outcome: ShardOutcome, with_type: bool = False) -> str:
  """'shard 0/2: <error>' (with the error's type if asked)."""
  kind = f'{outcome.error_type}: ' if with_type else ''
  return ' '.join([f'shard {outcome.shard}: {kind}{outcome.error}',
                   *outcome.notes])


def build_shards(dataset: Union[str, Sequence[str]], directory: str, tables,
                 *, workers: int, servers: int = 1, split: str = 'train',
                 data_dir: Optional[str] = None, on_invalid: str = 'raise',
                 options: Optional[PushOptions] = None,
                 **settings) -> List[Any]:
  """Builds one checkpoint per server from `workers` local processes: what
  `rlds-reverb build --workers N [--servers S]` runs.

      dataset --ranges of record files (positions as `load` orders them)-->
        N processes, a contiguous share each: checked as `build_checkpoint`
        checks, converted, planned; episode I -> server I % S; a part per
        server (`checkpoints.parts`, renamed into place once whole)
      -> per server, in the same processes: its parts merged into one
         checkpoint under `parts.server_root(directory, k, S)`
         (`directory` itself when S is 1), DONE last; the parts removed

  With one worker, this process reads the data once and writes each
  server's checkpoint as its episodes come (`CheckedBuild.write_servers`):
  no parts, no merge, so S servers cost about what one does.

  Args:
    dataset, split, data_dir: as for `rlds_reverb.load`.
    directory: where the checkpoints go (server k: directory/server-k-of-S).
    tables: as for `build_checkpoint` (TableOptions or names).
    workers: processes.
    servers: checkpoints, one per server.
    on_invalid: 'raise' or 'skip', as for `build_checkpoint`.
    options, **settings: what is written, as for `build_checkpoint`.

  Returns:
    A `BuildResult` per server, in server order; skipped episodes go with
    the server they would have gone to.

  Raises:
    OptionsError: a setting refused, before any process starts.
    CheckpointWriteError: `directory` is not new or empty, before any
      process starts.
    ShardsFailedError: a share or a merge failed (each named); no new
      checkpoint is left for any server, nor a directory the build made.
      Or the calling script lacks `if __name__ == '__main__':` (says so).
    KeyboardInterrupt: Ctrl-C; nothing is left.
  """
  _exit_if_importing_main()
  if workers < 1 or servers < 1:
    raise OptionsError(f'workers and servers must be >= 1, got {workers} and '
                       f'{servers}.')
  if on_invalid not in ('raise', 'skip'):
    raise OptionsError(f"on_invalid: 'raise' or 'skip' (a build is all or "
                       f'nothing), got {on_invalid!r}.')
  start = time.perf_counter()
  options = push_options.of(options, **settings)
  directory = os.fspath(directory)
  from rlds_reverb.checkpoints import writer as writer_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  writer_lib.check_root(directory)  # Before any process starts.
  made_directory = not os.path.exists(directory)
  made: List[str] = []
  with _build_pool(workers) as (pool, interrupted):
    try:
      job = _BuildJob(dataset, split, data_dir, directory, servers, tables,
                      options, on_invalid)
      if pool is None:  # One process: no parts, no merge.
        [built] = _each(pool, interrupted, [(_build_servers, job)])
        _raise_failed('shares', [built])
        results = built.result['results']
      else:
        shares = _each(pool, interrupted, [
            (_build_share, job, (index, workers)) for index in range(workers)])
        _raise_failed('shares', shares)
        merges = _each(pool, interrupted, [
            (_merge_server, directory, server, servers,
             [o.result['parts'][server] for o in shares
              if server in o.result['parts']],
             shares[0].result['settings'])
            for server in range(servers)])
        made = [o.result['path'] for o in merges if o.result]
        _raise_failed('merges', merges)
        results = _build_results(shares, merges, servers)
    except BaseException as e:
      if isinstance(e, _Interrupted):
        made = [path for o in e.outcomes if o.result
                for path in _paths_of(o.result)]
        e.add_note('Nothing was written: every part and new checkpoint '
                   'was removed.')
      for path in made:  # All or nothing: no server gets a new one.
        shutil.rmtree(path, ignore_errors=True)
      from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      parts.remove_unfinished(directory, servers, made_directory)
      raise
    finally:
      from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      parts.remove_parts(directory)
  seconds = time.perf_counter() - start
  results = [dataclasses.replace(result, seconds=seconds)
             for result in results]
  _warn_capacity([text for result in results for text in result.warnings])
  return results


def _warn_capacity(texts: Sequence[str]) -> None:
  """As `build_checkpoint` warns."""
  if texts:
    for text in texts:
      warnings.warn(text, CapacityWarning, stacklevel=3)


@contextlib.contextmanager
def _build_pool(workers: int):
  """`_spawned_pool` for more than one worker; for one, no pool (None, None):
  its tasks run in this process, which has already paid the ~3 s start of
  Python and TensorFlow that a spawned worker would pay again."""
  if workers == 1:
    with _CtrlCRecorded() as recorded:
      yield None, recorded
    return
  with _spawned_pool(workers) as pool_and_event:
    yield pool_and_event


class _CtrlCRecorded:
  """Around tasks run in this process: SIGINT raises KeyboardInterrupt as
  Python's handler does, and is recorded (`is_set`). A KeyboardInterrupt
  raised in a finalizer is printed as 'Exception ignored' and dropped, and
  TensorFlow frees functions in finalizers all the time: a SIGINT that
  lands in one is sent again a moment later, and the record ends the tasks
  at the next one whatever happens. Only where Python's own handler is in
  place (the main thread, no handler of the program's)."""

  def __init__(self):
    self._set = False
    self._previous = None

  def __enter__(self) -> '_CtrlCRecorded':
    from rlds_reverb.write import interrupts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    if interrupts.default_handler_here():
      self._previous = signal.signal(signal.SIGINT, self._on_sigint)
    return self

  def __exit__(self, *exc_info) -> None:
    if self._previous is not None:
      signal.signal(signal.SIGINT, self._previous)

  def _on_sigint(self, signum, frame):
    self._set = True
    if _in_finalizer(frame):
      threading.Timer(_RESEND_S, os.kill,
                      (os.getpid(), signal.SIGINT)).start()
      return None
    return signal.default_int_handler(signum, frame)

  def is_set(self) -> bool:
    return self._set


_RESEND_S = 0.05  # When a SIGINT that landed in a finalizer is sent again.


def _in_finalizer(frame) -> bool:
  while frame is not None:
    if frame.f_code.co_name == '__del__':
      return True
    frame = frame.f_back
  return False


def _each(pool, interrupted, tasks) -> List[ShardOutcome]:
  """`_run` for `build_shards` (without a pool: here, one task after the
  other); raises `_Interrupted` after Ctrl-C."""
  if pool is None:
    return _each_here(tasks, interrupted)
  outcomes = _run(pool, interrupted, 'build_shards', tasks)
  if interrupted.is_set():
    raise _Interrupted(outcomes)
  return outcomes


def _each_here(tasks, recorded: _CtrlCRecorded) -> List[ShardOutcome]:
  """The tasks in this process; a Ctrl-C during one (its outcome says
  KeyboardInterrupt, as a worker's would, or Python lost it and `recorded`
  has it) ends them, as `_Interrupted`."""
  outcomes = []
  try:
    for fn, *args in tasks:
      outcomes.append(fn(*args))
      if outcomes[-1].interrupted or recorded.is_set():
        raise KeyboardInterrupt
  except KeyboardInterrupt as e:
    raise _Interrupted(outcomes) from e
  return outcomes


class _Interrupted(KeyboardInterrupt):
  """Ctrl-C while tasks ran; `outcomes`: what each did."""

  def __init__(self, outcomes):
    super().__init__()
    self.outcomes = outcomes


def _raise_failed(what: str, outcomes: Sequence[ShardOutcome]) -> None:
  failed = [o for o in outcomes if o.result is None]
  if failed:
    raise ShardsFailedError(
        f'{len(failed)} of {len(outcomes)} {what} failed: '
        f'{" | ".join(failure_text(o, with_type=True) for o in failed)} '
        f'| nothing was written.')


@dataclasses.dataclass(frozen=True)
class _BuildJob:
  """What every process of a `build_shards` run reads and writes: its
  arguments, sent whole to each worker."""
  dataset: Any  # As for `load`: a directory, a name, or a list of them.
  split: str
  data_dir: Optional[str]
  directory: str  # Where the checkpoints go.
  servers: int
  tables: Any  # TableOptions or names.
  options: PushOptions
  on_invalid: str  # 'raise' or 'skip'.


def _build_share(job: _BuildJob, shard) -> ShardOutcome:
  """In a worker (one of two or more): share `shard` (index, count)
  of the data's ranges, as a part per server."""
  shard_text = '/'.join(map(str, shard))
  try:
    with _listen_for_ctrl_c():
      from rlds_reverb import build_parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      from rlds_reverb.push_options import OnInvalid  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      ranges = build_parts.share_ranges(job.dataset, job.split, job.data_dir,
                                        *shard)
      share = build_parts.build_share(ranges, job.directory, job.tables,
                                      job.servers, job.options,
                                      OnInvalid(job.on_invalid))
  except (Exception, KeyboardInterrupt) as e:  # pylint: disable=broad-except
    return _failed(shard_text, e, plan=None)
  return ShardOutcome(shard_text, result=dict(
      parts=share.parts, settings=share.settings, episodes=share.episodes,
      steps=share.steps,
      skipped=[dataclasses.asdict(e) for e in share.skipped],
      notes=list(share.notes)))


def _build_servers(job: _BuildJob) -> ShardOutcome:
  """In this process (one worker): the data read once, each server's
  checkpoint written as its episodes come (`CheckedBuild.write_servers`)."""
  try:
    with _listen_for_ctrl_c():
      from rlds_reverb import build as build_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      from rlds_reverb.push_options import OnInvalid  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      data = sources.load(job.dataset, split=job.split,
                          data_dir=job.data_dir)
      build = build_lib.CheckedBuild(data, job.tables, job.options,
                                     OnInvalid(job.on_invalid))
      build.check()
      results = build.write_servers(job.directory, job.servers)
  except (Exception, KeyboardInterrupt) as e:  # pylint: disable=broad-except
    return _failed('0/1', e, plan=None)
  return ShardOutcome('0/1', result=dict(results=results))


def _paths_of(result: Dict[str, Any]) -> List[str]:
  """The checkpoints a task's result names: a merge's, or the servers' of
  a build in this process."""
  if 'path' in result:
    return [result['path']]
  return [built.path for built in result.get('results', ())]


def _merge_server(directory, server, servers, part_paths, settings
                  ) -> ShardOutcome:
  """In a worker (one of two or more): server `server`'s parts merged
  into its checkpoint."""
  try:
    with _listen_for_ctrl_c():
      from rlds_reverb import build_parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      result = build_parts.merge_server(directory, server, servers,
                                        part_paths, settings)
  except (Exception, KeyboardInterrupt) as e:  # pylint: disable=broad-except
    return _failed(f'server {server}', e, plan=None)
  return ShardOutcome(f'server {server}', result=result)


def _build_results(shares, merges, servers: int):
  from rlds_reverb.build import BuildResult  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.checked_push import SkippedEpisode  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  skipped = sorted((SkippedEpisode(**e) for o in shares
                    for e in o.result['skipped']),
                   key=lambda e: e.position)
  notes = tuple(dict.fromkeys(n for o in shares for n in o.result['notes']))
  results = []
  for server, merge in enumerate(merges):
    mine = tuple(e for e in skipped if e.position % servers == server)
    results.append(BuildResult(
        path=merge.result['path'], episodes=merge.result['episodes'],
        trajectories=merge.result['steps'], items=merge.result['items'],
        seconds=0.0, bytes=merge.result['bytes'],
        evicted=tuple(map(tuple, merge.result['evicted'])),
        skipped_episodes=len(mine), skipped=mine,
        warnings=tuple(merge.result['warnings']), notes=notes))
  return results
