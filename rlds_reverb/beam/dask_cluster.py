"""A local Dask cluster of quiet worker processes, for `--runner dask`.

    local_cluster(workers=N) -> LocalCluster(N processes, one thread each,
      preload rlds_reverb.dask_worker) -> its scheduler's address -> closed

What `rlds-reverb push/build --runner dask` starts when no --dask-scheduler
is given. On several machines, start `dask scheduler` and `dask worker ADDR
--preload rlds_reverb.dask_worker` yourself (docs/scaling.md).
"""

import contextlib
import logging
import os
from typing import Iterator

from rlds_reverb import dask_worker

PRELOAD = dask_worker.__name__
_PRE_SPAWN_LEVEL = 'distributed.nanny.pre-spawn-environ.TF_CPP_MIN_LOG_LEVEL'


@contextlib.contextmanager
def local_cluster(workers: int) -> Iterator[str]:
  """A LocalCluster of `workers` quiet worker processes; yields the
  scheduler's address; closes the cluster at the end."""
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
  """TensorFlow's C++ log level for the workers: set before each is spawned
  (Dask's pre-spawn environment), since a worker process re-imports the
  driver's main module, and with it TensorFlow, before the preload runs."""
  return os.environ.get('TF_CPP_MIN_LOG_LEVEL', '3')
