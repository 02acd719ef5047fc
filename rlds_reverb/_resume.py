"""Where a push got to, in a JSON file, so that running it again continues.

    {"key": {...what identifies the push...}, "version": 2,
     "confirmed_episodes": 40, "confirmed_items": 3960,
     "partial_items": 12, "complete": false}

The file is rewritten after every confirmation (all items written so far
acknowledged by the server), atomically: a temporary file, fsync, rename. A
push killed at any moment leaves the last confirmed count. Run again with the
same key, it skips that many whole episodes of its (deterministic) episode
stream and writes the rest. `partial_items` (of `confirmed_items`) belong to
the next episode: a push interrupted by Ctrl-C inside an episode confirms
what it made of it, and the rerun makes only that episode's other items.
Episodes written after the last confirmation may be written twice: at least
once, at most one confirmation interval per process (`writer.
CONFIRM_EVERY_ROWS` rows, plus the episode that crossed it) after a push is
killed or its server stops confirming. Files of version 1 (without
`partial_items`) load with none.
"""

import dataclasses
import json
import os
from typing import Any, Dict

from rlds_reverb._util import files
from rlds_reverb.errors import ResumeStateError

FORMAT_VERSION = 2


@dataclasses.dataclass(frozen=True)
class State:
  key: Dict[str, Any]
  confirmed_episodes: int = 0  # Whole episodes.
  confirmed_items: int = 0  # In all tables, `partial_items` too.
  complete: bool = False
  partial_items: int = 0  # In all tables, of episode `confirmed_episodes`.


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
                  int(saved['confirmed_items']), bool(saved['complete']),
                  int(saved.get('partial_items', 0)))
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
    """`push`'s `on_confirmed` callback (a writer's `Progress`)."""
    partial = progress.confirmed_partial_items
    if not progress.confirmed_episodes:  # Still in the start's episode.
      partial += self._start.partial_items
    self._save(progress.confirmed_episodes, progress.confirmed_items,
               partial, False)

  def finish(self, episodes: int, items: int) -> None:
    self._save(episodes, items, 0, True)

  def _save(self, episodes: int, items: int, partial_items: int,
            complete: bool) -> None:
    self.state = dataclasses.replace(
        self._start,
        confirmed_episodes=self._start.confirmed_episodes + episodes,
        confirmed_items=self._start.confirmed_items + items,
        partial_items=partial_items, complete=complete)
    save(self._path, self.state)


def _differences(saved: Dict[str, Any], wanted: Dict[str, Any]):
  return [f'{name} was {saved.get(name)!r}, now {wanted.get(name)!r}'
          for name in sorted(set(saved) | set(wanted))
          if saved.get(name) != wanted.get(name)]
