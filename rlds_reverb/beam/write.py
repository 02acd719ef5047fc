"""`WriteToReverb`: numpy episodes into Reverb tables, confirmed per bundle.

    (position, episode) --checked_push.skip_reason: the push's rules-->
        malformed / flagged / empty --> tagged output 'skipped' (or raise)
        else --> server position % S: a batch of up to `batch_steps` steps
             --> tf.data over the batch -> convert.trajectory_blocks
             --> that server's SequenceWriter (the push's writer)
    bundle end --> every writer confirmed (flushed to zero pending, with a
                   timeout) --> counters: episodes, trajectories, items

`PushParts` (what `beam.push` runs) does the same per `read.Part`, in one
`process` call that yields the part's record (positions written and
skipped, counts): nothing rests on `finish_bundle` outputs, tagged outputs
or metrics, which DaskRunner drops, mixes or lacks.

Nothing is pending when a bundle commits, so a committed bundle's items are
in the tables. A runner that retries a failed bundle writes it again: items
are written at least once, and a failure duplicates at most what the failed
bundle wrote before it. One converter and one writer: the batch goes through
the same tf.data conversion and Reverb writer as `rlds_reverb.push`.
"""

import functools
import json
from typing import Any, Dict, List, Optional, Sequence, Tuple, Union

import apache_beam as beam
import tensorflow as tf

from rlds_reverb import addresses
from rlds_reverb import checked_push
from rlds_reverb import push_options
from rlds_reverb import convert
from rlds_reverb import servers_file
from rlds_reverb import sources
from rlds_reverb import specs
from rlds_reverb import validation
from rlds_reverb._util import pipelines
from rlds_reverb.convert import encoded
from rlds_reverb.sources import whole_reads
from rlds_reverb.push_options import PushOptions
from rlds_reverb.specs import fields
from rlds_reverb.write import items as items_lib
from rlds_reverb.write import push as write_push
from rlds_reverb.write import server as server_lib
from rlds_reverb.write import writer as writer_lib

# Beam metrics: counters of confirmed episodes, trajectories, items and of
# skipped episodes, and a string set of the skipped ones (JSON).
NAMESPACE = 'rlds_reverb'
COUNTERS = ('episodes', 'trajectories', 'items', 'skipped_episodes')
SKIPPED = 'skipped'
# Steps gathered before a batch is converted: building the conversion
# pipeline costs about as much as writing a few thousand steps.
BATCH_STEPS = 16_384


class WriteToReverb(beam.PTransform):
  """Writes `(position, numpy episode)` pairs (`ReadEpisodes`) into tables.

  Args:
    server_or_servers: 'host:port', or several: episode I goes to server
      I % S; a servers file ('servers.json') stands for its servers in
      server order, read here (`ServersFileError`). A malformed address
      raises `AddressError` here; each worker's `setup` checks the servers
      (a refused connection fails at once).
    tables: the table name(s) on every server; each item goes to each table.
    options: what is written (`PushOptions`): its items, priority, chunk
      lengths and timeout (how the data is read, `strict` and image storage,
      is `ReadEpisodes`'; its `step_spec` says it).
    on_invalid: 'raise' (a malformed episode fails its bundle, before it is
      written) or 'skip' (it goes to the 'skipped' output).
    step_spec: the data's step spec (`ReadEpisodes(...).step_spec`);
      signatures are then checked in `setup`, and fields of unknown size
      keep it. Without it, the first episode's shapes are the spec.
    batch_steps: steps converted at once (memory: one batch per server).
    **settings: the options as `rlds_reverb.push`'s keywords instead
      (sequence_length, stride_length, end_of_episode, priority, timeout,
      chunk_length).

  Returns (from `expand`) the ParDo's outputs: `.skipped` holds a
  `SkippedEpisode` per episode left out (malformed, flagged invalid in its
  metadata, or empty).
  """

  def __init__(self, server_or_servers: Union[str, Sequence[str]],
               tables: Union[str, Sequence[str]],
               options: Optional[PushOptions] = None, *,
               on_invalid: str = 'raise', step_spec: Optional[Any] = None,
               batch_steps: int = BATCH_STEPS, **settings):
    super().__init__()
    options = push_options.of(options, **settings)
    on_invalid = checked_push.OnInvalid.of(on_invalid)
    if on_invalid is checked_push.OnInvalid.STOP:
      raise ValueError("WriteToReverb takes on_invalid='raise' or 'skip': "
                       "'stop' would leave a bundle half-written.")
    servers = servers_file.addresses_of(server_or_servers)
    for address in servers:  # Malformed: fails here, not on the workers.
      addresses.parse(address)
    tables = items_lib.table_names(tables)
    self._arguments = (servers, tables, options, on_invalid, step_spec)
    self._batch_steps = batch_steps

  def expand(self, episodes):
    dofn = _WriteEpisodes(*self._arguments, self._batch_steps)
    return episodes | beam.ParDo(dofn).with_outputs(SKIPPED, main='written')

  def parts_dofn(self, image_storage) -> 'PushParts':
    """The DoFn that reads and writes whole `read.Part`s (`beam.push`)."""
    return PushParts(*self._arguments, image_storage)


