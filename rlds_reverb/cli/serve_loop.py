"""`serve`'s loop once its server answers: signals set flags, the main thread
acts on them (checkpoint on SIGUSR1, stop on SIGINT and SIGTERM).

`client` is anything with `checkpoint()`: a `reverb.Client`, or a server of
`reverb_native` in a process without TensorFlow.
"""

import signal
import time
from typing import Callable, Dict, Optional, Sequence

from rlds_reverb._util import wording

from rlds_reverb.cli import output

# How often the main thread looks at what the signals asked for.
_POLL_S = 0.2


def say(text: Optional[str]) -> None:
  """A note, if there is one to say."""
  if text:
    output.note(text)


class Requests:
  """What SIGINT, SIGTERM and SIGUSR1 asked for; the main thread acts on it.

  The handlers only set attributes: a lock taken in a handler (as
  `threading.Event.set` does) deadlocks if the main thread holds it.
  """

  def __init__(self):
    self.stop = False
    self.checkpoint = False

  def install(self) -> None:
    signal.signal(signal.SIGINT, self._on_stop)
    signal.signal(signal.SIGTERM, self._on_stop)
    signal.signal(signal.SIGUSR1, self._on_checkpoint)

  def _on_stop(self, signum, frame):
    del signum, frame
    self.stop = True

  def _on_checkpoint(self, signum, frame):
    del signum, frame
    self.checkpoint = True


def serve_until_stopped(requests: Requests, client, checkpoint_dir,
                        may_checkpoint=lambda: True) -> None:
  """Until SIGINT or SIGTERM; SIGUSR1 checkpoints, once `may_checkpoint()`
  (a request made before waits for it)."""
  while not requests.stop:
    if requests.checkpoint and may_checkpoint():
      requests.checkpoint = False  # Cleared first: a new request is not lost.
      checkpoint_on_request(client, checkpoint_dir)
    time.sleep(_POLL_S)


def checkpoint_on_request(client, checkpoint_dir) -> None:
  """SIGUSR1: a failed checkpoint is reported, and the data still served."""
  if not checkpoint_dir:
    output.note('SIGUSR1: no checkpoint written, serve has no '
                '--checkpoint-dir; still serving')
    return
  try:
    path = checkpoint(client, checkpoint_dir)
  except output.CliError as e:
    output.note(f'{e}; still serving')
    return
  output.note(f'checkpoint written to {path}')


def checkpoint(client, checkpoint_dir: str) -> str:
  try:
    return client.checkpoint()
  except RuntimeError as e:
    raise output.CliError(f'Could not write a checkpoint to {checkpoint_dir}: '
                          f'{output.error_line(e)}') from e


def discarded_text(sizes: Callable[[], Dict[str, int]],
                   names: Sequence[str]) -> str:
  """What stopping without --checkpoint-dir throws away; `sizes()` asks the
  server for {table: items}. Tables in the order given (`names`), not the
  server's, which changes from run to run."""
  try:
    found = sizes()
    held_sizes = {name: found[name] for name in names if name in found}
    held = ', '.join(f'{wording.count(size, "item")} of table {name!r}'
                     for name, size in held_sizes.items() if size)
    if not held:
      return (f'stopped without --checkpoint-dir; '
              f'{"every table was" if len(names) > 1 else "the table was"} '
              'empty, nothing is discarded')
    held = f'the {held} {"is" if sum(held_sizes.values()) == 1 else "are"}'
  except Exception:  # pylint: disable=broad-except
    # Still say it, without the counts.
    held = (f'{wording.noun(len(names), "table")} '
            f'{", ".join(repr(name) for name in names)} '
            f'{wording.noun(len(names), "is", "are")}')
  return (f'stopped without --checkpoint-dir: {held} discarded (serve '
          f'--checkpoint-dir DIR writes a checkpoint at stop and reloads it)')
