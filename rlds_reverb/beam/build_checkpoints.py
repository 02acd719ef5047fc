"""`BuildCheckpoints`: numpy episodes into one Reverb checkpoint per server,
from many workers, with no server running.

    (position, episode) --checked_push.skip_reason: the push's rules-->
        malformed / flagged / empty --> tagged output 'skipped' (or raise)
        else --> a batch of up to `batch_steps` steps
             --> tf.data over the batch -> convert.trajectory_blocks
             --> build_parts.ServerParts: episode I -> server I % S,
                 planned as a push plans it, a part per server
    bundle end --> the parts made whole (renamed into place); per server a
                   record: (server, {path, positions, skipped})
    GroupByKey(server) --> the merge: every position I % S == k once
                   (written or skipped), or PipelineFailedError and no
                   checkpoint; parts.merge: one checkpoint under
                   `parts.server_root(directory, k, S)`, DONE last; its
                   record under directory/.parts/results; parts removed

`BuildParts` (what `beam.build` runs) does the same per `read.Part`, in one
`process` call: DaskRunner drops `finish_bundle` outputs and mixes tagged
outputs into the main one. Only parts of committed bundles reach the merge:
a retried bundle's first attempt may leave a part behind, which nobody
names, so nothing is merged twice and nothing is lost (`build` removes the
leftovers). Every worker writes to `directory`: on a cluster it must be
storage all workers and the merging ones share as a POSIX file system
(NFS, a FUSE mount of a bucket): parts are plain files, renamed once whole.
"""

import json
import os
import shutil
from typing import Any, Dict, List, Optional, Tuple

import apache_beam as beam
from apache_beam.transforms import window

from rlds_reverb import checked_push
from rlds_reverb import push_options
from rlds_reverb import tables as tables_lib
from rlds_reverb.beam import results
from rlds_reverb.beam import runners
from rlds_reverb.beam import write
from rlds_reverb.build import ItemKind
from rlds_reverb.build import table_options
from rlds_reverb.build_parts import ServerParts
from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import parts as parts_lib
from rlds_reverb.errors import OptionsError
from rlds_reverb.errors import PipelineFailedError
from rlds_reverb.push_options import PushOptions
from rlds_reverb.specs import fields


class BuildCheckpoints(beam.PTransform):
  """Builds, from `(position, numpy episode)` pairs (`ReadEpisodes`), a
  checkpoint per server: server k's holds the items of episodes I % S == k
  that a push of them writes.

  Args:
    directory: the build's directory: server k's checkpoint goes to
      directory/server-k-of-S (to `directory` itself for one server).
    tables: as for `build_checkpoint` (TableOptions, names).
    step_spec: the data's step spec (`ReadEpisodes(...).step_spec`).
    servers: S.
    options: what is written (`PushOptions`).
    on_invalid: 'raise' or 'skip' ('raise' with `nstep`).
    batch_steps: steps converted at once.
    policy_info_fn: as for `build_checkpoint`.
    nstep: (n, discount): n-step transitions, the items
      `build_nstep_checkpoint` writes, instead of trajectories.
    episodes: how many episodes the input holds (`ReadEpisodes(...)
      .episodes`): a server's merge then refuses to write its checkpoint
      unless each of its positions (I % S == k, I < episodes) arrived once,
      written or skipped (`PipelineFailedError`).

  Returns (from `expand`) a dict: the skipped episodes (`SkippedEpisode`s)
  as 'skipped', the merges' records as 'built'.

  Its parts leave each bundle's end as outputs of `finish_bundle`, which
  Beam 2.77's DaskRunner drops: there it would write every server an empty
  checkpoint, so it is refused (`OptionsError`); `beam.build` runs on Dask.
  """

  def __init__(self, directory: str, tables, step_spec: Any, *,
               servers: int = 1, options: Optional[PushOptions] = None,
               on_invalid: str = 'raise',
               batch_steps: int = write.BATCH_STEPS,
               policy_info_fn=None,
               nstep: Optional[Tuple[int, float]] = None,
               episodes: Optional[int] = None):
    super().__init__()
    if servers < 1:
      raise ValueError(f'servers must be >= 1, got {servers}.')
    on_invalid = checked_push.OnInvalid.of(on_invalid)
    if on_invalid is checked_push.OnInvalid.STOP:
      raise ValueError("BuildCheckpoints takes on_invalid='raise' or "
                       "'skip': a build is all or nothing.")
    if nstep is not None and on_invalid is not checked_push.OnInvalid.RAISE:
      raise ValueError("BuildCheckpoints with nstep takes on_invalid="
                       "'raise', as build_nstep_checkpoint does.")
    options = push_options.of(options)
    made = table_options(tables)
    self.kind = ItemKind(options, policy_info_fn, nstep)
    spec = self.kind.spec(step_spec)
    signature = self.kind.signature(step_spec)
    self.settings = tuple(tables_lib.settings(t, signature) for t in made)
    self.directory = os.fspath(directory)
    self.servers = servers
    self.episodes = episodes
    self.tables = made
    self.names = [t.name for t in made]
    self.on_invalid = on_invalid
    self.step_spec = step_spec
    self.batch_steps = batch_steps
    ServerParts(self.directory, servers, spec,  # Checks chunk_length now.
                self.kind.item_plan, self.names, options.priority,
                options.chunk_length)

  def expand(self, episodes):
    _check_runner(episodes.pipeline.runner)
    written = episodes | 'Parts' >> beam.ParDo(_WriteParts(
        self.directory, self.servers, self.step_spec, self.names,
        self.kind, self.on_invalid, self.batch_steps)).with_outputs(
            write.SKIPPED, main='parts')
    return {'built': self.merged(written.parts),
            'skipped': written[write.SKIPPED]}

  def merged(self, parts):
    """(server, part record) pairs -> each server's checkpoint, checked
    whole (`episodes`), merged; a record per server (`merge_records`)."""
    every_server = (parts.pipeline | 'Servers' >> beam.Create(
        [(server, None) for server in range(self.servers)]))
    return ((parts, every_server)
            | 'AllParts' >> beam.Flatten()
            | 'ByServer' >> beam.GroupByKey()
            | 'Merge' >> beam.Map(merge_records, self.directory,
                                  self.servers, self.settings,
                                  self.episodes))

  def parts_dofn(self) -> 'BuildParts':
    """The DoFn that reads and writes whole `read.Part`s (`beam.build`)."""
    return BuildParts(self.directory, self.servers, self.tables, self.kind,
                      self.on_invalid)


