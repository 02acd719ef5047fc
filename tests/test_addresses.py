"""Server addresses and ports: refused at once, before any work.

Real sockets and real Reverb servers on localhost: a port bound but not
listening (refused), a socket that accepts and never answers (silent), an
HTTP/1 server (`python3 -m http.server`'s), a service that speaks first, an
in-process `reverb.Server`.
"""

import contextlib
import socket
import threading
import time

import pytest
import reverb

import rlds_reverb
from rlds_reverb import addresses
from rlds_reverb.write import server as server_lib
from tests import reverb_tables

HANG_GUARD_S = 60  # Not a speed check: a call came back before its timeout.
EXAMPLE = 'expected e.g. localhost:8000 or [::1]:8000'

MALFORMED = {  # address -> what the message says after "is not HOST:PORT: "
    '18231': 'no port',
    'localhost': 'no port',
    'http://localhost:18231': 'drop the scheme (Reverb speaks gRPC, not HTTP)',
    'localhost:99999': "the port must be a number from 1 to 65535, got '99999'",
    'localhost:0': "the port must be a number from 1 to 65535, got '0'",
    'localhost:': "the port must be a number from 1 to 65535, got ''",
    'localhost:80a': "the port must be a number from 1 to 65535, got '80a'",
    ':8000': 'no host',
    'local host:8000': "'local host' is not a host name",
    '::1:8000': 'write an IPv6 host in brackets',
    '[::1]': 'an IPv6 host needs its port after the bracket',
    '[nope]:8000': "'nope' is not an IPv6 address",
}

WELL_FORMED = {
    'localhost:8000': ('localhost', 8000),
    '127.0.0.1:1': ('127.0.0.1', 1),
    'replay-0.example.com:65535': ('replay-0.example.com', 65535),
    '[::1]:8000': ('::1', 8000),
    '[fe80::1]:9': ('fe80::1', 9),
}


@pytest.mark.parametrize('address', MALFORMED)
def test_malformed_address_says_what_and_shows_an_example(address):
  with pytest.raises(rlds_reverb.AddressError) as error:
    addresses.parse(address)
  assert str(error.value) == (f'server address {address!r} is not HOST:PORT: '
                              f'{MALFORMED[address]}; {EXAMPLE}')
  assert isinstance(error.value, ValueError)


@pytest.mark.parametrize('address', WELL_FORMED)
def test_well_formed_address(address):
  assert addresses.parse(address) == WELL_FORMED[address]


def test_not_a_string():
  with pytest.raises(rlds_reverb.AddressError, match=(
      r"server address must be a string HOST:PORT \(e.g. localhost:8000 or "
      r"\[::1\]:8000\), got int 18231")):
    addresses.parse(18231)


def test_refused_connection_fails_at_once(refused_address):
  start = time.monotonic()
  with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
    addresses.check_reachable(refused_address, timeout_s=10 * HANG_GUARD_S)
  assert time.monotonic() - start < HANG_GUARD_S
  assert str(error.value) == (
      f'No Reverb server at {refused_address}: the connection was refused '
      '(nothing listens on that port).')


def test_unresolvable_host_fails_at_once():
  try:
    socket.getaddrinfo('nosuchhost.invalid', 80)
  except socket.gaierror as e:
    if e.errno == socket.EAI_AGAIN:
      pytest.skip('no name resolution here')
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match=r"^No Reverb server at nosuchhost.invalid:80: "
                           r"cannot resolve host 'nosuchhost.invalid' \("):
    addresses.check_reachable('nosuchhost.invalid:80', timeout_s=1)


def test_host_that_drops_connects_fails_after_the_timeout(blackholed_address):
  """Any timeout shows it (the kernel drops every SYN): a short one, waited
  out in full."""
  with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
    addresses.check_reachable(blackholed_address, timeout_s=0.2)
  assert str(error.value) == (
      f'No Reverb server answered at {blackholed_address} within 0.2 s.')


def test_silent_host_fails_after_the_timeout_once(silent_address):
  """A TCP connect that succeeds, then not a byte back to gRPC's preface: no
  answer within the timeout, said by the probe. Once: the probe's wait was
  followed by Reverb's call's, and a table check with a timeout of 2 s failed
  after 4 s, saying "within 2 s". (A bound on what the message says, with a
  second of slack: not a speed check.)"""
  with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
    addresses.check_reachable(silent_address, timeout_s=0.1)
  assert str(error.value) == (
      f'No Reverb server answered at {silent_address} within 0.1 s.')
  client, address = server_lib.connect(silent_address)
  start = time.monotonic()
  with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
    server_lib.table_infos(client, address, ['t'], timeout_s=2)
  assert time.monotonic() - start < 3
  assert str(error.value) == (
      f'No Reverb server answered at {silent_address} within 2 s.')


def test_an_http1_server_is_not_reverb_at_once(http1_address):
  """Not after the timeout (an hour here): its answer to gRPC's preface is
  an HTTP/1 error page, not an HTTP/2 SETTINGS frame."""
  start = time.monotonic()
  with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
    addresses.check_reachable(http1_address, timeout_s=3600)
  assert time.monotonic() - start < HANG_GUARD_S
  assert str(error.value) == (
      f'The server at {http1_address} did not answer as a Reverb server: it '
      "answered gRPC's HTTP/2 preface with '<!DOCTYPE HTML>', not HTTP/2 (an "
      'HTTP/1 server, or another protocol?).')


