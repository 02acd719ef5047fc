"""`rlds-reverb inspect`: what a dataset holds, before deciding on a table.

Step spec, trajectory spec, episode count, and min/mean/median/max of episode
lengths and returns; `--plot` draws their histograms from the same per-episode
figures (`cli.plot`; needs matplotlib, the 'plot' extra, imported only then).
`--stats FILE.json` writes every numeric step field's statistics
(`step_stats`) to FILE.json and prints a table of them; the lengths and
returns then come from the same pass over the data. NaN and infinite values
(a -inf return) are counted apart as `nonfinite` and left out of every other
figure, in the return line, the table and both JSON objects alike.
"""

import argparse

from rlds_reverb._util import wording
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import progress

HELP = 'show specs and episode length and return statistics'
DESCRIPTION = ('Shows the step and trajectory specs of an RLDS dataset '
               'and statistics of its episode lengths and returns.')
EPILOG = """\
examples:
  rlds-reverb inspect --dataset bundled:cartpole
  rlds-reverb inspect --dataset DIR --json
  rlds-reverb inspect --dataset DIR --plot episodes.png   (pip install rlds_reverb[plot])
  rlds-reverb inspect --dataset DIR --stats stats.json    (to normalize with)
"""


def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser)
  options.add_json_flag(parser, 'the specs and statistics')
  parser.add_argument('--plot', metavar='FILE.png', default=None,
                      help='write histograms of episode lengths and returns, '
                           'in the format the extension names (.png, .svg, '
                           '.pdf, ...)')
  parser.add_argument('--stats', metavar='FILE.json', default=None,
                      help='write count, mean, std, min, max and 1st/99th '
                           'percentiles of every numeric step field (per '
                           'element and pooled) and of episode lengths and '
                           'returns to FILE.json, and print a table of them; '
                           'NaN and infinite values are counted apart '
                           '(nonfinite) and left out of the rest')


def run(args: argparse.Namespace) -> int:
  from rlds_reverb import stats as stats_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.cli import plot  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  pyplot = None
  if args.plot:  # Fail before reading anything.
    pyplot = plot.pyplot()
    plot.file_format(args.plot)
    plot.check_writable(args.plot)
  if args.stats:
    _check_writable(args.stats)
  rlds_data = options.load(args)
  step_format, trajectory_spec = options.step_format(args, rlds_data)
  field_stats = None
  with options.reading(args):
    if args.stats:
      field_stats, stats = _statistics(rlds_data, stats_lib)
    else:
      stats = stats_lib.episode_stats(rlds_data)
  if field_stats is not None:
    _save(field_stats, args.stats)
  if args.json:
    output.print_json({
        'step_spec': output.spec_fields(step_format.stored),
        'trajectory_spec': output.spec_fields(trajectory_spec),
        'notes': step_format.notes(),
        'episodes': stats.episodes,
        'steps': stats.steps,
        'length': stats_lib.summary(stats.lengths),
        'return': stats_lib.summary(stats.returns),
        **({'stats': args.stats} if args.stats else {}),
    })
  else:
    _print_text(step_format, trajectory_spec, stats, stats_lib)
    if field_stats is not None:
      _print_field_stats(field_stats, args.stats)
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
  """'min 2  mean 3  median 3  max 4', and 'nonfinite 1' when some values
  are NaN or infinite (left out of the rest)."""
  return '  '.join(f'{name} {_number(value)}' for name, value in summary.items()
                   if name != 'nonfinite' or value)


def _number(value) -> str:
  if value is None:
    return '-'
  return f'{value:.4g}' if isinstance(value, float) else f'{value:,}'


def _check_writable(path: str) -> None:
  """A statistics file that cannot be written fails before anything is read."""
  from rlds_reverb.step_stats import result  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  reason = result.unsaveable_reason(path)
  if reason:
    raise output.CliError(f'Cannot write the statistics to {path}: {reason}',
                          output.EXIT_USAGE)


def _statistics(rlds_data, stats_lib):
  """(DatasetStatistics, EpisodeStats): one pass, a bar of episodes read."""
  from rlds_reverb import step_stats  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  import numpy as np  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  lengths, returns = [], []
  with progress.Bar('reading', ' episodes',
                    total=options.episode_count(rlds_data)) as bar:
    def kept(block_lengths, block_returns):
      lengths.append(block_lengths)
      returns.append(block_returns)
      bar.update_to(sum(map(len, lengths)))
    found = step_stats.statistics(rlds_data, on_episodes=kept)
  episodes = stats_lib.EpisodeStats(
      np.concatenate(lengths) if lengths else np.zeros([0], np.int64),
      np.concatenate(returns) if returns else np.zeros([0], np.float64))
  return found, episodes


def _save(field_stats, path: str) -> None:
  try:
    field_stats.save(path)
  except OSError as e:
    raise output.CliError(
        f'Cannot write the statistics to {path}: {e.strerror}: {path}') from e


# The table's columns: (heading, the pooled Summary's value).
_COLUMNS = (('count', lambda s: s.count),
            ('nonfinite', lambda s: s.nonfinite),
            ('mean', lambda s: s.mean), ('std', lambda s: s.std),
            ('min', lambda s: s.min), ('max', lambda s: s.max))


def _print_field_stats(field_stats, path: str) -> None:
  """One row per field, its elements pooled (the file has them per element),
  then the episodes' lengths and returns."""
  percentiles = list(next(iter(field_stats.fields.values())).percentiles
                     if field_stats.fields else field_stats.length.percentiles)
  headings = ['field', 'shape'] + [name for name, _ in _COLUMNS] + [
      f'p{q:g}' for q in percentiles]
  rows = [[name, _shape_text(field.shape)] + _cells(field.whole, percentiles)
          for name, field in field_stats.fields.items()]
  rows.append(['(episode length)', ''] + _cells(field_stats.length,
                                                percentiles))
  if field_stats.returns is not None:
    rows.append(['(episode return)', ''] + _cells(field_stats.returns,
                                                  percentiles))
  accuracy = f'{field_stats.relative_accuracy:.0%}'
  print(f'statistics       {path} (per element and pooled; percentiles '
        f'within {accuracy} of |value|)')
  widths = [max(len(row[i]) for row in [headings] + rows)
            for i in range(len(headings))]
  for row in [headings] + rows:
    print('  '.join(cell.ljust(width) if i < 2 else cell.rjust(width)
                    for i, (cell, width) in enumerate(zip(row, widths)))
          .rstrip())
  by_reason = {}
  for name, why in field_stats.skipped.items():
    by_reason.setdefault(why, []).append(name)
  for why, names in by_reason.items():
    print(f'skipped          {", ".join(names)}: {why}')


def _shape_text(shape) -> str:
  return '[' + ','.join(str(dim) for dim in shape) + ']'


def _cells(summary, percentiles):
  cells = [_stat(value(summary)) for _, value in _COLUMNS]
  return cells + [_stat(summary.percentiles[q]) for q in percentiles]


def _stat(value) -> str:
  import numpy as np  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  value = np.asarray(value).item()
  if isinstance(value, int):
    return f'{value:,}'
  return '-' if value != value else f'{value:.4g}'  # NaN: no values.