def _check_runner(runner) -> None:
  """DaskRunner drops what a DoFn yields from `finish_bundle`."""
  name = type(runner).__name__
  if runners.is_dask(name):
    raise OptionsError(
        f'BuildCheckpoints cannot run on {name}: {name} drops the parts each '
        f'bundle writes, and every server would get an empty checkpoint. '
        f'rlds_reverb.beam.build builds on {name}.')


class _WriteParts(beam.DoFn):
  """The DoFn of `BuildCheckpoints`: parts per bundle."""

  def __init__(self, directory, servers, step_spec, tables, kind,
               on_invalid, batch_steps):
    super().__init__()
    self._directory = directory
    self._servers = servers
    self._step_spec = step_spec
    self._tables = tables
    self._kind = kind
    self._on_invalid = on_invalid
    self._batch_steps = batch_steps
    self._skipped = beam.metrics.Metrics.string_set(write.NAMESPACE,
                                                    write.SKIPPED)
    self._skipped_count = beam.metrics.Metrics.counter(write.NAMESPACE,
                                                       'skipped_episodes')
    self._router: Optional[ServerParts] = None
    self._batch: List[Tuple[int, Dict[str, Any]]] = []
    self._steps = 0
    self._records: Dict[int, Dict[str, Any]] = {}

  def start_bundle(self):
    self._begin()

  def process(self, element):
    try:
      skipped = self._add(*element)
    except BaseException:
      self._router.abort()
      raise
    if skipped is not None:
      yield beam.pvalue.TaggedOutput(write.SKIPPED, skipped)

  def finish_bundle(self):
    for pair in self._close():
      yield window.GlobalWindows.windowed_value(pair)

  def _begin(self) -> None:
    self._router = ServerParts(
        self._directory, self._servers,
        self._kind.spec(self._step_spec), self._kind.item_plan,
        self._tables, self._kind.options.priority,
        self._kind.options.chunk_length)
    self._batch, self._steps, self._records = [], 0, {}

  def _record(self, position: int) -> Dict[str, Any]:
    """The part record of `position`'s server: its part's path (once
    closed), the positions in it, the ones skipped."""
    return self._records.setdefault(
        position % self._servers,
        dict(path=None, positions=[], skipped=[]))

  def _add(self, position: int, episode: Dict[str, Any]
           ) -> Optional[checked_push.SkippedEpisode]:
    """Batches the episode (planning a full batch); or says why it is left
    out."""
    skipped = checked_push.skip_reason(position, episode, self._on_invalid)
    if skipped is not None:
      self._skipped_count.inc()
      self._skipped.add(json.dumps(vars(skipped), sort_keys=True))
      self._record(position)['skipped'].append(vars(skipped))
      return skipped
    self._record(position)['positions'].append(position)
    self._batch.append((position, episode[fields.STEPS]))
    self._steps += len(episode[fields.STEPS][fields.IS_FIRST])
    if self._steps >= self._batch_steps:
      self._plan_batch()
    return None

  def _close(self) -> List[Tuple[int, Dict[str, Any]]]:
    """Plans what is left and makes the parts whole: (server, record) for
    every server this bundle got episodes of, written or skipped."""
    try:
      self._plan_batch()
      done = self._router.close()
    except BaseException:
      self._router.abort()
      raise
    for server, path in done.items():
      self._records[server]['path'] = path
    return sorted(self._records.items())

  def _plan_batch(self) -> None:
    """Converts the batch as `WriteToReverb` does; plans it."""
    if not self._batch:
      return
    positions = [position for position, _ in self._batch]
    data = write._as_rlds([steps for _, steps in self._batch],  # pylint: disable=protected-access
                          self._step_spec)
    self._batch, self._steps = [], 0
    for index, rows in self._kind.rows(data):
      self._router.add(positions[int(index)], rows)


