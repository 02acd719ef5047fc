"""`rlds-reverb serve` of a build of many servers: one server process each,
started, watched and stopped as one.

    serve --dataset D --table T --from-checkpoint BUILT [--checkpoint-dir OWN]
          [--port P] [--servers-file F] [--keep-going]
      BUILT holds server-K-of-S (`build --servers S`); OWN, if given, is
      new, or holds the server-K-of-S roots of an earlier such serve (then
      `--from-checkpoint` may be left out: each server reloads its own)
        -> S children: `rlds-reverb <these arguments> --as-server K:S:PID`,
           each a plain serve of BUILT/server-K-of-S, its own checkpoints in
           OWN/server-K-of-S, on port P+K (or a free one), loading at once
        -> a line per server as it is ready; a total once all are, with
           their addresses on stdout; F (default OWN/servers.json) written:
           addresses, tables, items, the signature, for readers
      SIGINT, SIGTERM  -> every server checkpoints (with OWN) and stops
      SIGUSR1          -> every server checkpoints, into its own root
      a server that ends unasked -> named at once; the others stopped, exit
                          1 (2 if it refused its arguments), unless
                          --keep-going

A child is a serve of its own: every check, message and signal of one
server holds for each, and its lines come out prefixed 'server K of S'. When
every server loads a checkpoint holding just the tables served (a build, or
the servers' own checkpoints), the children load it without TensorFlow
(`serve_native`, `--parent-checks`) and one more process, the checker,
checks the dataset against every checkpoint once as they load: they are
ready when both are done. No checker where the build recorded that very
dataset and options and signed every checkpoint loaded (`build_record`).
A child ends with this process (`lifeline`), so a killed parent leaves no
server behind. BUILT is only read, as one serve
reads a seed: a build handed as --checkpoint-dir is refused, since each
server's first checkpoint would delete it.
"""

import dataclasses
import json
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from typing import Any, Dict, List, Optional

from rlds_reverb import addresses
from rlds_reverb._util import lifeline
from rlds_reverb._util import wording
from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import parts
from rlds_reverb.cli import output
from rlds_reverb.errors import AddressError

SERVERS_FILE = 'servers.json'
# The line a child whose parent checks the dataset waits for on its stdin.
CHECKED = 'checked'
# How often the main thread looks at signals and its children.
_POLL_S = 0.2


@dataclasses.dataclass(frozen=True)
class Layout:
  """What one serve of many servers starts: S servers, their seeds, roots
  and ports."""
  servers: int
  seed: Optional[str]  # BUILT: server-K-of-S inside, only read.
  own: Optional[str]  # OWN: each server's own root is OWN/server-K-of-S.
  port: Optional[int]  # Server K listens on port + K; None: free ones.
  servers_file: Optional[str]

  def port_of(self, server: int) -> Optional[int]:
    return None if self.port is None else self.port + server

  def name(self, server: int) -> str:
    return f'server {server} of {self.servers}'


def layout_of(args) -> Optional[Layout]:
  """The servers `args` ask for, or None for one server (serve as ever).
  Refuses (exit 2) what cannot be served as a whole, before any start."""
  seed = _servers_of(args.from_checkpoint, '--from-checkpoint')
  own = _servers_of(args.checkpoint_dir, '--checkpoint-dir')
  if seed is None and own is None:
    for given, flag in ((args.keep_going, '--keep-going'),
                        (args.servers_file, '--servers-file')):
      if given:
        raise _usage(f'{flag} goes with a build of many servers '
                     '(--from-checkpoint DIR holding server-K-of-S)')
    return None
  if own is not None:
    _check_own_roots(args.checkpoint_dir, own)
  if seed is not None and own is not None and seed != own:
    raise _usage(
        f'--from-checkpoint {args.from_checkpoint} holds a build of {seed} '
        f'servers, --checkpoint-dir {args.checkpoint_dir} the checkpoints '
        f'of {own}: give a new --checkpoint-dir')
  servers = seed or own
  _check_ports(args.port, servers)
  servers_file = args.servers_file or (
      os.path.join(args.checkpoint_dir, SERVERS_FILE)
      if args.checkpoint_dir else None)
  return Layout(servers=servers,
                seed=args.from_checkpoint if seed else None,
                own=args.checkpoint_dir, port=args.port,
                servers_file=servers_file)


