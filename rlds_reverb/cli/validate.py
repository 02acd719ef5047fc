"""`rlds-reverb validate`: every problem of a dataset, before pushing it.

Exit 0 when clean, 1 when problems were found, 2 when the dataset cannot be
read or its step spec cannot be converted.
"""

import argparse

from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import progress

HELP = 'read a whole dataset and report every malformed step'
DESCRIPTION = ('Reads a whole RLDS dataset and reports every step the '
               'converter would reject, with episode and step (0-based).')
EPILOG = """\
examples:
  rlds-reverb validate --dataset ~/tensorflow_datasets/my_rlds/1.0.0
  rlds-reverb validate --dataset DIR --json | jq '.problems[0]'

Kinds: episode_not_first, terminal_not_last, mid_before_first,
last_before_non_first (the converter's rules). Empty episodes and episodes
flagged by an 'invalid'/'is_invalid' metadata field are listed, not counted as
problems: push skips both. Notes name the fields read otherwise than stored:
a missing discount (1.0) or reward (0.0), a discount or flag of shape (1,)
(--strict refuses those instead).
exit status: 0 clean, 1 problems found, 2 unreadable dataset or bad usage.
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
    _print_text(report)
  return output.EXIT_FAILURE if report.problems else output.EXIT_OK


def _print_text(report) -> None:
  for message in report.notes:
    print(f'note: {message}')
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
  verdict = (f'{wording.count(len(report.problems), "problem")} in '
             f'{wording.count(len(report.malformed_episodes), "episode")}'
             if report.problems else 'no problems')
  print(f'{wording.count(report.episodes, "episode")}, '
        f'{wording.count(report.steps, "step")}: {verdict}')


def _positions(indices, limit: int = 10) -> str:
  text = ', '.join(str(i) for i in indices[:limit])
  return text + (', ...' if len(indices) > limit else '')
