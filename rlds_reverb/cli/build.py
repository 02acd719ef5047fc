"""`rlds-reverb build`: a dataset as a Reverb checkpoint, with no server.

    arguments --> TableOptions (serve's table options: cli/tables)
              --> PushOptions (push's item options: push.item_options_of)
              --> --out DIR: new or empty, and writable (exit 2, before the
                  data is read; nothing made until the build writes)
              --> rlds_reverb.build_checkpoint (build_nstep_checkpoint with
                  --n-step): read ahead and checked as push, then written,
                  DONE last; warnings one line each as they come
              --> --workers N / --servers S: rlds_reverb.build_shards, N
                  processes, one checkpoint per server (episode I -> I % S)
                  under DIR/server-K-of-S, and DIR/dataset.json: the
                  dataset read, so that its serve need not sign it again
                  (build_record)
              --> a summary: the checkpoint, what it holds, and the serve
                  command that starts from it

The build is the library's (`rlds_reverb.build`); this module reads the
arguments, maps usage errors to exit 2, and prints. A build is a seed:
`rlds-reverb serve --from-checkpoint DIR` loads it (Reverb's
`fallback_checkpoint_path`) and never changes it; the checkpoint's table
settings replace the server's, so serve needs only the tables' names.
"""

import argparse
import contextlib
import os
import shlex
import warnings
from typing import List, Sequence

from rlds_reverb import checkpoints
from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import progress as progress_lib
from rlds_reverb.cli import push
from rlds_reverb.cli import push_shared
from rlds_reverb.cli import runner
from rlds_reverb.cli import tables as table_flags

HELP = 'write a dataset as a Reverb checkpoint that a server loads at start'
DESCRIPTION = ('Writes the items a push would write as a new Reverb '
               'checkpoint under --out, with no server: '
               "'rlds-reverb serve --from-checkpoint DIR' (or a "
               'reverb.Server whose DefaultCheckpointer has it as '
               'fallback_checkpoint_path) then starts holding them, at its '
               'load speed, and never changes the build.')