def _usage(message: str) -> output.CliError:
  return output.CliError(message, output.EXIT_USAGE)


def _servers_of(root: Optional[str], flag: str) -> Optional[int]:
  """S if `root` holds server-0-of-S ... server-(S-1)-of-S, else None."""
  if not root or not os.path.isdir(root):
    return None
  names = directories.server_roots(directories.find(root))
  if not names:
    return None
  servers = int(names[0].rsplit('-', 1)[1])
  whole = [os.path.basename(parts.server_root(root, server, servers))
           for server in range(servers)]
  if list(names) != whole:
    raise _usage(f'{flag}: {root} holds {wording.listed(names)}, not one '
                 f'whole build of servers (server-0-of-S to '
                 f'server-(S-1)-of-S, all of one S)')
  return servers


def _check_own_roots(root: str, servers: int) -> None:
  """OWN's server roots must be servers' own: a build there would be
  deleted by its server's first checkpoint."""
  for server in range(servers):
    found = directories.find(parts.server_root(root, server, servers))
    if found.built or found.unfinished or found.parts:
      raise _usage(
          f'--checkpoint-dir: {root} holds a build of {servers} servers, and '
          "each server's first checkpoint would delete its part: start from "
          f'it with --from-checkpoint {root}, and give --checkpoint-dir a new '
          "directory for the servers' own checkpoints")


def _check_ports(port: Optional[int], servers: int) -> None:
  if port is None:
    return
  last = port + servers - 1
  if last > addresses.MAX_PORT:
    raise _usage(f'--port {port}: {servers} servers need ports {port} to '
                 f'{last}, past {addresses.MAX_PORT}')
  for server in range(servers):
    try:
      addresses.check_port_free(port + server)
    except AddressError as e:
      raise _usage(f'--port: server {server} of {servers} would listen on '
                   f'{port + server}: {e}') from e


# --- In each child: a plain serve of its own part. ---------------------------

def become_server(args) -> None:
  """In a child (`--as-server K:S:PID`): `args` made those of server K's
  own serve, and this process tied to its parent's life."""
  server, servers, parent = (int(part) for part in args.as_server.split(':'))
  lifeline.end_with_parent(parent)
  args.checkpoint_dir, args.from_checkpoint = roots_of_server(args, server,
                                                           servers)
  if args.port is not None:
    args.port += server


def roots_of_server(args, server: int, servers: int):
  """Server K's (--checkpoint-dir, --from-checkpoint): OWN/server-K-of-S and
  BUILT/server-K-of-S, each None where not given."""
  return tuple(given and parts.server_root(given, server, servers)
               for given in (args.checkpoint_dir, args.from_checkpoint))


def ready_record(port: int, items: Dict[str, int], max_sizes: Dict[str, int],
                 signature: Optional[List[Dict[str, Any]]]) -> str:
  """The one stdout line of a child once it serves: what the parent reads.
  `signature`: its fields (`output.spec_fields`), or None where the parent
  checks the dataset (`serve_native`)."""
  return json.dumps({
      'port': port,
      'tables': {name: {'items': items[name], 'max_size': max_sizes[name]}
                 for name in items},
      'signature': signature})


# --- In the parent: start, watch, stop. --------------------------------------

