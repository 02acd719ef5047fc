"""`rlds-reverb push`: a dataset into tables of a running Reverb server.

    dataset [shard I/N] --> check server, tables, signatures   (nothing written
        --> read it all: malformed / flagged / empty episodes,   if any fails)
            items per table -> warn: eviction, blocking limiter
        --> [--resume: skip the episodes already confirmed]
        --> rlds_reverb.push (progress saved after each confirmation)
        --> confirmed counts: a summary line or one JSON object

Episodes flagged invalid in their metadata ('invalid' / 'is_invalid') and
empty episodes are skipped. A malformed episode fails the push before anything
is written ('--on-invalid raise') or is left out ('--on-invalid skip').
Errors name episodes by their position in the dataset (or shard) as given.
'--workers N' runs N such pushes over the N shards (`cli.workers`).
"""

import argparse
import functools

from rlds_reverb import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import progress as progress_lib

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
last confirmed, writing at most the episodes in flight again.
exit status: 0 every item confirmed, 1 failure, 2 bad usage or input.
"""

# Malformed episodes named on stderr by '--on-invalid skip'.
LISTED_SKIPS = 5


def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser)
  parser.add_argument('--server', required=True, metavar='HOST:PORT',
                      help='the Reverb server')
  parser.add_argument('--table', required=True, action='append',
                      help='a table to write to; repeat for several')
  parser.add_argument('--sequence-length', type=options.positive_int, default=2,
                      metavar='L', help='steps per item (default: %(default)s)')
  parser.add_argument('--stride', type=options.positive_int, default=1, metavar='S',
                      help='steps between item starts (default: %(default)s)')
  parser.add_argument('--pad-end-of-episodes', action='store_true',
                      help='pad an episode shorter than an item to one item')
  parser.add_argument('--priority', type=float, default=1.0,
                      help="every item's priority (default: %(default)s)")
  parser.add_argument('--chunk-length', type=options.chunk_length,
                      action='append', default=None, metavar='[FIELD=]N',
                      help=('steps per chunk on the server, for every field '
                            '(N) or one field or prefix (FIELD=N); repeat; '
                            "default: by each field's bytes per step"))
  parser.add_argument('--on-invalid', choices=('raise', 'skip'),
                      default='raise',
                      help=('malformed episodes: fail before writing, or '
                            'leave them out (default: %(default)s)'))
  parser.add_argument('--timeout', type=float, default=30.0, metavar='SEC',
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
  options.add_json_flag(parser, 'the counts')


def run(args: argparse.Namespace) -> int:
  if args.timeout <= 0:
    raise output.CliError(f'--timeout must be > 0, got {args.timeout:g}',
                          output.EXIT_USAGE)
  if args.workers > 1:
    if args.shard is not None:
      raise output.CliError('--workers runs the shards itself; drop --shard',
                            output.EXIT_USAGE)
    from rlds_reverb.cli import workers  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    return workers.run(args)
  summary = push_one(args)
  print_summary(summary, args.json)
  return output.EXIT_OK


def push_one(args: argparse.Namespace) -> dict:
  """Checks, then pushes one dataset or shard; returns the summary dict."""
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import resume  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write.push import check_tables  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  rlds_data = options.load(args, shard=args.shard)
  _, spec = options.step_and_trajectory_spec(rlds_data)
  _check_chunk_length(args, spec)
  infos = check_tables(args.server, args.table, spec, timeout=args.timeout)
  report = _precheck(rlds_data, args)
  skip = _episodes_to_skip(report, args.on_invalid)
  kept = sorted(set(range(report.episodes)) - set(skip))
  end_of_episode = (rlds_reverb.EndOfEpisode.PAD if args.pad_end_of_episodes
                    else rlds_reverb.EndOfEpisode.DROP)
  _warn_capacity(infos, report, kept, args, end_of_episode)
  state = resume.State(_resume_key(args, len(kept)))
  if args.resume:
    state = _load_state(args, state.key)
  recorder = resume.Recorder(args.resume, state) if args.resume else None
  if state.complete:
    output.note(f'{args.resume} says this push is complete; nothing to do')
    return _summary(None, skip, state)
  result = _write(rlds_data, args, skip, kept, state, recorder, end_of_episode,
                  report)
  if recorder is not None:
    recorder.finish(result.episodes, result.items)
  return _summary(result, skip, state)


def _check_chunk_length(args, spec) -> None:
  """A --chunk-length naming no field, or too long, is a usage error."""
  from rlds_reverb.write import chunks  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import columns  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    chunks.check_option(
        options.chunk_length_option(args.chunk_length),
        columns.columns_of(spec),
        chunks.max_chunk_length(len(args.table), args.stride))
  except ValueError as e:
    raise output.CliError(f'--chunk-length: {e}', output.EXIT_USAGE) from e


def _precheck(rlds_data, args):
  """Reads every episode before writing: a corrupt record fails here."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import validation  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    return validation.validate(rlds_data)
  except tf.errors.OpError as e:
    raise output.CliError(
        f'cannot read {_dataset_text(args)}: {output.error_line(e)}; nothing '
        f'was written') from e


