"""`rlds-reverb serve` as a subprocess, and the dataset it serves in tests.

    Serve(dataset, stderr_path, ...)  as a context manager:
      starts `python -m rlds_reverb serve`, waits for 'serving ... on ...',
      .address, .size(), .stderr(), .wait_for_note(text), .stop(signum)
    fixtures: dataset (CLEAN as a TFDS directory), signature (its table's),
      pushed_items (what one push of CLEAN leaves in a table)
"""

import pathlib
import signal
import subprocess
import sys
import threading
import time

import pytest
import reverb

import rlds_reverb
from tests import reverb_tables
from tests import rlds_data
from tests import warm_process
from tests.cli_data import CLEAN
from tests.cli_data import write_tfds
from tests.cli_runs import HANG_GUARD_S

TABLE = 'replay'
NOTE_DEADLINE_S = 30


@pytest.fixture(scope='module')
def dataset(tmp_path_factory):
  return write_tfds(tmp_path_factory.mktemp('tfds'), 'clean_rlds', CLEAN)


@pytest.fixture(scope='module')
def signature():
  return reverb_tables.signature_for(rlds_data.as_rlds(CLEAN))


@pytest.fixture(scope='module')
def pushed_items(signature):
  """The items one push of CLEAN leaves, read back from an in-process table."""
  server = reverb_tables.start_server(
      [reverb_tables.fifo_table(TABLE, signature)])
  try:
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), reverb_tables.address(server),
                     TABLE)
    return reverb_tables.drain(server, TABLE)
  finally:
    server.stop()


def first_line(process) -> str:
  """The next line of `process`'s stdout (a serve's 'serving ...' once it
  is ready); a process that hangs instead is killed at HANG_GUARD_S."""
  guard = threading.Timer(HANG_GUARD_S, process.kill)
  guard.start()
  try:
    return process.stdout.readline()
  finally:
    guard.cancel()


class Serve:
  """`rlds-reverb serve` as a subprocess with its stderr in a file."""

  def __init__(self, dataset, stderr_path, checkpoint_dir=None, port=None,
               table_args=('--table', TABLE, '--sampler', 'fifo',
                           '--max-size', '100'), names=(TABLE,),
               from_checkpoint=None):
    command = [sys.executable, '-m', 'rlds_reverb', 'serve', '--dataset',
               dataset, *table_args]
    self.names = ', '.join(names)
    if checkpoint_dir is not None:
      command += ['--checkpoint-dir', str(checkpoint_dir)]
    if from_checkpoint is not None:
      command += ['--from-checkpoint', str(from_checkpoint)]
    if port is not None:
      command += ['--port', str(port)]
    self.stderr_path = pathlib.Path(stderr_path)
    with open(self.stderr_path, 'w') as stderr:
      self.process = warm_process.WarmPopen(command, stdout=subprocess.PIPE,
                                      stderr=stderr, text=True)
    self.address = None

  def __enter__(self):
    """Waits for 'serving TABLE on ADDRESS'; a hang is killed by a timer."""
    line = first_line(self.process)
    assert line.startswith(f'serving {self.names} on '), (line, self.stderr())
    self.address = line.split()[-1]
    self.port = int(self.address.split(':')[-1])
    assert line == (f'serving {self.names} on port {self.port} of every '
                    f'interface, e.g. localhost:{self.port}\n'), line
    return self

  def __exit__(self, *exc_info):
    if self.process.poll() is None:
      self.process.kill()
    if not self.process.stdout.closed:
      self.process.communicate(timeout=HANG_GUARD_S)

  def stderr(self) -> str:
    return self.stderr_path.read_text()

  def wait_for_note(self, text: str) -> str:
    """The stderr once it contains `text`; fails at the deadline or on exit."""
    deadline = time.monotonic() + NOTE_DEADLINE_S
    while text not in self.stderr():
      assert self.process.poll() is None, (text, self.stderr())
      assert time.monotonic() < deadline, (text, self.stderr())
      time.sleep(0.05)
    return self.stderr()

  def stop(self, signum=signal.SIGTERM) -> int:
    self.process.send_signal(signum)
    self.process.communicate(timeout=HANG_GUARD_S)
    return self.process.returncode

  def size(self) -> int:
    client = reverb.Client(self.address)
    return client.server_info(timeout=10)[TABLE].current_size
