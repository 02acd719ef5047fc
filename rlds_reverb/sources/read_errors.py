"""A read error in one line: TensorFlow's text without its node names, and
for a cut or corrupt record the record file and the byte offset.

    "{{function_node __wrapped__IteratorGetNext...}} truncated record at
     88533' failed with Read less bytes than requested"
      -> "a truncated record at byte 88,533 of DIR/x.tfrecord-00001, a file
          of N bytes (the file is cut short: copied or written only in part?)"
"""

import os
import re
from typing import List, Optional, Sequence, Union

from rlds_reverb import errors
from rlds_reverb._util import wire
from rlds_reverb.sources import opening


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
  for _, builder in opening.builders(dataset, data_dir):
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
