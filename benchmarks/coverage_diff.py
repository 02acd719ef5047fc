"""Coverage of rlds_reverb before and after a change to the tests: per module,
the lines and branches covered, and those covered before but not after.

Each OUT directory holds one coverage run's data (coverage.py, branch=True,
`patch = subprocess, _exit, fork` so that commands, workers and forked
processes count), of the same rlds_reverb code: the covered lines are
compared as sets. See
docs/development_tiers.md, "Coverage before and after".

    python benchmarks/coverage_diff.py BEFORE_OUT AFTER_OUT
    python benchmarks/coverage_diff.py --percent BEFORE_OUT AFTER_OUT

`--percent` compares runs of different rlds_reverb code (a whole round of
changes, where line numbers moved): per module, the percentage of lines and
of branches covered, and the modules whose share fell.
"""

import json
import os
import subprocess
import sys


def _files(out: str) -> dict:
  """coverage.py's JSON report of a run's data, per file. Made anew where
  the measured tree is there; else the report made earlier (a failed
  `coverage json` would remove it: the new one goes to a file beside)."""
  env = dict(os.environ, COVERAGE_RCFILE=os.path.join(out, 'covrc'))
  subprocess.run(['coverage', 'combine', '--append', '-q'], cwd=out, env=env,
                 check=False)
  report = os.path.join(out, 'coverage.json')
  made = subprocess.run(['coverage', 'json', '-q', '-o', report + '.new'],
                        cwd=out, env=env, check=False, capture_output=True,
                        text=True)
  if made.returncode == 0:
    os.replace(report + '.new', report)
  elif not os.path.exists(report):
    sys.exit(f'{out}: no coverage report: {made.stdout.strip()}')
  with open(report) as f:
    return json.load(f)['files']


def shares(out: str) -> dict:
  """{module path inside rlds_reverb: (lines %, branches %, statements)}."""
  result = {}
  for path, data in _files(out).items():
    summary = data['summary']
    branches = summary.get('num_branches', 0)
    result[path.split('rlds_reverb/', 1)[1]] = (
        100.0 * summary['covered_lines'] / max(1, summary['num_statements']),
        (100.0 * summary.get('covered_branches', 0) / branches
         if branches else 100.0),
        summary['num_statements'])
  return result


def _cell(values, index: int) -> str:
  return f'{values[index]:.1f}%' if values else '(none)'


def main_percent(before_out: str, after_out: str) -> int:
  before, after = shares(before_out), shares(after_out)
  print('| module | lines before | after | branches before | after | fell |')
  print('|---|---:|---:|---:|---:|---|')
  fell_any = False
  for name in sorted(set(before) | set(after)):
    b, a = before.get(name), after.get(name)
    if b and a:
      fell = [what for what, was, now in (('lines', b[0], a[0]),
                                          ('branches', b[1], a[1]))
              if now < was - 0.05]
    else:
      fell = []
    fell_any = fell_any or bool(fell)
    print(f'| {name} | {_cell(b, 0)} | {_cell(a, 0)} | {_cell(b, 1)} | '
          f'{_cell(a, 1)} | {", ".join(fell)} |')
  for label, data in (('before', before), ('after', after)):
    statements = sum(v[2] for v in data.values())
    lines = sum(v[0] * v[2] / 100 for v in data.values())
    print(f'{label}: {lines:,.0f} of {statements:,} lines covered '
          f'({100 * lines / max(1, statements):.1f}%)')
  return 1 if fell_any else 0


def covered(out: str):
  """{module path inside rlds_reverb: (lines, branches)} of a run's data."""
  files = _files(out)
  return {path.split('rlds_reverb/', 1)[1]: (
      set(data['executed_lines']),
      {tuple(arc) for arc in data.get('executed_branches', [])})
          for path, data in files.items()}


def main(before_out: str, after_out: str) -> int:
  before, after = covered(before_out), covered(after_out)
  empty = (set(), set())
  print('| module | lines before | after | branches before | after | lost |')
  print('|---|---:|---:|---:|---:|---|')
  lost_any = False
  for name in sorted(set(before) | set(after)):
    (lines_b, arcs_b), (lines_a, arcs_a) = (before.get(name, empty),
                                            after.get(name, empty))
    lost = sorted(lines_b - lines_a), sorted(arcs_b - arcs_a)
    lost_any = lost_any or any(lost)
    print(f'| {name} | {len(lines_b)} | {len(lines_a)} | {len(arcs_b)} | '
          f'{len(arcs_a)} | {"lines " + str(lost[0]) if lost[0] else ""}'
          f'{" branches " + str(lost[1]) if lost[1] else ""} |')
  print(f'lines covered: {sum(len(v[0]) for v in before.values())} before, '
        f'{sum(len(v[0]) for v in after.values())} after')
  return 1 if lost_any else 0


if __name__ == '__main__':
  if sys.argv[1] == '--percent':
    sys.exit(main_percent(*sys.argv[2:4]))
  sys.exit(main(*sys.argv[1:3]))
