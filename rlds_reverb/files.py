"""Whether a file can be written, asked before the work that would write it."""

import os
from typing import Optional


def unwritable_reason(path: str) -> Optional[str]:
  """Why `path` could not be written (a directory, no such directory, no
  permission), or None. Leaves the file as it was: made and removed if new.
  """
  if os.path.isdir(path):
    return 'it is a directory'
  existed = os.path.exists(path)
  try:
    with open(path, 'ab'):
      pass
    if not existed:
      os.remove(path)
  except OSError as e:
    return f'{e.strerror}: {e.filename}'
  return None
