"""`rlds-reverb push` options that choose how to run: --workers, --runner.

Usage errors are found before any work; Beam is imported only for --runner,
and without it installed --runner is a one-line error saying how to install
it. (Runs on Beam itself: `tests/test_beam.py`.)
"""

import subprocess
import sys

import pytest

from rlds_reverb import cli
from tests import extras
from tests import reverb_tables
from tests import servers_files
from tests.cli_data import CLEAN
from tests.cli_data import dirs  # pylint: disable=unused-import
from tests.cli_data import served_tables  # pylint: disable=unused-import
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli
from tests.cli_runs import run_cli_here

PUSH = ['push', '--dataset', 'bundled:cartpole', '--table', 'replay']

USAGE_CASES = {
    # name: (extra arguments, the error line's text)
    'workers_and_runner': (
        ['--server', 'h:1', '--workers', '2', '--runner', 'DirectRunner'],
        '--runner DirectRunner runs its own workers; drop --workers (only '
        '--runner dask starts a local cluster of --workers processes)'),
    'workers_and_dask_scheduler': (
        ['--server', 'h:1', '--workers', '2', '--runner', 'dask',
         '--dask-scheduler', 'tcp://h:8786'],
        "--dask-scheduler's cluster has its own workers; drop --workers"),
    'dask_scheduler_without_dask': (
        ['--server', 'h:1', '--runner', 'DirectRunner',
         '--dask-scheduler', 'tcp://h:8786'],
        '--dask-scheduler goes with --runner dask'),
    'dask_address_as_beam_option': (
        ['--server', 'h:1', '--runner', 'dask',
         '--beam-option', 'dask_client_address=tcp://h:8786'],
        '--runner dask: give the scheduler as --dask-scheduler ADDRESS, not '
        'as --beam-option dask_client_address'),
    'shard_and_runner': (
        ['--server', 'h:1', '--shard', '0/2', '--runner', 'DirectRunner'],
        '--runner splits the data itself; drop --shard'),
    'resume_and_runner': (
        ['--server', 'h:1', '--resume', 's.json', '--runner', 'DirectRunner'],
        '--runner retries failed bundles instead of resuming; drop --resume'),
    'beam_option_alone': (
        ['--server', 'h:1', '--beam-option', 'direct_num_workers=2'],
        '--beam-option needs --runner'),
    'parts_per_file_alone': (
        ['--server', 'h:1', '--parts-per-file', '2'],
        '--parts-per-file needs --runner'),
    'two_servers_one_process': (
        ['--server', 'h:1', '--server', 'h:2'],
        'Several --server need --workers or --runner, which spread the data '
        'over them'),
    'workers_and_shard': (
        ['--server', 'h:1', '--workers', '2', '--shard', '0/2'],
        '--workers runs the shards itself; drop --shard'),
}


@pytest.mark.parametrize('extra, message', USAGE_CASES.values(),
                         ids=USAGE_CASES.keys())
def test_options_that_cannot_run_together_exit_2(extra, message, capsys):
  assert cli.main(PUSH + extra) == 2
  assert capsys.readouterr().err == f'rlds-reverb: error: {message}\n'


@pytest.mark.parametrize('value', ['0', '-1', 'nan', 'inf'])
def test_timeout_must_be_finite_and_positive(value, capsys):
  with pytest.raises(SystemExit) as exited:
    cli.main(PUSH + ['--server', 'h:1', '--timeout', value])
  assert exited.value.code == 2
  assert (f"argument --timeout: must be finite and > 0, got '{value}'"
          in capsys.readouterr().err)


def test_beam_option_must_be_key_value(capsys):
  with pytest.raises(SystemExit) as exited:
    cli.main(PUSH + ['--server', 'h:1', '--runner', 'DirectRunner',
                     '--beam-option', 'direct_num_workers'])
  assert exited.value.code == 2
  assert ("argument --beam-option: must be KEY=VALUE, e.g. "
          "direct_num_workers=2, got 'direct_num_workers'"
          in capsys.readouterr().err)


