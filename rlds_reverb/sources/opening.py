"""Opens RLDS data as a `tf.data.Dataset` of episodes, never downloading.

    'bundled:cartpole'             -> CartPole-v1 episodes in the package
    '/data/name/1.0.0'             -> a TFDS directory (has dataset_info.json)
    '/data/name'                   -> ... or its single version subdirectory
    ['/data/a', '/data/b']         -> the episodes of a, then those of b
    'name/config:1.2.0' + data_dir -> a TFDS catalog dataset prepared there

Any of them takes a TFDS split, sliced or not ('train', 'train[:10%]'), and
a shard `(index, count)`: `tfds.even_splits` of the split, exact to the
episode, so the `count` shards together are the split. TFDS reads a shard's
episodes from the record files that hold them (skipping, not parsing, the
records before its start in the first file): N shards cost about one read of
the data in all, not N.
Catalog datasets must already be prepared: preparing one needs internet and
can take hours, which a loader should not start behind the user's back.
"""

import functools
import os
from typing import List, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_reverb import errors
from rlds_reverb.sources import bundled
from rlds_reverb.sources import combining
from rlds_reverb.sources import shards
from rlds_reverb.sources import whole_reads


INFO_FILE = 'dataset_info.json'
# Prefixes that make a string a path even when nothing is there, so a typo in
# a path is reported as a missing directory, not as an unknown catalog name.
_PATH_PREFIXES = ('/', './', '../', '~')


def load(dataset: Union[str, Sequence[str]], split: str = 'train',
         data_dir: Optional[str] = None,
         shard: Optional[shards.Shard] = None) -> tf.data.Dataset:
  """The episodes of `dataset`'s `split`; several datasets are concatenated.

  Args:
    dataset: `BUNDLED`, a TFDS directory (the version directory or its parent),
      a TFDS catalog name ('name/config:version'), or a sequence of these.
    split: a TFDS split, optionally sliced: 'train', 'train[:10%]', 'test[5:]'.
    data_dir: where catalog datasets are prepared (TFDS' default if None);
      ignored for directories.
    shard: `(index, count)` to read only the index-th of `count` disjoint
      parts of the split (of each source); None reads it all.

  Returns:
    A dataset of RLDS episodes, `{'steps': Dataset[step], **metadata}`, in
    TFDS' deterministic read order (files not shuffled), source after source.
    The package's own readers read it whole, faster (`whole_reads`).

  Raises:
    DatasetNotPreparedError: a catalog dataset is not prepared in the data dir.
    SourceError: no dataset given, not a TFDS directory, unreadable dataset
      info, unknown catalog name, unknown split, or datasets whose steps
      differ (their episode metadata may differ: what is not the same in
      all is dropped, but for a flag of invalid episodes), or a shard
      outside 0 <= index < count.
  """
  sources = as_sources(dataset)
  split_arg = shards.shard_split(split, shard)
  found = [_builder(source, data_dir) for source in sources]
  datasets = [_as_dataset(builder, split_arg, where)
              for builder, where in found]
  combine = functools.partial(combining.combine, sources)
  reader = whole_reads.join(
      [whole_reads.reader_of(builder, split_arg) for builder, _ in found],
      combine)
  rlds_data = combine(datasets)
  if reader is None:
    return rlds_data
  return whole_reads.remember(rlds_data, reader,
                              combining.image_fields([b for b, _ in found]))


def builders(dataset: Union[str, Sequence[str]],
             data_dir: Optional[str] = None) -> List[Tuple[str, object]]:
  """Each source of `dataset`, in order, with its TFDS builder (nothing read).

  For readers that plan their own reads from the builders' split and shard
  sizes (`rlds_reverb.beam`). Raises as `load`.
  """
  return [(source, _builder(source, data_dir)[0])
          for source in as_sources(dataset)]


def as_sources(dataset) -> List[str]:
  """One string per dataset; a single string is one dataset, not characters."""
  if isinstance(dataset, (str, os.PathLike)):
    sources = [dataset]
  else:
    sources = list(dataset)
  if not sources:
    raise errors.SourceError(
        f'No dataset given: pass a TFDS directory, a TFDS catalog name or '
        f"'{bundled.BUNDLED}'.")
  for source in sources:
    if not isinstance(source, (str, os.PathLike)):
      raise errors.SourceError(
          f'Dataset {source!r} is a {type(source).__name__}; expected a '
          f'directory or a TFDS catalog name (str).')
  return [os.fspath(source) for source in sources]


