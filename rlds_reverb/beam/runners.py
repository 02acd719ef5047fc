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

from typing import List, Optional, Sequence, Tuple

# Runners whose workers run on this machine: they reach what it reaches.
LOCAL_RUNNERS = ('DirectRunner', 'BundleBasedDirectRunner',
                 'SwitchingDirectRunner', 'PrismRunner')
DASK_RUNNER = 'apache_beam.runners.dask.dask_runner.DaskRunner'
_DASK_NAMES = ('dask', 'DaskRunner', DASK_RUNNER)
# Dask options that set how a Create is cut into tasks.
_DASK_PARTITIONING = ('dask_npartitions', 'dask_partition_size')


def name(runner: str) -> str:
  """The runner as Beam's `create_runner` takes it: 'dask' and 'DaskRunner'
  are Beam's DaskRunner (which Beam knows only by its module path)."""
  return DASK_RUNNER if runner in _DASK_NAMES else runner


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


def close(result) -> None:
  """Closes the Dask client of a pipeline that failed."""
  client = getattr(result, 'client', None)
  if client is not None:
    client.close()
