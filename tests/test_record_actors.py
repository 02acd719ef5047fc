"""Many actors: one recording directory per process, read as one dataset.

Two processes (this one and a child) record at once, each its own directory (what an actor of a
distributed collection does). `rlds_reverb.load` reads both as one dataset,
actor after actor, and `rlds-reverb push --dataset A --dataset B --workers
2` leaves the items an in-process push of that dataset leaves.
"""

import os
import subprocess
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

from benchmarks import record_crash  # pylint: disable=g-import-not-at-top
import rlds_reverb  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top
from tests import warm_process
from tests.cli_runs import HANG_GUARD_S  # pylint: disable=g-import-not-at-top
from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top

EPISODES = {0: 5, 1: 4}

ACTOR = ('import sys; from benchmarks import record_crash; '
         'record_crash.record(sys.argv[1], episodes=int(sys.argv[2]), '
         'actor=int(sys.argv[3]))')


def record_in_two_processes(root):
  """Actor 1 in a child process while actor 0 records in this one; their
  directories."""
  directories = [os.path.join(root, f'actor{actor}') for actor in EPISODES]
  child = warm_process.WarmPopen(
      [sys.executable, '-c', ACTOR, directories[1], str(EPISODES[1]), '1'],
      stderr=subprocess.PIPE, text=True)
  try:
    record_crash.record(directories[0], episodes=EPISODES[0], actor=0)
  finally:
    _, stderr = child.communicate(timeout=HANG_GUARD_S)
  assert child.returncode == 0, stderr
  return directories


def item_keys(items):
  return sorted(tuple((leaf.dtype.str, leaf.shape, leaf.tobytes())
                      for leaf in item) for item in items)


def test_two_recorders_read_and_push_as_one_dataset(make_server, tmp_path):
  directories = record_in_two_processes(tmp_path)
  each = [rlds_dirs.read_episodes(directory) for directory in directories]
  assert [len(episodes) for episodes in each] == list(EPISODES.values())
  assert each[0][0]['steps']['observation']['position'].tobytes() != (
      each[1][0]['steps']['observation']['position'].tobytes())
  together = [rlds_dirs._numpy_episode(e)  # pylint: disable=protected-access
              for e in rlds_reverb.load(directories)]
  rlds_dirs.assert_same_episodes(together, each[0] + each[1])

  server = make_server([reverb_tables.fifo_table('cli'),
                        reverb_tables.fifo_table('api')])
  address = reverb_tables.address(server)
  pushed = run_cli_here('push', '--dataset', directories[0], '--dataset',
                        directories[1], '--server', address, '--table', 'cli',
                        '--workers', '2')
  assert pushed.returncode == 0, pushed.stderr
  result = rlds_reverb.push(rlds_reverb.load(directories), address, 'api')
  steps = sum(len(e['steps']['is_last']) for e in together)
  assert result.items == steps - len(together)  # 2-step items.
  assert item_keys(reverb_tables.drain_flat(address, 'cli')) == item_keys(
      reverb_tables.drain_flat(address, 'api'))
