"""A short human name for a source, for logs and CLI output; never raises.

    '/data/alpha'      -> 'alpha:1.0.0 (/data/alpha)'   (its dataset info)
    'd4rl/x'           -> "TFDS 'd4rl/x' in /data"
    'bundled:cartpole' -> 'bundled:cartpole (CartPole-v1, .../data/cartpole)'
"""

import json
import os
from typing import Optional, Sequence, Union

from rlds_reverb import errors
from rlds_reverb.sources import bundled
from rlds_reverb.sources import opening


def display_name(dataset: Union[str, Sequence[str]],
                 data_dir: Optional[str] = None) -> str:
  """A short human name for `dataset`, for logs and CLI output; never raises."""
  try:
    sources = opening.as_sources(dataset)
  except errors.SourceError:
    return repr(dataset)
  return ' + '.join(_source_name(source, data_dir) for source in sources)


def _source_name(source: str, data_dir: Optional[str]) -> str:
  if source == bundled.BUNDLED:
    return (f'{bundled.BUNDLED} (CartPole-v1, '
            f'{bundled.bundled_dataset_dir()})')
  path = os.path.expanduser(source)
  if os.path.isdir(path):
    return _directory_name(path)
  return f"TFDS '{source}' in {data_dir or 'the default data dir'}"


def _directory_name(path: str) -> str:
  try:
    directory = opening.version_directory(path)
    with open(os.path.join(directory, opening.INFO_FILE)) as f:
      info = json.load(f)
    return f'{info["name"]}:{info["version"]} ({path})'
  except (errors.SourceError, OSError, ValueError, KeyError):
    return path
