"""What each test file costs, per tier: where the suite's minutes go.

    python benchmarks/test_costs.py                      # both tiers, -n 2
    python benchmarks/test_costs.py --tier default --json costs.json
    python benchmarks/test_costs.py --repo ../old-checkout   # the same, there

Runs pytest once per tier, as `.ci/run` does (`-n 2`), with this module as a
plugin (`-p test_costs`). In each worker, per test file (setup, call and
teardown of its tests: module fixtures count in the file that makes them):

    wall s       first test's start to last test's end, in its worker
    cpu s        the worker's CPU, plus that of the child processes it
                 waited for (a `run_cli` process, a `serve` subprocess)
    procs        processes started: subprocess (of them `py`: Python ones,
                 each a TensorFlow start, ~4 s of CPU) and multiprocessing;
                 not the forks of the tests' zygote (tests/warm_process.py)
    servers      reverb.Server objects made in the worker
    tfds dirs    TFDS directories written (store_as_tfds_dataset, and the
                 package's own EpisodeWriter)
    traces       functions traced: all (tf.function, tf.data, ...) and
                 of them tf.data's (a map, filter ... function)
    ... cpu s    CPU seconds of this process inside those calls (writing
                 TFDS directories; tracing)
    idle cores   the worker's CPU while it sleeps 0.5 s after the file's
                 last test, in cores: what the file left running (a failed
                 Reverb iterator kept alive retries its dead server, and
                 slows every later test of the worker)

It prints a table per tier, most CPU first, with the tier's wall clock,
the 20 slowest tests, and each test that starts a fresh Python (by
`subprocess`, or `tests/warm_process.py` falling back to it) with the
commands: a warm fork costs a fraction of one. Counts made inside child
processes are not seen (their
CPU is). `--json FILE` keeps everything for a later comparison.
"""

import argparse
import collections
import json
import os
import pathlib
import resource
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List

import pytest

_DIRECTORY_VARIABLE = 'TEST_COSTS_DIR'
COUNTERS = ('procs', 'py', 'mp', 'servers', 'tfds_dirs', 'tf_function',
            'tf_data', 'tfds_dirs_cpu', 'tf_function_cpu', 'tf_data_cpu')


# --- The plugin: runs inside each pytest worker. ----------------------------

class _Costs:
  """Per test file: times and counts, summed over its tests."""

  def __init__(self):
    self.files: Dict[str, Dict[str, float]] = collections.defaultdict(
        lambda: collections.defaultdict(float))
    self.tests: List[List[Any]] = []
    self.counts = collections.Counter()
    self.inside = set()  # Keys whose wrapped call is running: not twice.
    self.failed: List[str] = []
    self.pythons: List[str] = []  # This test's Python commands, so far.

  def count(self, name: str) -> None:
    self.counts[name] += 1


_COSTS = _Costs()


def _children_cpu() -> float:
  """CPU of the children waited for, the warm ones too (forked by the
  tests' zygote, `tests/warm_process.py`, with the zygote's imports)."""
  usage = resource.getrusage(resource.RUSAGE_CHILDREN)
  warm = sys.modules.get('tests.warm_process')
  forked = warm.forked_cpu() if warm is not None else 0.0
  return usage.ru_utime + usage.ru_stime + forked


def _counting(owner, name: str, counter) -> None:
  """Wraps `owner.name` so that each call counts (`counter(args)` names
  the counters)."""
  original = getattr(owner, name)

  def wrapped(*args, **kwargs):
    keys = counter(args, kwargs)
    for key in keys:
      _COSTS.count(key)
    outer = [key for key in keys if key not in _COSTS.inside]
    _COSTS.inside.update(outer)
    started = time.process_time()
    try:
      return original(*args, **kwargs)
    finally:
      spent = time.process_time() - started
      for key in outer:
        _COSTS.inside.discard(key)
        _COSTS.counts[f'{key}_cpu'] += spent
  wrapped.__wrapped__ = original
  setattr(owner, name, wrapped)


def _popen_counters(args, kwargs):
  command = kwargs.get('args', args[1] if len(args) > 1 else None)
  first = command[0] if isinstance(command, (list, tuple)) else command
  python = 'python' in os.path.basename(str(first)) or str(first) in (
      sys.executable, 'rlds-reverb')
  if python:
    _COSTS.pythons.append(_command_text(command))
  return ('procs', 'py') if python else ('procs',)


