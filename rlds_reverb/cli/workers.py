"""`rlds-reverb push --workers N`: N push processes, one per shard, summed.

    rlds-reverb push ... --workers 2
      |-- rlds-reverb push ... --shard 0/2 --json [--resume S.0-of-2.json]
      |-- rlds-reverb push ... --shard 1/2 --json [--resume S.1-of-2.json]
      '-> the sum of their JSON summaries, or each failure's error line

Processes, not threads: each worker reads, converts and writes with its own
interpreter and Reverb writer, all into the same server at once. A worker's
notes go to stderr prefixed with its shard. Workers run to their end even
when another fails, so every worker's count is known. A worker's error that
lists fields keeps its lines, under the summary, prefixed with its shard.
"""

import argparse
import concurrent.futures
import json
import subprocess
import sys
import time
from typing import List, Tuple

from rlds_reverb import wording
from rlds_reverb.cli import output

_SUMMED = ('episodes', 'trajectories', 'items', 'skipped_episodes',
           'resumed_after_episodes')


def run(args: argparse.Namespace) -> int:
  from rlds_reverb.cli import push  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  start = time.perf_counter()
  results = _run_all([worker_command(args, index)
                      for index in range(args.workers)])
  summaries, failures = [], []
  for index, (returncode, stdout, stderr) in enumerate(results):
    shard = f'{index}/{args.workers}'
    errors = _relay(stderr, shard)
    if returncode == 0:
      summaries.append(json.loads(stdout.strip().splitlines()[-1]))
    else:
      failures.append((shard, errors[-1] if errors else
                       _last_line(stderr, returncode)))
  if failures:
    raise output.CliError(_failure_text(failures, summaries, args.workers))
  summary = {name: sum(s[name] for s in summaries) for name in _SUMMED}
  # The workers push at the same time: the longest one's push time.
  summary['seconds'] = max(s['seconds'] for s in summaries)
  summary['wall_seconds'] = round(time.perf_counter() - start, 3)
  summary['workers'] = args.workers
  push.print_summary(summary, args.json)
  return output.EXIT_OK


def _failure_text(failures: List[Tuple[str, str]], summaries: List[dict],
                  workers: int) -> str:
  """A line naming each failed shard and its error, then the errors' details.

  An error of several lines has its first in that line and the others under
  it, each as '  shard I/N: detail'.
  """
  firsts, details = [], []
  for shard, error in failures:
    first, *rest = error.splitlines() or ['']
    firsts.append(f'shard {shard}: {first}')
    details += [f'shard {shard}: {line.strip()}' for line in rest
                if line.strip()]
  others = wording.count(len(summaries), 'other')
  confirmed = wording.count(sum(s['episodes'] for s in summaries), 'episode')
  summary = (f'{len(failures)} of {workers} workers failed: '
             f'{" | ".join(firsts)} | the {others} confirmed {confirmed}')
  return output.with_details(summary, details)


def _last_line(stderr: str, returncode: int) -> str:
  """What a worker that printed no error line said last (relayed in full)."""
  lines = [line.strip() for line in stderr.splitlines() if line.strip()]
  return lines[-1] if lines else f'exit status {returncode}, no message'


def worker_command(args: argparse.Namespace, index: int) -> List[str]:
  """The `rlds-reverb push` command line of shard `index`."""
  from rlds_reverb import resume  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  command = [sys.executable, '-m', 'rlds_reverb', 'push']
  for dataset in args.dataset:
    command += ['--dataset', dataset]
  command += ['--split', args.split, '--server', args.server]
  if args.data_dir:
    command += ['--data-dir', args.data_dir]
  for table in args.table:
    command += ['--table', table]
  command += ['--sequence-length', str(args.sequence_length),
              '--stride', str(args.stride), '--priority', repr(args.priority),
              '--on-invalid', args.on_invalid, '--timeout', repr(args.timeout),
              '--shard', f'{index}/{args.workers}', '--json']
  if args.pad_end_of_episodes:
    command.append('--pad-end-of-episodes')
  for field, length in args.chunk_length or ():
    command += ['--chunk-length', f'{field}={length}' if field else str(length)]
  if args.resume:
    command += ['--resume', resume.shard_path(args.resume, index, args.workers)]
  if args.debug:
    command.append('--debug')
  return command


def _run_all(commands):
  """(returncode, stdout, stderr) of each command, run at the same time."""
  processes = [subprocess.Popen(command, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True)
               for command in commands]
  try:
    with concurrent.futures.ThreadPoolExecutor(len(processes)) as pool:
      outputs = list(pool.map(_communicate, processes))
  except BaseException:  # Ctrl-C included: no worker outlives the command.
    for process in processes:
      process.kill()
    raise
  return [(process.returncode, stdout, stderr)
          for process, (stdout, stderr) in zip(processes, outputs)]


def _communicate(process):
  return process.communicate()


def _relay(stderr: str, shard: str) -> List[str]:
  """Prints a worker's stderr lines, prefixed; returns its error messages.

  An error's indented lines after it are part of it (`output.error_text`).
  """
  prefix = f'{output.PROG}: error: '
  errors = []
  previous_was_error = False
  for line in stderr.splitlines():
    if line.startswith(prefix):
      errors.append(line[len(prefix):])
      previous_was_error = True
    elif previous_was_error and line.startswith(output.DETAIL_INDENT):
      errors[-1] += f'\n{line}'
    elif line.strip():
      print(f'[shard {shard}] {line}', file=sys.stderr, flush=True)
      previous_was_error = False
  return errors
