"""Progress bars on a terminal; nothing when stderr is a file or pipe.

    checking  |#####     | 120/240 episodes [00:03, steps=25,480]   read-ahead
    pushing   |###       | 9,000/25,480 steps [00:01, episodes=41]  writing
    building  |###       | 9,000/25,480 steps [00:01, episodes=41]  a build
"""

import sys
from typing import Optional


class Bar:
  """A tqdm bar of `unit`s, moved to absolute counts.

  tqdm is imported only when stderr is a terminal, so logs and tests see none
  of its carriage returns.
  """

  def __init__(self, description: str, unit: str,
               total: Optional[int] = None, enabled: Optional[bool] = None):
    if enabled is None:
      enabled = sys.stderr.isatty()
    self._bar = _make_bar(description, unit, total) if enabled else None
    self._done = 0

  def update_to(self, done: int, **postfix) -> None:
    if self._bar is None:
      return
    self._bar.update(done - self._done)
    self._done = done
    self._bar.set_postfix(refresh=False, **postfix)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()

  def __enter__(self) -> 'Bar':
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


class PushProgress(Bar):
  """Steps confirmed, from `push`'s `on_confirmed`."""

  def __init__(self, enabled: Optional[bool] = None,
               total: Optional[int] = None):
    super().__init__('pushing', ' steps', total, enabled)

  def on_confirmed(self, progress) -> None:
    self.update_to(progress.trajectories, episodes=progress.episodes)


class ReadProgress(Bar):
  """Episodes read ahead, from the checks' `on_read(episodes, steps)`."""

  def __init__(self, enabled: Optional[bool] = None,
               total: Optional[int] = None):
    super().__init__('checking', ' episodes', total, enabled)

  def on_read(self, episodes: int, steps: int) -> None:
    self.update_to(episodes, steps=f'{steps:,}')


class BuildProgress:
  """A build's read-ahead (`on_read`), then its steps built (`on_built`, a
  `rlds_reverb.BuildProgress`): one bar at a time, the second's total the
  steps the first read."""

  def __init__(self, enabled: Optional[bool] = None,
               total: Optional[int] = None):
    self._enabled = enabled
    self._reading = ReadProgress(enabled, total)
    self._steps: Optional[int] = None
    self._building: Optional[Bar] = None

  def on_read(self, episodes: int, steps: int) -> None:
    self._steps = steps
    self._reading.update_to(episodes, steps=f'{steps:,}')

  def on_built(self, progress) -> None:
    if self._building is None:
      self._reading.close()
      self._building = Bar('building', ' steps', self._steps, self._enabled)
    self._building.update_to(progress.steps, episodes=progress.episodes)

  def __enter__(self) -> 'BuildProgress':
    return self

  def __exit__(self, *exc_info) -> None:
    self._reading.close()
    if self._building is not None:
      self._building.close()


def _make_bar(description: str, unit: str, total: Optional[int]):
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return tqdm(desc=description, total=total, unit=unit, file=sys.stderr,
              dynamic_ncols=True, leave=False)
