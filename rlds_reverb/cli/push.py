"""`rlds-reverb push`: a dataset into tables of a running Reverb server.

    arguments --> PushOptions (what is written), CheckOptions (what the
                  checks do), made once here (`options_of`, `checks_of`)
              --> one process: checked_push.CheckedPush on the dataset [shard]
                    check() -> notes: capacity warnings, skipped, resumed
                    write() -> a progress bar, confirmed counts
              --> --workers N: parallel.run_shards, the same push per shard
              --> --runner R: rlds_reverb.beam.push, a Beam pipeline
              --> a summary line or one JSON object

The checks and the push are the library's (`rlds_reverb.checked_push`); this
module reads the arguments, maps usage errors to exit code 2, and prints.
Errors name episodes by their position in the dataset (or shard) as given.
"""

import argparse
import dataclasses

from rlds_reverb import servers_file
from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import progress as progress_lib
from rlds_reverb.cli import push_shared
from rlds_reverb.cli import runner
from rlds_reverb.push_options import CheckOptions
from rlds_reverb.push_options import PushOptions

HELP = 'write a dataset into tables of a running Reverb server'
DESCRIPTION = ('Writes an RLDS dataset as fixed-length trajectory items '
               'into Reverb tables and waits until the server confirmed '
               'every item.')
EPILOG = """\
examples:
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay
  rlds-reverb push --dataset DIR --server localhost:8000 --table a --table b \\
      --sequence-length 3 --stride 2 --pad-end-of-episodes --json
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay \\
      --on-invalid skip --resume push_state.json
  rlds-reverb push --dataset DIR --server host:8000 --table replay --shard 3/16
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay \\
      --workers 2
  rlds-reverb push --dataset DIR --server served/servers.json \\
      --table replay --workers 2
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay \\
      --runner DirectRunner --beam-option direct_num_workers=2 \\
      --beam-option direct_running_mode=multi_processing
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay \\
      --runner dask --workers 2
  rlds-reverb push --dataset DIR --server host:8000 --table replay \\
      --runner dask --dask-scheduler tcp://scheduler:8786
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay \\
      --chunk-length 16 --chunk-length observation/pixels=2

The table(s) must exist; a signed table must have the signature
'rlds-reverb serve' gives it. Items are those of TF-Agents'
ReverbAddTrajectoryObserver(sequence_length, stride_length). The dataset is
read once before writing (to check it and count items), then again to write.
'--shard I/N' takes the I-th of N even parts of the split (TFDS split
slicing, exact to the episode). '--chunk-length' changes how the server
stores the items (memory, sampling speed), never the items themselves.
With '--resume FILE', progress is saved after
each confirmation; the same command run again continues where the server
last confirmed (after Ctrl-C, inside the episode it interrupted: every item
once), writing again at most the episodes in flight when a push was killed.
A table that already holds items is warned of before writing; the push adds
to them.
A '--server' ending in .json is a servers file ('serve' of a build of many
servers writes one): it stands for its servers, in server order, as if each
were given as '--server' there.
'--runner' runs the push as an Apache Beam pipeline (pip install
"rlds_reverb[beam]"): each episode is checked as it is read, episode I goes
to the I % S-th '--server', and a retried part may be written twice; the
push fails unless every episode was written or skipped once. '--runner
dask' runs on a Dask cluster: --dask-scheduler's, or a local one of
--workers processes.
exit status: 0 every item confirmed, 1 failure, 2 bad usage or input.
"""

def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser)
  parser.add_argument('--server', required=True, action='append',
                      type=options.server_or_servers_file,
                      metavar='HOST:PORT|SERVERS.json',
                      help=('the Reverb server; repeat with --workers or '
                            '--runner to spread the data over several; a '
                            "servers file ('serve' of a build of many "
                            'servers writes it) stands for its servers, in '
                            'server order'))
  parser.add_argument('--table', required=True, action='append',
                      help='a table to write to; repeat for several')
  add_item_arguments(parser)
  parser.add_argument('--timeout', type=options.seconds, default=30.0,
                      metavar='SEC',
                      help=('seconds to wait for the server at any one point '
                            '(default: %(default)s)'))
  parser.add_argument('--shard', type=options.shard, default=None,
                      metavar='I/N',
                      help='push only the I-th (0-based) of N parts')
  parser.add_argument('--workers', type=options.positive_int, default=1,
                      metavar='N',
                      help=('run N processes, one per shard I/N, and sum '
                            'their counts (default: %(default)s)'))
  parser.add_argument('--resume', default=None, metavar='STATE.json',
                      help=('save progress there after each confirmation and '
                            'continue from it when run again (with --workers, '
                            'one file per shard: STATE.I-of-N.json)'))
  parser.add_argument('--resume-anyway', action='store_true',
                      help=('with --resume: continue after the confirmed '
                            'episodes even when a table has lost them (a '
                            'server restarted without a checkpoint)'))
  runner.add_arguments(parser)
  options.add_json_flag(parser, 'the counts')


