"""Processes as /proc (Linux) shows them, for tests that kill a parent and
wait for what it started to be gone.

    children(pid)     the processes `pid` started: [Proc(pid, started, cmd)]
    wait_children(pid, count)   waits until `pid` has started `count`
    kill_parent(parent, procs)  SIGKILL to a Popen, then waits (deadline)
                      until `procs` are gone; kills and returns those left

A process is named by its pid and its start time, so a pid the kernel reuses
is never taken for it. A zombie (exited, not yet reaped by init) is gone.
"""

import os
import signal
import subprocess
import time
from typing import List, NamedTuple, Optional, Sequence, Tuple


class Proc(NamedTuple):
  pid: int
  started: int  # Clock ticks after boot (/proc/PID/stat, field 22).
  cmd: str


def _stat(pid: int) -> Optional[List[str]]:
  """The fields of /proc/PID/stat after the command: [state, ppid, ...]."""
  try:
    with open(f'/proc/{pid}/stat', encoding='utf-8') as f:
      return f.read().rsplit(')', 1)[1].split()
  except (FileNotFoundError, ProcessLookupError):
    return None


def _cmd(pid: int) -> str:
  try:
    with open(f'/proc/{pid}/cmdline', 'rb') as f:
      return f.read().replace(b'\0', b' ').decode(errors='replace').strip()
  except (FileNotFoundError, ProcessLookupError):
    return ''


def children(pid: int) -> List[Proc]:
  """The live processes whose parent is `pid`."""
  found = []
  for name in os.listdir('/proc'):
    if not name.isdigit():
      continue
    fields = _stat(int(name))
    if fields and int(fields[1]) == pid and fields[0] != 'Z':
      found.append(Proc(int(name), int(fields[19]), _cmd(int(name))))
  return found


def wait_children(pid: int, count: int, timeout_s: float,
                  like: str = '') -> List[Proc]:
  """`pid`'s children once `count` of them have `like` in their command."""
  deadline = time.monotonic() + timeout_s
  while True:
    found = children(pid)
    if sum(like in proc.cmd for proc in found) >= count:
      return found
    assert time.monotonic() < deadline, (
        f'{pid} started {found}, not {count} {like!r}')
    time.sleep(0.01)


def running(proc: Proc) -> bool:
  fields = _stat(proc.pid)
  return bool(fields) and int(fields[19]) == proc.started and fields[0] != 'Z'


def wait_gone(procs: Sequence[Proc], timeout_s: float) -> List[Proc]:
  """Those of `procs` still running after `timeout_s` (none: all gone)."""
  deadline = time.monotonic() + timeout_s
  left = [proc for proc in procs if running(proc)]
  while left and time.monotonic() < deadline:
    time.sleep(0.05)
    left = [proc for proc in left if running(proc)]
  return left


def kill_parent(parent: subprocess.Popen, procs: Sequence[Proc],
                timeout_s: float) -> Tuple[str, str, List[Proc]]:
  """SIGKILL to `parent`; its stdout and stderr once every holder of its
  pipes (its children inherit them) has closed them, and those of `procs`
  still running then, each killed: a failed test leaves nothing behind."""
  parent.kill()
  parent.wait()
  try:
    stdout, stderr = parent.communicate(timeout=timeout_s)
    left = wait_gone(procs, timeout_s)  # Closed their pipes: exiting.
  except subprocess.TimeoutExpired:
    stdout = stderr = ''
    left = [proc for proc in procs if running(proc)]
  for proc in left:
    os.kill(proc.pid, signal.SIGKILL)
  return stdout, stderr, left
