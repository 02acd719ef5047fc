"""`rlds-reverb validate`: every problem of a dataset, before pushing it.

Exit 0 when clean, 1 when problems were found (with --strict, NaN or
infinite values too), 2 when the dataset cannot be read or its step spec
cannot be converted.
"""

import argparse

from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import progress

HELP = 'read a whole dataset and report every malformed step'
DESCRIPTION = ('Reads a whole RLDS dataset and reports every step the '
               'converter would reject, with episode and step (0-based), '
               'and the NaN and infinite values of each float field.')
EPILOG = """\
examples:
  rlds-reverb validate --dataset ~/tensorflow_datasets/my_rlds/1.0.0
  rlds-reverb validate --dataset DIR --json | jq '.problems[0]'

Kinds: episode_not_first, terminal_not_last, mid_before_first,
last_before_non_first (the converter's rules). Empty episodes and episodes
flagged by an 'invalid'/'is_invalid' metadata field are listed, not counted as
problems: push skips both. Notes name the fields read otherwise than stored:
a missing discount (1.0) or reward (0.0), a discount or flag of shape (1,)
(--strict refuses those instead). NaN and infinite values are counted per
float field ('observation/position'), with the first episode and step that
holds one: notes, or failures with --strict.
exit status: 0 clean, 1 problems found (with --strict, non-finite values
too), 2 unreadable dataset or bad usage.
"""

# Problems listed in text output; --json lists them all.
MAX_LISTED = 50


def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser)
  options.add_json_flag(parser, 'episodes, steps and problems')


def run(args: argparse.Namespace) -> int:
  from rlds_reverb import validation  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  rlds_data = options.load(args)
  options.step_format(args, rlds_data)
  with options.reading(args), progress.ReadProgress(
      total=options.episode_count(rlds_data)) as reading:
    report = validation.validate(rlds_data, on_read=reading.on_read)
  if args.json:
    output.print_json(report.as_dict())
  else:
    _print_text(report, args.strict)
  failed = report.problems or (args.strict and report.nonfinite)
  return output.EXIT_FAILURE if failed else output.EXIT_OK


def _print_text(report, strict: bool) -> None:
  for message in report.notes:
    print(f'note: {message}')
  for found in report.nonfinite:
    print(found.message if strict else f'note: {found.message}')
  for problem in report.problems[:MAX_LISTED]:
    print(f'episode {problem.episode}, step {problem.step}: {problem.kind}: '
          f'{problem.message}')
  if len(report.problems) > MAX_LISTED:
    print(f'... and {wording.number(len(report.problems) - MAX_LISTED)} more '
          '(--json lists all)')
  if report.empty_episodes:
    print(f'{wording.count(len(report.empty_episodes), "empty episode")}, '
          f'skipped when pushed: {_positions(report.empty_episodes)}')
  if report.flagged_invalid:
    print(f'{wording.count(len(report.flagged_invalid), "episode")} flagged '
          f'invalid in metadata, skipped when pushed: '
          f'{_positions(report.flagged_invalid)}')
  print(f'{wording.count(report.episodes, "episode")}, '
        f'{wording.count(report.steps, "step")}: {_verdict(report, strict)}')


def _verdict(report, strict: bool) -> str:
  """'no problems' or '2 problems in 1 episode', then the non-finite values:
  a failure with --strict, else noted."""
  problems = (f'{wording.count(len(report.problems), "problem")} in '
              f'{wording.count(len(report.malformed_episodes), "episode")}'
              if report.problems else 'no problems')
  if not report.nonfinite:
    return problems
  values = sum(found.count for found in report.nonfinite)
  nonfinite = (f'{wording.count(values, "non-finite value")} in '
               f'{wording.count(len(report.nonfinite), "field")}')
  if not strict:
    return f'{problems}; {nonfinite} noted (--strict fails on them)'
  return f'{problems}; {nonfinite}' if report.problems else nonfinite


def _positions(indices, limit: int = 10) -> str:
  text = ', '.join(str(i) for i in indices[:limit])
  return text + (', ...' if len(indices) > limit else '')
