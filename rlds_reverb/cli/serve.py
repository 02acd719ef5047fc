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
import signal
import time
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from rlds_reverb import addresses
from rlds_reverb import checkpoints
from rlds_reverb import tables
from rlds_reverb._util import wording
from rlds_reverb.checkpoints import loading
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import serve_checkpoints
from rlds_reverb.cli import serve_many
from rlds_reverb.cli import tables as table_flags
from rlds_reverb.errors import AddressError
from rlds_reverb.errors import CheckpointError

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

# How often the main thread looks at what the signals asked for.
_POLL_S = 0.2


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
  # Set by serve_many for each server of many: K:S:PARENT_PID.
  parser.add_argument('--as-server', default=None, help=argparse.SUPPRESS)
  table_flags.add_arguments(parser)


def run(args: argparse.Namespace) -> int:
  if args.as_server:
    serve_many.become_server(args)
  else:
    layout = serve_many.layout_of(args)
    if layout is not None:
      table_flags.table_options(args)  # Bad table options said once, here.
      requests = _Requests()
      requests.install()
      return serve_many.run(args, layout, requests)
  configured = table_flags.table_options(args)
  for failed, message in options.image_usage_problems(args):
    if failed:
      raise output.CliError(message, output.EXIT_USAGE)
  _check_port(args.port)
  plan = serve_checkpoints.start(args.checkpoint_dir, args.from_checkpoint)
  if plan.own is not None:
    _say(serve_checkpoints.incomplete_text(plan.own))
  load = _checkpoint_to_load(plan, [table.name for table in configured])
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import specs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.convert import nstep  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  rlds_data = options.load(args)
  step_format, spec = options.step_format(args, rlds_data)
  # n-step items have no time axis: their spec is the signature.
  row_spec = nstep.transition_spec(step_format.spec) if args.n_step else spec
  signature = row_spec if args.n_step else specs.table_signature(spec)
  output.note_data(step_format.notes())
  requests = _Requests()
  requests.install()
  hint = _Hint(args, rlds_data)
  if load:
    _check_files(load.path)
    _check_checkpoint_signatures(load, signature, hint)
    for line in serve_checkpoints.ignored_options_lines(args, load):
      output.note(line)
    output.note(loading_text(load, plan))
  _say(serve_checkpoints.where_text(plan))
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
      _check_loaded_table(info, name, signature, hint)
    if plan.own is not None or plan.seed is not None:
      output.note(_restored_text(plan, info, names))
    measured = _measured_frames(args, rlds_data)
    for line in memory_lines(row_spec, {name: info[name] for name in names},
                             measured):
      output.note(line)
    if args.as_server:  # Read by the serve of many servers that started it.
      print(serve_many.ready_record(server.port, info, names, signature),
            flush=True)
    else:
      print(serving_text(names, server.port), flush=True)
    _serve_until_stopped(requests, client, args.checkpoint_dir)
    if args.checkpoint_dir:
      path = _checkpoint(client, args.checkpoint_dir)
      output.note(f'checkpoint written to {path}')
    else:
      output.note(_discarded_text(client, names))
  finally:
    server.stop()
    checkpointer.close()
  return output.EXIT_OK


def _say(text: Optional[str]) -> None:
  if text:
    output.note(text)


def _measured_frames(args, rlds_data) -> Dict[str, float]:
  """With --images encoded: the mean encoded frame of the first episode, by
  column path of trajectories and of n-step transitions (next_observation)."""
  storage = options.image_storage(args)
  if not storage.encoded:
    return {}
  from rlds_reverb.convert import encoded  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  sizes = encoded.mean_encoded_bytes(rlds_data, storage)
  return {**sizes, **{f'next_{path}': size for path, size in sizes.items()}}


def memory_lines(row_spec, infos, measured=None) -> List[str]:
  """Per table: its memory per item and at its max_size (the served one: a
  checkpoint's wins over the options). `measured`: bytes per row of columns
  the spec cannot size (encoded frames)."""
  from rlds_reverb.write import memory  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  estimate = memory.item_memory(row_spec, measured=measured)
  per_item = wording.size(estimate.bytes_per_item)
  lines = []
  for name, info in infos.items():
    if info.max_size >= tables.UNBOUNDED_SIZE:
      total = (f'max_size {info.max_size:,} (unbounded) -> about '
               f'{wording.size(estimate.bytes_per_item * 1e6)} per million '
               'items')
    else:
      total = (f'max_size {info.max_size:,} -> about '
               f'{wording.size(estimate.bytes_per_item * info.max_size)}')
    lines.append(f'memory estimate: table {name!r}: about {per_item} per '
                 f'item; {total}')
  if estimate.unsized:
    lines.append(
        'memory estimate: not counting the data of '
        f'{", ".join(repr(path) for path in estimate.unsized)} (strings or '
        'shapes the spec leaves open: their size is not known before a push)')
  return lines


