"""A learner in its own process, for what only a process shows: Ctrl-C, what
reaches stderr, and the exit.

    python -m tests.mixture_learner '{"sources": [[address, table], ...],
        "weights": [1, [1, -1, 0]], "timeout": 2, "on_server_loss": "drop"}'

Draws batches of 4 from `rlds_reverb.replay_mixture(sources, weights, 4)`,
printing 'batch K' after each, until an exception; prints 'stopped: NAME'
(KeyboardInterrupt also when TensorFlow reports it inside another error)
and 'text: ...' (the error's text on one line), then exits 130 for an
interrupt, else 0, its iterator still alive. A weight is a number, 'size'
for all, or a schedule [a, b, start]: a + b * step from step `start`, 0
before it. "on_server_loss" is optional ('raise' when not given).
"sigint": "record" installs a SIGINT handler that only records the Ctrl-C
(docs/mixed_replay.md: with Python's own handler, a KeyboardInterrupt
raised while TensorFlow builds `next()`'s error was lost, and the heap
corrupted, in about 1 run in 5 under load); the learner then stops at the
next exception, or after the batch under way, as 'KeyboardInterrupt'.

    python -m tests.mixture_learner '{"runs": [CONFIG, CONFIG, ...]}'

Several learners, one after the other in one process (one TensorFlow
start): each run's lines as above, every iterator kept alive to the exit;
exits as the last run says.
"""

import json
import os
import signal
import sys

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

_ALIVE = []  # `main_runs`' iterators, alive until the interpreter exits.


def schedule(a: float, b: float, start: int):
  return lambda step: a + b * step if step >= start else 0.0


def weights_of(config):
  if config == 'size':
    return config
  return [schedule(*weight) if isinstance(weight, list) else weight
          for weight in config]


def stop_name(error: BaseException) -> str:
  """The exception's name; a Ctrl-C that arrives while `next()` fails comes
  as pybind11's RuntimeError naming KeyboardInterrupt."""
  if isinstance(error, KeyboardInterrupt) or 'KeyboardInterrupt' in str(error):
    return 'KeyboardInterrupt'
  return type(error).__name__


class RecordedCtrlC:
  """A SIGINT handler that raises nothing: Python runs it in the main thread
  between two bytecodes, which may be inside TensorFlow's C++ error path."""

  def __init__(self):
    self.seen = False
    signal.signal(signal.SIGINT, self._record)

  def _record(self, signum, frame):  # pylint: disable=unused-argument
    self.seen = True


def main(config, alive=None) -> int:
  """One learner; `alive`, a list, keeps its iterator to the exit."""
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  ctrl_c = RecordedCtrlC() if config.get('sigint') == 'record' else None
  dataset = rlds_reverb.replay_mixture(
      [tuple(source) for source in config['sources']],
      weights_of(config['weights']), 4, timeout=config['timeout'],
      on_server_loss=config.get('on_server_loss', 'raise'))
  iterator = iter(dataset)
  if alive is not None:
    alive.append(iterator)
  try:
    batch = 0
    while not (ctrl_c and ctrl_c.seen):
      next(iterator)
      print(f'batch {batch}', flush=True)
      batch += 1
    raise KeyboardInterrupt
  except BaseException as e:  # pylint: disable=broad-except
    name = 'KeyboardInterrupt' if ctrl_c and ctrl_c.seen else stop_name(e)
    print(f'stopped: {name}', flush=True)
    print('text: ' + ' '.join(str(e).split()), flush=True)
  return 130 if name == 'KeyboardInterrupt' else 0


def main_runs(configs) -> int:
  """`main` for each config in turn; the last one's exit status."""
  code = 0
  for config in configs:
    code = main(config, _ALIVE)
  return code


if __name__ == '__main__':
  CONFIG = json.loads(sys.argv[1])
  sys.exit(main_runs(CONFIG['runs']) if 'runs' in CONFIG else main(CONFIG))
