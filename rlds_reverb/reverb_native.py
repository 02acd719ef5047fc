"""A Reverb server that loads a checkpoint, without TensorFlow's Python.

The one module that loads Reverb's bindings (`reverb/libpybind.so`, dm-reverb
0.14.0) without `import reverb`. Why: `import reverb` imports TensorFlow
(~6 CPU-s here), and a serve of S servers paid it in each server process
before loading its part of a build, though loading needs only C++. The
bindings need TensorFlow's two shared libraries, loaded first with ctypes
(`RTLD_LOCAL`: `RTLD_GLOBAL` crashed Python's `hmac` here), then ~0.4 s in
all. Used through this module only:

    pybind.Server(tables, port, create_default_checkpointer(root, '', seed))
    pybind.Table(name, sampler, remover, max_size, max_times_sampled,
                 rate_limiter, extensions, signature)   (placeholders: a
                 loaded checkpoint's settings and signature replace them)
    pybind.Client(address).ServerInfo(timeout_s), .Checkpoint()

Only for a checkpoint that holds every table served: a table made here has
no signature. A process that already imported `reverb` uses its bindings (a
second load of the same library fails); one that loads them here must not
import `reverb` after. `tests/test_reverb_native.py` pins the version and
loads a build in a fresh process, against a server of `import reverb`.
"""

import ctypes
import importlib.metadata
import importlib.util
import os
import socket
import sys
from typing import Dict, NamedTuple, Optional, Sequence

from rlds_reverb.checkpoints import schema

# The dm-reverb release whose bindings this module was written against.
REVERB_VERSION = '0.14.0'
_TENSORFLOW_LIBRARIES = ('libtensorflow_framework.so.2',
                         'libtensorflow_cc.so.2')


class NativeUnavailable(Exception):
  """Reverb's bindings cannot be loaded without TensorFlow's Python here."""


class TableSize(NamedTuple):
  """What a served table holds, from the server's own `TableInfo`."""
  current_size: int
  max_size: int


_bindings = None


def bindings():
  """Reverb's `libpybind` module, loaded once (`NativeUnavailable` if not)."""
  global _bindings
  if _bindings is None:
    _bindings = _load()
  return _bindings


def check_version() -> None:
  """`NativeUnavailable` unless the pinned dm-reverb is installed."""
  try:
    version = importlib.metadata.version('dm-reverb')
  except importlib.metadata.PackageNotFoundError as e:
    raise NativeUnavailable('dm-reverb is not installed') from e
  if version != REVERB_VERSION:
    raise NativeUnavailable(f'dm-reverb {version}, not {REVERB_VERSION}')


def _load():
  if 'reverb' in sys.modules:
    from reverb import pybind  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    return pybind
  check_version()
  reverb_spec = importlib.util.find_spec('reverb')
  tensorflow_spec = importlib.util.find_spec('tensorflow')
  if reverb_spec is None or tensorflow_spec is None:
    raise NativeUnavailable('dm-reverb or tensorflow is not installed')
  # The bindings' module init imports numpy; hashlib's OpenSSL is loaded
  # before TensorFlow's libraries, whose own symbols it must not bind to.
  import hashlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
  import numpy  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
  del hashlib, numpy
  tensorflow_dir = os.path.dirname(tensorflow_spec.origin)
  try:
    for library in _TENSORFLOW_LIBRARIES:
      ctypes.CDLL(os.path.join(tensorflow_dir, library))
    path = os.path.join(os.path.dirname(reverb_spec.origin), 'libpybind.so')
    spec = importlib.util.spec_from_file_location('libpybind', path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
  except (OSError, ImportError) as e:
    raise NativeUnavailable(f'cannot load Reverb bindings: {e}') from e
  return module


def free_port() -> int:
  """A port nobody listens on now, as `portpicker` gives `reverb.Server`
  (Reverb binds [::], so IPv6 first)."""
  try:
    probe = socket.socket(socket.AF_INET6, socket.SOCK_STREAM)
  except OSError:
    probe = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
  with probe:
    probe.bind(('', 0))
    return probe.getsockname()[1]


class LoadedServer:
  """A server of `tables` (names) that loads the newest checkpoint in `root`,
  or else `seed`, before it answers; its checkpoints go to `root`."""

  def __init__(self, tables: Sequence[str], port: int, root: str,
               seed: Optional[str]):
    pybind = bindings()
    placeholders = [_placeholder(pybind, name) for name in tables]
    checkpointer = pybind.create_default_checkpointer(root, '', seed)
    self.port = port
    self._server = pybind.Server(placeholders, port, checkpointer)
    self._client = pybind.Client(f'localhost:{port}')

  def sizes(self, timeout_s: int = 30) -> Dict[str, TableSize]:
    """{table: its items and max_size}, as the server answers now."""
    sizes = {}
    for data in self._client.ServerInfo(timeout_s):
      info = schema.parse('TableInfo', data)
      sizes[info.name] = TableSize(info.current_size, info.max_size)
    return sizes

  def checkpoint(self) -> str:
    """A checkpoint written now into the root; its path."""
    return self._client.Checkpoint()

  def stop(self) -> None:
    self._server.Stop()


def _placeholder(pybind, name: str):
  """A table the checkpoint's settings replace as it loads."""
  limiter = pybind.RateLimiter(
      samples_per_insert=1.0, min_size_to_sample=1,
      min_diff=-sys.float_info.max, max_diff=sys.float_info.max)
  return pybind.Table(
      name=name, sampler=pybind.UniformSelector(),
      remover=pybind.FifoSelector(), max_size=1, max_times_sampled=0,
      rate_limiter=limiter, extensions=[], signature=None)
