"""A push into a table that already holds items: said once, never refused.

Two identical pushes leave every item twice, and Reverb says nothing; seeding
several datasets into one table is legitimate. So every push says, before
writing, what a table holds that is not its own and what it adds: a
`TableNotEmptyWarning` from Python, one line on the command line, once per
table however many workers write into it (`test_shards.py`'s
test_workers_push_every_shard_into_one_table checks that, in the run of two
workers it makes anyway). Items that earlier runs of the same push confirmed
(a --resume rerun) are expected, not warned of (`test_faults.py`'s Ctrl-C
tests rerun with --resume and check that).
"""

import warnings

import pytest
import reverb

import rlds_reverb
from rlds_reverb import held as held_lib
from rlds_reverb import specs
from rlds_reverb._util import wording
from tests import reverb_tables
from tests import rlds_data
from tests.cli_data import write_tfds
from tests.cli_runs import run_cli_here
from tests.server_process import ServerHere
from tests import warned as warned_lib

# 4 episodes, 3 + 5 + 4 + 6 steps: 14 two-step items.
EPISODES = [rlds_data.flat_episode(n, seed=500 + n) for n in (3, 5, 4, 6)]
ITEMS = 14


def _held_line(table: str, holds: int, adds: int) -> str:
  return (f'rlds-reverb: warning: table {table!r} already holds '
          f'{wording.count(holds, "item")}; this push adds '
          f'{wording.count(adds, "more", "more")}')


def _held_lines(stderr: str):
  return [line for line in stderr.splitlines() if 'already holds' in line]


HELD_CASES = {
    # name: (Held, address, the warning or None)
    'empty': (held_lib.Held('r', 0, 0, adds=5), None, None),
    'other_items': (held_lib.Held('r', 9868, 9868, adds=9868), None,
                    f"table 'r' already holds {wording.count(9868, 'item')}; "
                    f"this push adds {wording.count(9868, 'more', 'more')}"),
    'adds_unknown': (held_lib.Held('r', 3, 3), 'h:1',
                     "table 'r' at h:1 already holds 3 items; this push "
                     'adds to them'),
    'only_its_own': (held_lib.Held('r', 40, 40, ours=40, adds=10), None,
                     None),
    'its_own_and_others': (
        held_lib.Held('r', 46, 46, ours=40, adds=10), None,
        "table 'r' already holds 46 items: 40 items confirmed by earlier "
        'runs of this push and 6 others; this push adds 10 more'),
    'some_removed': (held_lib.Held('r', 30, 90, ours=40, adds=10), None,
                     None),
    'adds_nothing': (held_lib.Held('r', 5, 5, adds=0), None, None),
}


@pytest.mark.parametrize('held, address, text', HELD_CASES.values(),
                         ids=HELD_CASES.keys())
def test_warning_text(held, address, text):
  assert held_lib.warning_text(held, address) == text


def test_earliest_look_is_the_table_before_any_writer_wrote():
  """Each worker looks before it writes; the look with the fewest inserts
  came before every write. What they add, and their own earlier items, sum."""
  looks = [held_lib.Held('r', 25, 30, ours=2, adds=7),
           held_lib.Held('r', 20, 20, ours=3, adds=8)]
  assert held_lib.earliest(looks) == held_lib.Held('r', 20, 20, ours=5,
                                                   adds=15)
  unknown = [held_lib.Held('r', 20, 20, adds=None), looks[0]]
  assert held_lib.earliest(unknown).adds is None


@pytest.fixture(scope='module')
def dataset_dir(tmp_path_factory):
  return write_tfds(tmp_path_factory.mktemp('tfds'), 'held_rlds', EPISODES)


def test_a_second_identical_push_warns_and_adds(dataset_dir):
  """The issue's case (two identical pushes), with `serve`'s tables: both
  pushes exit 0; the second says what is there and what it adds, for the
  table that holds items only. On 14 items, not the issue's bundled 9,868
  (three pushes of it): the line is `warning_text`'s, whose thousands
  separators test_warning_text[other_items] checks on 9,868."""
  with ServerHere([{'name': name, 'kind': 'fifo', 'signed_for': dataset_dir}
                   for name in ('replay', 'other')]) as server:
    push = ['push', '--dataset', dataset_dir, '--server', server.address]
    first = run_cli_here(*push, '--table', 'replay')
    second = run_cli_here(*push, '--table', 'replay', '--table', 'other')
    assert (first.returncode, second.returncode) == (0, 0), second.stderr
    assert _held_lines(first.stderr) == []
    assert _held_lines(second.stderr) == [_held_line('replay', ITEMS, ITEMS)]
    client = reverb.Client(server.address)
    assert reverb_tables.table_size(client, 'replay') == 2 * ITEMS
    assert reverb_tables.table_size(client, 'other') == ITEMS


