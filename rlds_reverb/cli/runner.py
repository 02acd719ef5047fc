"""`rlds-reverb push|build --runner R`: the job as an Apache Beam pipeline.

    rlds-reverb push ... --runner DirectRunner --beam-option direct_num_workers=2
    rlds-reverb build ... --runner dask [--dask-scheduler tcp://HOST:8786
                                         | --workers N]
      -> --runner dask without a scheduler: a local Dask cluster of N quiet
         worker processes (`rlds_reverb.dask_worker`), started ahead (while
         this process imports Beam and opens the data), closed at the end
      -> rlds_reverb.beam.push / .build on that runner
      -> the same summary as the job in one process, its counts from the
         records the pipeline wrote (`beam.results`)
      Ctrl-C: the pipeline cancelled (a local cluster closed); what the
      tables hold, or what the build left, said in one line

Beam (and Dask) are imported only here: without them installed, '--runner'
is a one-line usage error, and every other command works.
"""

import argparse
import contextlib
import logging
from typing import Callable, Iterator, List, Tuple

from rlds_reverb import dask_worker
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import push_shared

INSTALL_HINT = 'pip install "rlds_reverb[beam]"'


def add_arguments(parser: argparse.ArgumentParser) -> None:
  """--runner and what goes with it: push's and build's."""
  parser.add_argument('--runner', default=None, metavar='RUNNER',
                      help=('run on Apache Beam with this runner (dask, '
                            'DirectRunner, DataflowRunner, FlinkRunner, ...)'))
  parser.add_argument('--beam-option', action='append', default=[],
                      type=options.key_value, metavar='KEY=VALUE',
                      help=('a Beam pipeline option for --runner, as '
                            '--KEY=VALUE; repeat'))
  parser.add_argument('--dask-scheduler', default=None, metavar='ADDRESS',
                      help=('with --runner dask: the scheduler of a running '
                            'Dask cluster (tcp://HOST:8786); without it, a '
                            'local cluster of --workers processes'))
  parser.add_argument('--parts-per-file', type=options.positive_int,
                      default=None, metavar='K',
                      help=('with --runner: read each record file in K '
                            'parts (default: enough for 8 parts in all); a '
                            'part is what a retried task writes again'))


def usage_problems(args: argparse.Namespace) -> List[Tuple[bool, str]]:
  """(failed, message) for --runner's options given without it or at odds
  with it: push's and build's."""
  dask = dask_worker.is_dask_runner(args.runner)
  return [
      (args.workers > 1 and bool(args.runner) and not dask,
       f'--runner {args.runner} runs its own workers; drop --workers (only '
       f'--runner dask starts a local cluster of --workers processes)'),
      (args.workers > 1 and dask and bool(args.dask_scheduler),
       "--dask-scheduler's cluster has its own workers; drop --workers"),
      (bool(args.dask_scheduler) and not dask,
       '--dask-scheduler goes with --runner dask'),
      (dask and any(key == 'dask_client_address'
                    for key, _ in args.beam_option),
       '--runner dask: give the scheduler as --dask-scheduler ADDRESS, not '
       'as --beam-option dask_client_address'),
      (bool(args.beam_option) and not args.runner,
       '--beam-option needs --runner'),
      (args.parts_per_file is not None and not args.runner,
       '--parts-per-file needs --runner'),
  ]


def run(args: argparse.Namespace, push_options) -> int:
  """The push on Beam, with `push_options` (`PushOptions`) as they are."""
  try:
    with pipeline_options(args) as beam_options:
      beam = _import_beam(args)
      _check_dataset(args, push_options)
      result = beam.push(
          args.dataset, args.server, args.table, split=args.split,
          data_dir=args.data_dir, runner=args.runner,
          options=beam_options(), on_invalid=args.on_invalid,
          parts_per_file=args.parts_per_file, push_options=push_options)
  except KeyboardInterrupt as e:
    raise output.CliError(_push_interrupted_text(args),
                          output.EXIT_INTERRUPTED) from e
  push_shared.note_found({**vars(result),
                          'skipped': [vars(e) for e in result.skipped]})
  push_shared.print_summary(push_shared.summary_of(result), args.json)
  return output.EXIT_OK


