"""A process that runs `rlds_reverb.parallel`'s pools one after the other,
for tests/test_worker_start.py:

    python -m tests.worker_start_child FILE

Each pool's two workers report how they started; the lines go to stdout as
JSON, one per pool, and each worker also writes a line to its stderr. This
module imports neither TensorFlow nor the package's workers' modules, so a
worker that has them loaded before its task got them from the forkserver.
"""

import json
import os
import sys

from rlds_reverb import parallel


def report(tag):
  """In a worker: what it started with."""
  print(f'worker stderr {tag}', file=sys.stderr, flush=True)
  return parallel.ShardOutcome(tag, result={
      'parent': os.getppid(), 'variable': os.environ.get('WORKER_X'),
      'preloaded': 'rlds_reverb.checked_push' in sys.modules})


def pool(tag):
  with parallel._spawned_pool(2) as (workers, interrupted):  # pylint: disable=protected-access
    reports = parallel._run(workers, interrupted, 'test',  # pylint: disable=protected-access
                            [(report, tag), (report, tag)])
  print(json.dumps({'tag': tag, 'me': os.getpid(),
                    'reports': [outcome.result for outcome in reports]}),
        flush=True)


def main(stderr_file):
  pool('first')
  pool('again')
  os.environ['WORKER_X'] = 'set'  # Read as they work: forked workers see it.
  pool('variable_set')
  del os.environ['WORKER_X']
  pool('variable_gone')
  level = os.environ.get('TF_CPP_MIN_LOG_LEVEL')
  os.environ['TF_CPP_MIN_LOG_LEVEL'] = '1'  # Read at import: the server's
  pool('import_time_variable_set')         # was read with another.
  if level is None:
    del os.environ['TF_CPP_MIN_LOG_LEVEL']
  else:
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = level
  pool('import_time_variable_back')
  saved = os.dup(2)
  with open(stderr_file, 'w', encoding='utf-8') as f:
    os.dup2(f.fileno(), 2)  # stderr redirected: the forkserver's is older.
  pool('stderr_redirected')
  os.dup2(saved, 2)
  pool('stderr_back')


if __name__ == '__main__':
  main(sys.argv[1])
