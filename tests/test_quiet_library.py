"""What a user's script sees on stderr: its own lines, not the libraries'
(issue 39, item 15).

The script a reader writes from the docs (docs/checkpoints.md): the package
imports TensorFlow (`load`) and TF-Agents with gym
(`create_trajectory_data_spec`), a checkpoint is built and a server loads it
inside `rlds_reverb.quiet_known_lines()`; the script logs through `logging`,
TensorFlow's logger and `print`, and its own `tf.data` pipeline makes
TensorFlow's C++ logger warn. Run as a script is run, in its own interpreter
(what is dropped is printed while TensorFlow loads, and TensorFlow reads its
log level once), once per environment a user may have. Then, in this
process: `lines_dropped` with each kind of stderr, the lines `known` names,
and `--debug`.
"""

import importlib
import io
import os
import subprocess
import sys
import textwrap

import pytest

from rlds_reverb import known_lines
from rlds_reverb._util import quiet
from tests import cli_runs
from tests.library_lines import LIBRARY_LINES
from tests.library_lines import library_lines

HANG_GUARD_S = 300

USER_SCRIPT = textwrap.dedent('''
    import logging
    import os
    import sys

    import rlds_reverb
    from rlds_reverb import specs, tables

    episodes = rlds_reverb.load('bundled:cartpole')
    spec = rlds_reverb.create_trajectory_data_spec(episodes)
    import reverb
    import tensorflow as tf

    logging.warning('own logging line')
    tf.get_logger().warning('own tensorflow logger line')
    print('own stderr line', file=sys.stderr)
    partly_read = iter(tf.data.Dataset.range(3).cache())
    next(partly_read)
    del partly_read  # TensorFlow's C++ logger warns (W) of the cut cache.

    replay = tables.uniform('replay')
    rlds_reverb.build_checkpoint(episodes, 'ckpt', replay)
    with rlds_reverb.quiet_known_lines():
      print('own line inside the block', file=sys.stderr)
      server = reverb.Server(
          [tables.table(replay, specs.table_signature(spec))],
          checkpointer=reverb.checkpointers.DefaultCheckpointer('ckpt'))
    client = reverb.Client(f'localhost:{server.port}')
    print(client.server_info()['replay'].current_size,
          os.environ.get('TF_CPP_MIN_LOG_LEVEL'))
    server.stop()
''')

USER_LINES = ('WARNING:root:own logging line',
              'own tensorflow logger line',
              'own stderr line',
              'own line inside the block')
CUT_CACHE = 'The calling iterator did not fully read the dataset being cached'


NONE = {library: [] for library in LIBRARY_LINES}
ALL = {library: list(parts) for library, parts in LIBRARY_LINES.items()}

# name -> (the user's environment, library lines seen, TensorFlow's own
#          warning seen, what the script prints)
CASES = {
    'no_log_level': ({}, NONE, True, '9868 None\n'),
    # The user's level still rules TensorFlow's later lines: 2 hides its W.
    'users_log_level_2': ({'TF_CPP_MIN_LOG_LEVEL': '2'}, NONE, False,
                          '9868 2\n'),
    # The documented way to see them again.
    'quiet_off': ({'RLDS_REVERB_QUIET': '0'}, ALL, True, '9868 None\n'),
}


def run_script(tmp_path, environment) -> subprocess.CompletedProcess:
  script = tmp_path / 'script.py'
  script.write_text(USER_SCRIPT)
  env = dict(os.environ)
  for name in ('TF_CPP_MIN_LOG_LEVEL', 'RLDS_REVERB_QUIET'):
    env.pop(name, None)
  # TensorFlow turns oneDNN on by itself only on some CPUs (not this AMD
  # EPYC's: no AVX-512), and says so only then: on, its line is there to see.
  env['TF_ENABLE_ONEDNN_OPTS'] = '1'
  env.update(environment)
  return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=HANG_GUARD_S,
                        check=False)


# Slow tier: 'quiet_off' (~6 s a case). The default tier sees the same
# variable at work in tests/test_cli.py's --debug test, which shows
# TensorFlow's start-up lines through it.
@pytest.mark.parametrize('case', [
    pytest.param(case, marks=pytest.mark.slow) if case == 'quiet_off' else case
    for case in CASES])
def test_a_script_sees_its_own_lines_and_not_the_libraries(case, tmp_path):
  environment, seen, cut_cache_seen, printed = CASES[case]
  result = run_script(tmp_path, environment)
  assert (result.returncode, result.stdout) == (0, printed), result.stderr
  assert library_lines(result.stderr) == seen, result.stderr
  assert [line for line in USER_LINES if line not in result.stderr] == []
  assert (CUT_CACHE in result.stderr) == cut_cache_seen, result.stderr
  # Reverb's other lines are not the package's to drop.
  assert 'Started replay server on port' in result.stderr


# In this process: what `lines_dropped` does with each writer's lines.
def dropped_if_marked(line: str) -> bool:
  return line.startswith('known')


def write_native(text: str) -> None:  # As C++ writes: to fd 2.
  os.write(2, text.encode())


def write_python(text: str) -> None:
  sys.stderr.write(text)


