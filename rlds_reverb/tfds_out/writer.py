"""`EpisodeWriter`: RLDS episodes into a TFDS dataset directory, crash-safe.

    EpisodeWriter(dir, features, name=...)    [append=True: recover first]
      features.json, dataset_info.json        (atomic, synced)
    write(episode)
      -> encode.EpisodeEncoder: checked, serialized (raises before writing)
      -> shard file: one record, flushed, fsynced   <- durable on return
      -> shard full (shard_episodes) or old (shard_seconds):
           closed, synced, its length registered in dataset_info.json
    close()                                   last shard registered

Readers (TFDS, `rlds_reverb.load`, the CLI) see registered shards only: the
episodes of the open shard appear when it closes, or after `recover` if the
process died. Killed at any point, the directory holds every episode whose
`write` returned; `recover` (run by `append=True`) registers them and cuts
the episode that was being written.

Limits: one writer per directory at a time (nothing locks it); TFDS refuses
to read a split with no episode ("Shard empty"); an episode's images share
one size; a split holds at most 99,999 shards (TFDS's file names).
"""

import os
import time
import warnings
from typing import Any, Mapping, Optional

import tensorflow_datasets as tfds

from rlds_reverb._util import files
from rlds_reverb.errors import DatasetDirectoryError
from rlds_reverb.errors import LostEpisodesWarning
from rlds_reverb.tfds_out import encode
from rlds_reverb.tfds_out import layout
from rlds_reverb.tfds_out import recovery as recovery_lib
from rlds_reverb.tfds_out import records
from rlds_reverb.tfds_out.records import Durability


class EpisodeWriter:
  """Writes RLDS episodes, in order, as one split of a TFDS dataset.

  Usage:

      features = features_from_specs(step_spec, {'episode_id': id_spec})
      with EpisodeWriter('/data/run1', features, name='run1') as writer:
        writer.write({'steps': {'observation': obs, ...}, 'episode_id': 0})

  Reads back with `tfds.builder_from_directory('/data/run1')` and
  `rlds_reverb.load('/data/run1')`, in the order written.

  Attributes:
    directory: where the dataset is.
    recovery: what `append=True` recovered (`Recovery`), else None; a
      `LostEpisodesWarning` says when it cut finished episodes.
  """

  def __init__(
      self,
      directory: str,
      features: tfds.features.FeaturesDict,
      *,
      name: str,
      version: str = '1.0.0',
      split: str = 'train',
      shard_episodes: int = 1000,
      shard_seconds: Optional[float] = None,
      append: bool = False,
      durability: Durability = Durability.FSYNC,
  ):
    """Opens `directory` (the dataset's version directory) for writing.

    Args:
      directory: made if missing. New datasets need it missing or empty.
      features: of the episodes (`features_from_specs`): plain Tensor and
        uint8 Image features, RLDS flags in `steps`.
      name: the dataset's name (letters, digits, _); names the files.
      version: the dataset's version, 'X.Y.Z'.
      split: the split written.
      shard_episodes: episodes per shard file at most.
      shard_seconds: a shard is closed once this old (checked after each
        episode), so readers see episodes at least this often; None: never.
      append: add to the dataset in `directory` if there is one (recovering
        it first: `recovery`), with the same name, version and features;
        the new episodes go to new shards.
      durability: `Durability.FSYNC` (each episode on disk when `write`
        returns) or `FLUSH` (handed to the OS: survives a killed process,
        not a crashed machine; faster for short episodes).

    Raises:
      ValueError: a bad name, split, version, shard size or durability.
      FeaturesError: features the writer cannot store.
      DatasetDirectoryError: `directory` is a file, or is not empty and
        `append` is False, or holds no dataset of this name, version and
        features, or cannot be recovered.
    """
    layout.check_name(name, 'Dataset name')
    layout.check_name(split, 'Split')
    _check_options(version, shard_episodes, shard_seconds, durability)
    self._encoder = encode.EpisodeEncoder(features)
    self.directory = os.fspath(directory)
    self._split_name = split
    self._shard_episodes = shard_episodes
    self._shard_seconds = shard_seconds
    self._durability = durability
    self.recovery: Optional[recovery_lib.Recovery] = None
    if append and os.path.isfile(os.path.join(self.directory,
                                              layout.INFO_FILE)):
      self._info = self._reopen(features, name, version)
    else:
      self._info = _create(self.directory, features, name, version)
    self._info.disable_shuffling = True  # The order written is the order read.
    self._split = layout.checked_split(self.directory, self._info, split)
    self._episodes = sum(self._split.shard_lengths)
    self._shard: Optional[records.ShardWriter] = None
    self._shard_episodes_written = 0
    self._shard_data_bytes = 0
    self._shard_opened_at = 0.0
    self._closed = False
    layout.write_info(self.directory, self._info)

  @property
  def num_episodes(self) -> int:
    """Episodes in the split, earlier runs' included: the next one's index."""
    return self._episodes

  def write(self, episode: Mapping[str, Any]) -> int:
    """Writes one episode after the others; returns its index in the split.

    `episode` is `{'steps': {field: [T, ...] values}, **metadata}` (nested
    as the features, namedtuples as dicts). Once this returns the episode
    is durable (see `durability`) and recoverable.

    Raises:
      FeaturesError, MalformedEpisodeError: the episode does not fit the
        features, or its flags are not one episode's; nothing of it written.
      DatasetDirectoryError: the writer is closed.
    """
    if self._closed:
      raise DatasetDirectoryError(
          f'The writer of {self.directory} is closed; open a new one with '
          f'append=True to write more.')
    index = self._episodes
    record = self._encoder.encode(episode, f'Episode {index}')
    if self._shard is None:
      self._open_shard()
    self._shard.append(record)
    self._episodes += 1
    self._shard_episodes_written += 1
    self._shard_data_bytes += len(record)
    if self._shard_is_done():
      self._close_shard()
    return index

  def close(self) -> None:
    """Closes the open shard and registers it; further writes raise."""
    if self._closed:
      return
    self._close_shard()
    self._closed = True

  def __enter__(self) -> 'EpisodeWriter':
    return self

  def __exit__(self, *exc_info) -> None:
    """Closes, also on an error: every episode written stays readable."""
    self.close()

  def _reopen(self, features, name: str, version: str):
    """The info of the dataset in the directory, recovered, if it is this one."""
    info = layout.read_info(self.directory)
    wanted = {'name': name, 'version': version}
    found = {'name': info.name, 'version': info.version}
    differences = [f'{key} {found[key]!r}, not {wanted[key]!r}'
                   for key in wanted if wanted[key] != found[key]]
    if layout.read_features_json(self.directory) != layout.features_json(
        features):
      differences.append(
          f'other features (its {layout.FEATURES_FILE} differs)')
    if differences:
      raise DatasetDirectoryError(
          f'Cannot append to {self.directory}: its dataset has '
          f'{"; ".join(differences)}.')
    self.recovery = recovery_lib.recover(self.directory, self._split_name)
    if self.recovery.lost_episodes:
      warnings.warn(LostEpisodesWarning(str(self.recovery)),
                    stacklevel=3)
    return layout.read_info(self.directory)

  def _open_shard(self) -> None:
    index = len(self._split.shard_lengths)
    if index >= layout.MAX_SHARDS:
      raise DatasetDirectoryError(
          f'{self.directory}: split {self._split_name!r} has '
          f'{layout.MAX_SHARDS:,} shards, as many as TFDS reads; write more '
          f'episodes per shard (shard_episodes, shard_seconds).')
    path = os.path.join(self.directory, layout.shard_name(
        self._info.name, self._split_name, index))
    self._shard = records.ShardWriter(path, self._durability)
    self._shard_episodes_written = 0
    self._shard_data_bytes = 0
    self._shard_opened_at = time.monotonic()

  def _shard_is_done(self) -> bool:
    if self._shard_episodes_written >= self._shard_episodes:
      return True
    return self._shard_seconds is not None and (
        time.monotonic() - self._shard_opened_at >= self._shard_seconds)

  def _close_shard(self) -> None:
    """Closes the open shard, if any, and registers its length."""
    if self._shard is None:
      return
    self._shard.close()
    self._shard = None
    self._split.shard_lengths.append(self._shard_episodes_written)
    self._split.num_bytes += self._shard_data_bytes
    layout.write_info(self.directory, self._info)


