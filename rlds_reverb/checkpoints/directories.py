"""Reverb checkpoint directories, read the way Reverb's checkpointer reads them,
and told apart from what Reverb must never be handed.

`reverb.checkpointers.DefaultCheckpointer(root)` writes each checkpoint into a
new subdirectory named by the time, and its `DONE` file last:

    root/
      2024-05-01T10:00:00.1+00:00/   tables.tfrecord chunks.tfrecord
                                     items.tfrecord DONE
      2024-05-01T11:00:00.2+00:00/   tables.tfrecord     (no DONE: the server
                                                          died while writing)

At start Reverb loads the last subdirectory by name that has `DONE` and skips
the others without a word. After each checkpoint it keeps the entry of `root`
that sorts last and deletes every other one, files and folders alike,
whatever they are (dm-reverb 0.14.0, `tfrecord_checkpointer.cc`). So a root
handed to Reverb must hold nothing but Reverb's own checkpoints: `find`
sorts a directory's entries into

    complete, incomplete   Reverb's own checkpoints, with and without DONE
    built, unfinished      a build's (`rlds-reverb build`: BUILD_MARK
                           inside), with and without DONE: seeds, loaded
                           through `fallback_checkpoint_path`, never a root
    servers                a build's roots of many servers (server-K-of-S)
    parts                  a running (or killed) build's parts (.parts)
    others                 anything else: the user's

A `reverb.Server` given no checkpointer (`serve` without --checkpoint-dir)
still has one: dm-reverb 0.14.0's `TempDirCheckpointer`, whose root is a new
`tempfile.mkdtemp()` per server, which no later server loads
(`in_temporary_root`). Plain `os`: the command line imports TensorFlow and
Reverb late.
"""

import dataclasses
import os
import re
import tempfile
from typing import Optional, Tuple

from rlds_reverb._util import wording

DONE = 'DONE'
CHUNKS = 'chunks.tfrecord'
ITEMS = 'items.tfrecord'
TABLES = 'tables.tfrecord'
# Written first into every checkpoint a build makes (`CheckpointWriter`):
# Reverb's loader reads only the three files above, and a checkpoint that
# holds this one is a build's, whole (DONE) or not.
BUILD_MARK = 'build.json'
PARTS = '.parts'  # A build's parts while it runs (`checkpoints.parts`).
CHECKPOINT_FILES = frozenset({DONE, CHUNKS, ITEMS, TABLES, BUILD_MARK})

# Reverb's names (absl::FormatTime: RFC 3339, local time, its offset).
_CHECKPOINT_NAME = re.compile(
    r'^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?([+-]\d\d:\d\d|Z)$')
_SERVER_ROOT_NAME = re.compile(r'^server-(\d+)-of-(\d+)$')
# `tempfile.mkdtemp()`'s names: 'tmp' and 8 of its random characters.
_MKDTEMP_NAME = re.compile(r'^tmp[a-z0-9_]{8}$')
# Python's temporary directories besides $TMPDIR (a server's may differ).
_TEMPORARY_DIRECTORIES = ('/tmp', '/var/tmp', '/usr/tmp')


@dataclasses.dataclass(frozen=True)
class Checkpoints:
  """What `root` holds, sorted as Reverb's checkpointer would treat it.
  Checkpoint names are times: each tuple is oldest first."""
  root: str
  complete: Tuple[str, ...]  # With DONE: Reverb's own and builds alike.
  incomplete: Tuple[str, ...]  # Reverb's own without DONE.
  built: Tuple[str, ...] = ()  # Of `complete`, those a build wrote.
  unfinished: Tuple[str, ...] = ()  # A build's without DONE: failed, killed.
  servers: Tuple[str, ...] = ()  # server-K-of-S roots of a build.
  parts: bool = False  # A build's .parts directory.
  others: Tuple[str, ...] = ()  # Neither Reverb's nor a build's.
  is_checkpoint: bool = False  # `root` itself holds a checkpoint's files.

  @property
  def newest(self) -> Optional[str]:
    """The subdirectory Reverb loads at start, or None: it starts empty."""
    return self.complete[-1] if self.complete else None

  @property
  def own(self) -> Tuple[str, ...]:
    """Reverb's own checkpoints, complete or not: all a root may hold."""
    return tuple(sorted(set(self.complete) - set(self.built))
                 + list(self.incomplete))

  @property
  def empty(self) -> bool:
    return not (self.complete or self.incomplete or self.unfinished
                or self.servers or self.parts or self.others
                or self.is_checkpoint)

  def path(self, name: str) -> str:
    return os.path.join(self.root, name)


