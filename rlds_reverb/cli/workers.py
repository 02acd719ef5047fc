"""`rlds-reverb push --workers N`: N push processes, one per shard, summed.

    rlds-reverb push ... --workers 2
      |-- rlds-reverb push ... --shard 0/2 --json [--resume S.0-of-2.json]
      |-- rlds-reverb push ... --shard 1/2 --json [--resume S.1-of-2.json]
      '-> the sum of their JSON summaries, or each failure's error line

Processes, not threads: each worker reads, converts and writes with its own
interpreter and Reverb writer, all into the same server at once. A worker's
notes go to stderr prefixed with its shard. Workers run to their end even
when another fails, so every worker's count is known.
"""

import argparse
import concurrent.futures
import json
import subprocess
import sys
import time
from typing import List

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
      reason = errors[-1] if errors else stderr.strip()
      failures.append(f'shard {shard}: {reason}')
  if failures:
    confirmed = sum(s['episodes'] for s in summaries)
    raise output.CliError(
        f'{len(failures)} of {args.workers} workers failed: '
        f'{" | ".join(failures)} | the {len(summaries)} other(s) confirmed '
        f'{confirmed} episodes')
  summary = {name: sum(s[name] for s in summaries) for name in _SUMMED}
  # The workers push at the same time: the longest one's push time.
  summary['seconds'] = max(s['seconds'] for s in summaries)
  summary['wall_seconds'] = round(time.perf_counter() - start, 3)
  summary['workers'] = args.workers
  push.print_summary(summary, args.json)
  return output.EXIT_OK


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
  """Prints a worker's stderr lines, prefixed; returns its error messages."""
  prefix = f'{output.PROG}: error: '
  errors = []
  for line in stderr.splitlines():
    if line.startswith(prefix):
      errors.append(line[len(prefix):])
    elif line.strip():
      print(f'[shard {shard}] {line}', file=sys.stderr, flush=True)
  return errors