class _Child:
  """One server process, its lines read by two threads into `events`."""

  def __init__(self, args, layout: Layout, server: int, events: queue.Queue,
               load: Optional[str]):
    self.server = server
    self.name = layout.name(server)
    self.ready: Optional[Dict[str, Any]] = None
    self.reported = False
    command = [sys.executable, '-m', 'rlds_reverb', *args.argv,
               '--as-server', f'{server}:{layout.servers}:{os.getpid()}']
    if load is not None:
      command += ['--parent-checks', load]
    self.process = subprocess.Popen(
        command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        stdin=subprocess.PIPE if load is not None else subprocess.DEVNULL,
        bufsize=1)
    self._readers = [
        threading.Thread(target=self._read_records, args=(events,),
                         daemon=True),
        threading.Thread(target=self._pass_lines, daemon=True)]
    for reader in self._readers:
      reader.start()

  def _read_records(self, events: queue.Queue) -> None:
    for line in self.process.stdout:
      try:
        events.put((self, json.loads(line)))
      except json.JSONDecodeError:
        output.note(f'{self.name}: {line.rstrip()}')

  def _pass_lines(self) -> None:
    prefix = f'{output.PROG}: '
    for line in self.process.stderr:
      line = line.rstrip('\n')
      output.note(f'{self.name}: '
                  f'{line[len(prefix):] if line.startswith(prefix) else line}')

  def tell(self, line: str) -> None:
    """A line to the child's stdin (`serve_native.CHECKED`)."""
    try:
      self.process.stdin.write(f'{line}\n')
      self.process.stdin.flush()
    except (BrokenPipeError, OSError, ValueError):
      pass  # Ended: `_Watch.look` says so.

  def signal(self, signum: int) -> None:
    if self.process.poll() is None:
      try:
        self.process.send_signal(signum)
      except ProcessLookupError:
        pass

  def finish(self) -> int:
    code = self.process.wait()
    for reader in self._readers:
      reader.join()
    return code

  @property
  def address(self) -> Optional[str]:
    return f'localhost:{self.ready["port"]}' if self.ready else None


@dataclasses.dataclass(frozen=True)
class Checked:
  """The dataset's check of every server, made before they start (the
  build's record of it, `build_record`): what the checker would print."""
  fields: List[Dict[str, Any]]  # The signature's, for the servers file.
  lines: List[str]


def run(args, layout: Layout, requests, loads: Optional[List[str]],
        checked: Optional[Checked] = None) -> int:
  """Serves `layout`'s servers until `requests.stop`, or one ends unasked.
  `requests`: serve's signal flags, installed before the children start.
  `loads`: the checkpoint each server loads, which a checker process checks
  against the dataset as they load (`serve_native`), unless `checked`
  already did; None: each child checks its own."""
  start = time.monotonic()
  events = queue.Queue()
  output.note(_starting_text(layout))
  children = [_Child(args, layout, server, events,
                     loads[server] if loads else None)
              for server in range(layout.servers)]
  checker = _Checker(args, loads, events) if loads and not checked else None
  watch = _Watch(layout, children, args.keep_going, checker)
  if checked:
    for line in checked.lines:
      output.note(line)
    watch.on_checked('checked', checked.fields, time.monotonic() - start)
  try:
    while watch.running():
      _take_events(events, watch, start)
      if requests.checkpoint:
        requests.checkpoint = False
        watch.forward(signal.SIGUSR1, 'SIGUSR1: every server writes a '
                      'checkpoint, into its own root')
      if requests.stop:
        watch.stop()
      watch.look(time.monotonic() - start)
    _take_events(events, watch, start)
  finally:
    watch.stop()
    codes = [child.finish() for child in children]
    if checker is not None:
      checker.finish()
    _remove(watch.servers_file)
  code = watch.exit_code(codes)
  if code == output.EXIT_OK:
    output.note(f'all {layout.servers} servers stopped'
                f'{_not_ready_text(children, watch.checked)}')
  return code


