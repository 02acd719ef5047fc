"""A serve of many servers whose servers load without TensorFlow, while one
checker process checks the dataset for all of them.

    parent   native_loads(args, layout): the checkpoint each server loads,
             if every one holds exactly the tables served; then
             `serve_many` starts the checker beside the servers, both
             given those paths: the checker must not look again, as the
             servers are making their roots meanwhile. No checker when
             the build recorded the dataset and options given and signed
             every checkpoint loaded (`recorded_check`, `build_record`):
             its recorded lines instead
    checker  check(args) (`--check-servers PID --check-load PATH...`):
             imports TensorFlow once, signs the dataset, and checks each
             server's checkpoint against it (the checks one serve makes
             before its load), saying the
             ignored options and the memory; its one stdout line is the
             signature's fields; exit 2, naming the server, if one does not
             fit. It ends once done: its TensorFlow (~500 MB) is not held
             while the servers serve
    child    run(args) (`--as-server K:S:PID --parent-checks PATH`): a
             `reverb_native.LoadedServer` of its checkpoint, no TensorFlow,
             refused unless it is PATH, the one checked; its files read
             whole first; the ready record; then serves.
             It writes a checkpoint (SIGUSR1, stop with --checkpoint-dir)
             only once the parent wrote 'checked' to its stdin: data the
             dataset does not fit is never copied into the server's root

Why: each server imported TensorFlow (~6 CPU-s, ~250 MB) to check what one
process can check for all. Otherwise (a server with no checkpoint yet, a
table served that its checkpoint lacks, another dm-reverb) each child is a
whole serve, as before.
"""

import dataclasses
import functools
import json
import os
import shutil
import signal
import sys
import tempfile
import threading
from typing import List, Optional

from rlds_reverb import reverb_native
from rlds_reverb._util import lifeline
from rlds_reverb.checkpoints import loading
from rlds_reverb.cli import build_record
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import serve_checkpoints
from rlds_reverb.cli import serve_checks
from rlds_reverb.cli import serve_loop
from rlds_reverb.cli import serve_many
from rlds_reverb.cli import tables as table_flags

@dataclasses.dataclass(frozen=True)
class _Server:
  """What the parent knows of server K before it starts."""
  name: str  # 'server K of S'
  load: loading.CheckpointLoad


# --- In the parent, and in its checker. ----------------------------------------

def native_loads(args, layout: serve_many.Layout) -> Optional[List[str]]:
  """The checkpoint each server loads, if every one can load without
  TensorFlow, the dataset checked by a checker process (`check`); else
  None: each child checks its own."""
  try:
    reverb_native.check_version()
  except reverb_native.NativeUnavailable:
    return None
  found = _servers(args, layout.servers)
  return None if found is None else [server.load.path for server in found]


def _servers(args, servers: int) -> Optional[List[_Server]]:
  names = [table.name for table in table_flags.table_options(args)]
  found = [_server_of(args, servers, server, names)
           for server in range(servers)]
  return None if None in found else found


def _server_of(args, servers: int, server: int,
               names: List[str]) -> Optional[_Server]:
  """Server K's start, if it loads a checkpoint holding just `names`. A
  problem is left to the child, which says it as a whole serve does."""
  try:
    plan = serve_checkpoints.start(
        *serve_many.roots_of_server(args, server, servers))
    load = serve_checks.checkpoint_to_load(plan, names)
  except output.CliError:
    return None
  if load is None or sorted(load.tables) != sorted(names):
    return None
  return _Server(name=f'server {server} of {servers}', load=load)


def check(args) -> int:
  """The checker (`--check-servers PID --check-load PATH...`): signs the
  dataset (TensorFlow) and checks each server's checkpoint, its lines
  prefixed by server; prints the signature's fields as its one stdout line.
  `output.CliError` (exit 2), naming the server, if one does not fit.
  Ctrl-C is the parent's to handle: it stops this process with SIGTERM."""
  signal.signal(signal.SIGINT, signal.SIG_IGN)
  lifeline.end_with_parent(int(args.check_servers))
  for failed, message in options.image_usage_problems(args):
    if failed:
      raise output.CliError(message, output.EXIT_USAGE)
  dataset = serve_checks.dataset_signature(args)
  for line in checked_lines(args, dataset, args.check_load):
    output.note(line)
  print(json.dumps(output.spec_fields(dataset.signature)), flush=True)
  sys.stderr.flush()
  # Nothing to clean up; TensorFlow's own teardown takes seconds of the CPU
  # that the loading servers need.
  os._exit(output.EXIT_OK)  # pylint: disable=protected-access


def checked_lines(args, dataset: serve_checks.DatasetSignature,
                  loads: List[str]):
  """The checker's lines, as it checks each server's checkpoint `loads[K]`
  against `dataset`; `output.CliError` (exit 2), naming the server, at the
  first that does not fit."""
  servers = len(loads)
  found = [_Server(name=f'server {server} of {servers}',
                   load=serve_checks.read_checkpoint(path))
           for server, path in enumerate(loads)]
  yield from (f'note: {note}' for note in dataset.notes)
  measured = serve_checks.measured_frames(args, dataset.rlds_data)
  for server in found:
    try:
      serve_checks.check_checkpoint_signatures(server.load, dataset.signature,
                                               dataset.hint)
    except output.CliError as e:
      raise output.CliError(f'{server.name}: {e}', output.EXIT_USAGE) from e
    yield from _server_lines(args, server, functools.partial(
        serve_checks.memory_lines, dataset.row_spec, measured=measured))


