"""`rlds-reverb serve`: a Reverb server with tables signed for a dataset.

Every table's signature is the dataset's trajectory spec with a time axis
(with --n-step, its transition spec), so `rlds-reverb push` and TF-Agents'
`ReverbReplayBuffer` fit it as they are. Each table has its own sampler,
remover, sizes and rate limiter (`cli/tables` reads them, `rlds_reverb.tables`
builds them: MinSize(1) by default, which never blocks inserts). At start it
says what each table's items will cost in memory (`write.memory`). It runs
until SIGINT or SIGTERM, then (with --checkpoint-dir) checkpoints and stops.

Reverb listens on every interface: dm-reverb 0.14.0's server binds [::]:PORT
and takes no host, so there is no --host, and the line it prints says so. A
--port that another server already listens on is refused before the server
starts (`addresses.check_port_free`): gRPC would open it again with
SO_REUSEPORT, and clients would reach either server.

Checkpoints (`serve_checkpoints`): --checkpoint-dir is the server's own
root, which Reverb empties of everything else, so it must hold nothing but
Reverb's own checkpoints; --from-checkpoint is a seed (a build), read and
never changed. serve says at start which checkpoint Reverb restores and
where its own go (Reverb itself is silent, also when it skips an incomplete
one), and writes a checkpoint on SIGUSR1 while it keeps serving, as
`reverb.Client(ADDRESS).checkpoint()` from Python does. Reverb loads the
checkpoint inside `reverb.Server(...)` and answers nobody until it is done
(~7 s per million items): before that, serve reads its files whole (a
damaged one is named, which Reverb does not), says what it loads (items per
table, size on disk, about how long: `checkpoints.checkpoint_load`), which
table options the checkpoint's settings replace, and refuses a checkpoint
holding a table it does not serve, which Reverb would fail to load.
"""

import argparse
from typing import Optional, Sequence

from rlds_reverb import addresses
from rlds_reverb import tables
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import serve_checkpoints
from rlds_reverb.cli import serve_checks
from rlds_reverb.cli import serve_loop
from rlds_reverb.cli import serve_many
from rlds_reverb.cli import serve_native
from rlds_reverb.cli import tables as table_flags

HELP = "run a Reverb server with tables signed for a dataset's trajectories"
DESCRIPTION = ('Runs a Reverb server with one or more tables whose signature '
               "is the dataset's trajectory spec with a time axis, until "
               'SIGINT or SIGTERM. At start it prints an estimate of the '
               "memory each table's items take.")
EPILOG = """\
examples:
  rlds-reverb serve --dataset bundled:cartpole --table replay --port 8000
  rlds-reverb serve --dataset DIR --max-size 100000 \\
      --table uniform \\
      --table prioritized --sampler prioritized --priority-exponent 0.6 \\
      --table ratio --samples-per-insert 4 --min-size 1000 --error-buffer 400 \\
      --checkpoint-dir /tmp/reverb_ckpt
  kill -USR1 PID    # checkpoint now and keep serving
  rlds-reverb serve --dataset DIR --from-checkpoint /data/built \\
      --checkpoint-dir /data/served    # start from a build, keep it as is
  rlds-reverb serve --dataset DIR --from-checkpoint /data/built4 \\
      --table replay --port 8000    # a build of 4 servers: ports 8000-8003

Table options apply to the --table before them (--max-size above, given
first, to all three). At start it prints, per table, e.g. "memory estimate:
table 'replay': about 1.9 KB per item; max_size 1,000,000 -> about 1.9 GB":
items as 'rlds-reverb push' writes them (chunk lengths by its rule), data
counted raw (Reverb compresses it: images take less). A table with
--samples-per-insert blocks inserts while nothing samples: a push into it
warns, then fails after its --timeout.

It prints 'serving TABLES on port PORT of every interface, e.g.
localhost:PORT' once ready; stop it with Ctrl-C or SIGTERM. Reverb listens
on every interface and has no option for one: keep the port behind a
firewall. A --port that another server already listens on is refused
(exit 2). With --checkpoint-dir it restores the newest complete checkpoint
there at start (first saying how many items, how big, and about how long
the load takes: the server answers only once it is loaded), writes one on
SIGUSR1 and at shutdown, and keeps only the newest, deleting every other
entry of the directory: a directory holding anything else is refused (exit
2). --from-checkpoint starts from a checkpoint that is never changed (what
'rlds-reverb build' writes, or another server's), loaded while
--checkpoint-dir holds none. Every table of the loaded checkpoint must be
served (a --table of its name); its settings replace the table options, and
serve names the options it ignores. reverb.Client('HOST:PORT').checkpoint()
from Python writes one too.

A --from-checkpoint DIR of a build of S servers (DIR/server-K-of-S, what
build --servers S writes) starts S server processes, server K on port
--port+K (or a free one), each loading its part at once and keeping its own
checkpoints in CHECKPOINT_DIR/server-K-of-S; once all answer it prints
'serving TABLES on S servers of every interface: ADDRESS ...' and writes
--servers-file. Signals go to every server; one that ends unasked is named,
and the others are stopped (exit 1) unless --keep-going.
"""