def _discarded_text(client, names: Sequence[str]) -> str:
  """What stopping without --checkpoint-dir throws away."""
  try:
    info = client.server_info(timeout=5)
    sizes = {name: info[name].current_size for name in names}
    held = ', '.join(f'{wording.count(size, "item")} of table {name!r}'
                     for name, size in sizes.items() if size)
    if not held:
      return (f'stopped without --checkpoint-dir; '
              f'{"every table was" if len(names) > 1 else "the table was"} '
              'empty, nothing is discarded')
    held = f'the {held} {"is" if sum(sizes.values()) == 1 else "are"}'
  except Exception:  # pylint: disable=broad-except
    # Still say it, without the counts.
    held = (f'{wording.noun(len(names), "table")} '
            f'{", ".join(repr(name) for name in names)} '
            f'{wording.noun(len(names), "is", "are")}')
  return (f'stopped without --checkpoint-dir: {held} discarded (serve '
          f'--checkpoint-dir DIR writes a checkpoint at stop and reloads it)')


class _Requests:
  """What SIGINT, SIGTERM and SIGUSR1 asked for; the main thread acts on it.

  The handlers only set attributes: a lock taken in a handler (as
  `threading.Event.set` does) deadlocks if the main thread holds it.
  """

  def __init__(self):
    self.stop = False
    self.checkpoint = False

  def install(self) -> None:
    signal.signal(signal.SIGINT, self._on_stop)
    signal.signal(signal.SIGTERM, self._on_stop)
    signal.signal(signal.SIGUSR1, self._on_checkpoint)

  def _on_stop(self, signum, frame):
    del signum, frame
    self.stop = True

  def _on_checkpoint(self, signum, frame):
    del signum, frame
    self.checkpoint = True


def _serve_until_stopped(requests: _Requests, client, checkpoint_dir) -> None:
  while not requests.stop:
    if requests.checkpoint:
      requests.checkpoint = False  # Cleared first: a new request is not lost.
      _checkpoint_on_request(client, checkpoint_dir)
    time.sleep(_POLL_S)


def _checkpoint_on_request(client, checkpoint_dir) -> None:
  """SIGUSR1: a failed checkpoint is reported, and the data still served."""
  if not checkpoint_dir:
    output.note('SIGUSR1: no checkpoint written, serve has no '
                '--checkpoint-dir; still serving')
    return
  try:
    path = _checkpoint(client, checkpoint_dir)
  except output.CliError as e:
    output.note(f'{e}; still serving')
    return
  output.note(f'checkpoint written to {path}')


def _checkpoint(client, checkpoint_dir: str) -> str:
  try:
    return client.checkpoint()
  except RuntimeError as e:
    raise output.CliError(f'Could not write a checkpoint to {checkpoint_dir}: '
                          f'{output.error_line(e)}') from e


def _checkpoint_to_load(plan: serve_checkpoints.Start,
                        served: Sequence[str]):
  """What Reverb will load (None: nothing), read from its tables file; one
  whose tables are not all served is refused here, before Reverb starts:
  Reverb would first start loading it, then fail."""
  path = plan.load_path
  if not path:
    return None
  try:
    load = checkpoints.checkpoint_load(path)
  except (CheckpointError, OSError) as e:
    raise output.CliError(f'cannot read checkpoint {path}: '
                          f'{output.error_line(e)}', output.EXIT_USAGE) from e
  held = sorted(load.tables)  # Reverb writes them in no fixed order.
  if set(held) - set(served):
    raise output.CliError(
        f'checkpoint {path} holds '
        f'{wording.noun(len(held), "table")} {_names(held)}, '
        f'but serve serves {_names(served)}, and Reverb fails to load a '
        f'table it does not serve: serve every table it holds (--table '
        f'{" --table ".join(held)}; the checkpoint\'s settings replace '
        'their options), or start from another checkpoint', output.EXIT_USAGE)
  return load


def _check_files(path: str) -> None:
  """The checkpoint's files read whole before Reverb loads them: a damaged
  one is named here (exit 2), where Reverb would say 'corrupted record'."""
  try:
    loading.check_files(path)
  except CheckpointError as e:
    raise output.CliError(f'cannot load checkpoint {path}: {e}',
                          output.EXIT_USAGE) from e