def recorded_check(args, layout: serve_many.Layout,
                   loads: Optional[List[str]]) -> Optional[serve_many.Checked]:
  """The checker's verdict and lines as the build recorded them
  (`build_record`), if the dataset and options are the build's and every
  server loads a checkpoint it signed; else None: the checker runs."""
  if not loads or not layout.seed:
    return None
  servers = [_Server(name=layout.name(server),
                     load=serve_checks.read_checkpoint(path))
             for server, path in enumerate(loads)]
  found = build_record.verdict(args, layout.seed,
                               [server.load for server in servers])
  if found is None:
    return None
  lines = [f'the dataset and options are those {layout.seed} was built with '
           f'({build_record.RECORD}): the dataset is not signed again']
  lines += [f'note: {note}' for note in found.notes]
  for server in servers:
    lines += _server_lines(args, server, functools.partial(
        serve_checks.estimate_lines, found.bytes_per_item, found.unsized))
  return serve_many.Checked(fields=found.fields, lines=lines)


def _server_lines(args, server: _Server, memory_lines) -> List[str]:
  """What the check says of one server: the table options its checkpoint's
  settings replace, and its tables' memory (`memory_lines(held)`)."""
  held = {settings.name: settings for settings in server.load.settings}
  lines = (serve_checkpoints.ignored_options_lines(args, server.load) +
           memory_lines(held))
  return [f'{server.name}: {line}' for line in lines]


# --- In each child. ------------------------------------------------------------

def run(args) -> int:
  """Server K of a serve of many (`become_server` made `args` its own),
  loading its checkpoint without TensorFlow, until SIGINT or SIGTERM."""
  names = [table.name for table in table_flags.table_options(args)]
  serve_checks.check_port(args.port)
  plan = serve_checkpoints.start(args.checkpoint_dir, args.from_checkpoint)
  if plan.own is not None:
    serve_loop.say(serve_checkpoints.incomplete_text(plan.own))
  load = serve_checks.checkpoint_to_load(plan, names)
  if load is None or load.path != args.parent_checks:
    raise output.CliError(
        f'the checkpoint to load changed since the serve started: it was '
        f'{args.parent_checks}, checked against the dataset, and is now '
        f'{load.path if load else "none"}')
  serve_checks.check_files(load.path)
  requests = serve_loop.Requests()
  requests.install()
  checked = _Checked()
  output.note(serve_checks.loading_text(load, plan))
  serve_loop.say(serve_checkpoints.where_text(plan))
  root = plan.own.root if plan.own is not None else tempfile.mkdtemp()
  try:
    server = _start(args, names, root, plan)
    try:
      sizes = server.sizes()
      output.note(serve_checks.restored_text(plan, sizes, names))
      print(serve_many.ready_record(
          server.port, {name: sizes[name].current_size for name in names},
          {name: sizes[name].max_size for name in names}, None), flush=True)
      serve_loop.serve_until_stopped(requests, server, args.checkpoint_dir,
                                     checked.is_set)
      _stop_text(server, names, args.checkpoint_dir, checked.is_set())
    finally:
      server.stop()
  finally:
    if plan.own is None:
      shutil.rmtree(root, ignore_errors=True)
  return output.EXIT_OK


class _Checked:
  """Whether the parent said the dataset fits: a thread reads its stdin."""

  def __init__(self):
    self._event = threading.Event()
    threading.Thread(target=self._read, daemon=True).start()

  def _read(self) -> None:
    for line in sys.stdin:
      if line.strip() == serve_many.CHECKED:
        self._event.set()

  def is_set(self) -> bool:
    return self._event.is_set()


def _start(args, names: List[str], root: str,
           plan: serve_checkpoints.Start) -> reverb_native.LoadedServer:
  port = args.port or reverb_native.free_port()
  try:
    return reverb_native.LoadedServer(names, port, root, plan.seed)
  except (RuntimeError, ValueError, reverb_native.NativeUnavailable) as e:
    raise output.CliError(
        f'Could not start a Reverb server on port {port} from checkpoint '
        f'{plan.load_path}: {output.error_line(e)}') from e


def _stop_text(server: reverb_native.LoadedServer, names: List[str],
               checkpoint_dir: Optional[str], checked: bool) -> None:
  if not checkpoint_dir:
    output.note(serve_loop.discarded_text(
        lambda: {name: size.current_size
                 for name, size in server.sizes(5).items()}, names))
  elif not checked:
    output.note("stopped before the dataset's check passed: no checkpoint "
                'written')
  else:
    path = serve_loop.checkpoint(server, checkpoint_dir)
    output.note(f'checkpoint written to {path}')

