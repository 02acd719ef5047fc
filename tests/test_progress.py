"""Progress bars on a terminal: the read-ahead ('checking'), then the push.

The command runs with its stderr on a pseudo-terminal, as in a shell; with a
pipe or a file (every other test) no bar is drawn.
"""

import fcntl
import os
import pty
import struct
import subprocess
import sys
import termios

import reverb

import rlds_reverb
from rlds_reverb import specs
from rlds_reverb import validation
from tests import reverb_tables
from tests import warm_process
from tests.cli_runs import HANG_GUARD_S

BUNDLED_EPISODES, BUNDLED_STEPS = 64, 9932


def run_on_terminal(*args) -> str:
  """The command's stderr, written to a pseudo-terminal of 120x40."""
  leader, follower = pty.openpty()
  fcntl.ioctl(follower, termios.TIOCSWINSZ, struct.pack('HHHH', 40, 120, 0, 0))
  process = warm_process.WarmPopen(
      [sys.executable, '-m', 'rlds_reverb', *args], stdout=subprocess.DEVNULL,
      stderr=follower)
  os.close(follower)
  chunks = []
  while True:
    try:
      chunk = os.read(leader, 65536)
    except OSError:  # EIO: the command closed its end.
      break
    if not chunk:
      break
    chunks.append(chunk)
  os.close(leader)
  assert process.wait(timeout=HANG_GUARD_S) == 0, b''.join(chunks)
  return b''.join(chunks).decode(errors='replace')


def test_validation_reports_each_episode_read():
  seen = []
  report = validation.validate(rlds_reverb.load('bundled:cartpole'),
                               on_read=lambda e, s: seen.append((e, s)))
  assert [e for e, _ in seen] == list(range(1, BUNDLED_EPISODES + 1))
  assert seen[-1] == (report.episodes, report.steps) == (
      BUNDLED_EPISODES, BUNDLED_STEPS)
  assert all(s1 <= s2 for (_, s1), (_, s2) in zip(seen, seen[1:]))


def test_push_shows_the_check_then_the_push_on_a_terminal():
  spec = rlds_reverb.create_trajectory_data_spec(
      rlds_reverb.load('bundled:cartpole'))
  server = reverb_tables.start_server(
      [reverb_tables.fifo_table('t', specs.table_signature(spec))])
  try:
    shown = run_on_terminal('push', '--dataset', 'bundled:cartpole',
                            '--server', reverb_tables.address(server),
                            '--table', 't')
    client = reverb.Client(reverb_tables.address(server))
    assert reverb_tables.table_size(client, 't') == BUNDLED_STEPS - 64  # Items.
  finally:
    server.stop()
  # Bars redraw every 0.1 s (the bundled set takes about that): their
  # totals show, and the read-ahead's bar comes first.
  assert f'/{BUNDLED_EPISODES} [' in shown and 'episodes/s' in shown
  assert f'/{BUNDLED_STEPS} [' in shown and 'steps/s' in shown
  assert 0 <= shown.index('checking: ') < shown.index('pushing: ')