def add_arguments(parser: argparse.ArgumentParser) -> None:
  options.add_dataset_arguments(parser)
  parser.add_argument('--port', type=port_number, default=None,
                      help=('port to listen on, on every interface: 1-65535, '
                            'refused if another server listens there '
                            '(default, or 0: a free one)'))
  parser.add_argument('--n-step', action='store_true',
                      help=('sign the table for n-step transitions (push '
                            '--n-step), not trajectories'))
  options.add_image_arguments(parser)
  parser.add_argument('--checkpoint-dir', default=None, metavar='DIR',
                      help=("the server's own checkpoints (a new or empty "
                            'directory, or one only servers wrote to): load '
                            'the newest there at start (its table settings '
                            'win over these options) and write one on '
                            'SIGUSR1 and at shutdown'))
  parser.add_argument('--from-checkpoint', default=None, metavar='PATH',
                      help=('start from this checkpoint, or the newest in '
                            'this directory (a build), when --checkpoint-dir '
                            'holds none; it is only read, never changed'))
  parser.add_argument('--servers-file', default=None, metavar='PATH',
                      help=('with a build of many servers: write their '
                            'addresses, tables, items and signature here '
                            'once all are ready (default: '
                            'CHECKPOINT_DIR/servers.json), removed at stop'))
  parser.add_argument('--keep-going', action='store_true',
                      help=('with a build of many servers: when one ends '
                            'unasked, keep the others serving (default: '
                            'stop them, exit 1)'))
  # Set by serve_many for each server of many: K:S:PARENT_PID; with
  # --parent-checks PATH, the server loads PATH, which a checker process
  # checks against the dataset (`serve_native`).
  parser.add_argument('--as-server', default=None, help=argparse.SUPPRESS)
  parser.add_argument('--parent-checks', default=None, help=argparse.SUPPRESS)
  # Set by serve_many for the process that checks the dataset for all: its
  # PID and, once per server in order, the checkpoint that server loads.
  parser.add_argument('--check-servers', default=None, help=argparse.SUPPRESS)
  parser.add_argument('--check-load', action='append', default=[],
                      help=argparse.SUPPRESS)
  table_flags.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
  if args.check_servers:
    return serve_native.check(args)
  if args.as_server:
    serve_many.become_server(args)
    if args.parent_checks:
      return serve_native.run(args)
  else:
    layout = serve_many.layout_of(args)
    if layout is not None:
      table_flags.table_options(args)  # Bad table options said once, here.
      requests = serve_loop.Requests()
      requests.install()
      loads = serve_native.native_loads(args, layout)
      return serve_many.run(args, layout, requests, loads,
                            serve_native.recorded_check(args, layout, loads))
  configured = table_flags.table_options(args)
  for failed, message in options.image_usage_problems(args):
    if failed:
      raise output.CliError(message, output.EXIT_USAGE)
  serve_checks.check_port(args.port)
  plan = serve_checkpoints.start(args.checkpoint_dir, args.from_checkpoint)
  if plan.own is not None:
    serve_loop.say(serve_checkpoints.incomplete_text(plan.own))
  load = serve_checks.checkpoint_to_load(
      plan, [table.name for table in configured])
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  dataset = serve_checks.dataset_signature(args)
  signature = dataset.signature
  output.note_data(dataset.notes)
  requests = serve_loop.Requests()
  requests.install()
  if load:
    serve_checks.check_files(load.path)
    serve_checks.check_checkpoint_signatures(load, signature, dataset.hint)
    for line in serve_checkpoints.ignored_options_lines(args, load):
      output.note(line)
    output.note(serve_checks.loading_text(load, plan))
  serve_loop.say(serve_checkpoints.where_text(plan))
  checkpointer = serve_checkpoints.Checkpointer(reverb, plan)
  try:
    server = _start(reverb, args, configured, signature, plan,
                    checkpointer.checkpointer)
  except BaseException:
    checkpointer.close()
    raise
  names = [table.name for table in configured]
  try:
    client = reverb.Client(f'localhost:{server.port}')
    info = client.server_info(timeout=30)
    for name in names:
      serve_checks.check_loaded_table(info, name, signature, dataset.hint)
    if plan.own is not None or plan.seed is not None:
      output.note(serve_checks.restored_text(plan, info, names))
    measured = serve_checks.measured_frames(args, dataset.rlds_data)
    for line in serve_checks.memory_lines(
        dataset.row_spec, {name: info[name] for name in names}, measured):
      output.note(line)
    if args.as_server:  # Read by the serve of many servers that started it.
      print(serve_many.ready_record(
          server.port, {name: info[name].current_size for name in names},
          {name: info[name].max_size for name in names},
          output.spec_fields(signature)), flush=True)
    else:
      print(serving_text(names, server.port), flush=True)
    serve_loop.serve_until_stopped(requests, client, args.checkpoint_dir)
    if args.checkpoint_dir:
      path = serve_loop.checkpoint(client, args.checkpoint_dir)
      output.note(f'checkpoint written to {path}')
    else:
      output.note(serve_loop.discarded_text(
          lambda: {name: info.current_size
                   for name, info in client.server_info(timeout=5).items()},
          names))
  finally:
    server.stop()
    checkpointer.close()
  return output.EXIT_OK


