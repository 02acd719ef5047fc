"""Dask workers for `rlds_reverb.beam`'s pipelines: quiet ones, and a local
cluster of them.

    dask worker tcp://SCHEDULER:8786 --preload rlds_reverb.dask_worker
      -> dask_setup(worker), in each worker process as it starts: our
         import hook (gym's and TensorFlow's start-up lines dropped), absl's
         and Beam's warnings off, then TensorFlow and Beam imported, so a
         worker's first task does not wait for them
    local_cluster(workers=N) -> a LocalCluster of N such processes, one
      thread each; TensorFlow's C++ log level set before each is spawned
    StartedAhead(N): the same, started in a thread while this process goes
      on with its own start-up (what `--runner dask --workers N` uses)

Outside `rlds_reverb.beam` on purpose: importing that package imports
TensorFlow and Beam, which is what the workers should do while the caller
does something else; the command line also reads the runner's names here
before it imports Beam. Needs `pip install "rlds_reverb[beam]"` (dask).
"""

import contextlib
import logging
import os
import threading
from typing import Iterator, Optional

PRELOAD = __name__
# Beam's DaskRunner, which Beam knows only by its module path, and the
# names `--runner` and `runner=` also take for it.
DASK_RUNNER = 'apache_beam.runners.dask.dask_runner.DaskRunner'
RUNNER_NAMES = ('dask', 'DaskRunner', DASK_RUNNER)
_PRE_SPAWN_LEVEL = 'distributed.nanny.pre-spawn-environ.TF_CPP_MIN_LOG_LEVEL'


def is_dask_runner(runner) -> bool:
  return runner in RUNNER_NAMES


def dask_setup(worker=None) -> None:  # pylint: disable=unused-argument
  """Dask's preload hook. TensorFlow's C++ lines off unless the worker's
  environment sets their level (a local cluster sets it before spawning:
  a spawned worker imports the caller's main module, and maybe TensorFlow,
  before this runs)."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
  # Beam warns at import through the root logger, which a worker prints.
  logging.getLogger().setLevel(logging.ERROR)
  logging.getLogger('absl').setLevel(logging.ERROR)
  import rlds_reverb.beam  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import,redefined-outer-name
  logging.getLogger('apache_beam').setLevel(logging.ERROR)


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[str]:
  """A LocalCluster of `workers` quiet worker processes (one thread each);
  yields the scheduler's address; closes the cluster at the end."""
  import dask  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from dask import distributed  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  # Its scheduler and nannies run in this process, and log each start and
  # stop at INFO (their logger is set when distributed is imported).
  logging.getLogger('distributed').setLevel(logging.ERROR)
  with dask.config.set({_PRE_SPAWN_LEVEL: _tensorflow_level()}):
    cluster = distributed.LocalCluster(
        n_workers=workers, threads_per_worker=1, processes=True,
        preload=[PRELOAD], dashboard_address=None,
        silence_logs=logging.ERROR)
  try:
    yield cluster.scheduler_address
  finally:
    cluster.close()


def _tensorflow_level() -> str:
  return os.environ.get('TF_CPP_MIN_LOG_LEVEL', '3')


class StartedAhead:
  """A `local_cluster` started in a thread: its workers start, and import
  TensorFlow and Beam, while the caller reads its data. `address()` waits
  until it is ready; `close()` closes it (call it in a `finally`)."""

  def __init__(self, workers: int):
    self._ready = threading.Event()
    self._done = threading.Event()
    self._address: Optional[str] = None
    self._error: Optional[BaseException] = None
    self._thread = threading.Thread(target=self._run, args=(workers,),
                                    name='dask-local-cluster', daemon=True)
    self._thread.start()

  def _run(self, workers: int) -> None:
    try:
      with local_cluster(workers) as address:
        self._address = address
        self._ready.set()
        self._done.wait()
    except BaseException as e:  # pylint: disable=broad-except
      self._error = e
      self._ready.set()

  def address(self) -> str:
    """The scheduler's address, once the workers are up; raises what
    starting them raised."""
    self._ready.wait()
    if self._error is not None:
      raise self._error
    return self._address

  def close(self) -> None:
    self._done.set()
    self._thread.join()