@pytest.fixture
def make_tables(make_server, dataset_dir):
  """A server with fifo tables of these max sizes, signed for the data."""
  signature = specs.table_signature(rlds_reverb.create_trajectory_data_spec(
      rlds_reverb.load(dataset_dir)))

  def start(**max_sizes):
    server = make_server([reverb_tables.fifo_table(name, signature, size)
                          for name, size in max_sizes.items()])
    return reverb_tables.address(server)
  return start


def test_push_from_python_warns_and_says_so_in_its_result(make_tables,
                                                          dataset_dir):
  """A table whose max_size evicts gets both warnings: what it holds, and
  that Reverb will remove the oldest."""
  address = make_tables(a=1000, small=20)
  data = rlds_reverb.load(dataset_dir)
  with warnings.catch_warnings():
    warnings.simplefilter('error')  # Into empty tables: no warning at all.
    rlds_reverb.push(data, address, ['a', 'small'])
  with pytest.warns(rlds_reverb.TableNotEmptyWarning) as warned:
    result = rlds_reverb.push(data, address, ['a', 'small'])
  expected = [f"table '{table}' already holds {wording.count(ITEMS, 'item')}; "
              f"this push adds {wording.count(ITEMS, 'more', 'more')}"
              for table in ('a', 'small')]
  held = [str(w.message) for w in warned
          if issubclass(w.category, rlds_reverb.TableNotEmptyWarning)]
  assert held == expected
  assert list(result.warnings[:2]) == expected
  assert any(issubclass(w.category, rlds_reverb.CapacityWarning) and
             "table 'small' holds at most 20 items" in str(w.message)
             for w in warned)
  client = reverb.Client(address)
  assert reverb_tables.table_size(client, 'a') == 2 * ITEMS


def test_a_resumed_push_names_only_the_items_not_its_own(make_tables,
                                                         tmp_path):
  """The resume file says which items are the push's own: a table holding
  only those is not warned of; one holding others too is, saying both."""
  address = make_tables(a=1000)
  broken = [*EPISODES[:2], rlds_data.flat_episode_with(
      4, 9, is_terminal={1: True}), *EPISODES[2:]]
  state = str(tmp_path / 'state.json')

  def push_stopping_at_the_malformed_episode():
    with pytest.raises(Exception, match='Terminal step must be the last'):
      rlds_reverb.push(rlds_data.as_rlds(broken), address, 'a',
                       on_invalid='stop', resume=state)

  push_stopping_at_the_malformed_episode()  # Confirms episodes 0 and 1.
  ours = 2 + 4
  with warnings.catch_warnings():
    warnings.simplefilter('error', rlds_reverb.TableNotEmptyWarning)
    push_stopping_at_the_malformed_episode()  # Only its own items there.
  with pytest.warns(rlds_reverb.TableNotEmptyWarning):  # Not the push's own.
    rlds_reverb.push(rlds_data.as_rlds(EPISODES[:1]), address, 'a')  # 2 more.
  with pytest.warns(rlds_reverb.TableNotEmptyWarning) as warned:
    push_stopping_at_the_malformed_episode()
  assert warned_lib.ours(warned) == [
      f"table 'a' already holds {wording.count(ours + 2, 'item')}: "
      f'{wording.count(ours, "item")} confirmed by earlier runs of this push '
      f'and 2 others; this push adds to them']


def test_nstep_push_warns_too(make_server, dataset_dir):
  """n-step transitions read the data once: what they add is not known."""
  server = make_server([reverb_tables.fifo_table('t')])
  address = reverb_tables.address(server)
  data = rlds_reverb.load(dataset_dir)
  rlds_reverb.push_nstep_transitions(data, address, 't', n=2, discount=0.9)
  held = reverb_tables.table_size(reverb.Client(address), 't')
  with pytest.warns(rlds_reverb.TableNotEmptyWarning) as warned:
    result = rlds_reverb.push_nstep_transitions(data, address, 't', n=2,
                                                discount=0.9)
  expected = (f"table 't' already holds {wording.count(held, 'item')}; "
              f'this push adds to them')
  assert warned_lib.ours(warned) == [expected]
  assert result.warnings == (expected,)
