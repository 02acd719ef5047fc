"""Where a push got to, in a JSON file, so that running it again continues.

    {"key": {...what identifies the push...},
     "confirmed_episodes": 40, "confirmed_items": 3960, "complete": false}

The file is rewritten after every confirmation (all items written so far
acknowledged by the server), atomically: a temporary file, fsync, rename. A
push killed at any moment leaves the last confirmed count. Run again with the
same key, it skips that many episodes of its (deterministic) episode stream
and writes the rest. Episodes written after the last confirmation may be
written twice: at least once, at most one confirmation interval per process
(`writer.CONFIRM_EVERY_ROWS` rows, plus the episode that crossed it).
"""

import dataclasses
import json
import os
from typing import Any, Dict

from rlds_reverb import files
from rlds_reverb.errors import ResumeStateError

FORMAT_VERSION = 1


@dataclasses.dataclass(frozen=True)
class State:
  key: Dict[str, Any]
  confirmed_episodes: int = 0
  confirmed_items: int = 0
  complete: bool = False


def load(path: str, key: Dict[str, Any]) -> State:
  """The state of the push `key` in `path`; a fresh one if there is no file.

  Raises:
    ResumeStateError: the file is unreadable or belongs to another push.
  """
  if not os.path.exists(path):
    return State(key)
  try:
    with open(path, encoding='utf-8') as f:
      saved = json.load(f)
    state = State(saved['key'], int(saved['confirmed_episodes']),
                  int(saved['confirmed_items']), bool(saved['complete']))
  except (OSError, ValueError, KeyError, TypeError) as e:
    raise ResumeStateError(
        f'Resume file {path} is unreadable ({type(e).__name__}: {e}); '
        f'delete it to start the push from the beginning.') from e
  differences = _differences(state.key, key)
  if differences:
    raise ResumeStateError(
        f'Resume file {path} records another push ({"; ".join(differences)}); '
        f'use another file, or delete it to start from the beginning.')
  return state


def check_writable(path: str) -> None:
  """Raises unless `path` can be saved: before a push writes anything.

  Found only at the first confirmation, a bad path would leave the table
  written with nothing saved, and a rerun would write it all again.
  """
  reason = files.unwritable_reason(
      path, probe=files.temporary_path(path))  # Never `path` left empty.
  if reason:
    raise ResumeStateError(
        f'Resume file {path} cannot be written ({reason}). Nothing was '
        f'written.')


def save(path: str, state: State) -> None:
  """Replaces `path` with `state` in one step: never a half-written file."""
  files.replace_atomically(path, json.dumps(
      {'version': FORMAT_VERSION, **dataclasses.asdict(state)}, indent=1,
      sort_keys=True))


def shard_path(path: str, index: int, count: int) -> str:
  """Shard `index` of `count`'s file: 'state.json' -> 'state.1-of-4.json'."""
  stem, suffix = os.path.splitext(path)
  return f'{stem}.{index}-of-{count}{suffix}'


class Recorder:
  """Saves a push's progress, offset by what earlier runs confirmed."""

  def __init__(self, path: str, start: State):
    self._path = path
    self._start = start
    self.state = start

  def on_confirmed(self, progress) -> None:
    """`push`'s `on_confirmed` callback."""
    self._save(progress.confirmed_episodes, progress.confirmed_items, False)

  def finish(self, episodes: int, items: int) -> None:
    self._save(episodes, items, True)

  def _save(self, episodes: int, items: int, complete: bool) -> None:
    self.state = dataclasses.replace(
        self._start,
        confirmed_episodes=self._start.confirmed_episodes + episodes,
        confirmed_items=self._start.confirmed_items + items,
        complete=complete)
    save(self._path, self.state)


def _differences(saved: Dict[str, Any], wanted: Dict[str, Any]):
  return [f'{name} was {saved.get(name)!r}, now {wanted.get(name)!r}'
          for name in sorted(set(saved) | set(wanted))
          if saved.get(name) != wanted.get(name)]
