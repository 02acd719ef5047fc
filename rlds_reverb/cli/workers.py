"""`rlds-reverb push --workers N`: the checked push of each shard, in N processes.

    rlds-reverb push ... --workers 2
      -> parallel.run_shards: processes running checked_push.source_job on
         shard 0/2 and 1/2 (with --resume S.json: S.0-of-2.json, S.1-of-2.json)
      -> a warning per table that held items before any shard wrote (once)
      -> each shard's warnings and skipped episodes, prefixed with its shard
      -> the sum of their counts, or each failure's error line; interrupted
         (Ctrl-C), 'interrupted.' and what each shard confirmed, exit 130;
         killed (kill -9), the workers end with it (`_util.lifeline`)

The library runs the shards (`rlds_reverb.parallel`, what `push_shards`
runs); this module prints. Workers run to their end even when another
fails, so every worker's count is known. A worker's error that lists fields
keeps its lines, under the summary, prefixed with its shard. This process
imports no TensorFlow: the workers have the cores to themselves.
"""

import argparse
import time
from typing import Optional

from rlds_reverb._util import wording
from rlds_reverb.cli import output
from rlds_reverb.cli import push_shared


def run(args: argparse.Namespace, push_options, checks) -> int:
  """The shards of the dataset pushed with `push_options` and `checks`
  (`PushOptions`, `CheckOptions`), sent whole to every worker."""
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  start = time.perf_counter()
  outcomes = parallel.run_shards(
      args.dataset, args.server, args.table, workers=args.workers,
      split=args.split, data_dir=args.data_dir, options=push_options,
      checks=checks)
  for message in parallel.held_warnings(outcomes, args.server):
    output.note(f'warning: {message}')
  done = [outcome for outcome in outcomes if outcome.result is not None]
  for outcome in done:
    _note(outcome)
  total = parallel.summed(outcomes)
  output.note_data(total['notes'])
  if any(outcome.interrupted for outcome in outcomes):
    raise output.CliError(_interrupted_text(outcomes, args.resume),
                          output.EXIT_INTERRUPTED)
  failed = [outcome for outcome in outcomes if outcome.result is None]
  if failed:
    raise output.CliError(_failure_text(failed, done, args.workers))
  summary = push_shared.summary_of({
      **total,
      # The workers push at the same time: the longest one's push time.
      'seconds': max(outcome.result['seconds'] for outcome in done)})
  summary['wall_seconds'] = round(time.perf_counter() - start, 3)
  summary['workers'] = args.workers
  push_shared.print_summary(summary, args.json)
  return output.EXIT_OK


def _interrupted_text(outcomes, resume: Optional[str]) -> str:
  """'interrupted.', then what each shard confirmed, as one push says it."""
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  parts = parallel.interrupted_notes(outcomes)
  if not resume:
    parts.append(push_shared.NO_RESUME_HINT)
  return f'interrupted. {" | ".join(parts)}'


def _failure_text(failed, done, workers: int) -> str:
  """A line naming each failed shard and its error, then the errors' fields.

  An error that lists fields (`output.lists_fields`) has its message in that
  line and each field under it, as '  shard I/N: <field note>'.
  """
  from rlds_reverb import parallel  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  firsts, details = [], []
  for outcome in failed:
    if output.lists_fields(outcome.error_type):
      firsts.append(f'shard {outcome.shard}: {outcome.error}')
      details += [f'shard {outcome.shard}: {note}' for note in outcome.notes]
    elif outcome.error_type == 'MalformedEpisodeError':  # Python hints out.
      firsts.append(f'shard {outcome.shard}: {outcome.error} '
                    f'{push_shared.MALFORMED_HINT}')
    else:
      firsts.append(parallel.failure_text(outcome))
  summary = f'{len(failed)} of {workers} workers failed: {" | ".join(firsts)}'
  if done:
    others = wording.count(len(done), 'other')
    confirmed = wording.count(sum(o.result['episodes'] for o in done),
                              'episode')
    summary += f' | the {others} confirmed {confirmed}'
  return output.with_details(summary, details)


def _note(outcome) -> None:
  """A shard's warnings and skipped episodes, as one push would print them
  (its notes on the data are every shard's, printed once)."""
  push_shared.note_found({**outcome.result, 'notes': ()},
                         f'shard {outcome.shard}: ')
