"""The export job: a checkpoint's table in, an RLDS dataset directory out.

    --server: checkpoint now -> its directory (must be readable here);
              removed at the end if Reverb wrote it to a temporary root
    checkpoint dir (or serve's --checkpoint-dir: its newest complete one)
      table: signature -> trajectory spec (refused unless trajectories)
      items.tfrecord --one pass--> (chunk, tensor) -> column, time
      chunks.tfrecord --one pass--> wanted chunks set aside on disk
      episodes rebuilt in order -> tfds_out.TrajectoryWriter (the
        recorder's writer): RLDS steps + episode_id, episode_length,
        episode_return, terminated
      losses counted (strict: the first raises)
    OUT.export-XXXX/ (beside OUT) --rename--> OUT      (nothing else in OUT)

Everything is written into a hidden directory beside `out` and renamed to
`out` at the end; any error removes it, so `out` holds a whole dataset or
nothing. (A process killed outright leaves the hidden directory: delete it.)

The checkpoint `server` writes goes where the server's checkpointer points.
Into a directory the user chose (serve --checkpoint-dir), it stays: it is
now the server's newest checkpoint there (Reverb deleted the one before),
which a restart loads. Into the temporary root of a server given no
checkpointer, nobody would ever load it: it is removed, success or not.
"""

import os
import shutil
import tempfile
import time
from typing import Optional

import numpy as np
import tensorflow as tf

from rlds_reverb import checkpoints
from rlds_reverb._util import files
from rlds_reverb._util import wording
from rlds_reverb.errors import CheckpointReadError
from rlds_reverb.errors import DatasetDirectoryError
from rlds_reverb.errors import ExportError
from rlds_reverb.exporter import episodes as episodes_lib
from rlds_reverb.exporter import items as items_lib
from rlds_reverb.exporter import report as report_lib
from rlds_reverb.exporter import store as store_lib
from rlds_reverb.exporter import table as table_lib
from rlds_reverb.tfds_out import layout
from rlds_reverb.tfds_out.features import ImageEncoding
from rlds_reverb.tfds_out.features import ImageEncodings
from rlds_reverb.tfds_out.records import Durability
from rlds_reverb.tfds_out.trajectories import TrajectoryWriter

ExportReport = report_lib.ExportReport


def export(
    table: str,
    out: str,
    *,
    checkpoint: Optional[str] = None,
    server: Optional[str] = None,
    name: Optional[str] = None,
    image_encoding: ImageEncodings = ImageEncoding.PNG,
    strict: bool = False,
    timeout: float = 30.0,
) -> ExportReport:
  """Writes the table `table` of a Reverb checkpoint as an RLDS dataset.

  Args:
    table: the table to export: signed with TF-Agents trajectories (as
      TF-Agents' observers, `push` and `serve` sign them), items of any
      sequence length and stride, whole episodes too.
    out: the dataset directory to create (missing, or an empty directory);
      `tfds.builder_from_directory(out)`, `rlds_reverb.load(out)` and
      `rlds-reverb push --dataset out` read it, episodes in the order
      they were written to the table.
    checkpoint: a checkpoint directory, or the directory a server
      checkpoints into (`serve --checkpoint-dir`): its newest complete one.
    server: instead of `checkpoint`, 'host:port' of a running server: it
      writes a checkpoint, which must be readable here, and that is
      exported. It stays in the server's checkpoint directory, or is
      removed when Reverb wrote it to a temporary directory (a server
      without one: `serve` without --checkpoint-dir); the report says which.
    name: the dataset's name (default: the table's, made of letters, digits
      and underscores).
    image_encoding: how uint8 [H, W, C] fields are stored: 'png', 'jpeg',
      'none' or {field path: encoding} (`tfds_out.features_from_specs`).
      Fields the table holds encoded (`images='encoded'` pushes) are Image
      features of their own format: the stored bytes, as they are.
    strict: raise at the first loss (an episode missing its start or end,
      missing steps) instead of leaving it out and counting it.
    timeout: seconds to wait for the server to answer (`server` only).

  Each episode's metadata is that of a recording (`RldsRecorder`):
  `episode_id` (its place in the export: 0, 1, ... in the order written to
  the table), `episode_length` (steps), `episode_return` (the rewards' sum)
  and `terminated` (its last step's `is_terminal`, from the discounts).

  Returns:
    The `ExportReport`: episodes and steps written, what was lost.

  Raises:
    ValueError: neither or both of `checkpoint` and `server`; a bad name.
    DatasetDirectoryError: `out` is a file or a directory that is not empty,
      or its parent directory does not exist.
    ExportError: the table's items are not trajectories (unsigned, n-step
      transitions, ...); no whole episode to write; a loss with `strict`; a
      server without a checkpointer, or whose checkpoint is not readable here.
    TableNotFoundError: no such table.
    CheckpointReadError: no checkpoint there, or a file cut short or damaged
      (naming it).
    AddressError, ServerUnavailableError: `server` cannot be reached.
  """
  started = time.perf_counter()
  if (checkpoint is None) == (server is None):
    raise ValueError('Give one of checkpoint (a directory) and server '
                     "('host:port').")
  out = os.path.abspath(os.fspath(out))
  _check_out(out)
  if server is None:
    report = _export(table, out, os.fspath(checkpoint), name, image_encoding,
                     strict)
  else:
    written = _checkpoint_of_server(server, table, timeout)
    temporary = checkpoints.in_temporary_root(written)
    try:
      report = _export(table, out, written, name, image_encoding, strict)
    finally:
      if temporary:
        shutil.rmtree(written, ignore_errors=True)
    report.checkpoint_written = True
    report.checkpoint_removed = temporary
  report.seconds = time.perf_counter() - started
  return report


