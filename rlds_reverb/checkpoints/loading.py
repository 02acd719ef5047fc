"""What a server will load from a checkpoint, and about how long it takes,
told before it starts: Reverb loads inside `reverb.Server(...)`, silent, and
answers nobody until it is done (reverb#147: users report it as a hang).

    root/<time>/tables.tfrecord  (small: a record per table)
      -> per table: its name, the items it holds (inserted - deleted)
    root/<time>/*                -> the size on disk
    items / LOAD_ITEMS_PER_S     -> about how long the load takes

The big files (`items.tfrecord`, `chunks.tfrecord`) are not read. Plain `os`
and protobuf: `serve` says this before it imports Reverb.
"""

import dataclasses
import os
from typing import Tuple

from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import table_settings

# Items a dm-reverb 0.14.0 server loads per second at start, single-threaded.
# Measured on this project's machine (2 cores, shared; issue 33): 999,000
# 2-step halfcheetah items, 133 MB on disk, loaded in 7.4 s (135k items/s)
# from the server's own checkpoint; 300,000 in 1.7 s (177k/s). Again
# (2026-11-26, load average 4-5): `rlds-reverb build` of the same 999,000
# items (286 MB; `benchmarks/build_throughput.py`'s data), then `serve
# --checkpoint-dir`: 4.4, 5.9 and 7.5 s from its 'loading checkpoint' line
# to 'serving' (133k-227k items/s); in one process, 11.9 s wall for 6.2 CPU
# s (161k items per CPU second). A server sharing its core takes longer. The
# lowest figure: a big load is the one to warn of.
LOAD_ITEMS_PER_S = 135_000


@dataclasses.dataclass(frozen=True)
class CheckpointLoad:
  """One checkpoint as a server starting from it sees it."""
  path: str
  items: Tuple[Tuple[str, int], ...]  # (table, items it holds), file order.
  bytes: int  # Its files' size on disk.
  # The settings that replace the server's (signatures too), file order.
  settings: Tuple[table_settings.TableSettings, ...] = ()

  @property
  def tables(self) -> Tuple[str, ...]:
    return tuple(table for table, _ in self.items)

  @property
  def total_items(self) -> int:
    return sum(count for _, count in self.items)

  @property
  def seconds(self) -> float:
    """About how long a server takes to load it (`LOAD_ITEMS_PER_S`)."""
    return self.total_items / LOAD_ITEMS_PER_S


def checkpoint_load(path: str) -> CheckpointLoad:
  """What the checkpoint directory `path` (root/<time>) loads, from its
  tables file alone.

  Raises:
    CheckpointReadError: its tables file is cut short or damaged.
    OSError: it cannot be read.
  """
  items, settings = [], []
  for record in records.read_records(
      os.path.join(path, directories.TABLES)):
    table, counts = table_settings.read_record(record)
    items.append((table.name, counts.inserted - counts.deleted))
    settings.append(table)
  return CheckpointLoad(path=path, items=tuple(items),
                        bytes=directories.tree_size(path), settings=tuple(settings))


def check_files(path: str) -> None:
  """Every file of the checkpoint `path` read whole, as a server is about to
  load it: dm-reverb's loader says only 'corrupted record at 0' of a damaged
  file, naming none. Here the first damaged file is named, in the words
  `export --checkpoint` uses. Streams (memory stays a block); about a second
  per few hundred MB.

  Raises:
    CheckpointReadError: a file missing, cut short or damaged, naming it.
  """
  for name in (directories.TABLES, directories.ITEMS, directories.CHUNKS):
    records.check_whole(os.path.join(path, name))


def about(seconds: float) -> str:
  """A rough duration: 'under a second', 'about 7 s', 'about 3 min'."""
  if seconds < 1:
    return 'under a second'
  if seconds < 90:
    return f'about {seconds:.0f} s'
  if seconds < 90 * 60:
    return f'about {seconds / 60:.0f} min'
  return f'about {seconds / 3600:.1f} h'