@contextlib.contextmanager
def answering(answer: bytes):
  """'127.0.0.1:PORT' of a service that reads what comes, sends `answer`
  and hangs up when the client does (b'': a service that hangs up without
  a word)."""
  with socket.socket() as listener:
    listener.bind(('127.0.0.1', 0))
    listener.listen(8)

    def serve():
      connection, _ = listener.accept()
      with connection:
        connection.recv(4096)
        if answer:
          connection.sendall(answer)
          while connection.recv(4096):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    yield f'127.0.0.1:{listener.getsockname()[1]}'
    thread.join(HANG_GUARD_S)


ANSWERS = {  # What a service answers -> the line the message quotes.
    'ssh_banner': (b'SSH-2.0-OpenSSH_9.6\r\n', 'SSH-2.0-OpenSSH_9.6'),
    'http1_status_line': (b'HTTP/1.1 400 Bad Request\r\nServer: nginx\r\n',
                          'HTTP/1.1 400 Bad Request'),
    'a_tls_alert': (b'\x15\x03\x01\x00\x02\x02\x0a',  # Ends in a newline.
                    '\x15\x03\x01\x00\x02\x02'),
    'a_long_line': (b'x' * 100, 'x' * 40 + '...'),
    'an_http2_frame_not_settings': (  # GOAWAY.
        bytes([0, 0, 8, 7, 0, 0, 0, 0, 0]) + bytes(8),
        '\x00\x00\x08\x07' + '\x00' * 13),
}


@pytest.mark.parametrize('case', list(ANSWERS))
def test_a_service_that_answers_otherwise_is_not_reverb(case):
  answer, quoted = ANSWERS[case]
  with answering(answer) as address:
    with pytest.raises(rlds_reverb.ServerUnavailableError) as error:
      addresses.check_reachable(address, timeout_s=3600)
  assert str(error.value).startswith(
      f'The server at {address} did not answer as a Reverb server: it '
      f"answered gRPC's HTTP/2 preface with {quoted!r}")


def test_a_service_that_hangs_up_without_a_word_is_left_to_reverb():
  """No answer is not a wrong answer: only a definite one says "not Reverb"."""
  with answering(b'') as address:
    addresses.check_reachable(address, timeout_s=10)


def test_a_reverb_server_answers_the_probe_with_http2(make_server):
  server = make_server([reverb_tables.fifo_table('t')])
  for address in (reverb_tables.address(server), f'[::1]:{server.port}',
                  f'127.0.0.1:{server.port}'):
    addresses.check_reachable(address, timeout_s=10)
  client, address = server_lib.connect(reverb_tables.address(server))
  assert list(server_lib.table_infos(client, address, ['t'], 10)) == ['t']


def test_through_a_proxy_the_connect_is_left_to_grpc(refused_address,
                                                     monkeypatch):
  """gRPC sends connections through http_proxy: a direct connect says nothing
  about them, unless no_proxy names the host."""
  monkeypatch.setenv('http_proxy', 'http://proxy.invalid:3128')
  monkeypatch.delenv('no_proxy', raising=False)
  monkeypatch.delenv('NO_PROXY', raising=False)
  addresses.check_reachable(refused_address, timeout_s=1)
  monkeypatch.setenv('no_proxy', 'example.com,localhost')
  with pytest.raises(rlds_reverb.ServerUnavailableError,
                     match='connection was refused'):
    addresses.check_reachable(refused_address, timeout_s=1)


def test_client_with_malformed_address_is_refused():
  client = reverb.Client('localhost')
  with pytest.raises(rlds_reverb.AddressError) as error:
    server_lib.connect(client)
  assert str(error.value) == (
      "the reverb.Client's address 'localhost' is not HOST:PORT: no port; "
      f'{EXAMPLE}')


def test_ipv6_address_reaches_a_reverb_server(make_server):
  server = make_server([reverb_tables.fifo_table('t')])
  client, address = server_lib.connect(f'[::1]:{server.port}')
  assert list(server_lib.table_infos(client, address, ['t'], 10)) == ['t']


# --- Ports: another Reverb server there is refused. -------------------------

def test_port_of_a_running_reverb_server_is_in_use(make_server):
  """Two reverb.Server on one port both start (SO_REUSEPORT): not with it."""
  server = make_server([reverb_tables.fifo_table('t')])
  with pytest.raises(rlds_reverb.AddressError) as error:
    rlds_reverb.check_port_free(server.port)
  assert str(error.value) == (
      f'port {server.port} is already in use: another server listens there; '
      'choose another port, or stop that server first')


@pytest.mark.parametrize('family, host', [(socket.AF_INET, '127.0.0.1'),
                                          (socket.AF_INET6, '::1')])
def test_port_of_any_listener_is_in_use(family, host):
  with socket.socket(family) as listener:
    listener.bind((host, 0))
    listener.listen()
    port = listener.getsockname()[1]
    with pytest.raises(rlds_reverb.AddressError, match='already in use'):
      rlds_reverb.check_port_free(port)


def test_port_of_a_stopped_server_is_free(make_server):
  """Its connections linger in TIME_WAIT; gRPC can bind there, so can we."""
  server = make_server([reverb_tables.fifo_table('t')])
  reverb.Client(reverb_tables.address(server)).server_info(timeout=10)
  server.stop()
  rlds_reverb.check_port_free(server.port)
  again = make_server([reverb_tables.fifo_table('t')], port=server.port)
  assert 't' in reverb.Client(reverb_tables.address(again)).server_info(10)


@pytest.mark.parametrize('port', [0, -1, 65536, 99999, True, 8000.0, '8000'])
def test_port_out_of_range(port):
  with pytest.raises(rlds_reverb.AddressError) as error:
    rlds_reverb.check_port_free(port)
  assert str(error.value) == (
      f'port must be a number from 1 to 65535, got {port!r} (for a free '
      'port, give none: reverb.Server(tables) picks one)')