def _episodes_to_skip(report, on_invalid: str):
  """Sorted positions to leave out: flagged, empty, malformed if skipped."""
  malformed = report.malformed_episodes
  if malformed and on_invalid == 'raise':
    problem = report.problems[0]
    raise output.CliError(
        f'{problem.message} (episode {problem.episode}, step {problem.step}); '
        f'{wording.count(len(malformed), "malformed episode")} in all, '
        f'nothing was written '
        f"('rlds-reverb validate' lists them, '--on-invalid skip' leaves them "
        f'out)')
  _note_malformed(report)
  return sorted(set(report.flagged_invalid) | set(report.empty_episodes) |
                set(malformed))


def _warn_capacity(infos, report, kept, args, end_of_episode) -> None:
  from rlds_reverb.write import capacity  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import items as items_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  plan = items_lib.SequenceItems(args.sequence_length, args.stride,
                                 end_of_episode)
  items = sum(len(plan.plan(report.lengths[i]).item_ends) for i in kept)
  for message in capacity.warnings_for(infos, items):
    output.note(f'warning: {message}')


def _resume_key(args, num_episodes: int) -> dict:
  """What must be equal for a saved state to apply to this push."""
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return {
      'dataset': sources.describe(args.dataset, args.data_dir),
      'split': args.split,
      'shard': None if args.shard is None else '/'.join(map(str, args.shard)),
      'server': args.server,
      'tables': list(args.table),
      'sequence_length': args.sequence_length,
      'stride': args.stride,
      'pad_end_of_episodes': args.pad_end_of_episodes,
      'priority': args.priority,
      'on_invalid': args.on_invalid,
      'episodes_to_write': num_episodes,
  }


def _load_state(args, key):
  from rlds_reverb import resume  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import ResumeStateError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    state = resume.load(args.resume, key)
  except ResumeStateError as e:
    raise output.CliError(str(e), output.EXIT_USAGE) from e
  if state.confirmed_episodes and not state.complete:
    confirmed = wording.count(state.confirmed_episodes, 'confirmed episode')
    output.note(f'resuming from {args.resume} after {confirmed}')
  return state


def _write(rlds_data, args, skip, kept, state, recorder, end_of_episode,
           report):
  """The push itself, from the first episode not yet confirmed."""
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import validation  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  done = state.confirmed_episodes
  remaining = validation.without_episodes(rlds_data, skip).skip(done)
  total_steps = sum(report.lengths[i] for i in kept[done:])
  try:
    with progress_lib.PushProgress(total=total_steps) as progress:
      callbacks = [progress.on_confirmed] + (
          [recorder.on_confirmed] if recorder else [])
      return rlds_reverb.push(
          remaining, args.server, args.table,
          sequence_length=args.sequence_length, stride_length=args.stride,
          priority=args.priority, end_of_episode=end_of_episode,
          timeout=args.timeout,
          chunk_length=options.chunk_length_option(args.chunk_length),
          on_confirmed=functools.partial(_call_each, callbacks))
  except tf.errors.InvalidArgumentError as e:
    raise output.CliError(
        output.remap_episode(output.error_line(e), kept[done:])) from e
  except rlds_reverb.RldsReverbError as e:
    if recorder is not None:
      confirmed = wording.count(recorder.state.confirmed_episodes, 'episode')
      e.add_note(f'Progress is saved in {args.resume} ({confirmed} confirmed '
                 f'in all): run the same command again to continue.')
    raise


def _call_each(callbacks, progress) -> None:
  for callback in callbacks:
    callback(progress)


def _summary(result, skip, state) -> dict:
  """The counts of this run (0 if nothing was left to write)."""
  return {
      'episodes': result.episodes if result else 0,
      'trajectories': result.trajectories if result else 0,
      'items': result.items if result else 0,
      'skipped_episodes': (len(skip) +
                           (result.skipped_episodes if result else 0)),
      'resumed_after_episodes': state.confirmed_episodes,
      'seconds': round(result.seconds, 3) if result else 0.0,
  }


def _dataset_text(args) -> str:
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  shard = ('' if args.shard is None
           else f' shard {args.shard[0]}/{args.shard[1]}')
  return f'{sources.describe(args.dataset, args.data_dir)}{shard}'


def _note_malformed(report) -> None:
  episodes = report.malformed_episodes
  if not episodes:
    return
  first = {}
  for problem in report.problems:
    first.setdefault(problem.episode, problem)
  listed = '; '.join(
      f'episode {e} step {first[e].step} ({first[e].kind})'
      for e in episodes[:LISTED_SKIPS])
  more = f'; and {len(episodes) - LISTED_SKIPS} more' if len(
      episodes) > LISTED_SKIPS else ''
  output.note(f'skipping {wording.count(len(episodes), "malformed episode")}: '
              f'{listed}{more}')


def print_summary(summary: dict, as_json: bool) -> None:
  if as_json:
    output.print_json(summary)
    return
  rate = summary['trajectories'] / max(summary['seconds'], 1e-9)
  resumed = summary['resumed_after_episodes']
  after = f' after {resumed} confirmed before' if resumed else ''
  print(f"pushed {wording.count(summary['episodes'], 'episode')}{after}, "
        f"{wording.count(summary['trajectories'], 'step')}, "
        f"{wording.count(summary['items'], 'item')} in "
        f"{summary['seconds']:.2f} s ({rate:,.0f} steps/s); skipped "
        f"{wording.count(summary['skipped_episodes'], 'episode')}",
        flush=True)
