"""What the three ways of `rlds-reverb push` share: checks and output.

    cli/push.py (one process) --+   (cli/push.py makes the PushOptions)
    cli/workers.py (--workers) -+--> this module: the checks of the dataset's
    cli/runner.py (--runner) ---+    spec, and what they print before and
                                     after writing

Plain values only in and out (dicts, strings): `--workers` prints its
workers' results without importing TensorFlow.
"""

import argparse
from typing import Any, Dict, List

from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output

# Malformed episodes named on stderr by '--on-invalid skip'.
LISTED_SKIPS = 5
# What the command line says after a malformed episode, instead of the
# library's Python hints (its error's notes).
MALFORMED_HINT = ("('rlds-reverb validate' lists them, '--on-invalid skip' "
                  'leaves them out)')
# What an interrupted push without --resume says about running it again.
NO_RESUME_HINT = ('Without --resume, running this push again writes it all '
                  'again; with --resume FILE, progress is saved at each '
                  'confirmation and a rerun continues.')


def checked_spec(args: argparse.Namespace, push_options, rlds_data):
  """The dataset's trajectory spec, with --chunk-length checked against it.

  An unusable step spec, a --chunk-length naming no field, or one too long,
  is a usage error (exit 2), before anything else. `push_options` are the
  `PushOptions` of the arguments.
  """
  _, spec = options.step_format(args, rlds_data)
  check_chunk_length(push_options, len(args.table), spec)
  return spec


def check_chunk_length(push_options, num_tables: int, spec) -> None:
  """A --chunk-length naming no field, or too long, is a usage error."""
  from rlds_reverb.write import chunks  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import columns  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    chunks.check_option(
        push_options.chunk_length, columns.columns_of(spec),
        chunks.max_chunk_length(num_tables, push_options.stride_length))
  except ValueError as e:
    raise output.CliError(f'--chunk-length: {e}', output.EXIT_USAGE) from e


def note_found(result: Dict[str, Any], prefix: str = '') -> None:
  """What the checks found, on stderr: warnings, notes, skipped episodes.

  `result` is a `PushResult` or `Plan` as a dict (its `warnings`, `notes`
  and `skipped`, each skipped episode a dict).
  """
  for message in result['warnings']:
    output.note(f'{prefix}warning: {message}')
  output.note_data(result['notes'], prefix)
  note_skipped(result['skipped'], prefix)


def note_skipped(skipped: List[Dict[str, Any]], prefix: str = '') -> None:
  """Names the malformed episodes left out (dicts of `SkippedEpisode`)."""
  malformed = [e for e in skipped if e['kind'] not in ('flagged_invalid',
                                                       'empty')]
  if not malformed:
    return
  listed = '; '.join(f"episode {e['position']} step {e['step']} ({e['kind']})"
                     for e in malformed[:LISTED_SKIPS])
  more = (f'; and {wording.number(len(malformed) - LISTED_SKIPS)} more'
          if len(malformed) > LISTED_SKIPS else '')
  output.note(f'{prefix}skipping '
              f'{wording.count(len(malformed), "malformed episode")}: '
              f'{listed}{more}')


def summary_of(result) -> dict:
  """The JSON summary of a `PushResult` (or its dict)."""
  counts = result if isinstance(result, dict) else vars(result)
  return {
      'episodes': counts['episodes'],
      'trajectories': counts['trajectories'],
      'items': counts['items'],
      'skipped_episodes': counts['skipped_episodes'],
      'resumed_after_episodes': counts['resumed_after_episodes'],
      'seconds': round(counts['seconds'], 3),
      'notes': list(counts['notes']),
  }


def print_summary(summary: dict, as_json: bool) -> None:
  if as_json:
    output.print_json(summary)
    return
  rate = summary['trajectories'] / max(summary['seconds'], 1e-9)
  resumed = summary['resumed_after_episodes']
  after = (f' after {wording.number(resumed)} confirmed before' if resumed
           else '')
  print(f"pushed {wording.count(summary['episodes'], 'episode')}{after}, "
        f"{wording.count(summary['trajectories'], 'step')}, "
        f"{wording.count(summary['items'], 'item')} in "
        f"{summary['seconds']:.2f} s ({rate:,.0f} steps/s); skipped "
        f"{wording.count(summary['skipped_episodes'], 'episode')}",
        flush=True)