def add_item_arguments(parser: argparse.ArgumentParser) -> None:
  """What the items are and how they are stored: push's and build's."""
  parser.add_argument('--sequence-length', type=options.positive_int, default=2,
                      metavar='L', help='steps per item (default: %(default)s)')
  parser.add_argument('--stride', type=options.positive_int, default=1, metavar='S',
                      help='steps between item starts (default: %(default)s)')
  parser.add_argument('--n-step', type=options.positive_int, default=None,
                      metavar='N',
                      help=('write n-step transitions (observation, action, '
                            'discounted reward, discount, next observation; '
                            'Acme\'s arithmetic) instead of trajectories; '
                            'with --gamma; into a table served with --n-step'))
  parser.add_argument('--gamma', type=options.gamma, default=None,
                      metavar='G', help='the discount factor of --n-step')
  parser.add_argument('--pad-end-of-episodes', action='store_true',
                      help='pad an episode shorter than an item to one item')
  parser.add_argument('--priority', type=options.priority, default=1.0,
                      help="every item's priority (default: %(default)s)")
  parser.add_argument('--chunk-length', type=options.chunk_length,
                      action='append', default=None, metavar='[FIELD=]N',
                      help=('steps per chunk on the server, for every field '
                            '(N) or one field or prefix (FIELD=N); repeat; '
                            "default: by each field's bytes per step"))
  options.add_image_arguments(parser)
  parser.add_argument('--on-invalid', choices=('raise', 'skip'),
                      default='raise',
                      help=('malformed episodes: fail before writing, or '
                            'leave them out (default: %(default)s)'))


def run(args: argparse.Namespace) -> int:
  expand_servers(args)
  check_usage(args)
  push_options = options_of(args)
  if args.runner:
    return runner.run(args, push_options)
  if args.n_step:
    print_nstep_summary(push_nstep(args, push_options), args)
    return output.EXIT_OK
  if args.workers > 1:
    from rlds_reverb.cli import workers  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    return workers.run(args, push_options, checks_of(args))
  push_shared.print_summary(push_one(args, push_options, checks_of(args)),
                            args.json)
  return output.EXIT_OK


def expand_servers(args: argparse.Namespace) -> None:
  """--server with each servers file replaced by its servers, in server
  order (episode or shard I to server I % S as for --server given so);
  `args.servers_files` keeps (file, servers) for messages."""
  groups = [options.servers_of(given) for given in args.server]
  args.servers_files = [
      (given, len(group)) for given, group in zip(args.server, groups)
      if servers_file.is_servers_file(given)]
  args.server = [address for group in groups for address in group]


def options_of(args: argparse.Namespace) -> PushOptions:
  """What the push writes, from the arguments (checked by argparse and
  `check_usage`); made before TensorFlow loads."""
  return dataclasses.replace(item_options_of(args), timeout=args.timeout)


def item_options_of(args: argparse.Namespace) -> PushOptions:
  """The items and how they are stored (`add_item_arguments`): push's and
  build's."""
  return PushOptions(
      sequence_length=args.sequence_length, stride_length=args.stride,
      end_of_episode='pad' if args.pad_end_of_episodes else 'drop',
      priority=args.priority,
      chunk_length=options.chunk_length_option(args.chunk_length),
      image_storage=options.image_storage(args), strict=args.strict)


def checks_of(args: argparse.Namespace) -> CheckOptions:
  """What the push's checks do with malformed episodes and earlier runs."""
  return CheckOptions(on_invalid=args.on_invalid, resume=args.resume,
                      resume_anyway=args.resume_anyway)


def check_usage(args: argparse.Namespace) -> None:
  """Combinations of options that cannot run: exit 2, before any work."""
  problems = [
      (args.workers > 1 and args.shard is not None,
       '--workers runs the shards itself; drop --shard'),
      (bool(args.runner) and args.shard is not None,
       '--runner splits the data itself; drop --shard'),
      (bool(args.runner) and bool(args.resume),
       '--runner retries failed bundles instead of resuming; drop --resume'),
      (args.resume_anyway and not args.resume,
       '--resume-anyway goes with --resume'),
      (len(args.server) > 1 and not (args.runner or args.workers > 1),
       'Several --server need --workers or --runner, which spread the data '
       f'over them{_listed(args)}'),
      (len(set(args.table)) < len(args.table),
       f'--table {_repeated(args.table)} is given more than once: every item '
       f'would be written that many times into it'),
  ]
  for failed, message in (problems + runner.usage_problems(args) +
                          _nstep_problems(args) +
                          options.image_usage_problems(args)):
    if failed:
      raise output.CliError(message, output.EXIT_USAGE)


