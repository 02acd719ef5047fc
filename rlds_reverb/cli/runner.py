"""`rlds-reverb push --runner R [--beam-option KEY=VALUE ...]`: on Apache Beam.

    rlds-reverb push ... --runner DirectRunner --beam-option direct_num_workers=2
      -> rlds_reverb.beam.push: ReadEpisodes | WriteToReverb on that runner
      -> the skipped episodes, then the same summary as one push, its counts
         summed from the pipeline's counters

Beam is imported only here: without it installed, '--runner' is a one-line
usage error, and every other command works.
"""

import argparse
import logging

from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import push_shared

INSTALL_HINT = 'pip install "rlds_reverb[beam]"'


def run(args: argparse.Namespace, push_options) -> int:
  """The push on Beam, with `push_options` (`PushOptions`) as they are."""
  beam = _import_beam(quiet=not args.debug)
  _check_runner(args.runner)
  _check_dataset(args, push_options)
  result = beam.push(
      args.dataset, args.server, args.table, split=args.split,
      data_dir=args.data_dir, runner=args.runner, options=args.beam_option,
      on_invalid=args.on_invalid, parts_per_file=args.parts_per_file,
      push_options=push_options)
  push_shared.note_found({**vars(result),
                          'skipped': [vars(e) for e in result.skipped]})
  push_shared.print_summary(push_shared.summary_of(result), args.json)
  return output.EXIT_OK


def _import_beam(quiet: bool):
  """`rlds_reverb.beam`, Beam's Python logs at errors only unless `quiet` off.

  Beam logs through the root logger (a warning at import, which also
  installs a stderr handler) and relays its workers' logs through its own;
  a failed bundle is logged with its traceback, before the pipeline's error
  reaches us, which says it in one line.
  """
  if quiet:
    logging.getLogger().setLevel(logging.ERROR)
    logging.getLogger('apache_beam').setLevel(logging.CRITICAL)
  try:
    from rlds_reverb import beam  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  except ImportError as e:
    if not (e.name or '').startswith('apache_beam'):
      raise
    raise output.CliError(
        f'--runner needs Apache Beam, which is not installed: {INSTALL_HINT}',
        output.EXIT_USAGE) from e
  return beam


def _check_runner(name: str) -> None:
  """An unknown runner is bad usage (exit 2), before any work."""
  from apache_beam.runners import runner as runner_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    runner_lib.create_runner(name)
  except ValueError as e:
    raise output.CliError(f'--runner: {output.error_line(e)}',
                          output.EXIT_USAGE) from e


def _check_dataset(args: argparse.Namespace, push_options) -> None:
  """Opens the dataset here first: bad input is a usage error (exit 2)."""
  push_shared.checked_spec(args, push_options, options.load(args))
