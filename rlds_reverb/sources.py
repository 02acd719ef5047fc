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
import importlib.resources
import json
import os
import re
from typing import List, Optional, Sequence, Tuple, Union

import tensorflow as tf
import tensorflow_datasets as tfds

from rlds_reverb import errors
from rlds_reverb import whole_reads
from rlds_reverb import wire
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths

BUNDLED = 'bundled:cartpole'

_INFO_FILE = 'dataset_info.json'
# Prefixes that make a string a path even when nothing is there, so a typo in
# a path is reported as a missing directory, not as an unknown catalog name.
_PATH_PREFIXES = ('/', './', '../', '~')

Shard = Tuple[int, int]  # (index, count): the index-th of count parts.


def load(dataset: Union[str, Sequence[str]], split: str = 'train',
         data_dir: Optional[str] = None,
         shard: Optional[Shard] = None) -> tf.data.Dataset:
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
  sources = _as_sources(dataset)
  split_arg = shard_split(split, shard)
  found = [_builder(source, data_dir) for source in sources]
  datasets = [_as_dataset(builder, split_arg, where)
              for builder, where in found]
  combine = functools.partial(_combine, sources)
  reader = whole_reads.join(
      [whole_reads.reader_of(builder, split_arg) for builder, _ in found],
      combine)
  rlds_data = combine(datasets)
  if reader is None:
    return rlds_data
  return whole_reads.remember(rlds_data, reader,
                              _image_fields([b for b, _ in found]))


def _image_fields(found_builders) -> dict:
  """The Image step fields of the sources; a format where they all agree
  (the steps were checked to be the same), None where they differ."""
  images = [whole_reads.images_of(builder) for builder in found_builders]
  return {path: (image_format if all(other.get(path) == image_format
                                     for other in images) else None)
          for path, image_format in images[0].items()}


def _combine(sources: List[str], datasets: List[tf.data.Dataset]
             ) -> tf.data.Dataset:
  """The sources' datasets, one after the other (`_concatenate`)."""
  return functools.reduce(
      _concatenate, zip(sources[1:], datasets[1:]), datasets[0])


def shard_split(split: str, shard: Optional[Shard]):
  """The TFDS split argument for `shard` of `split` (`split` if None)."""
  if shard is None:
    return split
  index, count = shard
  if not 0 <= index < count:
    raise errors.SourceError(
        f'Shard {index}/{count} does not exist: the index must be in '
        f'0..{count - 1}.')
  return tfds.even_splits(split, count)[index]


def builders(dataset: Union[str, Sequence[str]],
             data_dir: Optional[str] = None) -> List[Tuple[str, object]]:
  """Each source of `dataset`, in order, with its TFDS builder (nothing read).

  For readers that plan their own reads from the builders' split and shard
  sizes (`rlds_reverb.beam`). Raises as `load`.
  """
  return [(source, _builder(source, data_dir)[0])
          for source in _as_sources(dataset)]


def bundled_dataset_dir() -> str:
  """The bundled CartPole TFDS directory, wherever the package is installed."""
  return str(importlib.resources.files('rlds_reverb') / 'data' / 'cartpole')


def display_name(dataset: Union[str, Sequence[str]],
                 data_dir: Optional[str] = None) -> str:
  """A short human name for `dataset`, for logs and CLI output; never raises."""
  try:
    sources = _as_sources(dataset)
  except errors.SourceError:
    return repr(dataset)
  return ' + '.join(_source_name(source, data_dir) for source in sources)


