"""A parent that spawns one child tied to it by `_util.lifeline`, for tests
that kill the parent.

    python -m tests.lifeline_child HOW

The parent spawns the child (multiprocessing, 'spawn', as the pools of
`rlds_reverb.parallel` do) and waits for it. The child prints
'child PID' once tied, then waits forever. HOW:
  end_with_parent  `end_with_parent(parent pid)`: on Linux, the kernel's
                   parent-death signal
  watch_parent     `watch_parent()`: the portable thread on the parent's
                   sentinel
  late             the child prints first, waits until its parent has died,
                   then calls `end_with_parent` (a parent that died before
                   its worker was tied); it prints 'survived' if it returns
"""

import os
import sys
import threading
import time

from rlds_reverb._util import lifeline

HANG_GUARD_S = 120


def child(how: str, parent_pid: int) -> None:
  if how == 'end_with_parent':
    lifeline.end_with_parent(parent_pid)
  elif how == 'watch_parent':
    lifeline.watch_parent()
  print(f'child {os.getpid()}', flush=True)
  if how == 'late':
    deadline = time.monotonic() + HANG_GUARD_S
    while os.getppid() == parent_pid and time.monotonic() < deadline:
      time.sleep(0.01)
    lifeline.end_with_parent(parent_pid)
    print('survived', flush=True)
  threading.Event().wait()


def main(how: str) -> None:
  import multiprocessing  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  process = multiprocessing.get_context('spawn').Process(
      target=child, args=(how, os.getpid()))
  process.start()
  process.join()


if __name__ == '__main__':
  main(sys.argv[1])
