"""What a pipeline wrote, as records the driver reads, and the check that
every episode arrived once.

    a part written (push)  -> part record: its positions, skipped, counts
    a server merged (build)-> server record: its path and counts
      -> write(DIR, key, record): DIR/key.json, renamed into place, so a
         rerun task writes the same file again (and a killed one none)
      -> read(DIR) on the driver, or `runners.gathered(result)`

Counts must not rest on runner metrics: DaskRunner has none, and string
sets lose values across DirectRunner's worker processes. Records are plain
JSON: positions, `SkippedEpisode` fields, numbers.
"""

import collections
import json
import os
from typing import Any, Dict, Iterable, List, Sequence

from rlds_reverb.checked_push import SkippedEpisode
from rlds_reverb.errors import PipelineFailedError

Record = Dict[str, Any]
_SHOWN_SPANS = 8


def write(directory: str, key: str, record: Record) -> None:
  """`record` as directory/key.json, whole or absent."""
  os.makedirs(directory, exist_ok=True)
  path = os.path.join(directory, f'{key}.json')
  temporary = f'{path}.{os.getpid()}.tmp'
  with open(temporary, 'w') as f:
    json.dump(record, f)
  os.replace(temporary, path)


def read(directory: str) -> List[Record]:
  """Every whole record under `directory`, by name."""
  if not os.path.isdir(directory):
    return []
  records = []
  for name in sorted(os.listdir(directory)):
    if name.endswith('.json'):
      with open(os.path.join(directory, name)) as f:
        records.append(json.load(f))
  return records


def skipped_of(records: Iterable[Record]) -> tuple:
  """The `SkippedEpisode`s the records list, by position."""
  found = [SkippedEpisode(**fields) for record in records
           for fields in record.get('skipped', ())]
  return tuple(sorted(found, key=lambda episode: episode.position))


def seen_positions(records: Iterable[Record]) -> List[int]:
  """Every position the records account for: written or skipped."""
  return [position for record in records
          for position in [*record.get('positions', ()),
                           *(e['position'] for e in record.get('skipped', ()))]]


def check_complete(expected: Iterable[int], seen: Sequence[int],
                   where: str, consequence: str) -> None:
  """Raises PipelineFailedError unless `seen` holds each of `expected`
  once and nothing else; the line names `where`, the positions, and
  `consequence` (what was or was not left behind)."""
  counts = collections.Counter(seen)
  expected = set(expected)
  missing = sorted(expected - counts.keys())
  repeated = sorted(p for p, n in counts.items() if n > 1)
  foreign = sorted(counts.keys() - expected)
  problems = [f'{label} {spans(found)}' for label, found in (
      ('missing episodes', missing), ('episodes repeated', repeated),
      ('episodes not its own', foreign)) if found]
  if problems:
    raise PipelineFailedError(
        f'{where}: {"; ".join(problems)} (of {len(expected):,} expected): '
        f'the runner lost or repeated a part; {consequence}.')


def spans(positions: Sequence[int]) -> str:
  """'0-3, 7, 9-10' for sorted positions; the first few spans only."""
  runs: List[List[int]] = []
  for position in positions:
    if runs and position == runs[-1][1] + 1:
      runs[-1][1] = position
    else:
      runs.append([position, position])
  texts = [str(a) if a == b else f'{a}-{b}' for a, b in runs[:_SHOWN_SPANS]]
  if len(runs) > _SHOWN_SPANS:
    texts.append(f'and {len(runs) - _SHOWN_SPANS} more spans')
  return ', '.join(texts)


def expected_of(server: int, servers: int, episodes: int) -> range:
  """The positions server `server` of `servers` gets: I % S == k."""
  return range(server, episodes, servers)


def totals(records: Iterable[Record], names: Sequence[str]) -> Dict[str, int]:
  """Sums of the records' counts `names`."""
  found = collections.Counter()
  for record in records:
    for name in names:
      found[name] += record.get(name, 0)
  return {name: found[name] for name in names}
