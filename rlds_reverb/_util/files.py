"""Files written safely: asked before the work that writes them, replaced whole.

`replace_atomically` is temporary file -> fsync -> rename -> fsync of the
directory: a reader, or a process started after a crash, finds the old
content or the new one, never a mix.
"""

import os
from typing import Optional


def unwritable_reason(path: str, probe: Optional[str] = None
                      ) -> Optional[str]:
  """Why `path` could not be written (a directory, no such directory, no
  permission), or None. Leaves `path` as it was: an existing file is opened
  for appending, never changed; a new one is tried by making and removing
  `probe` (a scratch file beside it; `path` itself by default), so that a
  reader never sees `path` empty if the caller writes it atomically.
  """
  if os.path.isdir(path):
    return 'it is a directory'
  exists = os.path.exists(path)
  try:
    with open(path if exists else probe or path, 'ab'):
      pass
    if not exists:
      os.remove(probe or path)
  except OSError as e:
    return f'{e.strerror}: {path}'
  return None


def replace_atomically(path: str, text: str) -> None:
  """Replaces `path` with `text` (UTF-8) in one step, durably."""
  temporary = temporary_path(path)
  with open(temporary, 'w', encoding='utf-8') as f:
    f.write(text)
    f.flush()
    os.fsync(f.fileno())
  os.replace(temporary, path)
  sync_directory(os.path.dirname(path) or '.')


def temporary_path(path: str) -> str:
  """Where `replace_atomically` writes `path` before renaming it."""
  return f'{path}.tmp'


def sync_directory(path: str) -> None:
  """Makes the directory's entries (a new or renamed file) durable."""
  descriptor = os.open(path, os.O_RDONLY)
  try:
    os.fsync(descriptor)
  finally:
    os.close(descriptor)