# name -> (writes in the block, stderr after it)
DROPPED = {
    'native': ([(write_native, 'known a\nown b\nknown c\n')], 'own b\n'),
    'python': ([(write_python, 'own a\nknown b\n')], 'own a\n'),
    'last line unended': ([(write_native, 'known a\nown b')], 'own b'),
    'nothing kept': ([(write_native, 'known a\n'),
                      (write_python, 'known b\n')], ''),
    'bytes kept as written': ([(write_native, 'own \u00e9\r\nknown\n')],
                              'own \u00e9\r\n'),
}


@pytest.mark.parametrize('name', list(DROPPED))
def test_lines_dropped_writes_every_other_line_after_the_block(name, capfd):
  writes, expected = DROPPED[name]
  with quiet.lines_dropped(dropped_if_marked):
    for write, text in writes:
      write(text)
    assert capfd.readouterr().err == ''  # Held until the block ends.
  assert capfd.readouterr().err == expected


def test_lines_dropped_puts_stderr_back_when_the_block_raises(capfd):
  python_stderr = sys.stderr
  with pytest.raises(KeyError):
    with quiet.lines_dropped(dropped_if_marked):
      write_native('own a\nknown b\n')
      raise KeyError('x')
  assert sys.stderr is python_stderr
  write_native('after\n')
  assert capfd.readouterr().err == 'own a\nafter\n'


def test_lines_dropped_writes_python_lines_back_to_its_own_stream(
    monkeypatch, capfd):
  """A notebook's or pytest's `sys.stderr` is not fd 2: its kept lines go
  back to it, the native ones to fd 2."""
  notebook = io.StringIO()
  monkeypatch.setattr(sys, 'stderr', notebook)
  with quiet.lines_dropped(dropped_if_marked):
    write_python('known a\nown b\n')
    write_native('own c\nknown d\n')
  assert (notebook.getvalue(), capfd.readouterr().err) == ('own b\n', 'own c\n')


def test_lines_dropped_keeps_the_order_of_a_python_stderr_on_fd_2(
    monkeypatch, capfd):
  """A script's `sys.stderr` is fd 2: its lines and C++'s keep their order."""
  with open(2, 'w', buffering=1, closefd=False) as on_fd_2:  # As Python's.
    monkeypatch.setattr(sys, 'stderr', on_fd_2)
    with quiet.lines_dropped(dropped_if_marked):
      write_python('own a\nknown b\n')
      write_native('own c\n')
      write_python('own d\n')
  assert capfd.readouterr().err == 'own a\nown c\nown d\n'


# Lines as printed here (2026-11-28), and lines like them that are not known.
KNOWN = (
    '2026-11-28 08:41:47.640996: E external/local_xla/xla/stream_executor/'
    'cuda/cuda_dnn.cc:9261] Unable to register cuDNN factory: Attempting to '
    'register factory for plugin cuDNN when one has already been registered',
    '2026-11-28 08:41:48.680778: W tensorflow/compiler/tf2tensorrt/utils/'
    'py_utils.cc:38] TF-TRT Warning: Could not find TensorRT',
    'To enable the following instructions: AVX2 AVX512F FMA, in other '
    'operations, rebuild TensorFlow with the appropriate compiler flags.',
    'Please upgrade to Gymnasium, the maintained drop-in replacement of Gym, '
    'or contact the authors of your software and request that they upgrade.',
    '[reverb/cc/platform/tfrecord_checkpointer.cc:447] Still reading '
    'compressed trajectory data. 101 records have been read so far.',
    '[reverb/cc/platform/tfrecord_checkpointer.cc:540] Successfully loaded 1 '
    'tables from ckpt/2026-11-28T08:44:30.220167217+00:00',
)
NOT_KNOWN = (
    '2026-11-28 08:46:02.881832: W tensorflow/core/kernels/data/'
    'cache_dataset_ops.cc:858] The calling iterator did not fully read the '
    'dataset being cached.',
    'Unable to register cuDNN factory',  # A user's own line.
    'Please upgrade to Gymnasium',
    '[reverb/cc/platform/default/server.cc:71] Started replay server on port 1',
    '[reverb/cc/platform/tfrecord_checkpointer.cc:300] Checkpoint loader found '
    'mix of deprecated_items field for table replay',
)


def test_known_lines_are_exactly_the_libraries_own():
  importlib.import_module('gym_notices.notices')  # As gym's import does.
  assert [known_lines.known(line) for line in KNOWN + NOT_KNOWN] == (
      [True] * len(KNOWN) + [False] * len(NOT_KNOWN))


def test_debug_drops_nothing_only_while_its_command_runs(monkeypatch,
                                                         tmp_path):
  """`--debug` shows TensorFlow's start-up lines (tests/test_cli.py) through
  the environment, which its workers inherit; a command run in-process (as
  the tests do) leaves the environment as it found it."""
  monkeypatch.delenv(known_lines.QUIET_VARIABLE, raising=False)
  result = cli_runs.run_cli_here('--debug', 'validate', '--dataset',
                                 tmp_path / 'nowhere')
  assert result.returncode == 2, result.stderr
  assert known_lines.QUIET_VARIABLE not in os.environ