def _check_options(version, shard_episodes, shard_seconds, durability) -> None:
  try:
    tfds.core.Version(version)
  except (ValueError, TypeError) as e:
    raise ValueError(
        f"Version {version!r} is not a TFDS version 'X.Y.Z'.") from e
  if isinstance(shard_episodes, bool) or not isinstance(
      shard_episodes, int) or shard_episodes < 1:
    raise ValueError(
        f'shard_episodes must be an int >= 1, got {shard_episodes!r}.')
  if shard_seconds is not None and not 0 <= shard_seconds < float('inf'):
    raise ValueError(
        f'shard_seconds must be None or finite and >= 0, got '
        f'{shard_seconds!r}.')
  if not isinstance(durability, Durability):
    raise ValueError(
        f'durability must be a Durability (FSYNC, FLUSH), got '
        f'{durability!r}.')


def _create(directory: str, features, name: str, version: str):
  """A new dataset's files in an empty (or new) directory; its info.

  features.json is written first, then dataset_info.json (by the caller):
  a directory holding only the first (and temporaries) is a creation that
  was interrupted, and is created again.
  """
  layout.check_new_directory(
      directory, leftovers=_CREATION_FILES,
      if_dataset='pass append=True to add episodes to it')
  os.makedirs(directory, exist_ok=True)
  layout.write_features(directory, features)
  return layout.new_info(name, version)


# What an interrupted `_create` may leave.
_CREATION_FILES = frozenset([
    layout.FEATURES_FILE, files.temporary_path(layout.FEATURES_FILE),
    files.temporary_path(layout.INFO_FILE)])

