"""Which checkpoint `serve` starts from, and where its own go: checked so that
Reverb's checkpointer never deletes what is not its own.

    --checkpoint-dir DIR   the server's own root: it loads the newest there
                           and writes one at SIGUSR1, at stop and for
                           `export --server`. Reverb then keeps the entry of
                           DIR that sorts last and deletes every other one,
                           whatever it is, so DIR must be new, empty or hold
                           only Reverb's own checkpoints (exit 2 otherwise,
                           naming what is there).
    --from-checkpoint P    a seed, read and never changed (Reverb's
                           `fallback_checkpoint_path`): a checkpoint, or a
                           directory whose newest complete one is meant (a
                           build's --out). Loaded when DIR holds no
                           checkpoint yet; without DIR, into a temporary root
                           removed at stop.

    loads: DIR's newest complete checkpoint, else the seed, else nothing

Plain `os` (`checkpoints.directories`): this runs before Reverb is imported.
"""

import dataclasses
import os
import shutil
import sys
import tempfile
from typing import Any, Dict, List, Optional, Sequence

from rlds_reverb import checkpoints
from rlds_reverb._util import wording
from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import table_settings
from rlds_reverb.cli import output
from rlds_reverb.cli import tables as table_flags


@dataclasses.dataclass(frozen=True)
class Start:
  """What the server loads at start and where its own checkpoints go."""
  own: Optional[directories.Checkpoints]  # --checkpoint-dir, checked.
  seed: Optional[str]  # The checkpoint --from-checkpoint means.

  @property
  def load_path(self) -> Optional[str]:
    """The checkpoint Reverb loads, or None: the tables start empty."""
    if self.own is not None and self.own.newest:
      return self.own.path(self.own.newest)
    return self.seed

  @property
  def restarts(self) -> bool:
    """Whether the server loads its own checkpoint, not the seed."""
    return self.own is not None and bool(self.own.newest)


def start(checkpoint_dir: Optional[str],
          from_checkpoint: Optional[str]) -> Start:
  """Both options checked (`output.CliError`, exit 2, before Reverb)."""
  own = _own_root(checkpoint_dir) if checkpoint_dir else None
  seed = _seed(from_checkpoint) if from_checkpoint else None
  if own is not None and seed is not None and _inside(seed, own.root):
    raise _usage(
        f'--from-checkpoint {from_checkpoint} lies in --checkpoint-dir '
        f'{checkpoint_dir}, where the server\'s first checkpoint would delete '
        f'it: give --checkpoint-dir a directory of its own')
  return Start(own=own, seed=seed)


def _usage(message: str) -> output.CliError:
  return output.CliError(message, output.EXIT_USAGE)


def _inside(path: str, root: str) -> bool:
  path, root = os.path.realpath(path), os.path.realpath(root)
  return path == root or path.startswith(root + os.sep)


# --- --checkpoint-dir: the server's own root. --------------------------------

def _own_root(root: str) -> directories.Checkpoints:
  found = directories.find(root)
  problem = own_root_problem(found)
  if problem:
    raise _usage(f'--checkpoint-dir: {problem}')
  problem = checkpoints.writable_error(root)
  if problem:
    raise _usage(f'--checkpoint-dir: {problem}')
  return directories.find(root)


def own_root_problem(found: directories.Checkpoints) -> Optional[str]:
  """Why `found.root` must not be a server's checkpoint root, or None. (A
  root of many servers' builds never comes here: `serve_many.layout_of`
  serves or refuses it first, for --from-checkpoint too.)"""
  root = found.root
  if os.path.exists(root) and not os.path.isdir(root):
    return f'{root} is not a directory'
  if found.is_checkpoint:
    return _one_checkpoint_text(root)
  deleted = ("the server's first checkpoint (SIGUSR1, stop, export "
             "--server) would delete it, as Reverb's checkpointer keeps only "
             'the newest entry of its directory')
  if found.built:
    return (f'{root} holds a build ({found.built[-1]}), and {deleted}: '
            f'start from it with --from-checkpoint {root}, and give '
            f'--checkpoint-dir a new directory for the server\'s own '
            f'checkpoints')
  if found.unfinished:
    size = wording.size(
        directories.tree_size(found.path(found.unfinished[-1])))
    return (f'{root} holds an unfinished build ({found.unfinished[-1]}, '
            f'{size} without a {directories.DONE} file, left by a build that '
            f'was killed), and {deleted}: remove it, or give another '
            f'--checkpoint-dir')
  if found.parts:
    return (f"{root} holds a build's parts ({directories.PARTS}: a build "
            f'running there, or killed), and {deleted}: give another '
            f'--checkpoint-dir')
  if found.others:
    which = wording.noun(len(found.others), 'is not a Reverb checkpoint',
                         'are not Reverb checkpoints')
    them = deleted.replace('delete it', 'delete them')
    return (f'{root} holds {wording.listed(found.others)}, which {which}, and '
            f'{them}: give a new or empty directory, or one only servers have '
            f'checkpointed to')
  return None


