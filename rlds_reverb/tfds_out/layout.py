"""The files of an RLDS dataset directory, as TFDS reads them.

    DIR/features.json                   the features; written first, once
    DIR/dataset_info.json               name, version, disable_shuffling, and
                                        per split the length of every shard
                                        (closed shards only)
    DIR/{name}-{split}.tfrecord-00000   shards: one serialized episode per
    DIR/{name}-{split}.tfrecord-00001   record, in the order written
    ...

This is the layout of TFDS's `SequentialWriter` (and so EnvLogger's TFDS
backend). TFDS reads a split's shards 0..N-1, N the number of lengths listed,
and trusts those lengths. `disable_shuffling` keeps the written order on read
(else shards are interleaved in blocks of 16). Metadata files are replaced
atomically (`files.replace_atomically`): never half-written.
"""

import json
import os
import re
from typing import Any, Dict, List

from google.protobuf import json_format
import tensorflow_datasets as tfds
from tensorflow_datasets.core.proto import dataset_info_pb2

from rlds_reverb._util import files
from rlds_reverb.errors import DatasetDirectoryError

INFO_FILE = 'dataset_info.json'
FEATURES_FILE = 'features.json'
FILE_FORMAT = 'tfrecord'
SHARD_TEMPLATE = '{DATASET}-{SPLIT}.{FILEFORMAT}-{SHARD_INDEX}'
# TFDS names shards with 5 digits up to 99,999 shards, with more digits
# beyond: then the names it expects change with the count.
MAX_SHARDS = 99_999

_NAME = re.compile(r'^[A-Za-z0-9_]+$')


def check_name(value: str, what: str) -> None:
  """Dataset and split names: letters, digits, underscores (file names)."""
  if not isinstance(value, str) or not _NAME.match(value):
    raise ValueError(
        f'{what} {value!r} must be letters, digits and underscores: it names '
        f'the record files.')


def shard_name(name: str, split: str, index: int) -> str:
  """'cartpole-train.tfrecord-00003'."""
  return f'{name}-{split}.{FILE_FORMAT}-{index:05d}'


def shard_indices(directory: str, name: str, split: str) -> List[int]:
  """Indices of the shard files of `split` in `directory`, sorted."""
  pattern = re.compile(
      rf'^{re.escape(name)}-{re.escape(split)}\.{FILE_FORMAT}-(\d{{5}})$')
  matches = (pattern.match(entry) for entry in os.listdir(directory))
  return sorted(int(match.group(1)) for match in matches if match)


def check_new_directory(directory: str, *, leftovers=frozenset(),
                        if_dataset: str = '') -> None:
  """Raises unless `directory` is missing or an empty directory (holding no
  more than `leftovers`): where a new dataset may be written.

  Raises:
    DatasetDirectoryError: '{directory} is not empty: it holds a dataset'
      (then `if_dataset`, what to do about it) or 'files other than a
      dataset'; or it is a file.
  """
  if not os.path.exists(directory):
    return
  if not os.path.isdir(directory):
    raise DatasetDirectoryError(
        f'{directory} is a file: a dataset is written into a directory.')
  if not set(os.listdir(directory)) - set(leftovers):
    return
  holds = 'files other than a dataset'
  if os.path.isfile(os.path.join(directory, INFO_FILE)):
    holds = f'a dataset{"; " if if_dataset else ""}{if_dataset}'
  raise DatasetDirectoryError(f'{directory} is not empty: it holds {holds}.')


def new_info(name: str, version: str) -> dataset_info_pb2.DatasetInfo:
  """The dataset info of a dataset with no split yet."""
  return dataset_info_pb2.DatasetInfo(
      name=name, version=version, file_format=FILE_FORMAT,
      disable_shuffling=True)


def checked_split(directory: str, info: dataset_info_pb2.DatasetInfo,
                  split: str) -> dataset_info_pb2.SplitInfo:
  """The split `split` of `info` (added if missing), stored as written here.

  Raises:
    DatasetDirectoryError: the dataset stores another file format, or names
      the split's files otherwise.
  """
  if info.file_format not in ('', FILE_FORMAT):
    raise DatasetDirectoryError(
        f'{directory} stores {info.file_format} files; only {FILE_FORMAT} '
        f'datasets can be written to or recovered.')
  found = [split_info for split_info in info.splits if split_info.name == split]
  split_info = found[0] if found else info.splits.add(name=split)
  template = split_info.filepath_template
  if template != SHARD_TEMPLATE and (template or split_info.shard_lengths):
    raise DatasetDirectoryError(
        f"{directory}: split '{split}' names its files "
        f"{template or 'as TFDS does by default'}; only {SHARD_TEMPLATE} (TFDS "
        f'SequentialWriter, EnvLogger) can be written to or recovered.')
  split_info.filepath_template = SHARD_TEMPLATE
  return split_info


def read_info(directory: str) -> dataset_info_pb2.DatasetInfo:
  """The parsed dataset_info.json of `directory`.

  Raises:
    DatasetDirectoryError: there is none, or it cannot be parsed.
  """
  path = os.path.join(directory, INFO_FILE)
  try:
    with open(path, encoding='utf-8') as f:
      text = f.read()
  except FileNotFoundError:
    raise DatasetDirectoryError(
        f'{directory} is not a TFDS dataset directory: it has no '
        f'{INFO_FILE}.') from None
  try:
    return json_format.Parse(text, dataset_info_pb2.DatasetInfo())
  except json_format.ParseError as e:
    raise DatasetDirectoryError(f'{path} cannot be parsed: {e}') from e


def write_info(directory: str, info: dataset_info_pb2.DatasetInfo) -> None:
  """Replaces dataset_info.json, as TFDS formats it, atomically."""
  files.replace_atomically(os.path.join(directory, INFO_FILE),
                           json_format.MessageToJson(info, sort_keys=True))


def features_json(features: tfds.features.FeaturesDict) -> Dict[str, Any]:
  """The content of features.json for `features`, as TFDS writes it."""
  return json_format.MessageToDict(features.to_proto())


def write_features(directory: str, features: tfds.features.FeaturesDict):
  files.replace_atomically(
      os.path.join(directory, FEATURES_FILE),
      json.dumps(features_json(features), indent=4, sort_keys=True))


def read_features_json(directory: str) -> Dict[str, Any]:
  """features.json of `directory` as a dict.

  Raises:
    DatasetDirectoryError: missing or not JSON.
  """
  path = os.path.join(directory, FEATURES_FILE)
  try:
    with open(path, encoding='utf-8') as f:
      return json.load(f)
  except (OSError, ValueError) as e:
    raise DatasetDirectoryError(
        f'{path} cannot be read: {type(e).__name__}: {e}') from e
