"""Recovery of a dataset directory whose writer stopped without closing.

    dataset_info.json: shards 0..R-1 registered (closed, synced)
      -> each checked by its records' length fields: does it still hold
         its registered episodes? (a copy cut short, a disk that lost data)
         no: cut to its last whole record, its length registered again,
             the finished episodes lost named (their index in the split)
    shard files R, R+1, ... on disk, not registered (the writer was killed)
      -> each scanned: its readable records counted, a torn tail cut
      -> a last shard left with no record removed
      -> registered in dataset_info.json (one atomic replace)
      -> the split's episode count: the next episode's index

A finished episode is a whole record in a shard, so a killed writer loses
none; the episode being written when it stopped is cut. Only a registered
shard that lost its end loses finished episodes, and `Recovery` names them.
Works on directories of TFDS's `SequentialWriter` and EnvLogger too (same
layout), whose own shards are registered only once closed.
"""

import dataclasses
import os
from typing import List, Sequence, Tuple

from rlds_reverb._util import files
from rlds_reverb._util import wire
from rlds_reverb._util import wording
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
  # Registered shards that ended before their registered episodes did.
  shortened_shards: Tuple[str, ...] = ()
  # The finished episodes those lost: their index in the split when written
  # (the `episode_id` of an `RldsRecorder`'s episodes).
  lost_episodes: Tuple[int, ...] = ()

  @property
  def changed(self) -> bool:
    return bool(self.registered_shards or self.cut_bytes or
                self.removed_files or self.shortened_shards)

  def __str__(self) -> str:
    done = []
    if self.shortened_shards:
      done.append(
          f'{" and ".join(self.shortened_shards)} ended before '
          f'{"its" if len(self.shortened_shards) == 1 else "their"} '
          f'registered episodes: lost '
          f'{wording.count(len(self.lost_episodes), "finished episode")} '
          f'({wording.noun(len(self.lost_episodes), "id")} '
          f'{_ranges(self.lost_episodes)})')
    if self.registered_shards:
      done.append(
          f'registered {wording.count(len(self.registered_shards), "shard")} '
          f'holding {wording.count(self.recovered_episodes, "episode")}')
    if self.cut_bytes:
      done.append(f'cut {wording.count(self.cut_bytes, "byte")} of torn '
                  f'records')
    if self.removed_files:
      done.append(f'removed {", ".join(self.removed_files)}')
    episodes = wording.count(self.episodes, 'episode')
    if not done:
      return (f"{self.directory}: nothing to recover; split '{self.split}' "
              f'has {episodes}.')
    return (f"{self.directory}: {'; '.join(done)}; split '{self.split}' has "
            f'{episodes}.')


def recover(directory: str, split: str = 'train') -> Recovery:
  """Makes every whole record of `split` readable, and says what was lost.

  Registered shards that end before their registered episodes are cut to
  their last whole record and registered again (the episodes lost are
  named); unregistered shards are registered, a torn last record cut. Safe
  to run on a directory that needs nothing (it changes nothing) and again
  after a crash during recovery. Not while a writer is writing there.

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
  repair = _repair_registered(directory, info.name, split, split_info)
  names, episodes, cut_bytes = [], 0, repair.cut_bytes
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
  if names or repair.shortened:
    layout.write_info(directory, info)
  return Recovery(directory, split, sum(split_info.shard_lengths), episodes,
                  tuple(names), cut_bytes, tuple(removed),
                  tuple(repair.shortened), tuple(repair.lost))


@dataclasses.dataclass
class _Repair:
  """What `_repair_registered` did to the registered shards."""
  shortened: List[str] = dataclasses.field(default_factory=list)
  lost: List[int] = dataclasses.field(default_factory=list)
  cut_bytes: int = 0


def _repair_registered(directory: str, name: str, split: str,
                       split_info) -> _Repair:
  """Cuts registered shards that end inside their registered records.

  Such a shard (copied in part, truncated, a disk that lost its end) makes
  every reader fail at its torn record. It is cut to its last readable
  record and its length registered again (in `split_info`, which the
  caller writes); `num_bytes` is counted again from the shards.
  """
  repair = _Repair()
  first = 0  # The index in the split of the shard's first episode.
  for index, length in enumerate(list(split_info.shard_lengths)):
    shard = layout.shard_name(name, split, index)
    path = os.path.join(directory, shard)
    if records.records_end(path, length) is None:
      found = records.scan(path)
      records.cut(path, found.end)
      repair.cut_bytes += found.size - found.end
      repair.shortened.append(shard)
      repair.lost.extend(range(first + found.records, first + length))
      split_info.shard_lengths[index] = found.records
    first += length
  if repair.shortened:
    split_info.num_bytes = sum(
        _data_bytes(os.path.join(directory, layout.shard_name(name, split, i)),
                    length)
        for i, length in enumerate(split_info.shard_lengths))
  return repair


def _data_bytes(path: str, length: int) -> int:
  """The data of the first `length` records of `path`, as TFDS counts it."""
  return records.records_end(path, length) - wire.RECORD_OVERHEAD * length


def _ranges(indices: Sequence[int]) -> str:
  """'3, 40-44' for [3, 40, 41, 42, 43, 44]: runs of consecutive indices."""
  runs = []
  for index in indices:
    if runs and index == runs[-1][1] + 1:
      runs[-1][1] = index
    else:
      runs.append([index, index])
  return ', '.join(f'{a}' if a == b else f'{a}-{b}' for a, b in runs)


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
        f'follow the {wording.count(registered, "registered shard")} of split '
        f'{split!r} without a gap; they are not what a writer left.')
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
