"""The README's Python API example runs as written, and again."""

import pathlib
import re
import subprocess
import sys

README = pathlib.Path(__file__).resolve().parent.parent / 'README.md'
HANG_GUARD_S = 300


def python_block(section: str) -> str:
  """The first ```python block after the heading `section`."""
  text = README.read_text()
  start = text.index(f'\n{section}\n')
  return re.search(r'```python\n(.*?)```', text[start:], re.S).group(1)


def test_python_api_example_runs_twice(tmp_path):
  """Run twice in the same directory: a rerun must not trip over the first
  (the example once saved a resume file bound to its server's port)."""
  code = python_block('## Python API')
  for _ in range(2):
    result = subprocess.run(
        [sys.executable, '-c', code], cwd=tmp_path, capture_output=True,
        text=True, timeout=HANG_GUARD_S, check=False)
    assert result.returncode == 0, result.stderr
    count, episodes, steps, items, skipped = result.stdout.split(maxsplit=4)
    # The bundled set: 64 episodes, 9,932 steps, 9,868 two-step items.
    assert (count, episodes, steps, items, skipped) == (
        '9932', '64', '9932', '9868', '()\n')
  assert list(tmp_path.iterdir()) == []