@extras.needs('beam')
def test_runner_dask_without_dask_is_one_line(monkeypatch, capsys):
  """Apache Beam installed, Dask not (the `beam` extra installs both)."""
  # Not installed: neither imports (with only dask.distributed blocked, the
  # cluster started ahead found it as an attribute of dask, imported by
  # other tests, and started two workers for nothing: 13 CPU-s).
  monkeypatch.setitem(sys.modules, 'dask', None)
  monkeypatch.setitem(sys.modules, 'dask.distributed', None)
  assert cli.main(PUSH + ['--server', 'h:1', '--runner', 'dask',
                          '--workers', '2']) == 2
  assert capsys.readouterr().err == (
      'rlds-reverb: error: --runner dask needs dask[distributed], which is '
      'not installed: pip install "rlds_reverb[beam]"\n')


# A push without --runner (against no server), then one with --runner where
# Beam cannot be imported, in one fresh interpreter.
WITHOUT_BEAM = r"""
import sys
from rlds_reverb import cli
push = ['push', '--dataset', 'bundled:cartpole', '--table', 'replay',
        '--server', 'localhost:1', '--timeout', '1']
print(cli.main(push), 'apache_beam' in sys.modules, flush=True)
sys.modules['apache_beam'] = None  # As if not installed.
print(cli.main(push + ['--runner', 'DirectRunner']), flush=True)
"""


def test_beam_is_imported_only_for_runner_and_its_absence_is_one_line():
  result = subprocess.run([sys.executable, '-c', WITHOUT_BEAM],
                          capture_output=True, text=True,
                          timeout=HANG_GUARD_S)
  assert result.stdout.split() == ['1', 'False', '2'], result.stderr
  assert result.stderr.splitlines()[-1] == (
      'rlds-reverb: error: --runner needs Apache Beam, which is not '
      'installed: pip install "rlds_reverb[beam]"')


# --- Server addresses: a malformed one is a usage error, a refused one fails
# at once, before any data is read, worker spawned or pipeline built. --------

MALFORMED_SERVERS = {
    '18231': 'no port',
    'localhost': 'no port',
    'http://localhost:18231': 'drop the scheme (Reverb speaks gRPC, not HTTP)',
    'localhost:99999': "the port must be a number from 1 to 65535, got '99999'",
    '::1:8000': 'write an IPv6 host in brackets',
}


@pytest.mark.parametrize('server', MALFORMED_SERVERS)
def test_malformed_server_is_a_usage_error(server):
  result = run_cli_here(*PUSH, '--server', server, '--timeout', '3600')
  assert result.returncode == 2
  assert result.stderr.splitlines()[-1] == (
      f'rlds-reverb push: error: argument --server: address {server!r} is '
      f'not HOST:PORT: {MALFORMED_SERVERS[server]}; expected e.g. '
      'localhost:8000 or [::1]:8000')
  assert 'Traceback' not in result.stderr


REFUSED_RUNS = {
    'one_push': [],
    'workers': ['--workers', '2'],
    'runner': pytest.param(['--runner', 'DirectRunner'],
                           marks=extras.needs('beam')),
}


def not_reverb_line(address):
  return (f'rlds-reverb: error: The server at {address} did not answer as a '
          "Reverb server: it answered gRPC's HTTP/2 preface with "
          "'<!DOCTYPE HTML>', not HTTP/2 (an HTTP/1 server, or another "
          'protocol?).')


def test_an_http1_server_on_the_port_is_named_at_once(http1_address):
  """`python3 -m http.server` on the port: not after --timeout (an hour
  here), and not as a timeout. Run as a user runs it, in a process."""
  result = run_cli(*PUSH, '--server', http1_address, '--timeout', '3600',
                   timeout=HANG_GUARD_S)
  assert result.returncode == 1, result.stderr
  assert result.stderr.splitlines() == [not_reverb_line(http1_address)]


@pytest.mark.parametrize('extra', REFUSED_RUNS.values(),
                         ids=REFUSED_RUNS.keys())
