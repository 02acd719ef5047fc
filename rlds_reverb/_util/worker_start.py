"""How local worker processes start: forked from a server that imported
TensorFlow once, or spawned.

A spawned worker is a fresh Python that imports TensorFlow, Reverb and
TFDS before its task begins: 6-9 CPU-s each on a 2-core AMD EPYC (about
3 s where the budgets were set), paid again by every worker of every
pool. multiprocessing's forkserver imports `PRELOAD` once, in a server
process started at the first pool, and forks each worker from it, with
those modules already loaded: a process that runs several pools (a
script, a notebook, the test suite) pays the imports once, and a
`--workers N` command pays them once instead of N times.

The forkserver keeps the environment and the standard streams it started
with. A forked worker takes the environment of the process that made the
pool as it starts (`environment_at_start`), so what it reads while it works
is what a spawned worker would read; what the preloaded modules read as
they import (TensorFlow's TF_CPP_MIN_LOG_LEVEL, Python's PYTHON*, ...) is
the forkserver's. So the forkserver is used only while the variables of
`IMPORT_TIME` (by prefix) and what file descriptors 0-2 are open on are
what they were when it started (`_surroundings`); after such a change (a
log level set, stderr redirected), pools are spawned, as before. Other
variables may change (gym sets one as the parent imports TF-Agents).

The forkserver stays, idle, until this process ends (then it ends too,
and any worker it forked with it: `lifeline`), holding what it imported.

Forking after `import tensorflow` is safe where nothing has run yet: the
server only imports, starting no TensorFlow runtime, no gRPC channel and
no thread of TensorFlow's own.
"""

import multiprocessing
import multiprocessing.forkserver
import os
from typing import Dict, Optional, Tuple

# What workers import (the shard's checked push, the build's parts).
PRELOAD = ('rlds_reverb.checked_push', 'rlds_reverb.build_parts')

# Variables read as Python and the preloaded modules import, by prefix.
IMPORT_TIME = ('TF_', 'TFDS_', 'CUDA', 'XLA_', 'PYTHON', 'LD_', 'OMP_',
               'MKL_', 'KMP_', 'OPENBLAS', 'GRPC_', 'ABSL_', 'AUTOGRAPH_',
               'PROTOCOL_BUFFERS_', 'LANG', 'LC_', 'HOME', 'PATH', 'TMP',
               'TEMP')

# What the forkserver started with (`_surroundings`), once started.
_started_with: Optional[Tuple[Dict[str, str], tuple]] = None


def context() -> multiprocessing.context.BaseContext:
  """The forkserver context while it serves this environment; else spawn."""
  global _started_with  # pylint: disable=global-statement
  if not _forkserver_available():
    return multiprocessing.get_context('spawn')
  if _started_with is None:
    if _forkserver_running():  # Someone else's: not ours to preload.
      return multiprocessing.get_context('spawn')
    forkserver = multiprocessing.get_context('forkserver')
    forkserver.set_forkserver_preload(list(PRELOAD))
    _started_with = _surroundings()
    return forkserver
  if _surroundings() != _started_with:
    return multiprocessing.get_context('spawn')
  return multiprocessing.get_context('forkserver')


def environment_at_start(environment: Dict[str, str]) -> None:
  """In a forked worker: the environment of the process that made the
  pool, as a spawned worker would have it."""
  os.environ.clear()
  os.environ.update(environment)


def _surroundings() -> Tuple[Dict[str, str], tuple]:
  """The variables read at import (`IMPORT_TIME`), and the files (device,
  inode) of stdin, stdout and stderr (None where closed)."""
  streams = []
  for fd in (0, 1, 2):
    try:
      stat = os.fstat(fd)
      streams.append((stat.st_dev, stat.st_ino))
    except OSError:
      streams.append(None)
  imported = {name: value for name, value in os.environ.items()
              if name.startswith(IMPORT_TIME)}
  return imported, tuple(streams)


def _forkserver_available() -> bool:
  return 'forkserver' in multiprocessing.get_all_start_methods()


def _forkserver_running() -> bool:
  """multiprocessing's forkserver runs already (its private pid: the same
  attribute from Python 3.4 to 3.13)."""
  server = multiprocessing.forkserver._forkserver  # pylint: disable=protected-access
  return getattr(server, '_forkserver_pid', None) is not None