def read_error_text(error: Exception,
                    dataset: Optional[Union[str, Sequence[str]]] = None,
                    data_dir: Optional[str] = None) -> str:
  """One line for an error reading records: for a cut or corrupt record, the
  record file and the byte offset (when `dataset` is given and says).

  TensorFlow names neither: "{{function_node __wrapped__IteratorGetNext...}}
  truncated record at 88533' failed with Read less bytes than requested".
  """
  reason = _tf_reason(getattr(error, 'message', None) or str(error))
  match = _RECORD_PROBLEM.search(reason)
  if not match or dataset is None:
    return reason
  kind, offset = match.group(1), int(match.group(2))
  try:
    files = _record_files(dataset, data_dir)
  except (errors.SourceError, OSError):
    return reason
  suspects = [path for path in files if _may_hold(path, offset, kind)]
  if len(suspects) != 1:
    where = (f'one of {", ".join(suspects[:3])}'
             f'{" ..." if len(suspects) > 3 else ""}' if suspects
             else 'its record files')
    return f'a {kind} record at byte {offset:,} of {where}'
  path = suspects[0]
  cut = ' (the file is cut short: copied or written only in part?)'
  return (f'a {kind} record at byte {offset:,} of {path}, a file of '
          f'{os.path.getsize(path):,} bytes{cut if kind == "truncated" else ""}')


# TensorFlow's text for a record it cannot read.
_RECORD_PROBLEM = re.compile(r'(truncated|corrupted) record at (\d+)')
_TF_NOISE = re.compile(r'\{\{function_node [^}]*\}\}\s*|\s*\[Op:[^\]]*\].*$')


def _tf_reason(message: str) -> str:
  """The first line of a TensorFlow error without its op and node names."""
  first = message.strip().split('\n')[0]
  reason = _TF_NOISE.sub('', first).replace("' failed with ", ': ')
  return reason.strip() or first


def _record_files(dataset, data_dir) -> List[str]:
  """Every record file of every split of each source."""
  files = []
  for _, builder in builders(dataset, data_dir):
    for split in builder.info.splits.values():
      files.extend(os.fspath(path) for path in split.filepaths)
  return sorted(set(files))


def _may_hold(path: str, offset: int, kind: str) -> bool:
  """Whether `path` can hold a `kind` record at `offset`.

  A truncated record (`wire`'s framing) runs past the end of its file; a
  corrupted one (a CRC that does not match) can be in any file longer than
  the offset.
  """
  try:
    size = os.path.getsize(path)
    if size <= offset:
      return False
    if kind != 'truncated':
      return True
    with open(path, 'rb', buffering=0) as f:
      length = wire.length_at(f.fileno(), offset)
  except OSError:
    return False
  return length is None or offset + wire.RECORD_OVERHEAD + length > size


def _as_sources(dataset) -> List[str]:
  """One string per dataset; a single string is one dataset, not characters."""
  if isinstance(dataset, (str, os.PathLike)):
    sources = [dataset]
  else:
    sources = list(dataset)
  if not sources:
    raise errors.SourceError(
        f'No dataset given: pass a TFDS directory, a TFDS catalog name or '
        f"'{BUNDLED}'.")
  for source in sources:
    if not isinstance(source, (str, os.PathLike)):
      raise errors.SourceError(
          f'Dataset {source!r} is a {type(source).__name__}; expected a '
          f'directory or a TFDS catalog name (str).')
  return [os.fspath(source) for source in sources]


def _builder(source: str, data_dir: Optional[str]):
  """The TFDS builder of one source, and where it is, for messages."""
  if source == BUNDLED:
    return _bundled_builder()
  if source.startswith('bundled:'):
    raise errors.SourceError(
        f"Unknown bundled dataset '{source}'; the package bundles "
        f"'{BUNDLED}' only.")
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
  path = bundled_dataset_dir()
  if not os.path.isfile(os.path.join(path, _INFO_FILE)):
    raise errors.SourceError(
        f'The bundled dataset is missing from {path}: the package was '
        f'installed without its data files; reinstall rlds_reverb.')
  return _directory_builder(path)


def _directory_builder(path: str):
  version_dir = _version_dir(path)
  try:
    builder = tfds.builder_from_directory(version_dir)
  except Exception as e:  # TFDS raises json, protobuf, OS and key errors.
    raise errors.SourceError(
        f'{version_dir}: cannot read the TFDS dataset info '
        f'({_first_line(e)}).') from e
  return builder, version_dir