EPILOG = """\
examples:
  rlds-reverb build --dataset DIR --out /data/built
  rlds-reverb serve --dataset DIR --from-checkpoint /data/built \\
      --checkpoint-dir /data/served
  rlds-reverb build --dataset DIR --out /data/built --max-size 1000000 \\
      --table uniform --table prioritized --sampler prioritized \\
      --priority-exponent 0.6 --sequence-length 3 --images encoded
  rlds-reverb build --dataset DIR --out /data/built --n-step 3 --gamma 0.99
  rlds-reverb build --dataset DIR --dataset MORE --out /data/built2
  rlds-reverb build --dataset DIR --out /data/built --workers 2 --servers 4
  rlds-reverb build --dataset DIR --out /shared/built --servers 4 \\
      --runner dask --dask-scheduler tcp://scheduler:8786

Table options (as serve's) apply to the --table before them; no --table
builds one table, 'replay'. Item options are push's. The dataset is read
twice: checked and counted, then built. A table whose --max-size is below
the items keeps the newest (what a FIFO remover leaves), with a warning.
DIR must be new or empty (exit 2 otherwise): a server loads one checkpoint,
so to add data, build all of it into a new DIR (--dataset repeats). The
checkpoint's DONE file is written last: a failed or interrupted build leaves
nothing (nor a DIR it made); a killed one leaves an unfinished build, which
serve and build refuse and name. A build is a seed: serve it with
--from-checkpoint DIR, the same table names (and --n-step, --images
options), without the other table options (the checkpoint's settings
replace them); the server's own checkpoints go to a --checkpoint-dir of
their own, and the build stays as it is for the next run. --workers N
builds in N processes; --servers S writes one checkpoint per server
(episode I goes to server I % S, as 'push --workers' spreads them) into
DIR/server-K-of-S. --runner builds as an Apache Beam pipeline (pip install
"rlds_reverb[beam]"), --runner dask on a Dask cluster (--dask-scheduler's,
or a local one of --workers processes); DIR must then be storage every
worker shares. A server's checkpoint is written only if each of its
episodes arrived once.
exit status: 0 built, 1 failure, 2 bad usage or input, 130 interrupted.
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser)
  parser.add_argument('--out', required=True, metavar='DIR',
                      help=('a new or empty directory; the checkpoint goes '
                            'into DIR/<time> (serve --from-checkpoint DIR '
                            'loads it)'))
  # Gone: refused with what to do instead (`check_usage`).
  parser.add_argument('--append', action='store_true', help=argparse.SUPPRESS)
  parser.add_argument('--workers', type=options.positive_int, default=1,
                      metavar='N',
                      help='build in N processes (default: %(default)s)')
  parser.add_argument('--servers', type=options.positive_int, default=1,
                      metavar='S',
                      help=('write one checkpoint per server, episode I to '
                            'server I %% S, into DIR/server-K-of-S '
                            '(default: %(default)s, into DIR)'))
  push.add_item_arguments(parser)
  runner.add_arguments(parser)
  table_flags.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
  configured = table_flags.table_options(args)
  check_usage(args)
  item_options = push.item_options_of(args)
  roots = server_roots(args.out, args.servers)
  _check_out(args.out)
  made = not os.path.exists(args.out)
  try:
    if args.runner:
      results = runner.build(args, configured, item_options)
    elif args.workers > 1 or args.servers > 1:
      results = _built_by_workers(args, configured, item_options)
    else:
      results = [_checked_build(args, configured, item_options)]
    if len(roots) > 1:
      _record(args, roots)
  except KeyboardInterrupt as e:
    if args.runner:  # Its workers stopped since: what they left.
      _remove_unfinished(args.out, args.servers, made)
    raise output.CliError(_interrupted_text(args.out, roots),
                          output.EXIT_INTERRUPTED) from e
  names = [table.name for table in configured]
  for result in results:
    push_shared.note_skipped([vars(episode) for episode in result.skipped])
    print(summary_text(result, names), flush=True)
  # One command serves them all: many servers start one process each.
  which = f'all {len(roots)} servers' if len(roots) > 1 else 'it'
  print(f'serve {which}: {serve_command(args, configured, args.out)}',
        flush=True)
  for line in after_build_notes(args):
    output.note(line)
  return output.EXIT_OK


def _record(args: argparse.Namespace, roots: Sequence[str]) -> None:
  """The dataset read, beside the build, so that its serve need not sign it
  again (`build_record`); a record not written only costs that serve time."""
  from rlds_reverb.cli import build_record  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    build_record.write(args, args.out, roots)
  except OSError as e:
    output.note(f'could not write {build_record.RECORD} into {args.out} '
                f'({output.error_line(e)}): its serve signs the dataset '
                'again')


def after_build_notes(args: argparse.Namespace) -> List[str]:
  """What to know about the serve command printed: where the server's own
  checkpoints go, and, if the build had table options, why serve has none."""
  lines = ['(the build is a seed, never changed: add --checkpoint-dir with a '
           "new directory to keep the server's own checkpoints)"]
  if any(table_flags.given_options(args).values()):
    lines.append("(serve needs only the table names: the checkpoint's "
                 'table settings replace its table options)')
  return lines


def server_roots(out: str, servers: int) -> List[str]:
  """Where each server loads from: `out`, or out/server-K-of-S."""
  from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return [parts.server_root(out, server, servers)
          for server in range(servers)]


def check_usage(args: argparse.Namespace) -> None:
  """Combinations of options that cannot run: exit 2, before any work."""
  problems = options.image_usage_problems(args)
  problems.append((args.append, APPEND_GONE))
  problems += runner.usage_problems(args)
  if args.n_step:
    problems.append((not args.runner and (args.workers > 1 or
                                          args.servers > 1),
                     '--n-step builds in one process, one checkpoint, or '
                     'with --runner: drop --workers and --servers, or add '
                     '--runner'))
    problems.append((args.gamma is None,
                     '--n-step needs --gamma G (0 <= G <= 1)'))
    problems += [(given, f'--n-step builds transitions, not trajectories: '
                         f'drop {option}')
                 for given, option in (
                     (args.sequence_length != 2, '--sequence-length'),
                     (args.stride != 1, '--stride'),
                     (args.pad_end_of_episodes, '--pad-end-of-episodes'),
                     (args.on_invalid != 'raise', '--on-invalid skip'))]
  else:
    problems.append((args.gamma is not None, '--gamma goes with --n-step'))
  for failed, message in problems:
    if failed:
      raise output.CliError(message, output.EXIT_USAGE)


APPEND_GONE = (
    '--append is gone: a server loads only the newest checkpoint of a '
    'directory, so a second build there hid the first. Build all the data '
    'into a new --out instead: --dataset OLD --dataset MORE')


def _check_out(out: str) -> None:
  """--out: new or empty, and one we can write (exit 2); made only once
  the build writes, so a build that fails first leaves nothing."""
  from rlds_reverb.checkpoints import writer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  problem = checkpoints.writable_error(out, create=False)
  if not problem:
    problem = writer.not_empty_text(checkpoints.find(out))
    if problem:
      problem += '; give a new or empty directory'
  if problem:
    raise output.CliError(f'--out: {problem}', output.EXIT_USAGE)


def _checked_build(args, configured, item_options):
  """The dataset loaded and its spec checked (usage errors: exit 2), then
  built."""
  rlds_data = options.load(args)
  step_format, spec = options.step_format(args, rlds_data)
  if not args.n_step:
    push_shared.check_chunk_length(item_options, len(configured), spec)
  output.note_data(step_format.notes())
  return _build(args, rlds_data, configured, item_options)


def _built_by_workers(args, configured, item_options):
  """`build_shards`: the dataset by name, read again in each process."""
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with _warnings_as_lines():
    return parallel.build_shards(
        args.dataset, args.out, configured, workers=args.workers,
        servers=args.servers, split=args.split, data_dir=args.data_dir,
        on_invalid=args.on_invalid, options=item_options)


def _build(args, rlds_data, configured, item_options):
  """The library's build, with progress bars and warnings as lines."""
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import errors  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  bars = progress_lib.BuildProgress(total=options.episode_count(rlds_data))
  try:
    with bars, _warnings_as_lines(), options.reading(args):
      if args.n_step:
        return rlds_reverb.build_nstep_checkpoint(
            rlds_data, args.out, configured, n=args.n_step,
            discount=args.gamma, options=item_options,
            on_read=bars.on_read, on_built=bars.on_built)
      return rlds_reverb.build_checkpoint(
          rlds_data, args.out, configured, options=item_options,
          on_invalid=args.on_invalid,
          on_read=bars.on_read, on_built=bars.on_built)
  except errors.DataReadError as e:
    raise output.CliError(str(e), output.EXIT_USAGE) from e
  except errors.MalformedEpisodeError as e:
    raise output.CliError(f'{e} {push_shared.MALFORMED_HINT}') from e