class _Target:
  """One server: its tables, asked, and this bundle's writer and batch."""

  def __init__(self, address: str, tables: List[str], timeout_s: float):
    self.tables = server_lib.Target.of(address, tables).asked(timeout_s)
    self.writer = None
    self.batch: List[Tuple[int, Dict[str, Any]]] = []
    self.batch_steps = 0


class _WriteEpisodes(beam.DoFn):
  """The DoFn of `WriteToReverb`; state lives per bundle."""

  def __init__(self, servers, tables, options, on_invalid, step_spec,
               batch_steps):
    super().__init__()
    self._servers = servers
    self._tables = tables
    self._options = options
    self._on_invalid = on_invalid
    self._step_spec = step_spec
    self._batch_steps = batch_steps
    self._counters = {name: beam.metrics.Metrics.counter(NAMESPACE, name)
                      for name in COUNTERS}
    self._skipped = beam.metrics.Metrics.string_set(NAMESPACE, SKIPPED)
    self._targets = None
    self._spec = None

  def setup(self):
    """Every server answers and has the tables; their signatures fit."""
    self._targets = [_Target(server, self._tables, self._options.timeout)
                     for server in self._servers]
    if self._step_spec is not None:
      self._set_spec(self._step_spec)

  def start_bundle(self):
    self._begin()

  def process(self, element):
    try:
      skipped = self._add(*element)
    except BaseException:
      self._settle()
      raise
    if skipped is not None:
      yield beam.pvalue.TaggedOutput(SKIPPED, skipped)

  def finish_bundle(self):
    """Writes what is left, then waits until every server confirmed it."""
    try:
      self._confirm()
    except BaseException:
      self._settle()
      raise

  def _begin(self) -> None:
    for target in self._targets:
      target.writer, target.batch, target.batch_steps = None, [], 0

  def _add(self, position: int, episode: Dict[str, Any]
           ) -> Optional[checked_push.SkippedEpisode]:
    """Batches the episode for its server (writing a full batch); or says
    why it is left out."""
    skipped = checked_push.skip_reason(position, episode, self._on_invalid)
    if skipped is not None:
      self._count_skipped(skipped)
      return skipped
    if self._spec is None:
      self._set_spec(_spec_of(episode[fields.STEPS]))
    target = self._targets[position % len(self._targets)]
    target.batch.append((position, episode[fields.STEPS]))
    target.batch_steps += len(episode[fields.STEPS][fields.IS_FIRST])
    if target.batch_steps >= self._batch_steps:
      self._write_batch(target)
    return None

  def _count_skipped(self, episode: checked_push.SkippedEpisode) -> None:
    self._counters['skipped_episodes'].inc()
    self._skipped.add(json.dumps(vars(episode), sort_keys=True))

  def _confirm(self) -> Dict[str, int]:
    """Writes every batch left and waits until every server confirmed all;
    the counts confirmed."""
    counts = dict.fromkeys(('episodes', 'trajectories', 'items'), 0)
    for target in self._targets:
      self._write_batch(target)
      if target.writer is not None:
        progress = target.writer.close()  # Everything is confirmed.
        target.writer = None
        counts['episodes'] += progress.confirmed_episodes
        counts['trajectories'] += progress.trajectories
        counts['items'] += progress.confirmed_items
    for name, value in counts.items():
      self._counters[name].inc(value)
    return counts

  def _settle(self) -> None:
    """After a failure: confirms, then closes, this bundle's writers.

    A Reverb writer that is not closed waits in its destructor, without end,
    for items a dead server or a blocked limiter never confirms; `close`
    closes it whether confirming succeeds or not (a timeout has closed it
    already). The runner retries the whole bundle, so what is confirmed here
    is written again: at most this bundle.
    """
    for target in self._targets:
      writer, target.writer = target.writer, None
      target.batch, target.batch_steps = [], 0
      if writer is not None:
        try:
          writer.close()
        except Exception:  # pylint: disable=broad-except
          pass  # The bundle's own error is the one to report.

  def _set_spec(self, step_spec) -> None:
    """The data's spec, checked against every server's signed tables."""
    self._spec = step_spec
    item_spec = specs.table_signature(specs.trajectory_spec(step_spec))
    for target in self._targets:
      for table, info in target.tables.infos.items():
        specs.check_item_signature(info.signature, item_spec, table)

  def _write_batch(self, target: _Target) -> None:
    """Converts the target's batch and appends it to its writer."""
    if not target.batch:
      return
    if target.writer is None:
      target.writer = self._new_writer(target)
    positions = [position for position, _ in target.batch]
    data = _as_rlds([steps for _, steps in target.batch], self._spec)
    target.batch, target.batch_steps = [], 0
    write_push.append_trajectories(data, target.writer, positions)

  def _new_writer(self, target: _Target) -> writer_lib.SequenceWriter:
    return writer_lib.SequenceWriter(
        target.tables, specs.trajectory_spec(self._spec),
        items_lib.SequenceItems.of(self._options), self._options)