def _version_dir(path: str) -> str:
  """`path` if it holds dataset_info.json, else its one subdir that does."""
  if os.path.isfile(os.path.join(path, _INFO_FILE)):
    return path
  versions = [name for name in sorted(os.listdir(path))
              if os.path.isfile(os.path.join(path, name, _INFO_FILE))]
  if not versions:
    raise errors.SourceError(
        f'{path} is not a TFDS dataset directory: no {_INFO_FILE} in it or in '
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


def _concatenate(dataset: tf.data.Dataset, source_and_next) -> tf.data.Dataset:
  """Appends one source; steps must match exactly, not just be compatible.

  tf.data would relax float32[3] and float32[5] to float32[None], which no
  Reverb table signature can hold. Episode metadata that differs (a field
  one source lacks, or stores otherwise) is dropped, as conversion drops
  it; a flag marking invalid episodes is kept, False where a source has none.
  """
  source, next_dataset = source_and_next
  before, after = dataset.element_spec, next_dataset.element_spec
  if not (_is_rlds(before) and _is_rlds(after)):
    differences = _spec_differences(before, after)
  else:
    differences = _spec_differences({fields.STEPS: before[fields.STEPS]},
                                    {fields.STEPS: after[fields.STEPS]})
  if differences:
    raise errors.SourceError(
        f'Cannot concatenate {source}: its episode spec differs from the '
        f'datasets before it at {"; ".join(differences)}.')
  if before == after:
    return dataset.concatenate(next_dataset)
  kept = _shared_metadata(before, after)
  return _with_metadata(dataset, kept).concatenate(
      _with_metadata(next_dataset, kept))


def _is_rlds(spec) -> bool:
  return isinstance(spec, dict) and fields.STEPS in spec


def _shared_metadata(before: dict, after: dict) -> List[str]:
  """Metadata fields both have alike, and the invalid flags either has."""
  shared = [name for name in before
            if name != fields.STEPS and before[name] == after.get(name)]
  flags = [name for name in fields.INVALID_FLAG_FIELDS
           if name not in shared and _is_flag(before.get(name),
                                              after.get(name))]
  return shared + flags


def _is_flag(*specs) -> bool:
  """Bool scalars where present, in one spec at least."""
  present = [spec for spec in specs if spec is not None]
  return bool(present) and all(
      isinstance(spec, tf.TensorSpec) and spec.dtype == tf.bool and
      spec.shape.rank == 0 for spec in present)


def _with_metadata(dataset: tf.data.Dataset, names: List[str]):
  """Episodes with `steps` and the metadata `names`; a missing flag False."""
  return dataset.map(functools.partial(_select_metadata, names=names))


def _select_metadata(episode, names):
  selected = {fields.STEPS: episode[fields.STEPS]}
  for name in names:
    selected[name] = episode.get(name, tf.constant(False))
  return selected


def _spec_differences(before, after) -> List[str]:
  """'path (spec before vs spec after)' for each field that differs."""
  lines = []
  for path, first, second in paths.spec_differences(before, after):
    first_text, second_text = paths.difference_texts(first, second)
    lines.append(f'{path} ({first_text} vs {second_text})')
  return lines


def _source_name(source: str, data_dir: Optional[str]) -> str:
  if source == BUNDLED:
    return f'{BUNDLED} (CartPole-v1, {bundled_dataset_dir()})'
  path = os.path.expanduser(source)
  if os.path.isdir(path):
    return _directory_name(path)
  return f"TFDS '{source}' in {data_dir or 'the default data dir'}"


def _directory_name(path: str) -> str:
  try:
    with open(os.path.join(_version_dir(path), _INFO_FILE)) as f:
      info = json.load(f)
    return f'{info["name"]}:{info["version"]} ({path})'
  except (errors.SourceError, OSError, ValueError, KeyError):
    return path


def _first_line(error: BaseException) -> str:
  """TFDS errors run to many lines (all catalog names); keep the first."""
  lines = str(error).strip().splitlines()
  return lines[0] if lines else type(error).__name__
