"""What differs between Beam runners, in one place: their names, the options
our pipelines need on them, and how the driver gets a pipeline's records.

    runner name ('dask' | 'DirectRunner' | 'module.SomeRunner')
      -> name(...): the name Beam's `create_runner` takes
      -> options(name, [(key, value)]): DaskRunner: one part per task
      -> pipeline.run() -> result
      -> gathered(result): DaskRunner: the last collection's elements, from
         the cluster (its result has no metrics); others: None (the records
         are read from files, `beam.results`)

Beam 2.77's DaskRunner runs a pipeline as Dask bags: a `Create` of fewer
than 128 elements is one partition (one task, one worker) unless told
otherwise; a DoFn's `finish_bundle` outputs and tagged outputs are dropped
or mixed into the main output; only the last transform's bag is computed;
`metrics()` raises. Our pipelines (`beam.pipeline`) avoid all four: one part
per element, every output from `process`, one chain, records as results.
"""

import socket
from typing import List, Optional, Sequence, Tuple

from rlds_reverb import dask_worker
from rlds_reverb.errors import ServerUnavailableError

# Runners whose workers run on this machine: they reach what it reaches.
LOCAL_RUNNERS = ('DirectRunner', 'BundleBasedDirectRunner',
                 'SwitchingDirectRunner', 'PrismRunner')
DASK_RUNNER = dask_worker.DASK_RUNNER
# Dask options that set how a Create is cut into tasks.
_DASK_PARTITIONING = ('dask_npartitions', 'dask_partition_size')


def name(runner: str) -> str:
  """The runner as Beam's `create_runner` takes it: 'dask' and 'DaskRunner'
  are Beam's DaskRunner (which Beam knows only by its module path)."""
  return DASK_RUNNER if dask_worker.is_dask_runner(runner) else runner


def is_dask(runner: str) -> bool:
  return name(runner) == DASK_RUNNER


def is_local(runner: str) -> bool:
  return runner in LOCAL_RUNNERS


def options(runner: str, given: Sequence[Tuple[str, str]]
            ) -> List[Tuple[str, str]]:
  """`given`, and on DaskRunner one element (a part) per task unless `given`
  cuts otherwise: its default puts up to 128 parts in one task, on one
  worker, and a killed worker then reruns all of them."""
  given = list(given)
  if is_dask(runner) and not any(key in _DASK_PARTITIONING
                                 for key, _ in given):
    given.append(('dask_partition_size', '1'))
  return given


def check_scheduler(runner: str, given: Sequence[Tuple[str, str]],
                    timeout_s: float = 5.0) -> None:
  """On DaskRunner, something answers at the scheduler's address
  (dask_client_address): Dask's client retries a closed port for 30 s.

  Raises:
    ServerUnavailableError: nothing answers there within `timeout_s`.
  """
  address = dict(given).get('dask_client_address')
  if not is_dask(runner) or not address:
    return
  host, _, port = address.split('://')[-1].rpartition(':')
  try:
    socket.create_connection((host.strip('[]'), int(port)),
                             timeout=timeout_s).close()
  except (OSError, ValueError) as e:
    raise ServerUnavailableError(
        f'No Dask scheduler answers at {address}: '
        f'{getattr(e, "strerror", None) or e}; start one (dask scheduler) '
        f'or give its address (tcp://HOST:8786).') from e


def short(runner: str) -> str:
  """'DaskRunner' for 'apache_beam.runners.dask.dask_runner.DaskRunner'."""
  return runner.rsplit('.', 1)[-1]


def gathered(result) -> Optional[list]:
  """The elements of the pipeline's last collection, where the runner
  hands them over (DaskRunner: its futures); None elsewhere. Closes the
  Dask client the runner opened (left open, it retries a closed cluster for
  30 s at exit)."""
  futures = getattr(result, 'futures', None)
  client = getattr(result, 'client', None)
  if futures is None or client is None:
    return None
  try:
    bags = client.gather(futures)
  finally:
    client.close()
  return [element for bag in bags for element in bag]


def close(result, cancel: bool = False) -> None:
  """Closes the Dask client of a pipeline that failed or was interrupted;
  with `cancel`, its tasks first (a Ctrl-C leaves them running on a
  cluster otherwise)."""
  client = getattr(result, 'client', None)
  if client is None:
    return
  if cancel:
    try:
      result.cancel()
    except Exception:  # pylint: disable=broad-except
      pass  # Closing the client is what matters.
  client.close()