def _export(table, out, checkpoint, name, image_encoding, strict
            ) -> ExportReport:
  """The table of the checkpoint `checkpoint` into `out` (checked)."""
  directory = _complete_checkpoint(checkpoint)
  description = table_lib.read(directory, table)
  spec = table_lib.trajectory_spec(description)
  name = name or _dataset_name(table)
  report = ExportReport(table=table, checkpoint=directory, out=out, name=name,
                        items_removed=description.deleted)
  staging = _staging_directory(out)
  try:
    _write(directory, description, spec, staging, report,
           report_lib.Losses(report, strict), image_encoding)
    os.rename(staging, out)
    files.sync_directory(os.path.dirname(out))
  except BaseException:
    shutil.rmtree(staging, ignore_errors=True)
    raise
  return report


def _write(directory, description, spec, staging, report, losses,
           image_encoding):
  """Rebuilds the episodes into `staging`, a new dataset directory."""
  columns = episodes_lib.Columns(
      specs=table_lib.columns(spec),
      step_type=table_lib.column_of(spec, 'step_type'),
      next_step_type=table_lib.column_of(spec, 'next_step_type'))
  items_path = os.path.join(directory, checkpoints.ITEMS)
  chunk_columns = items_lib.index(items_path, description.name,
                                  len(columns.specs))
  report.items = chunk_columns.items
  wanted = np.unique(chunk_columns.keys)
  with store_lib.ChunkStore(os.path.join(directory, checkpoints.CHUNKS),
                            wanted, staging) as store:
    pieces = episodes_lib.join(chunk_columns, store)
    del chunk_columns, wanted  # Pieces hold what is needed: ~30 B a chunk.
    kept = _Kept()
    with TrajectoryWriter(staging, spec, name=report.name,
                          image_encoding=image_encoding,
                          durability=Durability.FLUSH) as writer:
      for episode_id, first, values in episodes_lib.in_order(
          pieces, store, columns, losses):
        kept.add(episode_id, first, first + len(values[0]) - 1)
        report.steps += writer.write(tf.nest.pack_sequence_as(spec, values))
        report.episodes += 1
    if report.episodes == 0:
      lost = '; '.join(report.loss_lines()) or 'none lost'
      raise ExportError(
          f"Table '{description.name}' of {directory} holds no whole "
          f'episode ({wording.count(report.items, "item")}; {lost}): there is '
          f'nothing to export.')
    if report.lost:
      report.items_left_out = kept.items_left_out(
          items_path, description.name, len(columns.specs),
          columns.step_type, store)