class BuildParts(beam.DoFn):
  """Each `read.Part` of the data built into a part per server, in one
  `process` call, by `build_parts.build_share`: what `build_shards`' local
  workers run (read, checked as a build checks, converted, planned). Yields
  (server, part record) pairs: the part's path, the positions it holds, the
  ones skipped.

  What `beam.build` runs: nothing rests on `finish_bundle` outputs or tagged
  outputs, which DaskRunner drops or mixes into the main output. A part a
  runner retries writes new part files; the first attempt's are named by no
  record, so never merged (`build` removes them).
  """

  def __init__(self, directory, servers, tables, kind, on_invalid):
    super().__init__()
    self._directory = directory
    self._servers = servers
    self._tables = tables
    self._kind = kind
    self._on_invalid = on_invalid

  def process(self, element):
    from rlds_reverb import build_parts  # pylint: disable=g-import-not-at-top,import-outside-toplevel
    share = build_parts.build_share(
        [element], self._directory, self._tables, self._servers,
        self._kind.options, self._on_invalid,
        policy_info_fn=self._kind.policy_info_fn, nstep=self._kind.nstep)
    skipped: Dict[int, List[Dict[str, Any]]] = {}
    for episode in share.skipped:
      skipped.setdefault(episode.position % self._servers, []).append(
          vars(episode))
    for server in sorted(set(share.parts) | set(skipped)):
      yield server, dict(path=share.parts.get(server),
                         positions=list(share.positions.get(server, ())),
                         skipped=skipped.get(server, []))


def merge_records(element, directory: str, servers: int, settings,
           episodes: Optional[int]) -> Dict[str, Any]:
  """Server k's parts, checked whole, merged into its checkpoint; its
  record written where `build` reads it (`results`); the parts removed.

  A rerun (its worker died) returns the record of an attempt that
  finished, or removes what a killed attempt left in the server's root
  (new when the build started: all a build wrote there is this merge's).
  """
  server, records = element
  root = parts_lib.server_root(directory, server, servers)
  finished = _finished_record(directory, server)
  if finished is not None:
    return finished
  _remove_earlier_attempts(root)
  records = [record for record in records if record is not None]
  paths = sorted(r['path'] for r in records if r['path'] is not None)
  if episodes is not None:
    try:
      results.check_complete(
          results.expected_of(server, servers, episodes),
          results.seen_positions(records),
          f'Server {server} of {servers}',
          'its checkpoint was not written')
    except PipelineFailedError:
      parts_lib.remove(paths)
      raise
  merged = parts_lib.merge(paths, root, settings)
  counters = dict(episodes=merged.episodes, trajectories=merged.steps,
                  items=merged.items,
                  evicted=max([n for _, n in merged.evicted], default=0))
  for name, value in counters.items():  # For runners' UIs: '<name>/<k>'.
    beam.metrics.Metrics.counter(write.NAMESPACE, f'{name}/{server}').inc(
        value)
  record = dict(server=server, path=merged.path,
                skipped=[e for r in records for e in r['skipped']],
                evicted_per_table=[list(pair) for pair in merged.evicted],
                **counters)
  results.write(results_directory(directory), _record_key(server), record)
  parts_lib.remove(paths)
  return record


def _record_key(server: int) -> str:
  return f'server-{server}'


def _finished_record(directory: str, server: int) -> Optional[Dict[str, Any]]:
  """The record of a merge of `server` that finished (its checkpoint has
  DONE), or None."""
  for record in results.read(results_directory(directory)):
    if (record['server'] == server and
        os.path.exists(os.path.join(record['path'], directories.DONE))):
      return record
  return None


def _remove_earlier_attempts(root: str) -> None:
  """Checkpoints a killed attempt of this merge wrote under `root`."""
  found = directories.find(root)
  for name in (*found.unfinished, *found.built):
    shutil.rmtree(found.path(name), ignore_errors=True)


def results_directory(directory: str) -> str:
  """Where each server's merge leaves its record, while the build runs."""
  return os.path.join(directory, parts_lib.PARTS, 'results')

