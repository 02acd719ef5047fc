"""Recovery of a dataset directory whose writer stopped without closing.

    dataset_info.json: shards 0..R-1 registered (closed, synced)
    shard files R, R+1, ... on disk, not registered (the writer was killed)
      -> each scanned: its readable records counted, a torn tail cut
      -> a last shard left with no record removed
      -> registered in dataset_info.json (one atomic replace)
      -> the split's episode count: the next episode's index

A finished episode is a whole record in a shard, so none is lost; the
episode being written when the writer stopped is cut. Works on directories
of TFDS's `SequentialWriter` and EnvLogger too (same layout), whose own
shards are registered only once closed.
"""

import dataclasses
import os
from typing import Tuple

from rlds_reverb import files
from rlds_reverb.errors import DatasetDirectoryError
from rlds_reverb.tfds_out import layout
from rlds_reverb.tfds_out import records


@dataclasses.dataclass(frozen=True)
class Recovery:
  """What `recover` found and did."""
  directory: str
  split: str
  episodes: int  # In the split after recovery: the next episode's index.
  recovered_episodes: int  # Found in shards that were not registered.
  registered_shards: Tuple[str, ...] = ()  # File names now registered.
  cut_bytes: int = 0  # Torn records cut from the end of shards.
  removed_files: Tuple[str, ...] = ()  # Empty last shards, temporary files.

  @property
  def changed(self) -> bool:
    return bool(self.registered_shards or self.cut_bytes or
                self.removed_files)

  def __str__(self) -> str:
    if not self.changed:
      return (f'{self.directory}: nothing to recover; split '
              f"'{self.split}' has {self.episodes} episodes.")
    return (f'{self.directory}: registered {len(self.registered_shards)} '
            f'shards holding {self.recovered_episodes} episodes, cut '
            f'{self.cut_bytes} bytes of torn records, removed '
            f"{len(self.removed_files)} files; split '{self.split}' has "
            f'{self.episodes} episodes.')


def recover(directory: str, split: str = 'train') -> Recovery:
  """Registers the unregistered shards of `split`, cutting torn records.

  Safe to run on a directory that needs nothing (it changes nothing) and
  again after a crash during recovery. Not while a writer is writing there.

  Raises:
    DatasetDirectoryError: no readable dataset_info.json; another file
      format or file names; a registered shard file missing; shard files
      that do not follow the registered ones without a gap.
  """
  info = layout.read_info(directory)
  split_info = layout.checked_split(directory, info, split)
  registered = len(split_info.shard_lengths)
  unregistered = _unregistered_shards(directory, info.name, split, registered)
  removed = _remove_temporary_files(directory)
  names, episodes, cut_bytes = [], 0, 0
  for index in unregistered:
    name = layout.shard_name(info.name, split, index)
    path = os.path.join(directory, name)
    found = records.scan(path)
    if found.end < found.size:
      records.cut(path, found.end)
      cut_bytes += found.size - found.end
    if found.records == 0 and index == unregistered[-1]:
      os.remove(path)
      removed.append(name)
      continue
    split_info.shard_lengths.append(found.records)
    split_info.num_bytes += found.data_bytes
    names.append(name)
    episodes += found.records
  if names:
    layout.write_info(directory, info)
  return Recovery(directory, split, sum(split_info.shard_lengths), episodes,
                  tuple(names), cut_bytes, tuple(removed))


def _unregistered_shards(directory: str, name: str, split: str,
                         registered: int) -> Tuple[int, ...]:
  """Indices of the shard files after the registered ones; checks both."""
  indices = layout.shard_indices(directory, name, split)
  present = set(indices)
  missing = [index for index in range(registered) if index not in present]
  if missing:
    raise DatasetDirectoryError(
        f'{directory}: {layout.shard_name(name, split, missing[0])} is '
        f'registered in {layout.INFO_FILE} but missing; its episodes are '
        f'lost and TFDS cannot read the split.')
  extra = tuple(index for index in indices if index >= registered)
  if extra != tuple(range(registered, registered + len(extra))):
    raise DatasetDirectoryError(
        f'{directory}: shard files {", ".join(map(str, extra))} do not '
        f'follow the {registered} registered shards of split {split!r} '
        f'without a gap; they are not what a writer left.')
  return extra


def _remove_temporary_files(directory: str) -> list:
  """Our metadata files' temporaries, left by a crash before their rename."""
  removed = []
  for name in (layout.INFO_FILE, layout.FEATURES_FILE):
    temporary = files.temporary_path(name)
    if os.path.exists(os.path.join(directory, temporary)):
      os.remove(os.path.join(directory, temporary))
      removed.append(temporary)
  return removed