def build(args: argparse.Namespace, configured, item_options) -> list:
  """The build on Beam: a `BuildResult` per server. A Ctrl-C is the
  caller's to word (it knows --out)."""
  with pipeline_options(args) as beam_options:
    beam = _import_beam(args)
    return beam.build(
        args.dataset, args.out, configured, servers=args.servers,
        split=args.split, data_dir=args.data_dir, runner=args.runner,
        options=beam_options(), on_invalid=args.on_invalid,
        parts_per_file=args.parts_per_file, n=args.n_step,
        discount=args.gamma, push_options=item_options)


@contextlib.contextmanager
def pipeline_options(args: argparse.Namespace
                     ) -> Iterator[Callable[[], list]]:
  """A function giving --beam-option's pairs and, with --runner dask, the
  scheduler's address: --dask-scheduler's, or a local cluster's, started
  here, ahead (its workers start while this process imports Beam and opens
  the data), and closed after (its workers stop with it, a Ctrl-C too)."""
  given = list(args.beam_option)
  if not dask_worker.is_dask_runner(args.runner):
    yield lambda: given
  elif args.dask_scheduler:
    yield lambda: given + [('dask_client_address', args.dask_scheduler)]
  else:
    cluster = dask_worker.StartedAhead(args.workers)
    try:
      yield lambda: given + [('dask_client_address', cluster.address())]
    finally:
      cluster.close()


def _import_beam(args: argparse.Namespace):
  """`rlds_reverb.beam`, with the runner checked (exit 2 if unknown or not
  installed); Beam's Python logs at errors only unless --debug.

  Beam logs through the root logger (a warning at import, which also
  installs a stderr handler) and relays its workers' logs through its own;
  a failed bundle is logged with its traceback, before the pipeline's error
  reaches us, which says it in one line.
  """
  if not args.debug:
    logging.getLogger().setLevel(logging.ERROR)
    for name in ('apache_beam', 'distributed'):
      logging.getLogger(name).setLevel(logging.CRITICAL)
  try:
    from rlds_reverb import beam  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  except ImportError as e:
    if not (e.name or '').startswith('apache_beam'):
      raise
    raise output.CliError(
        f'--runner needs Apache Beam, which is not installed: {INSTALL_HINT}',
        output.EXIT_USAGE) from e
  _check_runner(args.runner)
  return beam


def _check_runner(name: str) -> None:
  """An unknown runner, or dask without Dask, is bad usage (exit 2)."""
  from apache_beam.runners import runner as runner_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.beam import runners  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  if runners.is_dask(name):
    try:
      import dask.distributed  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
    except ImportError as e:
      raise output.CliError(
          f'--runner {name} needs dask[distributed], which is not '
          f'installed: {INSTALL_HINT}', output.EXIT_USAGE) from e
    return
  try:
    runner_lib.create_runner(name)
  except ValueError as e:
    raise output.CliError(f'--runner: {output.error_line(e)}',
                          output.EXIT_USAGE) from e


def _check_dataset(args: argparse.Namespace, push_options) -> None:
  """Opens the dataset here first: bad input is a usage error (exit 2)."""
  push_shared.checked_spec(args, push_options, options.load(args))


def _push_interrupted_text(args: argparse.Namespace) -> str:
  """What an interrupted push on Beam left: the tables' sizes now."""
  held = []
  for address in dict.fromkeys(args.server):
    for table in args.table:
      size = _size_or_none(address, table)
      where = f'{table!r} on {address}'
      held.append(f'{where} holds {size:,} items' if size is not None
                  else f'{where} did not answer')
  return (f'interrupted; the pipeline was stopped, and what its parts '
          f'confirmed stays: {"; ".join(held)} (a part is written at least '
          f'once: run again into empty tables for each item once)')


def _size_or_none(address: str, table: str):
  from rlds_reverb.write import server as server_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import RldsReverbError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    client, _ = server_lib.connect(address)
    infos = server_lib.table_infos(client, address, [table], 2.0)
  except RldsReverbError:
    return None
  return infos[table].current_size
