"""Reverb server addresses and ports, checked before any work is done.

    'host:port' --parse--> (host, port), or AddressError showing the value
                --check_reachable--> a TCP connect first:
                    refused, unresolvable, no route  -> ServerUnavailableError
                                                        at once
                    no answer within the timeout     -> ServerUnavailableError
                    connected: gRPC's HTTP/2 preface sent, the answer read
                      (until the timeout at most)
                      not an HTTP/2 SETTINGS frame   -> ServerUnavailableError
                                                        ("did not answer as a
                                                        Reverb server")
                      not a byte within the timeout  -> ServerUnavailableError
                      a SETTINGS frame (or closed)   -> the caller asks Reverb,
                                                        in the time left

    port --check_port_free--> AddressError if out of range or already served

Why: `reverb.Client(address)` takes any string and connects lazily. A
malformed address ('localhost', 'http://localhost:8000', '8000') or a port
nobody listens on was found only when `server_info` gave up after its whole
timeout. And gRPC opens server ports with SO_REUSEPORT, so a second
`reverb.Server` on a port that another Reverb server holds starts without a
word, and clients then reach either one: pushes land on both servers.
Another service on the port (an HTTP/1 server, `python3 -m http.server`)
made gRPC wait for its whole deadline too: it answers gRPC's first bytes
with its own error page, which gRPC does not report; the probe reads it.

Plain sockets only: the command line checks addresses before it imports
TensorFlow, and `--workers` before it spawns a process.
"""

import errno
import ipaddress
import os
import re
import socket
import time
from typing import Optional, Tuple

from rlds_reverb.errors import AddressError
from rlds_reverb.errors import ServerUnavailableError

EXAMPLE = 'localhost:8000 or [::1]:8000'
MAX_PORT = 65535
# A host name or an IPv4 address: letters, digits, '-', '_' and dots.
_HOST = re.compile(r'^[A-Za-z0-9_]([A-Za-z0-9_.-]*[A-Za-z0-9_.])?$')
# connect() errors that say for certain that nothing serves there now.
_CERTAIN = {errno.ECONNREFUSED: 'the connection was refused (nothing '
                                'listens on that port)',
            errno.ENETUNREACH: 'the network is unreachable',
            errno.EHOSTUNREACH: 'no route to the host'}
# `_connect`'s problem for a connect that timed out.
_NO_ANSWER = 'no answer'
# What an HTTP/2 client sends first (RFC 9113, 3.4): the preface, then a
# SETTINGS frame (here empty: a 9-byte header, type 4, stream 0). An HTTP/2
# server, as gRPC's, answers with a SETTINGS frame of its own.
_HTTP2_PREFACE = b'PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n' + bytes(
    [0, 0, 0, 4, 0, 0, 0, 0, 0])
_FRAME_HEADER = 9
_SETTINGS = 4
# What gRPC reads to send its connections through a proxy, and to skip it.
_PROXY_VARIABLES = ('grpc_proxy', 'https_proxy', 'http_proxy')
_NO_PROXY_VARIABLES = ('no_grpc_proxy', 'no_proxy')


def parse(address, what: str = 'server address') -> Tuple[str, int]:
  """(host, port) of 'HOST:PORT' ('[IPV6]:PORT'); port in 1..65535.

  Raises:
    AddressError: showing the value, what is wrong and an example.
  """
  if not isinstance(address, str):
    raise AddressError(f'{what} must be a string HOST:PORT (e.g. {EXAMPLE}), '
                       f'got {type(address).__name__} {address!r}')
  host, port = _split(address, what)
  return host, _port_of(address, port, what)


def _split(address: str, what: str) -> Tuple[str, str]:
  """(host, port text); IPv6 hosts in brackets, without them."""
  if '://' in address:
    raise _malformed(address, what,
                     'drop the scheme (Reverb speaks gRPC, not HTTP)')
  if address.startswith('['):
    host, bracket, port = address[1:].partition(']:')
    if not bracket:
      raise _malformed(address, what,
                       'an IPv6 host needs its port after the bracket')
    try:
      ipaddress.IPv6Address(host)
    except ValueError:
      raise _malformed(address, what,
                       f'{host!r} is not an IPv6 address') from None
    return host, port
  if address.count(':') > 1:
    raise _malformed(address, what, 'write an IPv6 host in brackets')
  host, colon, port = address.partition(':')
  if not colon:
    raise _malformed(address, what, 'no port')
  if not _HOST.match(host):
    raise _malformed(address, what,
                     f'{host!r} is not a host name' if host else 'no host')
  return host, port


