"""`rlds-reverb push`: a dataset into tables of a running Reverb server.

    dataset -> [skip flagged / malformed episodes] -> rlds_reverb.push
            -> confirmed counts: a summary line or one JSON object

Episodes flagged invalid in their metadata ('invalid' / 'is_invalid') are
always skipped. A malformed episode fails the push ('--on-invalid raise') or,
with '--on-invalid skip', is found by a validation pass first and left out.
Skipped episodes count in 'skipped_episodes'. Errors name episodes by their
position in the dataset as given, whatever was skipped.
"""

import argparse

import numpy as np

from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import progress as progress_lib

_EPILOG = """\
examples:
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay
  rlds-reverb push --dataset DIR --server localhost:8000 --table a --table b \\
      --sequence-length 3 --stride 2 --pad-end-of-episodes --json
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay \\
      --on-invalid skip

The table(s) must exist; a signed table must have the signature
'rlds-reverb serve' gives it. Items are those of TF-Agents'
ReverbAddTrajectoryObserver(sequence_length, stride_length).
"""

# Malformed episodes named on stderr by '--on-invalid skip'.
LISTED_SKIPS = 5


def add_parser(subparsers, common) -> None:
  parser = subparsers.add_parser(
      'push', parents=[common], epilog=_EPILOG,
      formatter_class=argparse.RawDescriptionHelpFormatter,
      help='write a dataset into tables of a running Reverb server',
      description=('Writes an RLDS dataset as fixed-length trajectory items '
                   'into Reverb tables and waits until the server confirmed '
                   'every item.'))
  options.add_arguments(parser)
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
  parser.add_argument('--on-invalid', choices=('raise', 'skip'),
                      default='raise',
                      help=('malformed episodes: fail, or skip them after a '
                            'validation pass (default: %(default)s)'))
  parser.add_argument('--timeout', type=float, default=30.0, metavar='SEC',
                      help=('seconds to wait for the server at any one point '
                            '(default: %(default)s)'))
  parser.add_argument('--json', action='store_true',
                      help='print one JSON object of the counts')
  parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import validation  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  if args.timeout <= 0:
    raise output.CliError(f'--timeout must be > 0, got {args.timeout:g}',
                          output.EXIT_USAGE)
  rlds_data = options.load(args)
  options.step_and_trajectory_spec(rlds_data)
  skip, num_episodes = _episodes_to_skip(rlds_data, args.on_invalid)
  kept = sorted(set(range(num_episodes)) - set(skip))
  end_of_episode = (rlds_reverb.EndOfEpisode.PAD if args.pad_end_of_episodes
                    else rlds_reverb.EndOfEpisode.DROP)
  try:
    with progress_lib.PushProgress() as progress:
      result = rlds_reverb.push(
          validation.without_episodes(rlds_data, skip), args.server,
          args.table, sequence_length=args.sequence_length,
          stride_length=args.stride, priority=args.priority,
          end_of_episode=end_of_episode, timeout=args.timeout,
          on_confirmed=progress.on_confirmed)
  except tf.errors.InvalidArgumentError as e:
    message = output.error_line(e)
    raise output.CliError(
        output.remap_episode(message, kept) if skip else message) from e
  _print_result(result, len(skip), args.json)
  return output.EXIT_OK


def _episodes_to_skip(rlds_data, on_invalid: str):
  """(sorted positions to leave out, episode count or None if not counted)."""
  from rlds_reverb import validation  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  if on_invalid == 'skip':
    report = validation.validate(rlds_data)
    _note_malformed(report)
    skip = set(report.malformed_episodes) | set(report.flagged_invalid)
    return sorted(skip), report.episodes
  if validation.invalid_flag_field(rlds_data.element_spec) is None:
    return [], 0
  flags = validation.episode_flags(rlds_data)
  return [int(i) for i in np.flatnonzero(flags)], len(flags)


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
  output.note(f'skipping {len(episodes)} malformed episode(s): {listed}{more}')


def _print_result(result, skipped: int, as_json: bool) -> None:
  skipped_episodes = result.skipped_episodes + skipped
  if as_json:
    output.print_json({
        'episodes': result.episodes,
        'trajectories': result.trajectories,
        'items': result.items,
        'skipped_episodes': skipped_episodes,
        'seconds': round(result.seconds, 3),
    })
    return
  rate = result.trajectories / max(result.seconds, 1e-9)
  print(f'pushed {result.episodes} episodes, {result.trajectories} steps, '
        f'{result.items} items in {result.seconds:.2f} s ({rate:,.0f} steps/s); '
        f'skipped {skipped_episodes} episode(s)', flush=True)