def test_an_http1_server_is_not_reverb_in_every_way_of_running(
    extra, http1_address):
  result = run_cli_here(*PUSH, '--server', http1_address, '--timeout', '3600',
                        *extra)
  assert result.returncode == 1, result.stderr
  assert error_lines(result.stderr) == [not_reverb_line(http1_address)]


@pytest.mark.parametrize('extra', REFUSED_RUNS.values(),
                         ids=REFUSED_RUNS.keys())
def test_refused_server_fails_at_once(extra, refused_address):
  """Not after --timeout (an hour here): nothing listens, that is certain."""
  result = run_cli_here(*PUSH, '--server', refused_address, '--timeout', '3600',
                        *extra)
  assert result.returncode == 1, result.stderr
  assert error_lines(result.stderr) == [
      f'rlds-reverb: error: No Reverb server at {refused_address}: the '
      'connection was refused (nothing listens on that port).']
  assert 'Traceback' not in result.stderr


# --- A servers file as --server: its servers in server order, as if each
# were given as --server (a serve of many servers writes it). ---------------

def test_a_servers_file_of_one_server_is_pushed_into(tmp_path, dirs, server):
  path = servers_files.write(tmp_path / 'servers.json',
                             [reverb_tables.address(server)])
  result = run_cli_here('push', '--dataset', dirs['clean'], '--server', path,
                        '--table', 'a')
  assert result.returncode == 0, result.stderr
  assert (reverb_tables.drained_pairs(server, 'a') ==
          reverb_tables.observation_pairs(CLEAN))


@pytest.mark.slow
def test_workers_push_shard_i_into_server_i_of_the_file(tmp_path, dirs,
                                                        server, make_server):
  """Two processes: shard 0/2 (episodes 0-1) into the file's server 0,
  shard 1/2 (episode 2) into its server 1."""
  second = make_server([reverb_tables.fifo_table(
      'a', reverb_tables.client_of(server).server_info(
          timeout=10)['a'].signature)])
  servers = [server, second]
  path = servers_files.write(tmp_path / 'servers.json',
                             [reverb_tables.address(s) for s in servers],
                             shuffled=True)
  result = run_cli_here('push', '--dataset', dirs['clean'], '--server', path,
                        '--table', 'a', '--workers', '2')
  assert result.returncode == 0, result.stderr
  assert [reverb_tables.drained_pairs(s, 'a') for s in servers] == [
      reverb_tables.observation_pairs(CLEAN[:2]),
      reverb_tables.observation_pairs(CLEAN[2:])]


def servers_file_usage_cases(tmp_path):
  """name: (--server values, the error line's text): exit 2, nothing read."""
  two = servers_files.write(tmp_path / 'two.json', ['h:1', 'h:2'])
  bad = servers_files.write(tmp_path / 'bad.json', ['h:1', 'localhost'])
  gone = tmp_path / 'gone.json'
  return {
      'missing': ([str(gone)], f'--server {gone}: no such servers file (a '
                  'serve of many servers writes it once every server '
                  'answers, and removes it at stop)'),
      'malformed_address': ([bad], f"--server {bad}: server address "
                            "'localhost' is not HOST:PORT: no port; expected "
                            'e.g. localhost:8000 or [::1]:8000'),
      'two_servers_one_process': (
          [two], 'Several --server need --workers or --runner, which spread '
          f'the data over them ({two} lists 2 servers)'),
      'a_file_and_an_address_one_process': (
          ['h:3', two], 'Several --server need --workers or --runner, which '
          f'spread the data over them ({two} lists 2 servers)'),
  }


SERVERS_FILE_USAGE = ('missing', 'malformed_address',
                      'two_servers_one_process',
                      'a_file_and_an_address_one_process')


@pytest.mark.parametrize('case', SERVERS_FILE_USAGE)
def test_a_servers_file_that_cannot_be_used_exits_2(case, tmp_path, capsys):
  values, message = servers_file_usage_cases(tmp_path)[case]
  arguments = [part for value in values for part in ('--server', value)]
  assert cli.main(PUSH + arguments) == 2
  assert capsys.readouterr().err == f'rlds-reverb: error: {message}\n'