def _port_of(address: str, text: str, what: str) -> int:
  if not text.isdigit() or not 1 <= int(text) <= MAX_PORT:
    raise _malformed(address, what, f'the port must be a number from 1 to '
                                    f'{MAX_PORT}, got {text!r}')
  return int(text)


def _malformed(address: str, what: str, reason: str) -> AddressError:
  return AddressError(f'{what} {address!r} is not HOST:PORT: {reason}; '
                      f'expected e.g. {EXAMPLE}')


def check_reachable(address: str, timeout_s: float,
                    what: str = 'server address') -> None:
  """Fails at once if no Reverb server can serve at `address`; else returns.

  A TCP connect, as gRPC's first step: a refused connection, a host that
  does not resolve or cannot be routed to is certain now, and gRPC would only
  retry until its deadline. A connect that gets no answer within `timeout_s`
  is the same "no answer" the caller would wait for. Once connected, gRPC's
  HTTP/2 preface: a server that answers with anything but an HTTP/2 SETTINGS
  frame (an HTTP/1 server's error page) is not a Reverb server, and one that
  sends not a byte within `timeout_s` has not answered: a gRPC server sends
  its SETTINGS frame as soon as it takes the connection, so Reverb's own call
  would wait out a deadline as long. (The probe waited 3 s for an answer,
  then the caller's call its whole timeout: `--timeout 2` failed after 4 s,
  saying "within 2 s".) Skipped when gRPC goes through a proxy (its
  environment variables), which a direct connect would not.

  Raises:
    AddressError: a malformed address (`parse`).
    ServerUnavailableError: refused, unresolvable, unreachable, no answer,
      or an answer that is not HTTP/2.
  """
  host, port = parse(address, what)
  if _through_proxy(host):
    return
  deadline = time.monotonic() + timeout_s
  connection, problem = _connect(host, port, deadline)
  if problem is _NO_ANSWER:
    raise ServerUnavailableError(
        f'No Reverb server answered at {address} within {timeout_s:g} s.')
  if problem is not None:
    raise ServerUnavailableError(f'No Reverb server at {address}: {problem}.')
  if connection is None:
    return
  with connection:
    answer = _preface_answer(connection, deadline)
  if answer is None:
    raise ServerUnavailableError(
        f'No Reverb server answered at {address} within {timeout_s:g} s.')
  if not _may_be_settings_frame(answer):
    raise ServerUnavailableError(
        f'The server at {address} did not answer as a Reverb server: it '
        f"answered gRPC's HTTP/2 preface with {_first_line(answer)!r}, not "
        f'HTTP/2 (an HTTP/1 server, or another protocol?).')


def _connect(host: str, port: int, deadline: float
             ) -> Tuple[Optional[socket.socket], Optional[str]]:
  """(a socket connected to (host, port), None), or (None, why none can be)
  when that is certain, or (None, None) when it is not."""
  try:
    targets = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
  except socket.gaierror as e:
    if e.errno == socket.EAI_AGAIN:  # The resolver may answer later.
      return None, None
    return None, f'cannot resolve host {host!r} ({e.strerror})'
  problems = []
  for family, kind, proto, _, target in targets:
    connection = socket.socket(family, kind, proto)
    connection.settimeout(max(0.0, deadline - time.monotonic()))
    try:
      connection.connect(target)
      return connection, None
    except socket.timeout:
      connection.close()
      return None, _NO_ANSWER
    except OSError as e:
      connection.close()
      if e.errno not in _CERTAIN:
        return None, None  # Not certain: let the caller's call decide.
      problems.append(_CERTAIN[e.errno])
  return None, (problems[0] if problems else None)