class _Checker:
  """The process that checks the dataset for every server (`serve_native`):
  its lines passed on as they come; its outcome an event, as the
  children's ready records are: ('checked', the signature's fields), or
  ('refused', its exit code) once it said why."""

  def __init__(self, args, loads: List[str], events: queue.Queue):
    command = [sys.executable, '-m', 'rlds_reverb', *args.argv,
               '--check-servers', str(os.getpid())]
    for load in loads:
      command += ['--check-load', load]
    self.process = subprocess.Popen(
        command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, bufsize=1)
    self._events = events
    self._readers = [threading.Thread(target=self._read_record, daemon=True),
                     threading.Thread(target=self._pass_lines, daemon=True)]
    for reader in self._readers:
      reader.start()

  def _read_record(self) -> None:
    """Its record, printed once every check passed, is the outcome; no
    record by its end, a refusal."""
    for line in self.process.stdout:
      try:
        record = json.loads(line)
      except json.JSONDecodeError:
        output.note(line.rstrip())
        continue
      self._events.put((None, ('checked', record)))
      break
    else:
      self._events.put((None, ('refused', self.process.wait())))
      return
    self.process.stdout.read()
    self.process.wait()  # Reaped at once: it ends as soon as it printed.

  def _pass_lines(self) -> None:
    for line in self.process.stderr:
      print(line, end='', file=sys.stderr, flush=True)

  def stop(self) -> None:
    if self.process.poll() is None:
      try:
        self.process.terminate()
      except ProcessLookupError:
        pass

  def finish(self) -> None:
    self.process.wait()
    for reader in self._readers:
      reader.join()


def _not_ready_text(children: List['_Child'], checked: bool) -> str:
  """' (server 1 of 2 before it was ready)' for a stop during the start
  (all of them, if the dataset's check was not done)."""
  waiting = [child.name for child in children
             if not (child.ready and checked)]
  if not waiting:
    return ''
  return (f' ({wording.listed(waiting)} before '
          f'{"it was" if len(waiting) == 1 else "they were"} ready)')


def _starting_text(layout: Layout) -> str:
  where = (f'from {layout.seed}/server-K-of-{layout.servers}' if layout.seed
           else f'from their own checkpoints in {layout.own}')
  ports = (f'ports {layout.port} to {layout.port_of(layout.servers - 1)}'
           if layout.port is not None else 'free ports')
  return (f'starting {layout.servers} servers {where}, on {ports}, each in '
          'a process of its own, loading at the same time')


def _take_events(events: queue.Queue, watch: '_Watch', start: float) -> None:
  while True:
    try:
      child, record = events.get(timeout=_POLL_S)
    except queue.Empty:
      return
    if child is None:
      watch.on_checked(*record, seconds=time.monotonic() - start)
    else:
      watch.on_ready(child, record, time.monotonic() - start)


