"""Reverb's server bindings loaded without TensorFlow's Python, pinned: this
fails loudly if dm-reverb changes them.

`rlds_reverb.reverb_native` loads `reverb/libpybind.so` by path and calls
`Server`, `Table`, `RateLimiter`, the selectors, `create_default_checkpointer`
and `Client.ServerInfo`/`Checkpoint`, which Reverb does not promise to keep
(dm-reverb 0.14.0). A fresh process (the bindings cannot be loaded twice
beside `import reverb`) loads a build with them; this process, with
`import reverb`, reads the server and the checkpoint it writes, and compares
them with a `reverb.Server` that loads the same build.
"""

import importlib.metadata
import json
import os
import subprocess
import sys
import textwrap

import reverb

from rlds_reverb import reverb_native
from rlds_reverb.checkpoints import directories
from tests import reverb_tables
from tests.cli_runs import HANG_GUARD_S
from tests.cli_runs import run_cli_here
from tests.serve_command import TABLE
from tests.serve_command import dataset  # pylint: disable=unused-import
from tests.serve_command import signature  # pylint: disable=unused-import

_SERVE = textwrap.dedent('''\
    import json, sys
    from rlds_reverb import reverb_native
    server = reverb_native.LoadedServer(
        [sys.argv[1]], reverb_native.free_port(), sys.argv[2], sys.argv[3])
    sizes = {name: list(size) for name, size in server.sizes().items()}
    print(json.dumps({'port': server.port, 'sizes': sizes,
                      'tensorflow': 'tensorflow' in sys.modules}), flush=True)
    for line in sys.stdin:
      if line.strip() == 'checkpoint':
        print(json.dumps({'checkpoint': server.checkpoint()}), flush=True)
    server.stop()
''')


def test_dm_reverb_is_the_pinned_release():
  assert (importlib.metadata.version('dm-reverb') ==
          reverb_native.REVERB_VERSION)
  reverb_native.check_version()


def _loaded_by_reverb(checkpoint, signature, tmp_path):  # pylint: disable=redefined-outer-name
  server = reverb.Server(
      [reverb_tables.fifo_table(TABLE, signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          os.fspath(tmp_path / 'reverb-root'),
          fallback_checkpoint_path=os.fspath(checkpoint)))
  try:
    max_size = reverb.Client(reverb_tables.address(server)).server_info(
        timeout=10)[TABLE].max_size
    return reverb_tables.as_multiset(
        reverb_tables.drain(server, TABLE)), max_size
  finally:
    server.stop()


def test_a_process_without_tensorflow_loads_a_build_and_checkpoints_it(
    dataset, signature, tmp_path):  # pylint: disable=redefined-outer-name
  """The served items and the checkpoint written are the build's, and the
  process never imported TensorFlow's Python."""
  out = tmp_path / 'built'
  result = run_cli_here('build', '--dataset', dataset, '--out', out,
                        '--table', TABLE, '--sampler', 'fifo')
  assert result.returncode == 0, result.stderr
  seed = out / directories.find(out).newest
  want, max_size = _loaded_by_reverb(seed, signature, tmp_path)
  root = tmp_path / 'own'
  process = subprocess.Popen(
      [sys.executable, '-c', _SERVE, TABLE, os.fspath(root), os.fspath(seed)],
      stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
  try:
    ready = json.loads(process.stdout.readline())
    assert ready['tensorflow'] is False
    assert ready['sizes'] == {TABLE: [len(want), max_size]}
    process.stdin.write('checkpoint\n')
    process.stdin.flush()
    written = json.loads(process.stdout.readline())['checkpoint']
    assert os.path.dirname(written) == os.fspath(root)
    served = reverb_tables.as_multiset(
        reverb_tables.drain(f'localhost:{ready["port"]}', TABLE))
  finally:
    process.stdin.close()
    assert process.wait(timeout=HANG_GUARD_S) == 0
  assert served == want
  assert _loaded_by_reverb(written, signature, tmp_path / 'again') == (
      want, max_size)
