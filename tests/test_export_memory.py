"""Export streams: its peak RSS does not grow with the checkpoint.

Two checkpoints of 10 and 100 units (a unit: 64 steps of 8 KB random
observations, 0.5 MB that snappy cannot shrink; episodes of 2 units) are
exported, the larger first, by one child process (`tests/export_rss.py`,
with its buffers made small) that reports how far its RSS rose above where
it was before each export. The 90 extra units (45 MB of steps) may raise
that by a fifth of their size at most: an export that held the checkpoint,
its columns or its episodes would raise it by the whole (1.1x measured).
What does grow: the index of chunks, ~150 B a chunk, and episodes of
Reverb episodes open at once (0.03-0.07 of the data measured here).
`benchmarks/export_throughput.py` measures larger checkpoints.
"""

import json
import os
import subprocess
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import rlds_reverb  # pylint: disable=g-import-not-at-top
from tests import export_data  # pylint: disable=g-import-not-at-top
from tests import rlds_data  # pylint: disable=g-import-not-at-top

UNIT_STEPS = 64
EPISODE_UNITS = 2
OBSERVATION_SIZE = 2048  # float32: 8 KB a step.
HANG_GUARD_S = 300


def _checkpoint(root, units: int) -> str:
  episodes = [rlds_data.flat_episode(UNIT_STEPS * EPISODE_UNITS, seed,
                                     terminal=False,
                                     observation_size=OBSERVATION_SIZE)
              for seed in range(units // EPISODE_UNITS)]
  data = rlds_data.as_rlds(episodes)
  spec = rlds_reverb.create_trajectory_data_spec(data)
  server = export_data.checkpointed_server(
      [export_data.signed_table('replay', spec)], root / f'ckpt{units}')
  rlds_reverb.push(data, f'localhost:{server.port}', 'replay')
  directory = export_data.checkpoint(server)
  server.stop()
  return directory


def test_peak_rss_is_flat_from_10x_to_100x_the_data(tmp_path):
  large = _checkpoint(tmp_path, 100)
  small = _checkpoint(tmp_path, 10)

  result = subprocess.run(
      [sys.executable, '-m', 'tests.export_rss', 'replay',
       large, os.fspath(tmp_path / 'out100'),
       small, os.fspath(tmp_path / 'out10')],
      capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
  assert result.returncode == 0, result.stderr
  large_run, small_run = json.loads(result.stdout.splitlines()[-1])

  assert (small_run['steps'], large_run['steps']) == (
      10 * UNIT_STEPS, 100 * UNIT_STEPS)
  added_data = 90 * UNIT_STEPS * OBSERVATION_SIZE * 4
  growth = large_run['rss_growth'] - small_run['rss_growth']
  print(f"RSS growth during export {small_run['rss_growth'] / 2**20:.1f} MB "
        f"-> {large_run['rss_growth'] / 2**20:.1f} MB; its growth / added "
        f'data = {growth / added_data:.3f}')
  assert growth / added_data < 0.2, (small_run, large_run)
