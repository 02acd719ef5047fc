"""A push progress bar on a terminal; nothing when stderr is a file or pipe."""

import sys
from typing import Callable, Optional


class PushProgress:
  """Feeds `push`'s `on_confirmed` counts into a tqdm bar of steps.

  tqdm is imported only when stderr is a terminal, so logs and tests see none
  of its carriage returns.
  """

  def __init__(self, enabled: Optional[bool] = None,
               total: Optional[int] = None):
    if enabled is None:
      enabled = sys.stderr.isatty()
    self._bar = _make_bar(total) if enabled else None
    self._steps = 0

  def on_confirmed(self, progress) -> None:
    if self._bar is None:
      return
    self._bar.update(progress.trajectories - self._steps)
    self._steps = progress.trajectories
    self._bar.set_postfix(episodes=progress.episodes, refresh=False)

  def close(self) -> None:
    if self._bar is not None:
      self._bar.close()

  def __enter__(self) -> 'PushProgress':
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


def _make_bar(total: Optional[int]):
  from tqdm import tqdm  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return tqdm(desc='pushing', total=total, unit=' steps', file=sys.stderr,
              dynamic_ncols=True, leave=False)


Callback = Callable[[object], None]