def _check_checkpoint_signatures(load: checkpoints.CheckpointLoad,
                                 signature, hint: '_Hint') -> None:
  """The check `_check_loaded_table` makes once Reverb loaded the
  checkpoint, made before it starts loading (minutes, for a big one). A
  signature that does not decode is left to that later check."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tensorflow.core.protobuf import struct_pb2  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  for settings in load.settings:
    if not settings.signature:
      continue
    try:
      held = tf.__internal__.saved_model.decode_proto(
          struct_pb2.StructuredValue.FromString(settings.signature))
    except Exception:  # pylint: disable=broad-except
      continue
    _check_loaded_table({settings.name: _Signed(held)}, settings.name,
                        signature, hint)


class _Signed(NamedTuple):
  """What `_check_loaded_table` reads of a table's info."""
  signature: Any


def _names(names: Sequence[str]) -> str:
  return ', '.join(repr(name) for name in names)


def loading_text(load: checkpoints.CheckpointLoad,
                 plan: Optional[serve_checkpoints.Start] = None) -> str:
  """What serve says before Reverb loads a checkpoint, silent until done."""
  held = ', '.join(f'{wording.count(count, "item")} in {table!r}'
                   for table, count in sorted(load.items))
  rate = f'{checkpoints.LOAD_ITEMS_PER_S / 1000:.0f}k'
  which = ('checkpoint' if plan is None or plan.restarts or plan.seed is None
           else 'checkpoint (--from-checkpoint, only read)')
  return (f'loading {which} {load.path}: {held or "no tables"} '
          f'({wording.size(load.bytes)} on disk); the server answers once '
          f'it is loaded, in {loading.about(load.seconds)} (at about {rate} '
          'items/s)')


def _restored_text(plan: serve_checkpoints.Start, info,
                   names: Sequence[str]) -> str:
  if not plan.load_path:
    which = (f'{wording.noun(len(names), "table")} '
             f'{", ".join(repr(name) for name in names)}')
    return (f'no complete checkpoint in {plan.own.root}; {which} '
            f'{wording.noun(len(names), "starts", "start")} empty')
  sizes = ', '.join(f'{wording.count(info[name].current_size, "item")} in '
                    f'{name!r}'
                    for name in sorted(info))
  return f'restored checkpoint {plan.load_path}: {sizes}'


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


def _check_port(port: Optional[int]) -> None:
  """A port another server listens on is bad input: exit 2, nothing started."""
  if port is None:
    return
  try:
    addresses.check_port_free(port)
  except AddressError as e:
    raise output.CliError(f'--port: {e}', output.EXIT_USAGE) from e


def serving_text(names: Sequence[str], port: int) -> str:
  """What serve prints once ready; its last word is an address to use."""
  return (f'serving {", ".join(names)} on port {port} of every interface, '
          f'e.g. localhost:{port}')


def _start(reverb, args, configured, signature, plan, checkpointer):
  _check_port(args.port)  # Again: loading the dataset took seconds.
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


class _Hint:
  """What a checkpoint that does not fit the dataset was likely made with:
  the same dataset as n-step transitions (--n-step) or with encoded images
  (--images encoded), told by its signature's fields and dtypes."""

  def __init__(self, args, rlds_data):
    del rlds_data
    self._n_step = args.n_step
    self._encoded = options.image_storage(args).encoded

  def __call__(self, held) -> str:
    """' (...: serve with --n-step)' for a signature `held`; '' if none."""
    from rlds_reverb.specs import paths  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    held_paths = [path for path, _ in paths.flatten_with_paths(held)]
    strings = any(spec.dtype == tf.string for spec in tf.nest.flatten(held))
    nstep = any(path.split('/')[0] == 'next_observation'
                for path in held_paths)
    hints = []
    if nstep and not self._n_step:
      hints.append('its items are n-step transitions: serve with --n-step')
    if not nstep and self._n_step and held_paths:
      hints.append('its items are trajectories: serve without --n-step')
    if strings and not self._encoded:
      hints.append('it holds encoded images: serve with --images encoded')
    if not strings and self._encoded:
      hints.append('it holds raw images: serve without --images encoded')
    return f' ({"; ".join(hints)})' if hints else ''


def _check_loaded_table(info, table: str, signature,
                        hint: Optional[_Hint] = None) -> None:
  """A checkpoint's table config wins over ours: it must fit the dataset."""
  from rlds_reverb.specs import signature as signature_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  if table not in info:
    raise output.CliError(
        f'The checkpoint has no table {table!r}; its tables are {sorted(info)}')
  held = info[table].signature
  differences = signature_lib.spec_differences(held, signature)
  if held is not None and differences:
    said = hint(held) if hint is not None else ''
    raise output.CliError(output.with_details(
        f"The checkpoint's table {table!r} does not fit the dataset{said}:",
        differences))