def _builder(source: str, data_dir: Optional[str]):
  """The TFDS builder of one source, and where it is, for messages."""
  if source == bundled.BUNDLED:
    return _bundled_builder()
  if source.startswith('bundled:'):
    raise errors.SourceError(
        f"Unknown bundled dataset '{source}'; the package bundles "
        f"'{bundled.BUNDLED}' only.")
  path = os.path.expanduser(source)
  if os.path.isdir(path):
    return _directory_builder(path)
  if os.path.exists(path):
    raise errors.SourceError(
        f'{path} is a file, not a TFDS dataset directory.')
  if source.startswith(_PATH_PREFIXES):
    raise errors.SourceError(f'{path}: no such directory.')
  return _catalog_builder(source, data_dir)


def _bundled_builder():
  path = bundled.bundled_dataset_dir()
  if not os.path.isfile(os.path.join(path, INFO_FILE)):
    raise errors.SourceError(
        f'The bundled dataset is missing from {path}: the package was '
        f'installed without its data files; reinstall rlds_reverb.')
  return _directory_builder(path)


def _directory_builder(path: str):
  version_dir = version_directory(path)
  try:
    builder = tfds.builder_from_directory(version_dir)
  except Exception as e:  # TFDS raises json, protobuf, OS and key errors.
    raise errors.SourceError(
        f'{version_dir}: cannot read the TFDS dataset info '
        f'({_first_line(e)}).') from e
  return builder, version_dir


def version_directory(path: str) -> str:
  """`path` if it holds dataset_info.json, else its one subdir that does."""
  if os.path.isfile(os.path.join(path, INFO_FILE)):
    return path
  versions = [name for name in sorted(os.listdir(path))
              if os.path.isfile(os.path.join(path, name, INFO_FILE))]
  if not versions:
    raise errors.SourceError(
        f'{path} is not a TFDS dataset directory: no {INFO_FILE} in it or in '
        f'a version subdirectory.')
  if len(versions) > 1:
    raise errors.SourceError(
        f'{path} holds several dataset versions ({", ".join(versions)}); '
        f'pass the directory of one.')
  return os.path.join(path, versions[0])


def _catalog_builder(name: str, data_dir: Optional[str]):
  """A prepared catalog dataset's builder; TFDS would otherwise download."""
  try:
    builder = tfds.builder(name, data_dir=data_dir)
  except tfds.core.registered.DatasetNotFoundError as e:
    raise errors.SourceError(
        f"'{name}' is neither an existing directory nor a TFDS catalog "
        f'dataset.') from e
  except Exception as e:  # Bad config or version: AssertionError, ValueError.
    raise errors.SourceError(
        f"Cannot open TFDS catalog dataset '{name}': {_first_line(e)}") from e
  root = os.fspath(builder.data_dir_root)
  if not builder.is_prepared():
    top = os.path.relpath(builder.data_dir, root).split(os.sep)[0]
    raise errors.DatasetNotPreparedError(
        f"TFDS dataset '{name}' is not prepared in data dir {root} (no "
        f'{builder.data_dir}) and rlds-reverb never downloads: on a machine '
        f'with internet run `tfds build {name} --data_dir DIR`, then copy '
        f'DIR/{top} into {root}.')
  return builder, f"'{name}' in {root}"


def _as_dataset(builder, split, where: str) -> tf.data.Dataset:
  """`split` is a split string or a shard of one (`tfds.even_splits`)."""
  try:
    return builder.as_dataset(split=split, shuffle_files=False)
  except (ValueError, KeyError, AssertionError) as e:
    available = ', '.join(sorted(builder.info.splits)) or 'none'
    name = split if isinstance(split, str) else split.split  # A shard's.
    raise errors.SourceError(
        f"Bad split '{name}' for {where}; available splits: {available} "
        f'({_first_line(e)})') from e


def _first_line(error: BaseException) -> str:
  """TFDS errors run to many lines (all catalog names); keep the first."""
  lines = str(error).strip().splitlines()
  return lines[0] if lines else type(error).__name__
