"""Reverb's private bindings, pinned: this fails loudly if dm-reverb changes.

`rlds_reverb.write.reverb_cpp` calls bindings that Reverb does not promise to
keep (dm-reverb 0.14.0). If any of these tests fails, dm-reverb changed:
read `reverb/trajectory_writer.py` and `reverb/client.py` of the new version,
adapt `reverb_cpp` (the only module using them), then update these pins.
"""

import importlib.metadata

import numpy as np
import pytest
import reverb

from rlds_reverb.write import reverb_cpp
from tests import reverb_tables

PINNED_SIGNATURES = [
    'NewTrajectoryWriter(self: reverb.libpybind.Client, arg0: '
    'deepmind::reverb::ChunkerOptions, arg1: bool) -> '
    'deepmind::reverb::TrajectoryWriter\n',
    '__init__(self: reverb.libpybind.ConstantChunkerOptions, '
    'max_chunk_length: int, num_keep_alive_refs: int) -> None\n',
    'ConfigureChunker(self: reverb.libpybind.TrajectoryWriter, arg0: int, '
    'arg1: reverb.libpybind.ChunkerOptions) -> Status\n',
    'Append(self: reverb.libpybind.TrajectoryWriter, arg0: '
    'List[Optional[tensorflow::Tensor]]) -> '
    'List[Optional[reverb.libpybind.WeakCellRef]]\n',
    'CreateItem(self: reverb.libpybind.TrajectoryWriter, arg0: str, arg1: '
    'float, arg2: List[List[reverb.libpybind.WeakCellRef]], arg3: '
    'List[bool]) -> None\n',
    'Flush(self: reverb.libpybind.TrajectoryWriter, arg0: int, arg1: int) -> '
    'None\n',
    'EndEpisode(self: reverb.libpybind.TrajectoryWriter, arg0: bool, arg1: '
    'Optional[int]) -> None\n',
    'Close(self: reverb.libpybind.TrajectoryWriter) -> None\n',
]


def test_dm_reverb_is_the_pinned_release():
  assert importlib.metadata.version('dm-reverb') == reverb_cpp.REVERB_VERSION


def test_bindings_have_the_pinned_signatures():
  assert reverb_cpp.signatures() == PINNED_SIGNATURES


def test_items_round_trip_with_the_chunk_lengths_asked(make_server):
  """Two columns chunked 3 and 1; items of 2 steps read back exactly."""
  server = make_server([reverb_tables.fifo_table('t')])
  client = reverb.Client(reverb_tables.address(server))
  writer = reverb_cpp.ChunkedWriter(client, [3, 1], num_keep_alive_refs=2)
  rows = [(np.float32(step), np.full(2, step, np.int64)) for step in range(5)]
  refs = [writer.append(rows[0])]
  for row in rows[1:]:
    refs.append(writer.append(row))
    writer.create_item('t', 1.0, list(zip(refs[-2], refs[-1])),
                       [False, False])
  writer.flush(0, timeout_ms=10_000)
  writer.end_episode(timeout_ms=10_000)
  writer.close()
  samples = client.sample('t', num_samples=4, emit_timesteps=False)
  got = [[np.asarray(column).tolist() for column in sample.data]
         for sample in samples]
  assert got == [[[end - 1.0, end], [[end - 1] * 2, [end] * 2]]
                 for end in range(1, 5)]


def test_timeout_is_a_deadline_exceeded_error(make_server):
  """A full queue blocks the insert; the flush gives up after 100 ms."""
  server = make_server([reverb.Table.queue('q', 1)])
  client = reverb.Client(reverb_tables.address(server))
  writer = reverb_cpp.ChunkedWriter(client, [1], num_keep_alive_refs=1)
  for step in range(3):
    writer.create_item('q', 1.0, [writer.append([np.float32(step)])],
                       [True])
  with pytest.raises(reverb.errors.DeadlineExceededError):
    writer.flush(0, timeout_ms=100)
  list(client.sample('q', num_samples=1, emit_timesteps=False))  # Unblock.
  writer.close()