class _Kept:
  """The steps of every exported episode, per Reverb episode, to tell which
  items a loss left out: one [first, last] range per episode."""

  def __init__(self):
    self._ranges = []

  def add(self, episode_id: int, first: int, last: int) -> None:
    self._ranges.append((episode_id, first, last))

  def items_left_out(self, path: str, table: str, num_columns: int,
                     column: int, store: store_lib.ChunkStore) -> int:
    """Items of `table` with a step of `column` outside every exported
    episode (read a block of items at a time)."""
    kept = np.array(self._ranges, dtype=[('episode', np.uint64),
                                         ('first', np.int64),
                                         ('last', np.int64)])
    left_out = 0
    for found in items_lib.slices(path, table, num_columns):
      mine = found.columns == column
      positions = store.positions(found.keys[mine])
      first = store.index.starts[positions] + found.offsets[mine]
      inside = _inside(kept, store.index.episodes[positions], first,
                       first + found.lengths[mine] - 1)
      left_out += len(np.unique(found.owners[mine][~inside]))
    return left_out


def _inside(kept: np.ndarray, episodes: np.ndarray, firsts: np.ndarray,
            lasts: np.ndarray) -> np.ndarray:
  """Per slice (Reverb episode, first and last step): whether one kept
  range holds it. Kept ranges and slices sorted together; each slice is
  checked against the last range that starts at or before it."""
  count = len(kept)
  order = np.lexsort((
      np.concatenate([np.zeros(count, np.int8), np.ones(len(firsts), np.int8)]),
      np.concatenate([kept['first'], firsts]),
      np.concatenate([kept['episode'], episodes])))
  is_kept = order < count
  last_kept = np.maximum.accumulate(
      np.where(is_kept, np.arange(len(order)), -1))
  at = np.flatnonzero(~is_kept)
  candidate, slice_index = last_kept[at], order[at] - count
  inside = np.zeros(len(firsts), bool)
  found = candidate >= 0
  ranges = order[candidate[found]]
  inside[slice_index[found]] = (
      (kept['episode'][ranges] == episodes[slice_index[found]]) &
      (kept['last'][ranges] >= lasts[slice_index[found]]))
  return inside


def _staging_directory(out: str) -> str:
  """A new hidden directory beside `out`, with the permissions a plain
  `mkdir` would give it (mkdtemp's are the owner's only)."""
  staging = tempfile.mkdtemp(prefix=f'.{os.path.basename(out)}.export-',
                             dir=os.path.dirname(out))
  umask = os.umask(0)
  os.umask(umask)
  os.chmod(staging, 0o777 & ~umask)
  return staging


def _check_out(out: str) -> None:
  """`out` can be a new dataset: missing or empty, in a directory (the
  dataset is written beside it)."""
  layout.check_new_directory(out)
  parent = os.path.dirname(out)
  if not os.path.isdir(parent):
    raise DatasetDirectoryError(
        f'{parent}, the directory of {out}, does not exist.')


def _complete_checkpoint(path: str) -> str:
  """The checkpoint directory `path` means, complete (with DONE)."""
  try:
    directory = checkpoints.checkpoint_path(path)
  except FileNotFoundError as e:
    raise CheckpointReadError(str(e)) from e
  if not os.path.isfile(os.path.join(directory, checkpoints.DONE)):
    raise CheckpointReadError(
        f'{directory} has no {checkpoints.DONE} file: the checkpoint is '
        f'incomplete (being written, or its server died while writing).')
  return directory


def _dataset_name(table: str) -> str:
  """The table's name as a dataset name: letters, digits, underscores."""
  cleaned = ''.join(c if c.isalnum() and c.isascii() else '_' for c in table)
  return cleaned or 'reverb_table'


def _checkpoint_of_server(address: str, table: str, timeout: float) -> str:
  """A new checkpoint of the server at `address`; its directory here."""
  from rlds_reverb.write import server as server_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  client, address = server_lib.connect(address)
  server_lib.table_infos(client, address, [table], timeout)
  try:
    path = client.checkpoint()
  except ValueError as e:
    raise ExportError(
        f'The Reverb server at {address} has no checkpointer ("'
        f'{str(e).rstrip(".")}"): start it with one (rlds-reverb serve '
        f'--checkpoint-dir DIR) to export without sampling the table.') from e
  if not os.path.isfile(os.path.join(path, checkpoints.DONE)):
    raise ExportError(
        f'The Reverb server at {address} wrote its checkpoint to {path}, '
        f'which is not readable here: run the export where that directory '
        f'is, or copy it here and pass it as --checkpoint.')
  return path