def _listed(args: argparse.Namespace) -> str:
  """' (PATH lists S servers)' for each servers file among --server."""
  listed = [f'{path} lists {wording.count(count, "server")}'
            for path, count in args.servers_files]
  return f' ({"; ".join(listed)})' if listed else ''


def _nstep_problems(args: argparse.Namespace):
  """--n-step writes transitions in one process, each episode as read."""
  if not args.n_step:
    return [(args.gamma is not None, '--gamma goes with --n-step')]
  kept_out = [(args.sequence_length != 2, '--sequence-length'),
              (args.stride != 1, '--stride'),
              (args.pad_end_of_episodes, '--pad-end-of-episodes'),
              (args.on_invalid != 'raise', '--on-invalid skip'),
              (bool(args.resume), '--resume'),
              (args.workers > 1, '--workers'),
              (bool(args.runner), '--runner')]
  return [(args.gamma is None, '--n-step needs --gamma G (0 <= G <= 1)')] + [
      (given, f'--n-step writes transitions, not trajectories, in one '
              f'process without resuming: drop {option}')
      for given, option in kept_out]


def push_nstep(args: argparse.Namespace, push_options: PushOptions) -> dict:
  """`push_nstep_transitions` of the dataset (or shard); its summary."""
  from rlds_reverb import checked_push  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  rlds_data = options.load(args, shard=args.shard)
  result = checked_push.push_nstep_transitions(
      rlds_data, args.server[0], args.table, n=args.n_step,
      discount=args.gamma, options=push_options)
  for message in result.warnings:  # Tables that held items before.
    output.note(f'warning: {message}')
  return push_shared.summary_of(result)


def print_nstep_summary(summary: dict, args: argparse.Namespace) -> None:
  if args.json:
    output.print_json(summary)
    return
  print(f"pushed {wording.count(summary['episodes'], 'episode')}, "
        f"{wording.count(summary['trajectories'], 'transition')} of "
        f"{args.n_step} steps (gamma {args.gamma:g}), "
        f"{wording.count(summary['items'], 'item')} in "
        f"{summary['seconds']:.2f} s")
  push_shared.note_found({'warnings': [], 'notes': summary['notes'],
                          'skipped': []})


def _repeated(values) -> str:
  """The first value given more than once, or ''."""
  return next((value for value in values if values.count(value) > 1), '')


def push_one(args: argparse.Namespace, push_options: PushOptions,
             checks: CheckOptions) -> dict:
  """Checks, then pushes one dataset or shard; returns the summary dict."""
  from rlds_reverb import checked_push  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  rlds_data = options.load(args, shard=args.shard)
  push_shared.checked_spec(args, push_options, rlds_data)
  job = checked_push.CheckedPush(
      rlds_data, args.server[0], args.table, push_options, checks,
      source=checked_push.Source(args.dataset, args.split, args.data_dir,
                                 args.shard))
  plan = _check(job, options.episode_count(rlds_data))
  _note_plan(plan, args.resume)
  try:
    with progress_lib.PushProgress(total=plan.steps) as progress:
      result = job.write(on_confirmed=progress.on_confirmed)
  except KeyboardInterrupt as e:
    if not args.resume:
      e.add_note(push_shared.NO_RESUME_HINT)
    raise
  return push_shared.summary_of(result)


def _check(job, episodes):
  """`job.check()` with a bar of episodes read ahead; bad input (a resume
  file of another push, one that cannot be written) exits 2."""
  from rlds_reverb import errors  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    with progress_lib.ReadProgress(total=episodes) as reading:
      return job.check(on_read=reading.on_read)
  except (errors.ResumeStateError, errors.DataReadError) as e:
    raise output.CliError(str(e), output.EXIT_USAGE) from e
  except errors.MalformedEpisodeError as e:
    raise output.CliError(f'{e} {push_shared.MALFORMED_HINT}') from e


def _note_plan(plan, resume_path) -> None:
  """What the checks found, on stderr, before anything is written."""
  push_shared.note_found({'warnings': plan.warnings, 'notes': plan.notes,
                          'skipped': [vars(e) for e in plan.skipped]})
  if plan.state.complete:
    output.note(f'{resume_path} says this push is complete; nothing to do')
  elif plan.state.confirmed_items or plan.state.confirmed_episodes:
    output.note(f'resuming from {resume_path} after {plan.state_text()} '
                f'confirmed')
