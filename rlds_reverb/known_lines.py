"""The lines of TensorFlow, gym and Reverb that the package drops, and when.

    import rlds_reverb            adds `QuietImports` to sys.meta_path
      rlds_reverb.load(...)       a module of ours imports tensorflow -> their
      create_trajectory_data_spec tf_agents (for us) imports gym     -> start-up
                                                                lines dropped
    with rlds_reverb.quiet_known_lines():
      reverb.Server(..., checkpointer=...)  -> Reverb's loading lines dropped

Lines are dropped only while the package imports TensorFlow or gym (or inside
`quiet_known_lines`), and only those `known` names; every other line written
then comes out when the import ends. No log level changes: TensorFlow reads
`TF_CPP_MIN_LOG_LEVEL` once, at its first message, which it prints while
being imported, so a level set for the import (even put back after it) would
hold for the whole process and hide the user's own pipelines' warnings too.
The same lines printed by a user's own `import tensorflow` stay: they are the
user's. `RLDS_REVERB_QUIET=0` in the environment drops nothing.
"""

import contextlib
import importlib.abc
import os
import re
import sys
from typing import Iterator, Optional, Sequence

from rlds_reverb._util import quiet

QUIET_VARIABLE = 'RLDS_REVERB_QUIET'

# TensorFlow 2.15's start-up lines, printed while `tensorflow` is imported
# (measured: at TF_CPP_MIN_LOG_LEVEL 0 all, at 1 the cu* and TF-TRT lines, at
# 2 the three cu* lines, at 3 none).
TENSORFLOW_START_UP = re.compile(
    r'^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] \S+:\d+\] ('
    r'Unable to register cu(DNN|FFT|BLAS) factory: Attempting to register '
    r'factory for plugin cu\w+ when one has already been registered'
    r'|TF-TRT Warning: Could not find TensorRT'
    r'|oneDNN custom operations are on\.'
    r'|Could not find cuda drivers on your machine, GPU will not be used\.'
    r'|This TensorFlow binary is optimized to use available CPU instructions'
    r')'
    # The second line of the last one.
    r'|^To enable the following instructions: .* in other operations, '
    r'rebuild TensorFlow with the appropriate compiler flags\.$')

# dm-reverb 0.14.0's progress as a server loads a checkpoint (about 25 lines,
# one per 100 chunk records). Its other lines (a server started or shut down)
# are not known here.
REVERB_CHECKPOINT_LOAD = re.compile(
    r'^\[reverb/cc/platform/tfrecord_checkpointer\.cc:\d+\] +('
    r'Initializing TFRecordCheckpointer in '
    r'|Loading latest checkpoint from '
    r'|Loading checkpoint from '
    r'|Loading and verifying metadata of the checkpointed tables\.'
    r'|Metadata for table .* was successfully loaded and verified\.'
    r'|Successfully loaded and verified metadata for all '
    r'|Still reading compressed trajectory data\. '
    r'|Completed reading compressed trajectory data\. '
    r'|Table .* items have been successfully loaded from checkpoint '
    r'|Successfully loaded \d+ tables from )')

# Imports whose start-up lines the package drops when it is the importer.
NOISY_IMPORTS = ('tensorflow', 'gym')


def known(line: str) -> bool:
  """Whether `line` (no newline) is one of the lines the package drops."""
  return bool(TENSORFLOW_START_UP.match(line)
              or REVERB_CHECKPOINT_LOAD.match(line)
              or line in _gym_notice_lines())


def _gym_notice_lines() -> Sequence[str]:
  """The lines of gym's "Gym has been unmaintained" notices, as the
  installed `gym_notices` (which gym imports to print them) words them."""
  notices = sys.modules.get('gym_notices.notices')
  if notices is None:
    return ()
  return [line for text in getattr(notices, 'notices', {}).values()
          for line in text.split('\n')]


def quiet_wanted() -> bool:
  return os.environ.get(QUIET_VARIABLE) != '0'


@contextlib.contextmanager
def nothing_dropped(enabled: bool = True) -> Iterator[None]:
  """In the block nothing is dropped, in this process and those it starts
  (the command line's `--debug`); the environment is put back after."""
  if not enabled:
    yield
    return
  before = os.environ.get(QUIET_VARIABLE)
  os.environ[QUIET_VARIABLE] = '0'
  try:
    yield
  finally:
    if before is None:
      os.environ.pop(QUIET_VARIABLE, None)
    else:
      os.environ[QUIET_VARIABLE] = before


@contextlib.contextmanager
def quiet_known_lines() -> Iterator[None]:
  """Drops the known lines of TensorFlow, gym and Reverb written to stderr
  in the block: TensorFlow's start-up lines, gym's notice and Reverb's
  progress as a server loads a checkpoint (~25 lines a load, which no log
  level of Reverb's turns off):

      with rlds_reverb.quiet_known_lines():
        server = reverb.Server(tables, checkpointer=checkpointer)

  Every other line written in the block (a warning, another thread's
  output) is written when it ends. With `RLDS_REVERB_QUIET=0` in the
  environment it drops nothing.
  """
  if not quiet_wanted():
    yield
    return
  with quiet.lines_dropped(known):
    yield


class QuietImports(importlib.abc.MetaPathFinder):
  """Runs the import of TensorFlow or gym inside `quiet_known_lines` when a
  module of the package is what imports it (directly or through TF-Agents,
  Reverb or TFDS); any other importer's lines stay."""

  def find_spec(self, fullname: str, path: Optional[Sequence[str]] = None,
                target: Optional[object] = None):
    if (fullname not in NOISY_IMPORTS or not quiet_wanted()
        or not _imported_by_the_package()):
      return None
    spec = _spec_of_the_other_finders(self, fullname, path, target)
    if spec is not None and hasattr(spec.loader, 'exec_module'):
      try:
        spec.loader.exec_module = _QuietExec(spec.loader)
      except AttributeError:  # A loader with __slots__: imported as it is.
        pass
    return spec


def _imported_by_the_package() -> bool:
  """Whether a module of the package (other than this one) is on the stack."""
  frame = sys._getframe(1)  # pylint: disable=protected-access
  while frame is not None:
    name = frame.f_globals.get('__name__') or ''
    if name.partition('.')[0] == 'rlds_reverb' and name != __name__:
      return True
    frame = frame.f_back
  return False


def _spec_of_the_other_finders(finder, fullname, path, target):
  for other in sys.meta_path:
    if other is not finder and hasattr(other, 'find_spec'):
      spec = other.find_spec(fullname, path, target)
      if spec is not None:
        return spec
  return None


class _QuietExec:
  """A loader's `exec_module`, once, inside `quiet_known_lines`; the loader
  itself stays the module's `__loader__`, unchanged after."""

  def __init__(self, loader):
    self._loader = loader

  def __call__(self, module) -> None:
    del self._loader.exec_module  # Its class's method again.
    with quiet_known_lines():
      self._loader.exec_module(module)


def install() -> None:
  """Adds `QuietImports` first in `sys.meta_path`, once."""
  if not any(isinstance(finder, QuietImports) for finder in sys.meta_path):
    sys.meta_path.insert(0, QuietImports())
