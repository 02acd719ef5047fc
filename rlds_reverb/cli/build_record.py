"""What a build of many servers read, recorded beside it, so that a serve
of the build given the same dataset and options need not sign the dataset
again: no checker process, no TensorFlow, while the servers load.

    build --servers S (TensorFlow)           serve --from-checkpoint BUILT
      the dataset signed, as serve signs it     (no TensorFlow)
      -> BUILT/dataset.json: the key, the        the key of its own arguments
         check's lines' inputs (notes, the       == the record's, and every
         signature's fields, bytes per item),    server's tables signed with
         each table's signature as written       the bytes the build wrote?
                                                 yes: the recorded verdict;
                                                 no: the checker, as before

The key: each source's TFDS metadata files (dataset_info.json and
features.json, what the step spec is made from, hashed), the split, the
options that shape the signature (--strict, --n-step, --images,
--image-format, --image-field) and the package's version. A source named
by catalog name has no key (its directory is TFDS's to find): its serve
runs the checker. The record only spares work: a missing, unreadable or
stale one means the checker runs.
"""

import base64
import dataclasses
import hashlib
import importlib.metadata
import importlib.resources
import json
import os
from typing import Any, Dict, List, Optional, Sequence

from rlds_reverb import checkpoints
from rlds_reverb.cli import serve_checks

RECORD = 'dataset.json'
_FORMAT = 1
_METADATA_FILES = ('dataset_info.json', 'features.json')
# The arguments besides the sources that the tables' signature depends on,
# with their defaults. Whether items are n-step transitions, not their n
# (serve's --n-step is a flag, build's takes n).
_SHAPING = {'split': 'train', 'strict': False, 'images': 'raw',
            'image_format': 'png', 'image_field': None}
_BUNDLED = 'bundled:cartpole'  # sources.BUNDLED, which imports TensorFlow.


@dataclasses.dataclass(frozen=True)
class Verdict:
  """The check a checker would make, as the build recorded it."""
  notes: List[str]
  fields: List[Dict[str, Any]]  # The signature's, for servers.json.
  bytes_per_item: float
  unsized: List[str]


def key(args) -> Optional[Dict[str, Any]]:
  """What the signature of `args`' dataset depends on; None if a source is
  not a TFDS directory (or the bundled one)."""
  digests = []
  for source in args.dataset:
    directory = _version_directory(source)
    if directory is None:
      return None
    digests.append(_metadata_digest(directory))
  return {'format': _FORMAT, 'package': _package_version(),
          'metadata': digests, 'n_step': bool(getattr(args, 'n_step', None)),
          **{name: getattr(args, name, default)
             for name, default in _SHAPING.items()}}


def write(args, out: str, roots: Sequence[str]) -> None:
  """Records the dataset of `args` beside the build in `out` (its servers'
  roots `roots`); nothing for a dataset without a key. Signs the dataset
  as serve's checker does (TensorFlow)."""
  found = key(args)
  if found is None:
    return
  from rlds_reverb.write import memory  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  dataset = serve_checks.dataset_signature(args)
  estimate = memory.item_memory(
      dataset.row_spec,
      measured=serve_checks.measured_frames(args, dataset.rlds_data))
  from rlds_reverb.cli import output  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  record = {'key': found, 'notes': list(dataset.notes),
            'signature': output.spec_fields(dataset.signature),
            'bytes_per_item': estimate.bytes_per_item,
            'unsized': list(estimate.unsized),
            'tables': _signatures(checkpoints.checkpoint_load(_newest(root))
                                  for root in roots)}
  path = os.path.join(out, RECORD)
  temporary = f'{path}.tmp'
  try:
    with open(temporary, 'w') as file:
      json.dump(record, file, indent=1)
    os.replace(temporary, path)
  finally:
    if os.path.exists(temporary):
      os.remove(temporary)


def verdict(args, seed: Optional[str],
            loads: Sequence[checkpoints.CheckpointLoad]) -> Optional[Verdict]:
  """The recorded check of the build `seed` if it holds for `args` and the
  checkpoints `loads` (one per server, their tables files read); else None:
  the checker runs."""
  if not seed:
    return None
  try:
    with open(os.path.join(seed, RECORD)) as file:
      record = json.load(file)
    if record['key'] != key(args):
      return None
    if any(_signatures([load]) != record['tables'] for load in loads):
      return None
    return Verdict(notes=record['notes'],
                   fields=record['signature'],
                   bytes_per_item=record['bytes_per_item'],
                   unsized=record['unsized'])
  except (OSError, ValueError, KeyError, TypeError):
    return None


def _signatures(loads) -> Dict[str, str]:
  """Each table's signature as the checkpoints `loads` hold it (base64 of
  its bytes); one table signed two ways gets no entry to match."""
  found: Dict[str, set] = {}
  for load in loads:
    for settings in load.settings:
      found.setdefault(settings.name, set()).add(
          base64.b64encode(settings.signature).decode('ascii'))
  return {name: signed.pop() for name, signed in found.items()
          if len(signed) == 1}


def _newest(root: str) -> str:
  found = checkpoints.find(root)
  return found.path(found.newest)


def _version_directory(source: str) -> Optional[str]:
  """The directory holding the source's dataset_info.json, as
  `sources.load` finds it; None for a catalog name or a bad path."""
  if source == _BUNDLED:
    path = str(importlib.resources.files('rlds_reverb') / 'data' / 'cartpole')
  else:
    path = os.path.expanduser(os.fspath(source))
  if not os.path.isdir(path):
    return None
  if os.path.isfile(os.path.join(path, _METADATA_FILES[0])):
    return path
  versions = [name for name in sorted(os.listdir(path))
              if os.path.isfile(os.path.join(path, name, _METADATA_FILES[0]))]
  return os.path.join(path, versions[0]) if len(versions) == 1 else None


def _metadata_digest(directory: str) -> str:
  digest = hashlib.sha256()
  for name in _METADATA_FILES:
    file_path = os.path.join(directory, name)
    data = b''
    if os.path.isfile(file_path):
      with open(file_path, 'rb') as file:
        data = file.read()
    digest.update(f'{name}:{len(data)}:'.encode())
    digest.update(data)
  return digest.hexdigest()


def _package_version() -> str:
  try:
    return importlib.metadata.version('rlds_reverb')
  except importlib.metadata.PackageNotFoundError:
    return 'unknown'
