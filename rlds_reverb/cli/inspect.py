"""`rlds-reverb inspect`: what a dataset holds, before deciding on a table.

Step spec, trajectory spec, episode count, and min/mean/median/max of episode
lengths and returns; `--plot` draws their histograms from the same per-episode
figures (`cli.plot`; needs matplotlib, the 'plot' extra, imported only then).
"""

import argparse

from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output

HELP = 'show specs and episode length and return statistics'
DESCRIPTION = ('Shows the step and trajectory specs of an RLDS dataset '
               'and statistics of its episode lengths and returns.')
EPILOG = """\
examples:
  rlds-reverb inspect --dataset bundled:cartpole
  rlds-reverb inspect --dataset DIR --json
  rlds-reverb inspect --dataset DIR --plot episodes.png   (pip install rlds_reverb[plot])
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser)
  options.add_json_flag(parser, 'the specs and statistics')
  parser.add_argument('--plot', metavar='FILE.png', default=None,
                      help='write histograms of episode lengths and returns, '
                           'in the format the extension names (.png, .svg, '
                           '.pdf, ...)')


def run(args: argparse.Namespace) -> int:
  from rlds_reverb import stats as stats_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.cli import plot  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  pyplot = None
  if args.plot:  # Fail before reading anything.
    pyplot = plot.pyplot()
    plot.file_format(args.plot)
    plot.check_writable(args.plot)
  rlds_data = options.load(args)
  step_format, trajectory_spec = options.step_format(args, rlds_data)
  with options.reading(args):
    stats = stats_lib.episode_stats(rlds_data)
  if args.json:
    output.print_json({
        'step_spec': output.spec_fields(step_format.stored),
        'trajectory_spec': output.spec_fields(trajectory_spec),
        'notes': step_format.notes(),
        'episodes': stats.episodes,
        'steps': stats.steps,
        'length': stats_lib.summary(stats.lengths),
        'return': stats_lib.summary(stats.returns),
    })
  else:
    _print_text(step_format, trajectory_spec, stats, stats_lib)
  if pyplot is not None:
    plot.write(pyplot, stats, args.plot)
    if not args.json:
      print(f'plot             {args.plot}')
  return output.EXIT_OK


def _print_text(step_format, trajectory_spec, stats, stats_lib) -> None:
  print(f'step spec        {output.spec_text(step_format.stored)}')
  for message in step_format.notes():
    print(f'note             {message}')
  print(f'trajectory spec  {output.spec_text(trajectory_spec)}')
  print(f'episodes         {wording.number(stats.episodes)} '
        f'({wording.count(stats.steps, "step")})')
  print(f'length           {_summary_text(stats_lib.summary(stats.lengths))}')
  print(f'return           {_summary_text(stats_lib.summary(stats.returns))}')


def _summary_text(summary) -> str:
  return '  '.join(f'{name} {_number(value)}' for name, value in summary.items())


def _number(value) -> str:
  if value is None:
    return '-'
  return f'{value:.4g}' if isinstance(value, float) else f'{value:,}'
