"""A Reverb server in its own process, for tests that kill or lose it
(`ServerProcess`); the same tables in the test's process (`ServerHere`).

    python -m tests.server_process '[{"name": "q", "kind": "queue", "size": 3}]'

Prints 'port N' once serving, then serves until killed or stdin closes.
Kinds: 'fifo' (max_size, drainable: each item sampled once), 'queue' (size),
'ratio' (SampleToInsertRatio: samples_per_insert, min_size, error_buffer),
'uniform' (max_size; items kept when sampled, as replay and mixtures read).
A table is signed for an RLDS dataset's trajectories when its config has
'signed_for': a dataset directory; else unsigned (Reverb accepts any data).
"""

import json
import os
import subprocess
import sys
from tests import warm_process

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

HANG_GUARD_S = 120


def _table(config):
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import tables  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  name, kind = config['name'], config['kind']
  signature = _signature(config.get('signed_for'))
  if kind == 'queue':  # Reverb's own: its Queue limiter is the point.
    return reverb.Table.queue(name, config['size'], signature=signature)
  max_size = config.get('max_size', 10**6)
  if kind == 'ratio':
    options = tables.TableOptions(
        name, sampler='fifo', max_size=max_size, min_size=config['min_size'],
        samples_per_insert=config['samples_per_insert'],
        error_buffer=config['error_buffer'])
  elif kind == 'uniform':
    options = tables.uniform(name, max_size)
  else:
    options = tables.fifo(name, max_size)
  return tables.table(options, signature)


def _signature(dataset_dir):
  if dataset_dir is None:
    return None
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  spec = rlds_reverb.create_trajectory_data_spec(rlds_reverb.load(dataset_dir))
  return rlds_reverb.specs.table_signature(spec)


def main(configs) -> None:
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  server = reverb.Server([_table(config) for config in configs])
  print(f'port {server.port}', flush=True)
  sys.stdin.read()  # Until the test closes stdin (or kills us).
  server.stop()


class ServerProcess:
  """Starts `main` in a subprocess; `address`, `kill()`, a context manager."""

  def __init__(self, configs):
    self.process = warm_process.WarmPopen(
        [sys.executable, '-m', 'tests.server_process', json.dumps(configs)],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
        text=True)
    line = self.process.stdout.readline()
    if not line.startswith('port '):
      self.kill()
      raise RuntimeError(f'server process did not start: {line!r} '
                         f'{self.process.stderr.read()}')
    self.address = f'localhost:{int(line.split()[1])}'

  def kill(self) -> None:
    if self.process.poll() is None:
      self.process.kill()
    self.process.communicate(timeout=HANG_GUARD_S)

  def __enter__(self) -> 'ServerProcess':
    return self

  def __exit__(self, *exc_info) -> None:
    self.kill()


class ServerHere:
  """The same tables in this process (`reverb.Server`), for tests that
  neither kill nor lose the server: no Python and TensorFlow start-up
  (~3 s of CPU). `address`, `kill()` (stops it), a context manager."""

  def __init__(self, configs):
    import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    self.server = reverb.Server([_table(config) for config in configs])
    self.address = f'localhost:{self.server.port}'

  def kill(self) -> None:
    self.server.stop()

  def __enter__(self) -> 'ServerHere':
    return self

  def __exit__(self, *exc_info) -> None:
    self.kill()


if __name__ == '__main__':
  main(json.loads(sys.argv[1]))
