"""Every Python and shell block of README.md and docs/*.md runs as written.

Each page runs in its own process and temporary directory, its blocks in
order against real local servers (`tests/docs_blocks.py` says how, and how a
block that cannot run says so). The Python API block runs twice in one
directory: a rerun must not trip over what the first left behind.
"""

import ast
import pathlib
import re
import socket
import subprocess
import sys

import pytest

from tests import docs_blocks
from tests import warm_process
from tests.script_runs import run_here

ROOT = docs_blocks.ROOT
HANG_GUARD_S = 600
# Pages run by a test of their own, which also checks their output.
CHECKED_PAGES = ('README.md', 'docs/index.md')
# Every block that does not run, by page and first line: a new skip must be
# added here, in sight of review.
SKIPPED = {
    ('README.md', 'pip install ".[test,beam]"'),       # .ci/run installs so
    ('README.md', 'rlds-reverb demo'),                 # .ci/run runs both
    ('docs/index.md', 'python examples/seed_replay_buffer.py'),
    ('docs/conversion.md', 'python -m pytest -q tests/test_dataset_shapes.py'),
    ('docs/conversion.md',
     'python -m pytest -q tests/test_catalog.py tests/test_catalog_odd.py'),
    ('docs/scaling.md', 'rlds-reverb push --dataset gs://BUCKET/tfds/NAME/1.0.0 --table replay \\'),
    ('docs/scaling.md', 'dask scheduler'),
    # The flow runs in cli.md's page and in tests/test_examples.py.
    ('docs/scaling.md', 'rlds-reverb build --dataset DIR --out built --table replay --servers 2'),
    ('docs/development.md', 'python -m pytest -q -n 2 tests'),
    ('docs/development.md', 'pip install ".[docs]" && mkdocs build --strict'),
    ('docs/encoded_images_performance.md', 'pip install ".[bench]"'),
    ('docs/development_tiers.md', 'pip install ".[test]"'),
    ('docs/development_tiers.md', 'python -m pytest -q tests/test_catalog*.py'),
    ('docs/development_tiers.md',  # A whole tier measured: 10-17 minutes.
     'python benchmarks/test_costs.py --tier default --json costs.json'),
    ('docs/encoded_images_performance.md',
     "import sys; sys.path.insert(0, 'benchmarks')"),
    ('docs/encoded_images_performance.md',
     'python benchmarks/server_memory.py --shape image synthetic_png \\'),
    ('docs/encoded_images_performance.md',
     'python benchmarks/push_throughput.py --source tfds --shape image \\'),
    ('docs/encoded_images_performance.md',
     'python benchmarks/sample_throughput.py --repeats 3'),
    ('docs/encoded_images_performance.md',
     'pip install ".[bench]"'),
}


def free_port() -> str:
  with socket.socket() as probe:
    probe.bind(('', 0))
    return str(probe.getsockname()[1])


def run_page(page: pathlib.Path, cwd: pathlib.Path) -> str:
  """The page run by a new Python, as a reader's script runs (not a warm
  process: one that imported rlds_reverb would hide what a script that does
  not import it prints at exit, test_a_page_whose_names_fail_at_exit_fails);
  its `rlds-reverb` commands are forked from the zygote."""
  result = subprocess.run(
      [sys.executable, '-m', 'tests.docs_blocks', str(page), free_port()],
      cwd=cwd, env={**docs_blocks.environment(''),
                    warm_process.ZYGOTE_VARIABLE: warm_process.zygote_socket()},
      capture_output=True, text=True, timeout=HANG_GUARD_S, check=False)
  assert result.returncode == 0, result.stderr[-6000:]
  # A traceback at exit (a __del__ that failed) is what a reader's script
  # prints too: the page must end cleanly.
  assert 'Exception ignored' not in result.stderr, result.stderr[-6000:]
  return result.stdout


def page_ids():
  return [str(page.relative_to(ROOT)) for page in docs_blocks.PAGES]


# Slow tier: each page's blocks start servers and commands (2-35 s a page).
# The default tier runs the README's and the overview's examples (below), and
# parses every page against the convention (the skips, the links, the API
# page); CI runs both tiers, so every block runs there.
@pytest.mark.slow
@pytest.mark.parametrize('name', [
    name for name in page_ids() if name not in CHECKED_PAGES])
def test_page_runs(name, tmp_path):
  run_page(ROOT / name, tmp_path)


def test_readme_trains_an_agent_from_the_served_table(tmp_path):
  """The README's example: serve, push, train by address. (Run here rather
  than in test_page_runs, so that its output is checked.)"""
  out = run_page(ROOT / 'README.md', tmp_path)
  assert re.search(r'^serving replay on port \d+ of every interface', out, re.M)
  assert f'pushed 64 episodes, {9932:,} steps, {9868:,} items' in out
  assert re.search(rf'^100 train steps on {9868:,} items; loss \d', out, re.M)


def run_page_here(page: pathlib.Path, cwd: pathlib.Path) -> str:
  """`run_page` in this process (`python -m tests.docs_blocks` as a function,
  what the process runs): for a run whose exit a process checks already."""
  result = run_here(docs_blocks.run_page, page, free_port(), cwd=cwd)
  assert result.returncode == 0, result.stderr[-6000:]
  return result.stdout


def test_python_api_example_runs_twice(tmp_path):
  """docs/index.md's Python API example, twice in the same directory (it once
  saved a resume file bound to its server's port). The first run is a
  process, checked for a clean exit; the rerun, in this process, finds what
  the first left on disk as a second process would."""
  for run in (run_page, run_page_here):
    out = run(ROOT / 'docs/index.md', tmp_path)
    # The bundled set: 64 episodes, 9,932 steps, 9,868 two-step items.
    assert out == '9932 64 9932 9868 ()\n'
  assert list(tmp_path.iterdir()) == []


