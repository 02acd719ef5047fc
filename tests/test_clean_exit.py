"""A user's script ends without "Exception ignored" tracebacks.

The script a reader writes from the docs: module-level names (a
`reverb.Server`, the loaded episodes, a TF-Agents dataset sampling from the
server), after `import tensorflow_datasets`. Run as a script is run, in its
own interpreter, since what is checked happens at that interpreter's exit
(`rlds_reverb/_util/clean_exit.py` says why it happens and how it is avoided).
"""

import os
import subprocess
import sys
import textwrap

import pytest

HANG_GUARD_S = 120

# Reverb's and TFDS's imports alone, as in a script that does not import us.
WITHOUT_RLDS_REVERB = textwrap.dedent('''
    import reverb
    import tensorflow_datasets

    server = reverb.Server([reverb.Table.queue('replay', 10)])
    print('serving')
''')

# The docs' pattern: served, pushed, sampled, all at module level.
USER_SCRIPT = textwrap.dedent('''
    import reverb
    import tensorflow_datasets
    import rlds_reverb
    from tf_agents.replay_buffers import reverb_replay_buffer

    episodes = rlds_reverb.load('bundled:cartpole')
    spec = rlds_reverb.create_trajectory_data_spec(episodes)
    server = reverb.Server([reverb.Table.queue(
        'replay', 100_000, signature=rlds_reverb.specs.table_signature(spec))])
    address = f'localhost:{server.port}'
    result = rlds_reverb.push(episodes, address, 'replay')
    replay = reverb_replay_buffer.ReverbReplayBuffer(
        spec, 'replay', sequence_length=2, server_address=address)
    dataset = replay.as_dataset(sample_batch_size=4, num_steps=2)
    experience, _ = next(iter(dataset))
    print(result.items, experience.observation.shape)
''')


def run_script(code, tmp_path):
  script = tmp_path / 'script.py'
  script.write_text(code)
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='3')
  return subprocess.run([sys.executable, str(script)], cwd=tmp_path, env=env,
                        capture_output=True, text=True, timeout=HANG_GUARD_S,
                        check=False)


# Slow tier: two TensorFlow start-ups and a push (~20 s).
@pytest.mark.slow
def test_a_script_serving_and_sampling_at_module_level_ends_cleanly(tmp_path):
  result = run_script(USER_SCRIPT, tmp_path)
  assert result.returncode == 0, result.stderr
  assert result.stdout == '9868 (4, 2, 4)\n'  # The bundled set's items.
  assert 'Exception ignored' not in result.stderr, result.stderr
  # The server still stops at exit, in Reverb's own __del__.
  assert 'Shutting down replay server' in result.stderr

  # What the same script prints without our exit hook (etils, imported by
  # TFDS, holds `__main__`). If this starts to pass, Reverb or etils changed:
  # `rlds_reverb._util.clean_exit` may no longer be needed.
  result = run_script(WITHOUT_RLDS_REVERB, tmp_path)
  assert result.stdout == 'serving\n'
  assert ('Exception ignored in: <function Server.__del__' in result.stderr
          ), result.stderr


# A watchdog asking a server that accepts connections and never answers:
# its server_info holds the thread for its whole deadline (1 s).
WATCHDOG_IN_A_CALL = textwrap.dedent('''
    import socket
    import threading
    import time
    from rlds_reverb.mixture import at_exit
    from rlds_reverb.mixture import watchdog

    silent = socket.socket()
    silent.bind(('localhost', 0))
    silent.listen(8)
    place = watchdog.Place(name='source 0', table='replay', removes=False,
                           address=f'localhost:{silent.getsockname()[1]}')
    watchdog.Watchdog([place], timeout=60, demand=watchdog.Demand(1))
    time.sleep(0.3)  # Its first server_info under way.
    start = time.monotonic()
    at_exit.settle()  # What the exit runs (atexit).
    alive = [thread.name for thread in threading.enumerate()
             if thread.name == 'rlds_reverb mixture watchdog']
    print(alive, f'after {time.monotonic() - start:.1f} s')
''')


def test_the_exit_waits_for_a_watchdog_inside_a_server_call():
  """A mixture's watchdog thread inside a server_info when the process
  ends crashed it ('terminate called without an active exception',
  SIGABRT: examples/mix_datasets.py, once, in the slow tier of
  2026-12-07): the exit now waits until the thread has returned."""
  from tests import warm_process  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  process = warm_process.WarmPopen(
      [sys.executable, '-c', WATCHDOG_IN_A_CALL], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  stdout, stderr = process.communicate(timeout=HANG_GUARD_S)
  assert process.returncode == 0, stderr
  assert stdout.startswith('[] '), stdout  # No watchdog thread left.
  assert 'terminate called' not in stderr


# A call from tf.data into Python under way when the process ends (a
# mixture's `choices`), ending 0.5 s later on its thread.
CALL_UNDER_WAY = textwrap.dedent('''
    import threading
    import time
    from rlds_reverb.mixture import at_exit

    ended = []
    entered = threading.Event()

    def call():
      with at_exit.call():
        entered.set()
        time.sleep(0.5)
        ended.append(True)

    threading.Thread(target=call, daemon=True).start()
    entered.wait()
    at_exit.settle()  # What the exit runs (atexit).
    print(ended)
''')


def test_the_exit_waits_for_a_call_from_tf_data_under_way():
  """The exit settles only once no call from tf.data into Python is under
  way (the hang of a mixture's iterator destroyed after Python stopped
  serving threads: rlds_reverb/mixture/at_exit.py)."""
  from tests import warm_process  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  process = warm_process.WarmPopen(
      [sys.executable, '-c', CALL_UNDER_WAY], stdout=subprocess.PIPE,
      stderr=subprocess.PIPE, text=True)
  stdout, stderr = process.communicate(timeout=HANG_GUARD_S)
  assert process.returncode == 0, stderr
  assert stdout == '[True]\n'
