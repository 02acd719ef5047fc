"""Worker processes that end when the process that started them dies.

A pool's worker waits for work on a pipe whose writing end it holds too, so
when its parent is killed (SIGKILL, the OOM killer) nothing ever wakes it:
it stays, idle, holding its memory (~670 MB with TensorFlow), and keeps
multiprocessing's resource tracker alive with it. A worker calls
`end_with_parent` first thing:

    Linux   prctl(PR_SET_PDEATHSIG, SIGKILL): the kernel kills the worker
            when the parent's thread that started it ends (the pool's
            submitting thread, alive until the pool is shut down), whatever
            the worker is doing, GIL held or not
    else    (or prctl refused) a daemon thread waits on the parent's
            sentinel (`multiprocessing.parent_process()`) and ends the worker
    then    the parent may have died before either was set: if the worker's
            parent is no longer `parent_pid`, it ends now

Once its workers are gone, the resource tracker reads EOF on its pipe and
exits too. A worker ended this way does no cleanup: it has nobody to report
to, and what it confirmed is where a kill leaves it (the server, its resume
file).
"""

import ctypes
import multiprocessing
import os
import signal
import sys
import threading

# <linux/prctl.h>: the signal the kernel sends us when our parent dies.
PR_SET_PDEATHSIG = 1
# The status of a worker ended by the watcher or the late check.
PARENT_GONE_EXIT = 1


def end_with_parent(parent_pid: int) -> None:
  """This process ends when `parent_pid`, its parent, dies (now, if it has
  died already)."""
  if not _kill_on_parent_death():
    watch_parent()
  if os.getppid() != parent_pid:  # Died before we asked: nothing will fire.
    os._exit(PARENT_GONE_EXIT)


def _kill_on_parent_death() -> bool:
  """The kernel sends SIGKILL when the parent dies; False where it cannot."""
  if not sys.platform.startswith('linux'):
    return False
  try:
    libc = ctypes.CDLL(None, use_errno=True)
    return libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0) == 0
  except (OSError, AttributeError):  # No libc found, or no prctl in it.
    return False


def watch_parent() -> None:
  """A daemon thread ends this process once its multiprocessing parent has
  ended (its sentinel is ready). The portable way: it needs the GIL, so a
  worker busy in native code holding it ends when that call returns.

  A process that multiprocessing did not start has no sentinel: left alone.
  """
  parent = multiprocessing.parent_process()
  if parent is None:
    return
  threading.Thread(target=_end_after, args=(parent,), daemon=True,
                   name='rlds_reverb.lifeline').start()


def _end_after(parent) -> None:
  parent.join()  # Waits on the sentinel: ready once the parent has died.
  os._exit(PARENT_GONE_EXIT)