def _preface_answer(connection: socket.socket,
                    deadline: float) -> Optional[bytes]:
  """What the server answered to the HTTP/2 preface by `deadline`; None if
  not a byte came by then. Reads until a frame header came or what came
  already is not one: a TLS server's 7-byte alert decides at once, not at
  `deadline`. A connection ended or reset early gives what came before."""
  answer = b''
  try:
    connection.sendall(_HTTP2_PREFACE)
    while (len(answer) < _FRAME_HEADER
           and _may_be_settings_frame(answer)):
      connection.settimeout(max(0.0, deadline - time.monotonic()))
      received = connection.recv(256)
      if not received:
        break
      answer += received
  except socket.timeout:
    return answer or None
  except OSError:  # A reset: what came so far decides.
    pass
  return answer


def _may_be_settings_frame(answer: bytes) -> bool:
  """Whether `answer` is empty, or as far as it goes the header of a
  SETTINGS frame on stream 0 (length: 3 bytes, type: 1, flags: 1, stream:
  4, its top bit reserved)."""
  header = answer[:_FRAME_HEADER]
  if len(header) > 3 and header[3] != _SETTINGS:
    return False
  stream = bytearray(header[5:9])
  if stream:
    stream[0] &= 0x7F
  return not any(stream)


def _first_line(answer: bytes, limit: int = 40) -> str:
  """The first line of `answer` as text, at most `limit` characters."""
  text = answer.decode('ascii', 'backslashreplace')
  line = (text.strip().splitlines() or [''])[0].strip()
  return line if len(line) <= limit else line[:limit] + '...'


def _through_proxy(host: str) -> bool:
  """Whether gRPC would connect to `host` through an HTTP proxy."""
  if not any(_environment(name) for name in _PROXY_VARIABLES):
    return False
  for name in _NO_PROXY_VARIABLES:
    skipped = [entry.strip().lstrip('.').lower()
               for entry in (_environment(name) or '').split(',')]
    if any(entry == '*' or host.lower() == entry
           or host.lower().endswith(f'.{entry}') for entry in skipped if entry):
      return False
  return True


def _environment(name: str) -> Optional[str]:
  return os.environ.get(name) or os.environ.get(name.upper())


def check_port_free(port: int) -> None:
  """Raises unless a Reverb server could have `port` to itself.

  gRPC opens ports with SO_REUSEPORT: `reverb.Server(tables, port=P)` starts
  even when another Reverb server listens on P, and clients then reach either
  one. A bind without SO_REUSEPORT fails on such a port, on IPv6 (Reverb
  listens on [::], all interfaces) and IPv4 alike. Call it just before
  `reverb.Server(tables, port=port)`; a server that starts in between still
  wins the race.

  Raises:
    AddressError: `port` is not in 1..65535 (0 would let the system choose,
      and `reverb.Server.port` would then say 0; pass port=None for a free
      one), or a server already listens on it.
  """
  if isinstance(port, bool) or not isinstance(port, int) or not (
      1 <= port <= MAX_PORT):
    raise AddressError(
        f'port must be a number from 1 to {MAX_PORT}, got {port!r} (for a '
        f'free port, give none: reverb.Server(tables) picks one)')
  for family, host in ((socket.AF_INET6, '::'), (socket.AF_INET, '0.0.0.0')):
    error = _bind_error(family, host, port)
    if error is None:
      continue
    if error.errno == errno.EADDRINUSE:
      raise AddressError(f'port {port} is already in use: another server '
                         f'listens there; choose another port, or stop that '
                         f'server first')
    raise AddressError(f'cannot listen on port {port}: '
                       f'{error.strerror or error}')


def _bind_error(family: int, host: str, port: int) -> Optional[OSError]:
  """The error of binding (host, port) without SO_REUSEPORT, or None.

  With SO_REUSEADDR, as gRPC sets it: connections of a stopped server that
  linger in TIME_WAIT do not count, a listening socket does.
  """
  try:
    probe = socket.socket(family, socket.SOCK_STREAM)
  except OSError:
    return None  # No such family here (IPv6 off): gRPC cannot use it either.
  with probe:
    probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
      probe.bind((host, port))
    except OSError as e:
      return None if e.errno == errno.EADDRNOTAVAIL else e
  return None
