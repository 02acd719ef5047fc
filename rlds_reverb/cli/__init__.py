"""The `rlds-reverb` command: demo, serve, push, build, validate, inspect,
recover, export.

    rlds-reverb [--debug] COMMAND [options]     (also: python -m rlds_reverb)

One module per command, each with HELP, DESCRIPTION and EPILOG texts,
`add_arguments(parser)` and `run(args) -> exit code`. A failure prints
'rlds-reverb: error: ...' on stderr, one line (an error that lists fields
adds one indented line per field), and exits non-zero; `--debug` adds the
traceback and TensorFlow's and Reverb's own logs, which are silenced
otherwise, whatever TF_CPP_MIN_LOG_LEVEL says. A reader that goes away
(`| head`) ends the command quietly with exit status 141, as SIGPIPE would.
"""

import argparse
import importlib
import sys
import traceback
from typing import List, Optional

from rlds_reverb import known_lines
from rlds_reverb._util import quiet
from rlds_reverb.cli import output

COMMANDS = ('demo', 'serve', 'push', 'build', 'validate', 'inspect',
            'recover', 'export')

_EPILOG = """\
examples:
  rlds-reverb demo
  rlds-reverb validate --dataset ~/tensorflow_datasets/my_rlds/1.0.0
  rlds-reverb serve --dataset DIR --table replay --port 8000
  rlds-reverb push --dataset DIR --server localhost:8000 --table replay
  rlds-reverb build --dataset DIR --out CKPT_DIR
  rlds-reverb inspect --dataset DIR --plot episodes.png
  rlds-reverb recover DIR
  rlds-reverb export --checkpoint CKPT_DIR --table replay --out DIR

'rlds-reverb COMMAND --help' shows each command's options and examples.
"""


def build_parser() -> argparse.ArgumentParser:
  parser = argparse.ArgumentParser(
      prog=output.PROG,
      description='RLDS datasets into Reverb tables as TF-Agents trajectories.',
      epilog=_EPILOG, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--debug', action='store_true',
                      help=('show tracebacks of failures, and native (TensorFlow, Reverb) '
                            'logs'))
  # Also accepted after the command; SUPPRESS keeps it from resetting the flag.
  common = argparse.ArgumentParser(add_help=False)
  common.add_argument('--debug', action='store_true', default=argparse.SUPPRESS,
                      help='show tracebacks of failures')
  subparsers = parser.add_subparsers(dest='command', metavar='COMMAND',
                                     required=True)
  for name in COMMANDS:
    _add_command(subparsers, common, name)
  return parser


def _add_command(subparsers, common: argparse.ArgumentParser,
                 name: str) -> None:
  """The subcommand `name`, from the module of the same name."""
  command = importlib.import_module(f'rlds_reverb.cli.{name}')
  parser = subparsers.add_parser(
      name, parents=[common], help=command.HELP,
      description=output.wrapped(command.DESCRIPTION), epilog=command.EPILOG,
      formatter_class=argparse.RawDescriptionHelpFormatter)
  command.add_arguments(parser)
  parser.set_defaults(run=command.run)


def main(argv: Optional[List[str]] = None) -> int:
  """Runs one command; returns its exit code (argparse exits 2 on bad usage).

  A closed stdout or stderr ends it quietly with EXIT_BROKEN_PIPE.
  """
  try:
    try:
      return _run(argv)
    finally:
      sys.stdout.flush()  # A closed pipe shows here, not at interpreter exit.
  except BrokenPipeError:
    return output.reader_gone()


def _run(argv: Optional[List[str]]) -> int:
  args = build_parser().parse_args(argv)
  # As given: a command may run itself again in children (serve_many).
  args.argv = list(sys.argv[1:] if argv is None else argv)
  if not args.debug:
    quiet.silence()  # Before the command imports TensorFlow or gym.
  try:
    # --debug: TensorFlow's start-up lines too, which the library drops.
    with known_lines.nothing_dropped(enabled=args.debug):
      with quiet.quieted(enabled=not args.debug):
        return args.run(args)
  except output.CliError as e:
    return _fail(args, str(e), e.exit_code)
  except KeyboardInterrupt as e:  # Its notes say what was written, if any.
    return _fail(args, output.error_line(e), output.EXIT_INTERRUPTED)
  except BrokenPipeError:
    raise
  except Exception as e:  # pylint: disable=broad-except
    return _fail(args, output.error_text(e), output.EXIT_FAILURE)


def _fail(args: argparse.Namespace, message: str, exit_code: int) -> int:
  if args.debug:
    traceback.print_exc()
  output.print_error(message)
  return exit_code


if __name__ == '__main__':
  sys.exit(main())
