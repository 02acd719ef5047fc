"""`rlds-reverb serve`: a Reverb server with one table signed for a dataset.

The table's signature is the dataset's trajectory spec with a time axis, so
`rlds-reverb push` and TF-Agents' `ReverbReplayBuffer` fit it as they are.
Its rate limiter is MinSize(1), which never blocks inserts. It runs until
SIGINT or SIGTERM, then (with --checkpoint-dir) checkpoints and stops.
"""

import argparse
import signal
import threading

from rlds_reverb.cli import options
from rlds_reverb.cli import output

_EPILOG = """\
examples:
  rlds-reverb serve --dataset bundled:cartpole --table replay --port 8000
  rlds-reverb serve --dataset DIR --table replay --sampler prioritized \\
      --max-size 100000 --checkpoint-dir /tmp/reverb_ckpt

It prints 'serving TABLE on HOST:PORT' once ready; stop it with Ctrl-C or
SIGTERM.
"""

SAMPLERS = ('uniform', 'fifo', 'lifo', 'prioritized')
REMOVERS = ('fifo', 'lifo', 'uniform')
PRIORITY_EXPONENT = 0.8


def add_parser(subparsers, common) -> None:
  parser = subparsers.add_parser(
      'serve', parents=[common], epilog=_EPILOG,
      formatter_class=argparse.RawDescriptionHelpFormatter,
      help="run a Reverb server with a table signed for a dataset's trajectories",
      description=('Runs a Reverb server with one table whose signature is '
                   "the dataset's trajectory spec with a time axis, until "
                   'SIGINT or SIGTERM.'))
  options.add_arguments(parser)
  parser.add_argument('--table', required=True, help='the table name')
  parser.add_argument('--port', type=int, default=None,
                      help='port to listen on (default: a free one)')
  parser.add_argument('--max-size', type=int, default=1_000_000,
                      help=('items kept; older ones are removed silently '
                            '(default: %(default)s)'))
  parser.add_argument('--sampler', choices=SAMPLERS, default='uniform',
                      help='how items are sampled (default: %(default)s)')
  parser.add_argument('--remover', choices=REMOVERS, default='fifo',
                      help='which item goes when full (default: %(default)s)')
  parser.add_argument('--checkpoint-dir', default=None, metavar='DIR',
                      help=('load the newest checkpoint there at start and '
                            'write one at shutdown'))
  parser.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import specs  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  if args.max_size < 1:
    raise output.CliError(f'--max-size must be >= 1, got {args.max_size}',
                          output.EXIT_USAGE)
  _, spec = options.step_and_trajectory_spec(options.load(args))
  signature = specs.table_signature(spec)
  stop = _stop_on_signals()
  server = _start(reverb, args, signature)
  try:
    _check_loaded_table(reverb, server, args.table, signature)
    print(f'serving {args.table} on localhost:{server.port}', flush=True)
    while not stop.wait(0.5):
      pass
    if args.checkpoint_dir:
      path = reverb.Client(f'localhost:{server.port}').checkpoint()
      output.note(f'checkpoint written to {path}')
  finally:
    server.stop()
  return output.EXIT_OK


def _stop_on_signals() -> threading.Event:
  """An event set by SIGINT or SIGTERM, so shutdown runs in the main thread."""
  stop = threading.Event()

  def handle(signum, frame):
    del signum, frame
    stop.set()

  signal.signal(signal.SIGINT, handle)
  signal.signal(signal.SIGTERM, handle)
  return stop


def _start(reverb, args, signature):
  checkpointer = None
  if args.checkpoint_dir:
    checkpointer = reverb.checkpointers.DefaultCheckpointer(args.checkpoint_dir)
  table = reverb.Table(
      name=args.table, sampler=_selector(reverb, args.sampler),
      remover=_selector(reverb, args.remover), max_size=args.max_size,
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)
  try:
    return reverb.Server([table], port=args.port, checkpointer=checkpointer)
  except (RuntimeError, ValueError) as e:
    where = f'port {args.port}' if args.port else 'a free port'
    raise output.CliError(
        f'could not start a Reverb server on {where}: {output.error_line(e)}'
    ) from e


def _selector(reverb, name: str):
  if name == 'prioritized':
    return reverb.selectors.Prioritized(PRIORITY_EXPONENT)
  return {'uniform': reverb.selectors.Uniform, 'fifo': reverb.selectors.Fifo,
          'lifo': reverb.selectors.Lifo}[name]()


def _check_loaded_table(reverb, server, table: str, signature) -> None:
  """A checkpoint's table config wins over ours: it must fit the dataset."""
  from rlds_reverb.specs import signature as signature_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  info = reverb.Client(f'localhost:{server.port}').server_info(timeout=30)
  if table not in info:
    raise output.CliError(
        f'the checkpoint has no table {table!r}; its tables are {sorted(info)}')
  differences = signature_lib.spec_differences(info[table].signature,
                                               signature)
  if info[table].signature is not None and differences:
    raise output.CliError(
        f"the checkpoint's table {table!r} does not fit the dataset: "
        f'{differences[0]}')