@contextlib.contextmanager
def _warnings_as_lines():
  """The build's warnings (a table too small, episodes too short), each a
  'warning:' line on stderr as it is issued, before anything is written."""
  from rlds_reverb.errors import CapacityWarning  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import ShortEpisodesWarning  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  ours = (CapacityWarning, ShortEpisodesWarning)
  with warnings.catch_warnings():
    shown = warnings.showwarning
    for category in ours:
      warnings.simplefilter('always', category)

    def show(message, category, *rest, **keywords):
      if issubclass(category, ours):
        output.note(f'warning: {message}')
      else:
        shown(message, category, *rest, **keywords)
    warnings.showwarning = show
    yield


def _remove_unfinished(out: str, servers: int, made: bool) -> None:
  """The parts that workers of an interrupted --runner build wrote after
  the library's own clean-up (a local cluster's run until it is closed);
  --out too if this build made it and it is left empty."""
  from rlds_reverb.checkpoints import parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  parts.remove_unfinished(out, servers, made)


def _interrupted_text(out: str, roots: Sequence[str]) -> str:
  """What a Ctrl-C left in --out (new or empty before the build): nothing,
  as the library removes what it had not finished; or, when it came once
  every DONE was written, the whole build."""
  done = [found.path(found.newest) for found in map(checkpoints.find, roots)
          if found.newest]
  if done and len(done) == len(roots):
    return (f'interrupted after the build was complete: '
            f'{wording.noun(len(done), "its checkpoint", "its checkpoints")}'
            f' {", ".join(done)} {wording.noun(len(done), "is", "are")} whole'
            ' and kept')
  if done:
    return (f'interrupted; {", ".join(done)} '
            f'{wording.noun(len(done), "is", "are")} whole, but the other '
            f"servers' checkpoints were not written: remove {out} and build "
            'again')
  left = (f'{out} holds no checkpoint' if os.path.exists(out)
          else f'{out} was not made')
  return f'interrupted; nothing was written ({left})'


def summary_text(result, names: Sequence[str]) -> str:
  """The checkpoint and what it holds, on one line."""
  held = ', '.join(_held_text(result, name) for name in names)
  skipped = (f', {wording.number(result.skipped_episodes)} skipped'
             if result.skipped_episodes else '')
  return (f'built {result.path}: '
          f'{wording.count(result.episodes, "episode")}{skipped}; {held}; '
          f'{wording.size(result.bytes)} on disk; {result.seconds:.2f} s')


def _held_text(result, name: str) -> str:
  held = f'{wording.count(result.held(name), "item")} in {name!r}'
  evicted = dict(result.evicted).get(name, 0)
  if evicted:
    held += (f' (the oldest {wording.number(evicted)} of '
             f'{wording.number(result.items)} left out by its max_size)')
  return held


def serve_command(args: argparse.Namespace, configured, root: str) -> str:
  """The `serve` command that starts from the checkpoint: the dataset, what
  the signature depends on (--n-step, --images ...), and the table names
  only."""
  words: List[str] = ['rlds-reverb', 'serve']
  for source in args.dataset:
    words += ['--dataset', source]
  if args.split != 'train':
    words += ['--split', args.split]
  if args.data_dir:
    words += ['--data-dir', args.data_dir]
  if args.strict:
    words.append('--strict')
  words += ['--from-checkpoint', root]
  if args.n_step:
    words.append('--n-step')
  if args.images != 'raw':
    words += ['--images', args.images]
    if args.image_format != 'png':
      words += ['--image-format', args.image_format]
    for field in args.image_field or ():
      words += ['--image-field', field]
  for table in configured:
    words += ['--table', table.name]
  return shlex.join(words)