class PushParts(_WriteEpisodes):
  """`WriteToReverb`'s DoFn over parts of the data (`read.Part`s): each is
  pushed as `rlds_reverb.push` pushes (read ahead and checked, converted
  from TFDS's records, written) with episode I to server I % S, and
  confirmed, inside one `process` call, which yields its record
  (`results`): the positions written and skipped, the counts.

  What `beam.push` runs: nothing rests on `finish_bundle` outputs, tagged
  outputs or metrics, which DaskRunner drops, mixes or lacks. A part a
  runner retries is written again (at least once, as `WriteToReverb`).
  """

  def __init__(self, servers, tables, options, on_invalid, step_spec,
               image_storage):
    super().__init__(servers, tables, options, on_invalid, step_spec,
                     BATCH_STEPS)  # Unused: a part is converted whole.
    self._image_storage = image_storage

  def start_bundle(self):
    pass  # Each part is its own bundle of writes.

  def finish_bundle(self):
    pass

  def process(self, element):
    self._begin()
    try:
      positions, skipped = self._write_part(element)
      counts = self._confirm()
    except BaseException:
      self._settle()
      raise
    yield dict(first=element.first_position,
               count=element.end - element.start, positions=positions,
               skipped=[vars(episode) for episode in skipped], **counts)

  def _write_part(self, part):
    """Checks the part as a push does, then writes its episodes kept; their
    positions, and the episodes left out."""
    data, encoding = encoded.prepare(
        sources.load(part.source, split=part.split_text(),
                     data_dir=part.data_dir), self._image_storage)
    report = validation.shifted(
        validation.validate(
            data, frames=checked_push.frames_to_check(encoding)),
        part.first_position)
    if report.problems and self._on_invalid is checked_push.OnInvalid.RAISE:
      # The first one, as a stream of episodes says it: other parts may
      # have written.
      raise checked_push.malformed_error(report.problems[0])
    skipped = checked_push.skipped_episodes(report, self._on_invalid)
    for episode in skipped:
      self._count_skipped(episode)
    left_out = {episode.position for episode in skipped}
    kept = [part.first_position + i for i in range(report.episodes)
            if part.first_position + i not in left_out]
    data = validation.without_episodes(
        whole_reads.whole(data),
        sorted(position - part.first_position for position in left_out))
    blocks = convert.trajectory_blocks(data, None, self._options.strict)
    for block in pipelines.numpy_of(blocks):
      position = kept[block.episode_index]
      target = self._targets[position % len(self._targets)]
      if target.writer is None:
        target.writer = self._new_writer(target)
      target.writer.write_episode(block.trajectory, position)
    return kept, skipped


def _spec_of(steps: Dict[str, Any]) -> Dict[str, tf.TensorSpec]:
  """A step spec from numpy steps: dtypes, and shapes after the time axis."""
  return tf.nest.map_structure(_step_spec_of_column, steps)


def _step_spec_of_column(column) -> tf.TensorSpec:
  """Strings come as numpy object arrays (of bytes)."""
  dtype = tf.string if column.dtype == object else tf.as_dtype(column.dtype)
  return tf.TensorSpec(column.shape[1:], dtype)


def _as_rlds(batch: List[Dict[str, Any]], step_spec) -> tf.data.Dataset:
  """The batch's numpy steps as RLDS episodes, for the converter."""
  signature = {fields.STEPS: tf.nest.map_structure(_with_time_axis, step_spec)}
  return tf.data.Dataset.from_generator(
      functools.partial(_each_episode, batch, list(step_spec)),
      output_signature=signature).map(_steps_dataset)


def _with_time_axis(spec: tf.TensorSpec) -> tf.TensorSpec:
  return tf.TensorSpec([None, *spec.shape], spec.dtype)


def _each_episode(batch, names):
  for steps in batch:
    yield {fields.STEPS: {name: steps[name] for name in names}}


def _steps_dataset(episode):
  return {fields.STEPS: tf.data.Dataset.from_tensor_slices(
      episode[fields.STEPS])}