def _command_text(command) -> str:
  """A Python command, short: which test starts a fresh Python (a
  TensorFlow start) where a warm fork would do."""
  words = [str(word) for word in command] if isinstance(
      command, (list, tuple)) else [str(command)]
  return ' '.join(word if len(word) < 40 else word[:37] + '...'
                  for word in words[1:4])


def _install() -> None:
  """Counting wrappers on what costs: made once per worker."""
  import multiprocessing.process  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  # Where a process is started: not a fork of the tests' zygote
  # (`tests/warm_process.WarmPopen` calls it only when it falls back).
  _counting(subprocess.Popen, '_execute_child', _popen_counters)
  _counting(multiprocessing.process.BaseProcess, 'start',
            lambda a, k: ('procs', 'mp'))
  import reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  _counting(reverb.server.Server, '__init__', lambda a, k: ('servers',))
  import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  _counting(tfds.dataset_builders, 'store_as_tfds_dataset',
            lambda a, k: ('tfds_dirs',))
  from rlds_reverb.tfds_out import writer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  _counting(writer.EpisodeWriter, '__init__', lambda a, k: ('tfds_dirs',))
  from tensorflow.python.eager.polymorphic_function import tracing_compilation  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  _counting(tracing_compilation, '_create_concrete_function',
            lambda a, k: ('tf_function',))
  from tensorflow.python.data.ops import structured_function  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  _counting(structured_function.StructuredFunctionWrapper, '__init__',
            lambda a, k: ('tf_data',))


def pytest_configure(config):
  del config
  if os.environ.get(_DIRECTORY_VARIABLE):
    _install()


IDLE_S = 0.5


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  """Around each test's setup, call and teardown; after a file's last test,
  what the worker spends asleep."""
  if not os.environ.get(_DIRECTORY_VARIABLE):
    yield
    return
  yield from _measure(item)
  path = item.location[0]
  if nextitem is None or nextitem.location[0] != path:
    _COSTS.files[path]['idle_cores'] = _idle_cores()


def _idle_cores() -> float:
  started = time.process_time()
  time.sleep(IDLE_S)
  return (time.process_time() - started) / IDLE_S


def _measure(item):
  path = item.location[0]
  before = (time.perf_counter(), time.process_time(), _children_cpu(),
            dict(_COSTS.counts))
  _COSTS.pythons = []
  yield
  wall = time.perf_counter() - before[0]
  cpu = time.process_time() - before[1]
  children = _children_cpu() - before[2]
  row = _COSTS.files[path]
  row['tests'] += 1
  row['wall'] += wall
  row['cpu'] += cpu + children
  row['child_cpu'] += children
  for key in COUNTERS:
    row[key] += _COSTS.counts[key] - before[3].get(key, 0)
  _COSTS.tests.append([item.nodeid, wall, cpu + children, _COSTS.pythons])


def pytest_runtest_logreport(report):
  if os.environ.get(_DIRECTORY_VARIABLE) and report.failed:
    _COSTS.failed.append(f'{report.nodeid} ({report.when})')


def pytest_sessionfinish(session):
  directory = os.environ.get(_DIRECTORY_VARIABLE)
  if not directory or not _COSTS.tests:
    return
  worker = getattr(session.config, 'workerinput', {}).get('workerid', 'main')
  pathlib.Path(directory, f'{worker}.json').write_text(json.dumps(
      {'files': {path: dict(row) for path, row in _COSTS.files.items()},
       'tests': _COSTS.tests, 'failed': _COSTS.failed}))


# --- The driver: runs pytest per tier and prints the tables. ----------------

TIERS = {'default': [], 'slow': ['-m', 'slow']}


