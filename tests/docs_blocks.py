"""The code blocks of the Markdown docs (README.md, docs/*.md), and running them.

Every ```python and ```sh block runs as written, in page order; ```text
blocks (output, pictures, formulas) do not. A page's Python blocks share one
namespace, the globals of a fresh `__main__` module, as in a script that a
reader pastes them into: their names live until the interpreter exits, so what
such a script prints at exit shows here too (the page's test fails on
"Exception ignored"). Each shell block runs in `bash -e -o pipefail`, in the
same directory (a temporary one) and environment. The few blocks that cannot run as they are say so on the line just above them:

    <!-- docs-test: skip (why: e.g. needs Dataflow) -->
    <!-- docs-test: background -->       a server the page's later blocks use:
                                          started, waited for until it prints
                                          its first line, stopped with SIGINT
                                          (Ctrl-C) after them, or before the
                                          next background block starts (as a
                                          reader stops one server to try the
                                          next on the same port); must exit 0
    <!-- docs-test: requires MODULE -->  skipped when MODULE is not installed
                                          (apache_beam: the `beam` extra)

Port 8000 in a block is replaced by a free port, the same one throughout the
page, so that pages can run beside other servers.

    python -m tests.docs_blocks PAGE.md PORT    runs one page (what the tests do)
"""

import atexit
import dataclasses
import importlib.util
import os
import pathlib
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import types
from typing import List, Optional

from tests import warm_process

ROOT = pathlib.Path(__file__).resolve().parent.parent
PAGES = [ROOT / 'README.md'] + sorted((ROOT / 'docs').glob('*.md'))
LANGUAGES = ('python', 'sh', 'text')
DOCS_PORT = '8000'
STOP_GUARD_S = 60

_FENCE = re.compile(r'^```(\S*)\s*$')
_DIRECTIVE = re.compile(r'^<!-- docs-test: (.*?) -->$')
_KINDS = re.compile(
    r'^(skip \(\S.*\)|background|requires [A-Za-z_][A-Za-z0-9_.]*)$')


class DocsBlockError(ValueError):
  """A page whose blocks break the convention above."""


@dataclasses.dataclass(frozen=True)
class Block:
  page: str
  line: int             # 1-based line of the opening fence
  language: str
  code: str
  directive: Optional[str]  # 'skip (...)', 'background', 'requires M'

  @property
  def where(self) -> str:
    return f'{self.page}:{self.line}'

  @property
  def runs(self) -> bool:
    if self.language == 'text' or (self.directive or '').startswith('skip'):
      return False
    if (self.directive or '').startswith('requires '):
      return importlib.util.find_spec(self.directive.split()[1]) is not None
    return True


def blocks(page: pathlib.Path) -> List[Block]:
  """Every fenced block of `page`, checked against the convention."""
  name = str(page.relative_to(ROOT) if page.is_relative_to(ROOT) else page)
  lines = page.read_text().split('\n')
  found, i = [], 0
  while i < len(lines):
    if lines[i].lstrip().startswith('```') and not lines[i].startswith('```'):
      raise DocsBlockError(f'{name}:{i + 1}: an indented fence; fences start '
                           f'at the line start here.')
    opening = _FENCE.match(lines[i])
    if not opening:
      i += 1
      continue
    language = opening.group(1)
    if language not in LANGUAGES:
      raise DocsBlockError(
          f'{name}:{i + 1}: a block of language {language!r}; expected one '
          f'of {", ".join(LANGUAGES)} (text for output and pictures).')
    end = i + 1
    while end < len(lines) and lines[end] != '```':
      end += 1
    if end == len(lines):
      raise DocsBlockError(f'{name}:{i + 1}: a block that is never closed.')
    found.append(Block(name, i + 1, language, '\n'.join(lines[i + 1:end]) + '\n',
                       _directive(name, lines, i)))
    i = end + 1
  return found


def python_block(page: str, heading: str) -> str:
  """The first ```python block after the line `heading` of `page`."""
  path = ROOT / page
  start = path.read_text().split('\n').index(heading) + 1
  return next(b.code for b in blocks(path)
              if b.language == 'python' and b.line > start)


