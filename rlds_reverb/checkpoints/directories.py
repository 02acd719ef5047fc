"""Reverb checkpoint directories, read the way Reverb's checkpointer reads them.

`reverb.checkpointers.DefaultCheckpointer(root)` writes each checkpoint into a
new subdirectory named by the time, and its `DONE` file last:

    root/
      2024-05-01T10:00:00.1+00:00/   tables.tfrecord chunks.tfrecord
                                     items.tfrecord DONE
      2024-05-01T11:00:00.2+00:00/   tables.tfrecord     (no DONE: the server
                                                          died while writing)

At start Reverb loads the last subdirectory by name that has `DONE` and skips
the others without a word; after each checkpoint it deletes every entry of
`root` but the newest. A `reverb.Server` given no checkpointer (`serve`
without --checkpoint-dir) still has one: dm-reverb 0.14.0's
`TempDirCheckpointer`, whose root is a new `tempfile.mkdtemp()` per server,
which no later server loads (`in_temporary_root`). This module tells the
user what Reverb will do, and which checkpoint a path means. Plain `os`: the
command line imports TensorFlow and Reverb late.
"""

import dataclasses
import os
import re
import tempfile
from typing import Optional, Tuple

DONE = 'DONE'
CHUNKS = 'chunks.tfrecord'
ITEMS = 'items.tfrecord'
TABLES = 'tables.tfrecord'

# `tempfile.mkdtemp()`'s names: 'tmp' and 8 of its random characters.
_MKDTEMP_NAME = re.compile(r'^tmp[a-z0-9_]{8}$')
# Python's temporary directories besides $TMPDIR (a server's may differ).
_TEMPORARY_DIRECTORIES = ('/tmp', '/var/tmp', '/usr/tmp')


@dataclasses.dataclass(frozen=True)
class Checkpoints:
  """The checkpoint subdirectories of `root`, oldest first (names are times)."""
  root: str
  complete: Tuple[str, ...]
  incomplete: Tuple[str, ...]

  @property
  def newest(self) -> Optional[str]:
    """The subdirectory Reverb loads at start, or None: it starts empty."""
    return self.complete[-1] if self.complete else None

  def path(self, name: str) -> str:
    return os.path.join(self.root, name)


def find(root: str) -> Checkpoints:
  """The complete and incomplete checkpoints in `root` (none if missing)."""
  names = sorted(_subdirectories(root))
  complete = tuple(name for name in names if _is_complete(root, name))
  incomplete = tuple(name for name in names if name not in complete)
  return Checkpoints(root=root, complete=complete, incomplete=incomplete)


def _subdirectories(root: str):
  if not os.path.isdir(root):
    return []
  return [entry.name for entry in os.scandir(root) if entry.is_dir()]


def _is_complete(root: str, name: str) -> bool:
  return os.path.exists(os.path.join(root, name, DONE))


def in_temporary_root(checkpoint: str) -> bool:
  """Whether the checkpoint directory `checkpoint` lies in the root Reverb
  makes for a server given no checkpointer: a `tempfile.mkdtemp()` directly
  in a temporary directory. Nobody chose that root and no other server
  loads it, so a checkpoint written there for one reading is garbage after.

  Told by the path alone (a client cannot ask a server about its
  checkpointer): a root the user named like mkdtemp's, in /tmp, counts too.
  """
  root = os.path.dirname(os.path.abspath(checkpoint))
  parents = {os.path.realpath(directory) for directory in
             (tempfile.gettempdir(), *_TEMPORARY_DIRECTORIES)}
  return bool(_MKDTEMP_NAME.match(os.path.basename(root))) and (
      os.path.realpath(os.path.dirname(root)) in parents)


def writable_error(root: str) -> Optional[str]:
  """Why Reverb could not write a checkpoint under `root`, or None.

  Creates `root` if missing and a subdirectory in it, as Reverb does, so a
  bad path fails at start rather than at shutdown, when the data would be lost.
  """
  if os.path.exists(root) and not os.path.isdir(root):
    return f'{root} is not a directory'
  try:
    os.makedirs(root, exist_ok=True)
    os.rmdir(tempfile.mkdtemp(prefix='.write-test-', dir=root))
  except OSError as e:
    return f'{root} is not writable: {e.strerror or e}'
  return None


def checkpoint_path(path: str) -> str:
  """`path` if it is one checkpoint, else its newest complete checkpoint."""
  if os.path.isfile(os.path.join(path, CHUNKS)):
    return path
  found = find(path)
  if found.newest:
    return found.path(found.newest)
  if not os.path.isdir(path):
    raise FileNotFoundError(f'No Reverb checkpoint at {path}: no such '
                            'directory')
  raise FileNotFoundError(
      f'No Reverb checkpoint at {path}: it holds no {CHUNKS}, and no '
      f'checkpoint directory with a {DONE} file'
      f'{_listed(found.incomplete)}')


def _listed(names: Tuple[str, ...], most: int = 3) -> str:
  """' (among a, b, c and 2 more)' for messages; '' for none."""
  if not names:
    return ''
  more = f' and {len(names) - most} more' if len(names) > most else ''
  return f' (among {", ".join(names[:most])}{more})'