def _one_checkpoint_text(path: str) -> str:
  parent = os.path.dirname(os.path.abspath(path))
  built = os.path.isfile(os.path.join(path, directories.BUILD_MARK))
  instead = (f'start from it with --from-checkpoint {path}' if built else
             f'give its parent, --checkpoint-dir {parent}, to restart from '
             f'it, or --from-checkpoint {path} to start from it')
  return (f'{path} is one checkpoint, not a directory of them, and the '
          f"server's first checkpoint would delete its files: {instead}")


def incomplete_text(found: directories.Checkpoints) -> Optional[str]:
  """A warning of Reverb's own incomplete checkpoints in the server's root,
  which Reverb skips and deletes at the next checkpoint; None if none."""
  if not found.incomplete:
    return None
  names = ', '.join(found.incomplete)
  them = wording.noun(len(found.incomplete), 'it', 'them')
  instead = (f'loads {found.newest} instead' if found.newest
             else 'starts without it')
  return (f'warning: '
          f'{wording.count(len(found.incomplete), "incomplete checkpoint")} in '
          f'{found.root} (no {directories.DONE} file: a server stopped while '
          f'writing?): {names}. Reverb ignores {them}, {instead}, and '
          f'deletes {them} at the next checkpoint')


# --- --from-checkpoint: the seed. --------------------------------------------

def _seed(path: str) -> str:
  """The checkpoint `path` means: itself, or its newest complete one."""
  if not os.path.isdir(path):
    raise _usage(f'--from-checkpoint: {path}: no such directory')
  if directories.is_checkpoint(path):
    if not os.path.isfile(os.path.join(path, directories.DONE)):
      raise _usage(
          f'--from-checkpoint: {path} is an unfinished checkpoint (no '
          f'{directories.DONE} file: its writer failed or was killed)')
    return path
  found = directories.find(path)
  if not found.newest:
    raise _usage(
        f'--from-checkpoint: {path} holds no complete checkpoint (a '
        f'directory with a {directories.DONE} file)'
        f'{_among(found.incomplete + found.unfinished)}')
  return found.path(found.newest)


def _among(names: Sequence[str]) -> str:
  return f'; it holds unfinished ones: {wording.listed(names)}' if names else ''


# --- Reverb's checkpointer, and what serve says of it. -----------------------

class Checkpointer:
  """`reverb.checkpointers.DefaultCheckpointer` for `start`, and the
  temporary root it needs when there is a seed but no --checkpoint-dir
  (removed by `close`)."""

  def __init__(self, reverb, plan: Start):
    self._temporary = None
    self.checkpointer = None
    if plan.own is None and plan.seed is None:
      return
    root = plan.own.root if plan.own is not None else None
    if root is None:
      self._temporary = root = tempfile.mkdtemp()
    self.checkpointer = reverb.checkpointers.DefaultCheckpointer(
        root, fallback_checkpoint_path=plan.seed)

  def close(self) -> None:
    if self._temporary:
      shutil.rmtree(self._temporary, ignore_errors=True)


def where_text(plan: Start) -> Optional[str]:
  """Said at start: where the server's own checkpoints go, and whether the
  seed is loaded (None without either option)."""
  if plan.own is None:
    if plan.seed is None:
      return None
    return ('no --checkpoint-dir: SIGUSR1 and stop write no checkpoint (the '
            f'seed {plan.seed} is only read)')
  own = (f"the server's own checkpoints go to {plan.own.root} (at SIGUSR1, "
         'at stop and for export --server; Reverb keeps the newest)')
  if plan.seed is None:
    return own
  if plan.restarts:
    return (f'{own}; it holds one, which is loaded: the seed {plan.seed} is '
            f'loaded only while it holds none')
  return f'{own}; the seed {plan.seed} is only read, never changed'


def ignored_options_lines(args, load: checkpoints.CheckpointLoad
                          ) -> List[str]:
  """Per table the command line gave options and the checkpoint holds: the
  options that its settings replace, named, and what holds instead."""
  held: Dict[str, table_settings.TableSettings] = {
      settings.name: settings for settings in load.settings}
  lines = []
  for name, given in table_flags.given_options(args).items():
    if not given or name not in held:
      continue
    flags = ', '.join(table_flags.flag_text(field, value)
                      for field, value in given.items())
    lines.append(
        f'table {name!r}: {flags} {wording.noun(len(given), "is", "are")} '
        f"ignored: the checkpoint's settings replace the table options "
        f'({settings_text(held[name])})')
  return lines


def settings_text(settings: table_settings.TableSettings) -> str:
  """'max_size 1,000,000, sampler uniform, remover fifo, min_size 1'."""
  parts = [f'max_size {settings.max_size:,}',
           f'sampler {_selector_text(settings.sampler)}',
           f'remover {_selector_text(settings.remover)}']
  if settings.max_times_sampled > 0:
    parts.append(f'max_times_sampled {settings.max_times_sampled:,}')
  limits = settings.rate_limits
  parts.append(f'min_size {limits.min_size_to_sample:,}')
  if abs(limits.min_diff) < sys.float_info.max:  # Not MinSize's.
    parts.append(f'samples_per_insert {limits.samples_per_insert:g}')
  return ', '.join(parts)


def _selector_text(selector: Any) -> str:
  if selector.kind == 'prioritized':
    return f'prioritized (exponent {selector.priority_exponent:g})'
  return selector.kind