def port_number(text: str) -> Optional[int]:
  """argparse type: a port 1..65535; 0 means a free one, as no --port does.

  Reverb would take 99999 and listen on 99999 % 65536, and on port 0 listen
  on a port it does not report.
  """
  try:
    port = int(text)
  except ValueError:
    port = -1
  if not 0 <= port <= addresses.MAX_PORT:
    raise argparse.ArgumentTypeError(
        f'must be a port from 1 to {addresses.MAX_PORT} (or 0 for a free '
        f"one), got '{text}'")
  return port or None


def serving_text(names: Sequence[str], port: int) -> str:
  """What serve prints once ready; its last word is an address to use."""
  return (f'serving {", ".join(names)} on port {port} of every interface, '
          f'e.g. localhost:{port}')


def _start(reverb, args, configured, signature, plan, checkpointer):
  serve_checks.check_port(args.port)  # Again: loading the dataset took seconds.
  served = [tables.table(table, signature) for table in configured]
  try:
    return reverb.Server(served, port=args.port, checkpointer=checkpointer)
  except (RuntimeError, ValueError) as e:
    where = f'port {args.port}' if args.port else 'a free port'
    if plan.load_path:
      where += f' from checkpoint {plan.load_path}'
    raise output.CliError(
        f'Could not start a Reverb server on {where}: {output.error_line(e)}'
    ) from e