def find(root: str) -> Checkpoints:
  """What `root` holds (nothing if it is missing or not a directory)."""
  root = os.fspath(root)
  if not os.path.isdir(root):
    return Checkpoints(root=root, complete=(), incomplete=())
  sorted_entries = {'complete': [], 'incomplete': [], 'built': [],
                    'unfinished': [], 'servers': [], 'others': []}
  parts = False
  for entry in sorted(os.scandir(root), key=lambda entry: entry.name):
    kind = _kind(entry)
    if kind == 'parts':
      parts = True
      continue
    if kind == 'built':
      sorted_entries['complete'].append(entry.name)
    if kind == 'file':
      if entry.name in CHECKPOINT_FILES:
        continue  # `root` is itself a checkpoint (`is_checkpoint`).
      kind = 'others'
    sorted_entries[kind].append(entry.name)
  return Checkpoints(
      root=root, parts=parts, is_checkpoint=is_checkpoint(root),
      **{kind: tuple(names) for kind, names in sorted_entries.items()})


def _kind(entry: os.DirEntry) -> str:
  """Which of `Checkpoints`' groups one entry of a root belongs to."""
  if not entry.is_dir():
    return 'file'
  if entry.name == PARTS:
    return 'parts'
  if _SERVER_ROOT_NAME.match(entry.name):
    return 'servers'
  if not _CHECKPOINT_NAME.match(entry.name):
    return 'others'
  try:
    files = set(os.listdir(entry.path))
  except OSError:
    return 'others'
  if not files <= CHECKPOINT_FILES:
    return 'others'
  done = DONE in files
  if BUILD_MARK in files:
    return 'built' if done else 'unfinished'
  return 'complete' if done else 'incomplete'


def is_checkpoint(path: str) -> bool:
  """Whether `path` is one checkpoint (root/<time>) rather than a root:
  it holds a checkpoint's own files."""
  return any(os.path.isfile(os.path.join(path, name))
             for name in (DONE, CHUNKS, ITEMS, TABLES))


def server_roots(found: Checkpoints) -> Tuple[str, ...]:
  """The server-K-of-S roots of `found`, in server order."""
  return tuple(sorted(found.servers, key=lambda name: tuple(
      int(number) for number in _SERVER_ROOT_NAME.match(name).groups()[::-1])))


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


def writable_error(root: str, create: bool = True) -> Optional[str]:
  """Why a checkpoint could not be written under `root`, or None.

  With `create`, makes `root` if missing and a subdirectory in it, as Reverb
  does, so a bad path fails at start rather than at shutdown, when the data
  would be lost. Without, leaves no trace: a missing `root` must be one its
  nearest existing parent lets us make (a build that fails then leaves no
  empty directory behind).
  """
  if os.path.exists(root) and not os.path.isdir(root):
    return f'{root} is not a directory'
  if not create and not os.path.exists(root):
    return _creatable_error(root)
  try:
    os.makedirs(root, exist_ok=True)
    os.rmdir(tempfile.mkdtemp(prefix='.write-test-', dir=root))
  except OSError as e:
    return f'{root} is not writable: {e.strerror or e}'
  return None


def _creatable_error(root: str) -> Optional[str]:
  parent = os.path.dirname(os.path.abspath(root))
  while not os.path.exists(parent):
    parent = os.path.dirname(parent)
  if not os.path.isdir(parent):
    return f'{root} cannot be made: {parent} is not a directory'
  if not os.access(parent, os.W_OK | os.X_OK):
    return f'{root} cannot be made: {parent} is not writable'
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
      f'{_listed(found.incomplete + found.unfinished)}')


def _listed(names: Tuple[str, ...]) -> str:
  """' (among a, b, c and 2 more)' for messages; '' for none."""
  return f' (among {wording.listed(names)})' if names else ''


def tree_size(path: str) -> int:
  """Bytes of the files under `path`: what a leftover costs on disk."""
  return sum(os.path.getsize(os.path.join(parent, name))
             for parent, _, names in os.walk(path) for name in names)
