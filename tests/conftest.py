"""Shared fixtures: quiet TensorFlow, real Reverb servers, RLDS datasets."""

import functools
import http.server
import os
import socket
import threading

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top


def _graph_optimizer_off() -> None:
  """Grappler off in the tests' own processes (not in the processes they
  start, which run as a user's do): it rewrites each `tf.data` function
  graph when an iterator is made, for speed only, never for what a
  function computes, and that is most of an iterator's cost here (56 ms of
  CPU for a small conversion pipeline's, 12 ms without:
  benchmarks/iterator_cost.py).
  RLDS_REVERB_TEST_GRAPPLER=1 keeps it on. docs/development_tiers.md,
  "Eighth cuts".
  """
  if os.environ.get('RLDS_REVERB_TEST_GRAPPLER') != '1':
    tf.config.optimizer.set_experimental_options(
        {'disable_meta_optimizer': True})


_graph_optimizer_off()

import portpicker  # pylint: disable=g-import-not-at-top

from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top

_pick_unused_port = portpicker.pick_unused_port
_HANDED_OUT = set()


def _pick_a_port_never_used_here(*args, **kwargs) -> int:
  """portpicker's pick, never a port this process had before.

  gRPC shares one connection per address in a process; after a server on
  a port stops, that connection backs off (1 s, then longer: a writer left
  retrying grows it), and a new server on the same port goes unanswered
  until the back-off ends: measured 2.9 s after four failed calls, and two
  CI errors (ServerInfo past its 10 s deadline on a server just started).
  Every `reverb.Server(port=None)` in the tests picks through here.
  """
  for _ in range(100):
    port = _pick_unused_port(*args, **kwargs)
    if port not in _HANDED_OUT:
      break
  _HANDED_OUT.add(port)
  return port


portpicker.pick_unused_port = _pick_a_port_never_used_here


@pytest.fixture
def make_server():
  """Starts real Reverb servers on localhost; stops them after the test."""
  servers = []

  def start(tables, **kwargs):
    server = reverb_tables.start_server(tables, **kwargs)
    servers.append(server)
    return server

  yield start
  for server in servers:
    server.stop()


@pytest.fixture(scope='module')
def module_server(served_tables):
  """One real Reverb server per test module, holding the module's tables.

  A module that serves tables names them in a module-scoped fixture
  `served_tables` (a list of `reverb.Table`): what differs from module to
  module is only which tables, signed for what; the tests take `server`.
  """
  server = reverb_tables.start_server(served_tables)
  yield server
  server.stop()


@pytest.fixture
def server(module_server):
  """The module's server with every table emptied: each test starts clean."""
  reverb_tables.empty(module_server)
  return module_server


@pytest.fixture
def empty_server(server):
  """`server`, by the name the command-line tests give it."""
  return server


@pytest.fixture
def address(server):
  """'localhost:PORT' of `server`, its tables emptied."""
  return reverb_tables.address(server)


@pytest.fixture
def silent_address():
  """'localhost:PORT' of a host that takes connections and never answers.

  The kernel accepts TCP connections into the listening socket's backlog;
  nothing reads them, so gRPC waits for its deadline, as for a host that
  drops packets, on any network.
  """
  with socket.socket() as listener:
    listener.bind(('127.0.0.1', 0))
    listener.listen(64)
    yield f'127.0.0.1:{listener.getsockname()[1]}'


@pytest.fixture
def blackholed_address():
  """'127.0.0.1:PORT' where a TCP connect gets no answer, as from a host that
  drops packets: a listening socket whose accept queue (of 1) is full; the
  kernel drops further SYNs."""
  with socket.socket() as listener, socket.socket() as first:
    listener.bind(('127.0.0.1', 0))
    listener.listen(0)
    first.connect(listener.getsockname())
    yield f'127.0.0.1:{listener.getsockname()[1]}'


@pytest.fixture
def http1_address(tmp_path):
  """'localhost:PORT' of a real HTTP/1 server: what `python3 -m http.server`
  runs (ThreadingHTTPServer, SimpleHTTPRequestHandler) on a free port, in a
  thread of this process, serving an empty directory."""
  handler = functools.partial(_QuietHandler, directory=str(tmp_path))
  with http.server.ThreadingHTTPServer(('127.0.0.1', 0), handler) as httpd:
    # shutdown() waits for serve_forever's next poll: 0.5 s by default.
    thread = threading.Thread(target=httpd.serve_forever, daemon=True,
                              kwargs={'poll_interval': 0.02})
    thread.start()
    yield f'localhost:{httpd.server_address[1]}'
    httpd.shutdown()
    thread.join()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
  def log_message(self, *args):  # Not on the test's stderr.
    pass


@pytest.fixture
def refused_address():
  """'localhost:PORT' of a port bound but not listening: connect is refused."""
  with socket.socket(socket.AF_INET6) as bound:
    bound.bind(('::', 0))
    yield f'localhost:{bound.getsockname()[1]}'


__all__ = ['rlds_data', 'reverb_tables']
