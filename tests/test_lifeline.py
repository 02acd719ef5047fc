"""A worker ends when its parent dies (`_util.lifeline`): a real parent
process, killed with SIGKILL, and its spawned child, watched until gone.

Each way the child is tied (the kernel's parent-death signal, the portable
thread on the parent's sentinel, and the check for a parent that died
before the child was tied) is a case; multiprocessing's resource tracker,
which the parent started, must be gone with them. The pools of
`rlds_reverb.parallel` killed the same way: tests/test_shards.py and
tests/test_build_servers.py.
"""

import select
import subprocess
import sys

import pytest

from tests import process_tree

HANG_GUARD_S = 120

pytestmark = pytest.mark.skipif(not sys.platform.startswith('linux'),
                                reason='reads /proc')


@pytest.mark.parametrize('how', ['end_with_parent', 'watch_parent', 'late'])
def test_the_child_ends_when_its_parent_is_killed(how):
  parent = subprocess.Popen(
      [sys.executable, '-m', 'tests.lifeline_child', how],
      stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
  started = select.select([parent.stdout], [], [], HANG_GUARD_S)[0]
  assert started and parent.stdout.readline().startswith('child '), (
      parent.poll(), started)
  procs = process_tree.children(parent.pid)
  assert sorted('resource_tracker' in proc.cmd for proc in procs) == [
      False, True], procs  # The child and multiprocessing's tracker.

  stdout, stderr, left = process_tree.kill_parent(parent, procs,
                                                 HANG_GUARD_S)
  assert left == [], 'still running after their parent was killed'
  assert 'survived' not in stdout, (stdout, stderr)