def run_tier(repo: pathlib.Path, tier: str, workers: int,
             extra: List[str]) -> Dict[str, Any]:
  with tempfile.TemporaryDirectory() as directory:
    env = dict(os.environ, **{_DIRECTORY_VARIABLE: directory})
    here = str(pathlib.Path(__file__).resolve().parent)
    env['PYTHONPATH'] = os.pathsep.join(
        [str(repo), here] + ([env['PYTHONPATH']] if env.get('PYTHONPATH')
                             else []))
    env.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
    paths = [] if any(not arg.startswith('-') for arg in extra) else ['tests']
    command = [sys.executable, '-m', 'pytest', '-q', '-p', 'test_costs',
               '-n', str(workers), *TIERS[tier], *extra, *paths]
    started = time.perf_counter()
    done = subprocess.run(command, cwd=repo, env=env, capture_output=True,
                          text=True)
    wall = time.perf_counter() - started
    files, tests, failed = {}, [], []
    for part in pathlib.Path(directory).glob('*.json'):
      found = json.loads(part.read_text())
      files.update(found['files'])
      tests += found['tests']
      failed += found['failed']
  summary = done.stdout.strip().splitlines()[-1] if done.stdout else ''
  return {'tier': tier, 'wall': wall, 'returncode': done.returncode,
          'summary': summary, 'files': files, 'tests': tests,
          'failed': failed}


def table(result: Dict[str, Any], most: int = 20) -> str:
  rows = sorted(result['files'].items(), key=lambda kv: -kv[1]['cpu'])
  lines = [f"## {result['tier']} tier: {result['wall'] / 60:.1f} min wall "
           f"({result['summary']})", '',
           '| file | tests | wall s | cpu s | procs (py, mp) | servers | '
           'tfds dirs (n, cpu s) | traces (all, tf.data) | tracing cpu s | '
           'idle cores after |',
           '|---|---:|---:|---:|---|---:|---|---|---:|---:|']
  total = collections.Counter()
  for path, row in rows:
    for key, value in row.items():
      total[key] += value
    lines.append(_row(path, row))
  total['idle_cores'] = max((row.get('idle_cores', 0) for _, row in rows),
                            default=0)  # The worst, not a sum.
  lines.append(_row('**all**', total))
  slowest = sorted(result['tests'], key=lambda test: -test[1])[:most]
  lines += ['', f'The {most} slowest tests (wall s, cpu s):', '']
  lines += [f'- {wall:.1f} s, {cpu:.1f} cpu s: `{nodeid}`'
            for nodeid, wall, cpu, *_ in slowest]
  pythons = [(test[0], test[3]) for test in result['tests']
             if len(test) > 3 and test[3]]
  lines += ['', f'Tests that start Python processes ({len(pythons)}; '
            'a fresh Python imports TensorFlow anew):', '']
  lines += [f'- `{nodeid}`: ' + '; '.join(f'`{c}`' for c in commands)
            for nodeid, commands in sorted(pythons)]
  if result['failed']:
    lines += ['', 'Failed:', ''] + [f'- `{name}`' for name in result['failed']]
  return '\n'.join(lines)


def _row(path: str, row) -> str:
  return (f"| {path} | {row['tests']:.0f} | {row['wall']:.1f} | "
          f"{row['cpu']:.1f} | {row['procs']:.0f} ({row['py']:.0f}, "
          f"{row['mp']:.0f}) | {row['servers']:.0f} | "
          f"{row['tfds_dirs']:.0f}, {row.get('tfds_dirs_cpu', 0):.1f} | "
          f"{row['tf_function']:.0f}, {row['tf_data']:.0f} | "
          f"{max(row.get('tf_function_cpu', 0), row.get('tf_data_cpu', 0)):.1f} | "
          f"{row.get('idle_cores', 0):.2f} |")


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument('--tier', choices=('default', 'slow', 'both'),
                      default='both')
  parser.add_argument('--workers', type=int, default=2)
  parser.add_argument('--repo', default=str(
      pathlib.Path(__file__).resolve().parent.parent),
                      help='the checkout whose tests run (default: this one)')
  parser.add_argument('--json', default=None, metavar='FILE')
  parser.add_argument('pytest_args', nargs='*',
                      help='more pytest arguments (after --)')
  args = parser.parse_args()
  tiers = ['default', 'slow'] if args.tier == 'both' else [args.tier]
  results = []
  for tier in tiers:
    result = run_tier(pathlib.Path(args.repo), tier, args.workers,
                      args.pytest_args)
    results.append(result)
    print(table(result), flush=True)
    print(flush=True)
  if args.json:
    pathlib.Path(args.json).write_text(json.dumps(results, indent=1))


if __name__ == '__main__':
  main()
