"""Interrupt `rlds-reverb push --resume` at random points; rerun; count.

    python benchmarks/push_interrupt.py [--rounds 10] [--copies 20]
        [--signal both|int|kill] [--seed 0] [--json]

The issue's setting: one `rlds-reverb serve` of the bundled set, and a push
of the bundled set given `--copies` times (20: 1,280 episodes, 197,360
items). Each round empties the table, starts the push with a fresh resume
file, and once the table holds a random number of items sends SIGINT
(Ctrl-C) or SIGKILL; then runs the same command again and counts:

    held       items in the table after the interruption
    said       SIGINT: the items the error line says are there (whole
               episodes' and the next one's): must equal `held`
    repeated   items in the table after the rerun, minus a clean push's:
               SIGINT must give 0; SIGKILL at most one confirmation interval
               (`writer.CONFIRM_EVERY_ROWS` rows, plus the episode that
               crossed it: < 4,096 + 500 items here)
    lost       a clean push's items missing after the rerun: must be 0

Exit status 1 if an item was lost, a SIGINT round repeated one, or a line
said other than the table held.
"""

import argparse
import json
import os
import random
import re
import signal
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import reverb  # pylint: disable=g-import-not-at-top

BUNDLED = 'bundled:cartpole'
BUNDLED_ITEMS = 9868
POLL_S = 0.005
# What an interrupted push says it confirmed (`writer.contents_text`).
SAID = re.compile(r'before the interruption: [\d,]+ whole episodes? '
                  r'\(([\d,]+) items?\)(?: and ([\d,]+) items? of episode)?')


def _command(*args):
  return [sys.executable, '-m', 'rlds_reverb', *map(str, args)]


def _sigint_default() -> None:
  """In a child: SIGINT as in a terminal, even when this script was started
  in the background, where the shell leaves it ignored."""
  signal.signal(signal.SIGINT, signal.SIG_DFL)


def _serve():
  """`rlds-reverb serve` of the bundled set; (process, address)."""
  serve = subprocess.Popen(
      _command('serve', '--dataset', BUNDLED, '--table', 'replay', '--port',
               '0'), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
      text=True, preexec_fn=_sigint_default)
  for line in serve.stdout:
    if line.startswith('serving'):
      return serve, f'localhost:{int(line.split("port ")[1].split()[0])}'
  raise RuntimeError('serve did not start')


def _size(client: reverb.Client) -> int:
  return client.server_info(timeout=30)['replay'].current_size


def _number(text) -> int:
  return int((text or '0').replace(',', ''))


def one_round(address: str, push_args, total: int, sent: str,
              rng: random.Random) -> Dict[str, Any]:
  """One interruption and rerun; the counts of the module docstring."""
  client = reverb.Client(address)
  client.reset('replay')
  with tempfile.TemporaryDirectory() as tmp:
    args = [*push_args, '--resume', os.path.join(tmp, 'state.json')]
    push = subprocess.Popen(_command(*args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True,
                            preexec_fn=_sigint_default)
    at = rng.randrange(1, int(total * 0.9))
    while _size(client) < at:
      if push.poll() is not None:
        raise RuntimeError(f'the push ended first: {push.communicate()}')
      time.sleep(POLL_S)
    push.send_signal(signal.SIGINT if sent == 'int' else signal.SIGKILL)
    _, stderr = push.communicate()
    held = _size(client)
    said = None
    if sent == 'int':
      match = SAID.search(stderr)
      said = _number(match[1]) + _number(match[2]) if match else None
    again = subprocess.run(_command(*args), capture_output=True, text=True)
    if again.returncode:
      raise RuntimeError(f'the rerun failed: {again.stderr}')
  final = _size(client)
  return {'signal': sent, 'sent_at': at, 'held': held, 'said': said,
          'repeated': max(final - total, 0), 'lost': max(total - final, 0)}


def main() -> int:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--rounds', type=int, default=10)
  parser.add_argument('--copies', type=int, default=20)
  parser.add_argument('--signal', choices=('both', 'int', 'kill'),
                      default='both')
  parser.add_argument('--seed', type=int, default=0)
  parser.add_argument('--json', action='store_true')
  args = parser.parse_args()
  rng = random.Random(args.seed)
  total = BUNDLED_ITEMS * args.copies
  serve, address = _serve()
  push_args = ['push', *['--dataset', BUNDLED] * args.copies, '--server',
               address, '--table', 'replay']
  signals = (['int', 'kill'] if args.signal == 'both' else [args.signal])
  rounds = []
  try:
    for index in range(args.rounds):
      result = one_round(address, push_args, total,
                         signals[index % len(signals)], rng)
      rounds.append(result)
      if not args.json:
        print(json.dumps(result), flush=True)
  finally:
    serve.send_signal(signal.SIGINT)
    serve.communicate()
  bad = [r for r in rounds
         if r['lost'] or (r['signal'] == 'int' and
                          (r['repeated'] or r['said'] != r['held']))]
  summary = {
      'items': total, 'rounds': len(rounds),
      'repeated_after_sigint': [r['repeated'] for r in rounds
                                if r['signal'] == 'int'],
      'repeated_after_sigkill': [r['repeated'] for r in rounds
                                 if r['signal'] == 'kill'],
      'lost': sum(r['lost'] for r in rounds), 'bad_rounds': len(bad)}
  print(json.dumps(summary), flush=True)
  return 1 if bad else 0


if __name__ == '__main__':
  sys.exit(main())