def test_the_blocks_that_do_not_run_are_the_known_few():
  """Every page parses (languages, directives); its skips are listed above."""
  skipped = {(block.page, block.code.split('\n')[0].split('  #')[0].rstrip())
             for page in docs_blocks.PAGES
             for block in docs_blocks.blocks(page)
             if (block.directive or '').startswith('skip')}
  assert skipped == SKIPPED


@pytest.mark.parametrize('text, message', [
    ('```bash\nls\n```\n', "docs/x.md:1: a block of language 'bash'; "
     'expected one of python, sh, text (text for output and pictures).'),
    ('```\nls\n```\n', "docs/x.md:1: a block of language ''; expected one "
     'of python, sh, text (text for output and pictures).'),
    ('<!-- docs-test: skip -->\n```sh\nls\n```\n',
     "docs/x.md:1: docs-test directive 'skip'; expected 'skip (why)', "
     "'background' or 'requires MODULE'."),
    ('```sh\nls\n', 'docs/x.md:1: a block that is never closed.'),
    ('- a list\n\n  ```sh\n  ls\n  ```\n',
     'docs/x.md:3: an indented fence; fences start at the line start here.'),
])
def test_convention_errors(text, message, monkeypatch, tmp_path):
  (tmp_path / 'docs').mkdir()
  page = tmp_path / 'docs' / 'x.md'
  page.write_text(text)
  monkeypatch.setattr(docs_blocks, 'ROOT', tmp_path)
  with pytest.raises(docs_blocks.DocsBlockError) as error:
    docs_blocks.blocks(page)
  assert str(error.value) == message


def test_a_background_block_that_fails_at_ctrl_c_fails_the_page(tmp_path):
  page = tmp_path / 'page.md'
  # A loop of short sleeps, not `tail -f`: bash runs a trap once the command
  # under way ends, and a SIGINT that came between `echo` and the start of
  # `tail` (bash's own, not tail's) waited for a `tail -f` that never ends
  # (1 run in 6 on a slow machine).
  page.write_text('<!-- docs-test: background -->\n```sh\n'
                  "trap 'exit 3' INT; echo ready; "
                  'while :; do sleep 0.1; done\n```\n')
  result = subprocess.run(
      [sys.executable, '-m', 'tests.docs_blocks', str(page), free_port()],
      cwd=tmp_path, env=docs_blocks.environment(''), capture_output=True,
      text=True, timeout=HANG_GUARD_S, check=False)
  assert result.returncode == 1
  assert result.stderr.splitlines()[-1] == (
      'docs-test: a background block exited 3 at Ctrl-C.')


# Slow tier (~10 s, a TensorFlow start-up): the default tier runs index.md
# (test_python_api_example_runs_twice), whose server outlives its blocks too.
@pytest.mark.slow
def test_a_page_whose_names_fail_at_exit_fails(tmp_path):
  """A page's names live until its interpreter exits, as a script's do: a
  module-level server after `import tensorflow_datasets`, without the exit
  hook `import rlds_reverb` registers, prints Reverb's traceback at exit,
  and the page fails on it."""
  page = tmp_path / 'page.md'
  page.write_text('```python\nimport reverb\nimport tensorflow_datasets\n\n'
                  "server = reverb.Server([reverb.Table.queue('q', 10)])\n"
                  '```\n')
  with pytest.raises(AssertionError) as failed:
    run_page(page, tmp_path)
  assert ('Exception ignored in: <function Server.__del__'
          in str(failed.value))


def test_relative_links_of_the_readme_reach_files():
  """mkdocs checks the links between docs pages; the README is not one."""
  readme = (ROOT / 'README.md').read_text()
  targets = re.findall(r'\]\(((?!https?:)[^)#]+)(?:#[^)]*)?\)', readme)
  assert targets and [t for t in targets if not (ROOT / t).exists()] == []


def test_the_api_page_documents_every_public_name():
  """`rlds_reverb.__all__`, `rlds_reverb.beam.__all__` and
  `rlds_reverb.tables.__all__`, each from the module that defines it: a new
  public name needs its entry, and a renamed one breaks `mkdocs build
  --strict`."""
  init = ast.parse((ROOT / 'rlds_reverb/__init__.py').read_text())
  lazy, public, eager = {}, [], {}
  for node in init.body:
    if isinstance(node, ast.Assign) and node.targets[0].id == '_LAZY':
      lazy = ast.literal_eval(node.value)
    elif isinstance(node, ast.Assign) and node.targets[0].id == '__all__':
      public = ast.literal_eval(node.value)
    elif isinstance(node, ast.ImportFrom):
      eager.update((alias.name, node.module) for alias in node.names)
  expected = {f'{lazy.get(name) or eager[name]}.{name}' for name in public}
  beam_all = module_all(ROOT / 'rlds_reverb/beam/__init__.py')
  expected |= {f'rlds_reverb.beam.{name}' for name in beam_all}
  expected |= {f'rlds_reverb.tables.{name}'
               for name in module_all(ROOT / 'rlds_reverb/tables.py')}
  documented = set(re.findall(r'^::: (\S+)$',
                              (ROOT / 'docs/api.md').read_text(), re.M))
  assert documented == expected


def module_all(path: pathlib.Path):
  """A module's `__all__`, read without importing it."""
  return next(ast.literal_eval(node.value)
              for node in ast.parse(path.read_text()).body
              if isinstance(node, ast.Assign)
              and getattr(node.targets[0], 'id', None) == '__all__')