def _directive(name: str, lines: List[str], fence: int) -> Optional[str]:
  above = _DIRECTIVE.match(lines[fence - 1]) if fence else None
  if not above:
    return None
  kind = above.group(1)
  if not _KINDS.match(kind):
    raise DocsBlockError(
        f'{name}:{fence}: docs-test directive {kind!r}; expected '
        f"'skip (why)', 'background' or 'requires MODULE'.")
  return kind


def environment(port: str) -> dict:
  """The page's environment: this repository's package and interpreter."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3', DOCS_PORT=port)
  env['PYTHONPATH'] = os.pathsep.join(
      filter(None, [str(ROOT), env.get('PYTHONPATH')]))
  env['PATH'] = os.pathsep.join(
      [os.path.dirname(sys.executable), env.get('PATH', '')])
  return env


def run_page(page: pathlib.Path, port: str) -> None:
  """Runs the page's blocks in order, in the current directory."""
  os.environ.update(environment(port))
  if os.environ.get(warm_process.ZYGOTE_VARIABLE):
    os.environ['PATH'] = os.pathsep.join([_stand_in(), os.environ['PATH']])
  namespace = script_namespace()
  servers = []
  try:
    for block in blocks(page):
      if not block.runs:
        continue
      code = re.sub(rf'\b{DOCS_PORT}\b', port, block.code)
      print(f'--- {block.where} ({block.language})', file=sys.stderr,
            flush=True)
      if block.language == 'python':
        exec(compile(code, block.where, 'exec'), namespace)  # pylint: disable=exec-used
      elif block.directive == 'background':
        while servers:
          _stop(*servers.pop())
        servers.append(_start(block, code))
      else:
        subprocess.run(['bash', '-e', '-o', 'pipefail', '-c', code],
                       check=True)
  finally:
    while servers:
      _stop(*servers.pop())


def _stand_in() -> str:
  """A directory holding `rlds-reverb` for the page's PATH when the tests'
  zygote runs: the same command, forked from the zygote
  (`warm_process.exec_warm`) instead of a new Python and TensorFlow start
  (~3 s of CPU per command)."""
  directory = tempfile.mkdtemp(prefix='docs-bin-')
  atexit.register(shutil.rmtree, directory, ignore_errors=True)
  warm_process.write_stand_in(os.path.join(directory, 'rlds-reverb'),
                              'rlds_reverb')
  return directory


def script_namespace() -> dict:
  """The globals of a new `__main__` module, kept until the interpreter exits.

  Names a script defines are freed at interpreter teardown, in the order
  Python tears modules down; a dict local to `run_page` would be freed when it
  returns, hiding what a reader's script prints at exit.
  """
  script = types.ModuleType('__main__')
  sys.modules['__main__'] = script
  return vars(script)


def _start(block: Block, code: str):
  """Starts a background block; returns once it printed its first line."""
  log = tempfile.TemporaryFile(mode='w+')
  server = subprocess.Popen(['bash', '-c', code], stdout=subprocess.PIPE,
                            stderr=log, text=True, start_new_session=True)
  first = server.stdout.readline()
  print(first, end='', flush=True)
  if not first:
    server.wait()
    log.seek(0)
    raise DocsBlockError(f'{block.where}: the background block exited '
                         f'({server.returncode}) without a line: {log.read()}')
  return server, log


def _stop(server: subprocess.Popen, log) -> None:
  """Ctrl-C, as the reader stops it; it must exit cleanly."""
  os.killpg(server.pid, signal.SIGINT)
  rest, _ = server.communicate(timeout=STOP_GUARD_S)
  log.seek(0)
  print(rest, end='')
  print(log.read(), end='', file=sys.stderr, flush=True)
  if server.returncode != 0:
    raise DocsBlockError(
        f'a background block exited {server.returncode} at Ctrl-C.')


if __name__ == '__main__':
  try:
    run_page(pathlib.Path(sys.argv[1]).resolve(), sys.argv[2])
  except DocsBlockError as e:
    sys.exit(f'docs-test: {e}')
