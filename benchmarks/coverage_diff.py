"""Coverage of rlds_reverb before and after a change to the tests: per module,
the lines and branches covered, and those covered before but not after.

Each OUT directory holds one coverage run's data (coverage.py, branch=True,
`patch = subprocess` so that commands and workers count), of the same
rlds_reverb code: the covered lines are compared as sets. See
docs/development_tiers.md, "Coverage before and after".

    python benchmarks/coverage_diff.py BEFORE_OUT AFTER_OUT
"""

import json
import os
import subprocess
import sys


def covered(out: str):
  """{module path inside rlds_reverb: (lines, branches)} of a run's data."""
  env = dict(os.environ, COVERAGE_RCFILE=os.path.join(out, 'covrc'))
  subprocess.run(['coverage', 'combine', '--append', '-q'], cwd=out, env=env,
                 check=False)
  report = os.path.join(out, 'coverage.json')
  subprocess.run(['coverage', 'json', '-q', '-o', report], cwd=out, env=env,
                 check=True)
  with open(report) as f:
    files = json.load(f)['files']
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
  sys.exit(main(*sys.argv[1:3]))
