"""A worker's share of a build of one checkpoint per server: ranges of the
data -> a part per server (`checkpoints.parts`), checked as a build is.

    ranges (sources.ranges.Part: a range of one record file, its position)
      -> per range: build.CheckedBuild(...).check(): the spec, malformed /
         flagged / empty episodes (raised, or skipped)
      -> convert.trajectory_blocks (numpy, one block per episode)
      -> parts.ServerParts: episode I -> server I % S, planned as push plans
      -> {server: part path}, and what was built and left out

What `parallel.build_shards`' processes run, one share each; the parent
merges each server's parts (`parts.merge`).
"""

import dataclasses
import os
import uuid
from typing import Any, Dict, List, Optional, Sequence, Tuple

import numpy as np

from rlds_reverb import build as build_lib
from rlds_reverb import sources
from rlds_reverb import validation
from rlds_reverb.checked_push import SkippedEpisode
from rlds_reverb.checkpoints import parts as parts_lib
from rlds_reverb.checkpoints import plan as plan_lib
from rlds_reverb.checkpoints import table_settings
from rlds_reverb.convert import encoded
from rlds_reverb.push_options import OnInvalid
from rlds_reverb.push_options import PushOptions
from rlds_reverb.sources import ranges as ranges_lib
from rlds_reverb.sources import whole_reads
from rlds_reverb.sources.ranges import Part


@dataclasses.dataclass(frozen=True)
class Share:
  """What one worker built: its part per server, and its episodes."""
  parts: Dict[int, str]
  settings: Tuple[table_settings.TableSettings, ...]  # Of the tables.
  episodes: int
  steps: int
  skipped: Tuple[SkippedEpisode, ...] = ()
  notes: Tuple[str, ...] = ()
  # Per server, the positions of the episodes its part holds.
  positions: Dict[int, List[int]] = dataclasses.field(
      default_factory=dict)


def build_share(ranges: Sequence[Part], directory: str, tables,
                servers: int, options: PushOptions = PushOptions(),
                on_invalid: OnInvalid = OnInvalid.RAISE,
                name: Optional[str] = None, *,
                policy_info_fn=None,
                nstep: Optional[Tuple[int, float]] = None) -> Share:
  """Builds the parts of `ranges` (in position order) under `directory`:
  trajectories (with `policy_info_fn`), or n-step transitions (`nstep`).

  Raises as `build_checkpoint`'s checks; a failure removes this share's
  parts.
  """
  router = settings = None
  skipped: List[SkippedEpisode] = []
  notes: Dict[str, None] = {}
  try:
    for part in ranges:
      data = sources.load(part.source, split=part.split_text(),
                          data_dir=part.data_dir)
      job = build_lib.CheckedBuild(data, tables, options, on_invalid,
                                   policy_info_fn=policy_info_fn,
                                   nstep=nstep)
      plan = job.check()
      notes.update(dict.fromkeys(plan.notes))
      settings = plan.settings
      if router is None:
        router = ServerParts(
            directory, servers, plan.spec, job.item_plan, job.names,
            options.priority, options.chunk_length, name)
      first = part.first_position
      skipped += [dataclasses.replace(e, position=first + e.position)
                  for e in plan.skipped]
      for position, rows in _episodes(data, plan, options, job.kind):
        router.add(first + position, rows)
    done = router.close() if router is not None else {}
  except BaseException:
    if router is not None:
      router.abort()
    raise
  return Share(done, settings or (), router.episodes if router else 0,
               router.steps if router else 0, tuple(skipped), tuple(notes),
               router.positions if router else {})


def share_ranges(dataset, split: str, data_dir: Optional[str], index: int,
                 count: int) -> List[Part]:
  """Share `index` of `count`: contiguous ranges of the data (record-file
  pieces, `sources.ranges`), about as many episodes as the others."""
  ranges = ranges_lib.plan_parts(dataset, split, data_dir, min_parts=count)
  sizes = np.array([part.end - part.start for part in ranges], np.int64)
  starts = np.cumsum(sizes) - sizes
  share = (starts * count) // max(int(sizes.sum()), 1)
  return [part for part, at in zip(ranges, share.tolist()) if at == index]