class _Watch:
  """The parent's view of its children: who is ready, who ended, whether
  it is stopping, and why."""

  def __init__(self, layout: Layout, children: List[_Child],
               keep_going: bool, checker: Optional[_Checker]):
    self.layout = layout
    self.children = children
    self.keep_going = keep_going
    self.checker = checker
    # The dataset's check passed (or is the children's own).
    self.checked = checker is None
    self.signature: Optional[List[Dict[str, Any]]] = None  # The parent's.
    self.refused: Optional[int] = None  # The checker's exit code, if it refused.
    self.stopping = False
    self.lost: List[int] = []  # Exit codes of servers that ended unasked.
    self.servers_file: Optional[str] = None

  def running(self) -> bool:
    return any(child.process.poll() is None for child in self.children)

  def on_ready(self, child: _Child, record: Dict[str, Any],
               seconds: float) -> None:
    child.ready = record
    if self.stopping:  # Ready as it was told to stop: nothing to announce.
      return
    items = ', '.join(f'{wording.count(table["items"], "item")} in {name!r}'
                      for name, table in record['tables'].items())
    output.note(f'{child.name} ready on port {record["port"]}: {items} '
                f'({seconds:.1f} s)')
    self._maybe_all_ready(seconds)

  def on_checked(self, outcome: str, value, seconds: float) -> None:
    """The checker's outcome: passed (`value`: the signature's fields),
    each child told; or, unless stopping, refused (`value`: its exit code;
    it said why), every server stopped, exit 2."""
    if outcome == 'refused':
      if not self.stopping:
        self.refused = value
        self.stop()
      return
    self.checked = True
    self.signature = value
    for child in self.children:
      child.tell(CHECKED)
    self._maybe_all_ready(seconds)

  def _maybe_all_ready(self, seconds: float) -> None:
    if (self.checked and not self.stopping and
        all(child.ready for child in self.children)):
      self._all_ready(seconds)

  def _all_ready(self, seconds: float) -> None:
    ready = [child.ready for child in self.children]
    names = list(ready[0]['tables'])
    total = sum(table['items'] for record in ready
                for table in record['tables'].values())
    if self.layout.servers_file:
      _write_servers_file(self.layout.servers_file, self.children,
                          self.signature)
      self.servers_file = self.layout.servers_file
      said = (f'; addresses, tables and signature in '
              f'{self.layout.servers_file}')
    else:
      said = ' (--servers-file PATH writes their addresses for readers)'
    output.note(f'all {self.layout.servers} servers ready in {seconds:.1f} '
                f's: {wording.count(total, "item")}{said}')
    addresses_ = ' '.join(child.address for child in self.children)
    print(f'serving {", ".join(names)} on {self.layout.servers} servers of '
          f'every interface: {addresses_}', flush=True)

  def forward(self, signum: int, text: str) -> None:
    output.note(text)
    for child in self.children:
      child.signal(signum)

  def stop(self) -> None:
    if self.stopping:
      return
    self.stopping = True
    if self.checker is not None:
      self.checker.stop()
    for child in self.children:
      child.signal(signal.SIGTERM)

  def look(self, seconds: float) -> None:
    """Says, once, each server that ended while nobody asked it to."""
    for child in self.children:
      code = child.process.poll()
      if code is None or child.reported or self.stopping:
        continue
      child.reported = True
      self.lost.append(code)
      where = f' (localhost:{child.ready["port"]})' if child.ready else ''
      if self.keep_going and self.running():
        output.note(f'{child.name}{where} ended after {seconds:.1f} s, '
                    f'{_status(code)}; --keep-going: the others go on')
        continue
      output.note(f'{child.name}{where} ended after {seconds:.1f} s, '
                  f'{_status(code)}; stopping the others')
      self.stop()

  def exit_code(self, codes: List[int]) -> int:
    """0 for servers that stopped when told to: a server told to stop
    while it starts, before its own handlers, ends by the SIGTERM itself."""
    if self.refused is not None:
      return (output.EXIT_USAGE if self.refused == output.EXIT_USAGE
              else output.EXIT_FAILURE)
    if output.EXIT_USAGE in self.lost:
      return output.EXIT_USAGE
    stopped = (0, -signal.SIGTERM) if self.stopping else (0,)
    if self.lost or any(code not in stopped for code in codes):
      return output.EXIT_FAILURE
    return output.EXIT_OK


def _status(code: int) -> str:
  if code < 0:
    return f'killed by {signal.Signals(-code).name}'
  return f'exit code {code}'


def _write_servers_file(path: str, children: List[_Child],
                        signature: Optional[List[Dict[str, Any]]]) -> None:
  """Written whole or not at all (a reader never sees half of it).
  `signature`: the parent's, or None: the children's."""
  ready = [child.ready for child in children]
  record = {
      'servers': [{'server': child.server, 'address': child.address,
                   'tables': child.ready['tables']} for child in children],
      'tables': list(ready[0]['tables']),
      'signature': signature or ready[0]['signature'],
  }
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  partial = f'{path}.partial'
  with open(partial, 'w') as file:
    json.dump(record, file, indent=1)
  os.replace(partial, path)


def _remove(path: Optional[str]) -> None:
  """The servers file, once its servers are gone: no reader dials them."""
  if path:
    try:
      os.remove(path)
    except FileNotFoundError:
      pass
