"""What `serve` checks and says of a checkpoint against the dataset it is
given: which checkpoint loads, its files read whole, its tables' signatures
against the dataset's, and the memory its tables take.

Used by one server's serve before and after Reverb loads, and by the serve
of many servers whose children load without TensorFlow (`serve_native`):
there the parent makes the dataset's checks once, for every server, while
they load.
"""

import dataclasses
from typing import Any, Dict, List, NamedTuple, Optional, Sequence

from rlds_reverb import addresses
from rlds_reverb import checkpoints
from rlds_reverb import tables
from rlds_reverb._util import wording
from rlds_reverb.checkpoints import loading
from rlds_reverb.cli import options
from rlds_reverb.cli import output
from rlds_reverb.cli import serve_checkpoints
from rlds_reverb.errors import AddressError
from rlds_reverb.errors import CheckpointError


@dataclasses.dataclass(frozen=True)
class DatasetSignature:
  """The dataset as serve signs its tables for it."""
  rlds_data: Any
  row_spec: Any  # One item's row: a trajectory step, or an n-step item.
  signature: Any  # The tables' signature.
  hint: 'Hint'
  notes: List[str]  # What the step format says of the data.


def dataset_signature(args) -> DatasetSignature:
  """The dataset of `args` loaded and its tables' signature made (imports
  TensorFlow)."""
  from rlds_reverb import specs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.convert import nstep  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  rlds_data = options.load(args)
  step_format, spec = options.step_format(args, rlds_data)
  # n-step items have no time axis: their spec is the signature.
  row_spec = nstep.transition_spec(step_format.spec) if args.n_step else spec
  signature = row_spec if args.n_step else specs.table_signature(spec)
  return DatasetSignature(rlds_data=rlds_data, row_spec=row_spec,
                          signature=signature, hint=Hint(args, rlds_data),
                          notes=step_format.notes())


def check_port(port: Optional[int]) -> None:
  """A port another server listens on is bad input: exit 2, nothing started."""
  if port is None:
    return
  try:
    addresses.check_port_free(port)
  except AddressError as e:
    raise output.CliError(f'--port: {e}', output.EXIT_USAGE) from e


def measured_frames(args, rlds_data) -> Dict[str, float]:
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
  return estimate_lines(estimate.bytes_per_item, estimate.unsized, infos)


def estimate_lines(bytes_per_item: float, unsized: Sequence[str],
                   infos) -> List[str]:
  """`memory_lines` of an estimate already made (`build_record`'s)."""
  per_item = wording.size(bytes_per_item)
  lines = []
  for name, info in infos.items():
    if info.max_size >= tables.UNBOUNDED_SIZE:
      total = (f'max_size {info.max_size:,} (unbounded) -> about '
               f'{wording.size(bytes_per_item * 1e6)} per million items')
    else:
      total = (f'max_size {info.max_size:,} -> about '
               f'{wording.size(bytes_per_item * info.max_size)}')
    lines.append(f'memory estimate: table {name!r}: about {per_item} per '
                 f'item; {total}')
  if unsized:
    lines.append(
        'memory estimate: not counting the data of '
        f'{", ".join(repr(path) for path in unsized)} (strings or '
        'shapes the spec leaves open: their size is not known before a push)')
  return lines


def checkpoint_to_load(plan: serve_checkpoints.Start,
                       served: Sequence[str]):
  """What Reverb will load (None: nothing), read from its tables file; one
  whose tables are not all served is refused here, before Reverb starts:
  Reverb would first start loading it, then fail."""
  path = plan.load_path
  if not path:
    return None
  load = read_checkpoint(path)
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


def read_checkpoint(path: str):
  """`checkpoints.CheckpointLoad` of `path`, from its tables file; one that
  cannot be read is bad input (exit 2), named."""
  try:
    return checkpoints.checkpoint_load(path)
  except (CheckpointError, OSError) as e:
    raise output.CliError(f'cannot read checkpoint {path}: '
                          f'{output.error_line(e)}', output.EXIT_USAGE) from e


def check_files(path: str) -> None:
  """The checkpoint's files read whole before Reverb loads them: a damaged
  one is named here (exit 2), where Reverb would say 'corrupted record'."""
  try:
    loading.check_files(path)
  except CheckpointError as e:
    raise output.CliError(f'cannot load checkpoint {path}: {e}',
                          output.EXIT_USAGE) from e


def check_checkpoint_signatures(load: checkpoints.CheckpointLoad,
                                signature, hint: 'Hint') -> None:
  """The check `check_loaded_table` makes once Reverb loaded the
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
    check_loaded_table({settings.name: _Signed(held)}, settings.name,
                        signature, hint)


class _Signed(NamedTuple):
  """What `check_loaded_table` reads of a table's info."""
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


def restored_text(plan: serve_checkpoints.Start, info,
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


class Hint:
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


def check_loaded_table(info, table: str, signature,
                        hint: Optional[Hint] = None) -> None:
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