def merge_server(directory: str, server: int, servers: int,
                 part_paths: Sequence[str],
                 settings: Sequence[table_settings.TableSettings]
                 ) -> Dict[str, Any]:
  """Server `server`'s checkpoint of its parts; what it holds, as a dict
  (for `parallel`), with a warning per table max_size leaves short."""
  merged = parts_lib.merge(part_paths, parts_lib.server_root(
      directory, server, servers), settings)
  plan = build_lib.BuildPlan(None, tuple(settings), items=merged.items)
  where = f'server {server} of {servers}: ' if servers > 1 else ''
  size = sum(os.path.getsize(os.path.join(merged.path, name))
             for name in os.listdir(merged.path))
  return dict(path=merged.path, episodes=merged.episodes, steps=merged.steps,
              items=merged.items, evicted=list(merged.evicted), bytes=size,
              warnings=[where + text for text in
                        build_lib.capacity_warnings(plan)])


def _episodes(data, plan: build_lib.BuildPlan, options: PushOptions,
              kind: build_lib.ItemKind):
  """(position in `data`, the item spec's leaves) of each episode kept."""
  prepared, _ = encoded.prepare(data, options.image_storage)
  kept = validation.without_episodes(
      whole_reads.whole(prepared), [e.position for e in plan.skipped])
  positions = build_lib.kept_positions(plan.skipped)
  for index, rows in kind.rows(kept):
    yield positions(int(index)), rows


class ServerParts:
  """A worker's parts, one per server that gets episodes: episode I goes to
  server I % `servers`, planned as a push plans it (`plan.Plan`).

      parts = ServerParts(directory, 2, spec, item_plan, ['replay'])
      for position, rows in episodes:   # rows: the item spec's leaves
        parts.add(position, rows)
      parts.close()   # -> {server: part path}
  """

  def __init__(self, directory: str, servers: int, spec: Any, item_plan,
               tables: Sequence[str], priority: float = 1.0,
               chunk_length=None, name: Optional[str] = None):
    self._directory = os.fspath(directory)
    self._servers = servers
    self._new_plan = lambda: plan_lib.Plan(spec, item_plan, tables, priority,
                                           chunk_length)
    self._new_plan()  # Checks chunk_length against the columns now.
    self._item_plan = item_plan
    self._tables = list(tables)
    self._name = name or uuid.uuid4().hex
    self._plans: Dict[int, plan_lib.Plan] = {}
    self._parts: Dict[int, parts_lib.PartWriter] = {}
    self._last: Optional[int] = None
    self.positions: Dict[int, List[int]] = {}  # Per server, as added.

  def add(self, position: int, rows: Sequence[np.ndarray]) -> None:
    """Plans episode `position`: `rows`, the item spec's leaves [T, ...]."""
    server = position % self._servers
    if server not in self._parts:
      self._parts[server] = parts_lib.PartWriter(os.path.join(
          parts_lib.parts_directory(self._directory, server, self._servers),
          self._name), self._tables)
      self._plans[server] = self._new_plan()
    part, planner = self._parts[server], self._plans[server]
    self.positions.setdefault(server, []).append(position)
    steps = len(rows[0])
    part.episode(position, len(self._item_plan.plan(steps).item_ends), steps,
                 new_run=self._last is None or position != self._last + 1)
    self._last = position
    for planned in planner.add(rows, position):
      plan_lib.write(part, planned)

  @property
  def episodes(self) -> int:
    return sum(part.episodes for part in self._parts.values())

  @property
  def steps(self) -> int:
    return sum(part.steps for part in self._parts.values())

  def close(self) -> Dict[int, str]:
    """Completes every part; {server: the part's path}."""
    done = {}
    for server, part in sorted(self._parts.items()):
      for planned in self._plans[server].close():
        plan_lib.write(part, planned)
      done[server] = part.close()
    return done

  def abort(self) -> None:
    for part in self._parts.values():
      part.abort()
