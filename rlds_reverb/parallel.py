"""A push split over local processes, one shard each, into the same server.

    push_shards(source, 'host:port', 'replay', workers=N)
      -> N spawned processes: load(source, shard=(i, N)) -> push(...)
      -> one PushResult, the sum of theirs

The Python form of `rlds-reverb push --workers N`. Each process has its own
interpreter, TensorFlow and Reverb writer (threads would share one GIL), so
it takes a source that can be opened again by name (what `load` accepts),
not a `tf.data.Dataset`. For a dataset you build yourself, run `push` in your
own processes on `rlds_data.shard(N, i)` (every process then reads all
episodes and keeps every N-th: N reads of the data instead of one).
Processes are spawned, so a script calling this needs the usual
`if __name__ == '__main__':` guard.
"""

import concurrent.futures
import dataclasses
import multiprocessing
import time
from typing import Optional, Sequence, Union

from rlds_reverb.errors import ShardsFailedError


def push_shards(dataset: Union[str, Sequence[str]], server: str,
                tables: Union[str, Sequence[str]], *, workers: int,
                split: str = 'train', data_dir: Optional[str] = None,
                **push_options):
  """Pushes the `workers` shards of `dataset` at once; sums their results.

  Args:
    dataset: what `rlds_reverb.load` opens (directory, catalog name, ...).
    server: 'host:port' (a `reverb.Client` cannot cross processes).
    tables: as for `push`.
    workers: number of processes and shards.
    split, data_dir: as for `load`.
    **push_options: `push`'s keyword arguments (sequence_length, timeout...).

  Returns:
    A `PushResult` whose counts are the sums over shards and whose `seconds`
    is the wall time of the whole run.

  Raises:
    ShardsFailedError: some shard failed; names each, with its error, and
      what the others confirmed. The others ran to their end.
  """
  if workers < 1:
    raise ValueError(f'workers must be >= 1, got {workers}.')
  start = time.perf_counter()
  context = multiprocessing.get_context('spawn')
  with concurrent.futures.ProcessPoolExecutor(workers,
                                              mp_context=context) as pool:
    futures = [pool.submit(_push_shard, dataset, split, data_dir,
                           (index, workers), server, tables, push_options)
               for index in range(workers)]
    outcomes = [future.result() for future in futures]
  results = [outcome for outcome in outcomes if not isinstance(outcome, str)]
  failures = [f'shard {index}/{workers}: {outcome}'
              for index, outcome in enumerate(outcomes)
              if isinstance(outcome, str)]
  if failures:
    raise ShardsFailedError(
        f'{len(failures)} of {workers} shards failed: {" | ".join(failures)} '
        f'| the {len(results)} other(s) confirmed '
        f'{sum(r.episodes for r in results)} episodes.')
  return _sum(results, time.perf_counter() - start)


def _push_shard(dataset, split, data_dir, shard, server, tables, push_options):
  """In a worker: the shard's PushResult, or its error as one line."""
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write.push import push  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    rlds_data = sources.load(dataset, split=split, data_dir=data_dir,
                             shard=shard)
    return push(rlds_data, server, tables, **push_options)
  except Exception as e:  # pylint: disable=broad-except
    parts = [f'{type(e).__name__}: {e}'] + list(getattr(e, '__notes__', ()))
    return ' '.join(' '.join(part.split()) for part in parts)


def _sum(results, seconds: float):
  from rlds_reverb.write.push import PushResult  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  counts = {field.name: sum(getattr(r, field.name) for r in results)
            for field in dataclasses.fields(PushResult)
            if field.name != 'seconds'}
  return PushResult(seconds=seconds, **counts)
