"""`rlds-reverb serve` with several tables: options, limits, memory estimate.

One `serve` subprocess with four tables, each configured otherwise, checked
through `server_info()` of a `reverb.Client`; pushes into it; the options'
checks (exit 2, naming the table and the option) run in-process, as they do
before TensorFlow is imported.
"""

import signal

import pytest
import reverb
import tensorflow as tf

import rlds_reverb
from rlds_reverb import cli
from rlds_reverb import tables
from rlds_reverb._util import wording
from rlds_reverb.cli import serve_checks
from rlds_reverb.cli import tables as table_flags
from rlds_reverb.write import capacity
from rlds_reverb.write import memory
from tests import reverb_tables
from tests import rlds_data
from tests.cli_data import CLEAN
from tests.cli_runs import error_lines
from tests.cli_runs import run_cli
from tests.serve_command import Serve
from tests.serve_command import dataset  # pylint: disable=unused-import
from tests.serve_command import pushed_items  # pylint: disable=unused-import
from tests.serve_command import signature  # pylint: disable=unused-import

# Before any --table: every table's, unless it sets its own (the exponent
# only applies to the prioritized one).
TABLE_ARGS = (
    '--max-size', '60000', '--priority-exponent', '0.6',
    '--table', 'uniform',
    '--table', 'prioritized', '--sampler', 'prioritized', '--remover', 'lifo',
    '--max-times-sampled', '2', '--min-size', '3',
    '--table', 'fifo', '--sampler', 'fifo', '--remover', 'uniform',
    '--max-size', '50',
    '--table', 'ratio', '--sampler', 'lifo', '--samples-per-insert', '2',
    '--error-buffer', '6', '--max-size', '100',
)
NAMES = ('uniform', 'prioritized', 'fifo', 'ratio')
# table: (sampler, remover, max_size, max_times_sampled, rate limiter)
EXPECTED = {
    'uniform': ('uniform', 'fifo', 60000, 0, 'MinSize(1)'),
    'prioritized': ('prioritized(0.6)', 'lifo', 60000, 2, 'MinSize(3)'),
    'fifo': ('fifo', 'uniform', 50, 0, 'MinSize(1)'),
    'ratio': ('lifo', 'fifo', 100, 0,
              'SampleToInsertRatio(samples_per_insert=2, min_size_to_sample=1, '
              'min_diff=-4, max_diff=8)'),
}


@pytest.fixture(scope='module')
def served(dataset, tmp_path_factory):  # pylint: disable=redefined-outer-name
  stderr_path = tmp_path_factory.mktemp('serve') / 'serve.err'
  with Serve(dataset, stderr_path, table_args=TABLE_ARGS,
             names=NAMES) as server:
    yield server


def selector_text(options) -> str:
  """'fifo', or 'prioritized(0.6)': a KeyDistributionOptions proto."""
  name = options.WhichOneof('distribution')
  if name == 'prioritized':
    return f'prioritized({options.prioritized.priority_exponent:g})'
  return name


def test_each_table_is_served_as_configured(served, signature):  # pylint: disable=redefined-outer-name
  infos = reverb.Client(served.address).server_info(timeout=30)
  assert sorted(infos) == sorted(NAMES)
  got = {name: (selector_text(info.sampler_options),
                selector_text(info.remover_options), info.max_size,
                info.max_times_sampled, capacity.limiter_text(info))
         for name, info in infos.items()}
  assert got == EXPECTED
  for name, info in infos.items():
    assert info.signature == signature, name


def test_memory_estimate_per_table(served):
  per_item = memory.item_memory(
      rlds_reverb.create_trajectory_data_spec(rlds_data.as_rlds(CLEAN)))
  # CLEAN's 6 columns of 36 B a step, all in chunks of 32.
  assert per_item == memory.ItemMemory(1600 + 6 * 915 / 32 + 36)
  lines = [line for line in served.stderr().splitlines()
           if 'memory estimate' in line]
  assert lines == [
      "rlds-reverb: memory estimate: table 'uniform': about 1.8 KB per item; "
      'max_size 60,000 -> about 108 MB',
      "rlds-reverb: memory estimate: table 'prioritized': about 1.8 KB per "
      'item; max_size 60,000 -> about 108 MB',
      "rlds-reverb: memory estimate: table 'fifo': about 1.8 KB per item; "
      'max_size 50 -> about 90 KB',
      "rlds-reverb: memory estimate: table 'ratio': about 1.8 KB per item; "
      'max_size 100 -> about 181 KB',
  ]


def test_push_into_one_table_and_sample_it_back(served, pushed_items):  # pylint: disable=redefined-outer-name
  """Into 'fifo' only; `drain` samples it empty (its MinSize is 1)."""
  result = rlds_reverb.push(rlds_data.as_rlds(CLEAN), served.address, 'fifo')
  assert result.items == 6
  sizes = {name: info.current_size for name, info in
           reverb.Client(served.address).server_info(timeout=30).items()}
  assert sizes == {'uniform': 0, 'prioritized': 0, 'fifo': 6, 'ratio': 0}
  assert (reverb_tables.as_multiset(reverb_tables.drain(served.address, 'fifo'))
          == reverb_tables.as_multiset(pushed_items))


# Slow tier (7 s): the same warning and timeout as test_faults.py's
# test_blocking_rate_limiter_warns_then_fails_after_timeout[ratio], here on a
# table `serve --samples-per-insert` made (whose limiter
# test_each_table_is_served_as_configured reads back).
@pytest.mark.slow
def test_push_into_a_ratio_table_warns_then_fails_after_its_timeout(
    served, dataset):  # pylint: disable=redefined-outer-name
  """SampleToInsertRatio blocks inserts on the server, with no timeout."""
  result = run_cli('push', '--dataset', dataset, '--server', served.address,
                   '--table', 'ratio', '--timeout', '2')
  assert result.returncode == 1
  limiter = EXPECTED['ratio'][-1]
  assert (f"rlds-reverb: warning: table 'ratio' has rate limiter {limiter}, "
          'which blocks inserts after 4 more items until something samples; '
          'this push writes 6, and fails after the timeout if nothing '
          'samples.' in result.stderr)
  [line] = error_lines(result.stderr)
  assert (f"did not confirm items for table 'ratio' within 2 s: the server "
          'is down or unreachable, or a rate limiter there blocks inserts.'
          in line), line
  assert f"table 'ratio' ({limiter})" in line
  client = reverb.Client(served.address)
  assert reverb_tables.table_size(client, 'ratio') == 4


def test_memory_estimate_against_the_servers_resident_memory(served):
  """The estimate within a wide band of what the server's RSS grows by."""
  episodes = [rlds_data.flat_episode(1000, seed) for seed in range(30)]
  before = _rss_bytes(served.process.pid)
  result = rlds_reverb.push(rlds_data.as_rlds(episodes), served.address,
                            'uniform')
  grown = _rss_bytes(served.process.pid) - before
  assert result.items == 30 * 999
  estimate = memory.item_memory(
      rlds_reverb.create_trajectory_data_spec(rlds_data.as_rlds(episodes)))
  ratio = grown / result.items / estimate.bytes_per_item
  assert 0.5 < ratio < 2, (grown / result.items, estimate)


def _rss_bytes(pid: int) -> int:
  with open(f'/proc/{pid}/status') as status:
    for line in status:
      if line.startswith('VmRSS:'):
        return int(line.split()[1]) * 1024
  raise AssertionError(f'no VmRSS in /proc/{pid}/status')


def test_stop_names_what_each_table_discards(served):
  # Its own push: under xdist this test may be the first on a new server.
  rlds_reverb.push(rlds_data.as_rlds(CLEAN), served.address, 'uniform')
  infos = reverb.Client(served.address).server_info(timeout=30)
  sizes = {name: infos[name].current_size for name in NAMES}
  assert sizes['uniform'] > 1 and not sizes['prioritized'], sizes
  # Tables left empty have nothing to discard and go unnamed.
  held = ', '.join(f'{size:,} items of table {name!r}'
                   for name, size in sizes.items() if size)
  assert served.stop(signal.SIGTERM) == 0, served.stderr()
  assert served.stderr().splitlines()[-1] == (
      f'rlds-reverb: stopped without --checkpoint-dir: the {held} are '
      'discarded (serve --checkpoint-dir DIR writes a checkpoint at stop and '
      'reloads it)')


# --- The options, read and checked before anything starts. -----------------

def parse(*table_args):
  return table_flags.table_options(cli.build_parser().parse_args(
      ['serve', '--dataset', 'unused', *table_args]))


def test_no_table_serves_replay_with_the_defaults():
  assert parse() == [tables.TableOptions('replay')]
  assert parse('--table', 'replay') == [tables.TableOptions('replay')]
  [options] = parse('--sampler', 'fifo', '--table', 'replay')  # As before.
  assert options == tables.TableOptions('replay', sampler='fifo')
  assert (options.max_size, options.remover, options.min_size,
          options.samples_per_insert) == (1_000_000, 'fifo', 1, None)


def test_options_before_any_table_are_defaults_a_table_overrides():
  assert parse('--max-size', '10', '--samples-per-insert', '2',
               '--error-buffer', '8', '--priority-exponent', '0.5',
               '--table', 'a', '--table', 'b', '--max-size', '20',
               '--sampler', 'prioritized') == [
                   tables.TableOptions('a', max_size=10, samples_per_insert=2,
                                       error_buffer=8),
                   tables.TableOptions('b', max_size=20, samples_per_insert=2,
                                       error_buffer=8, sampler='prioritized',
                                       priority_exponent=0.5)]


def test_the_library_builds_what_the_options_say():
  options = parse('--table', 'a', '--sampler', 'prioritized', '--remover',
                  'prioritized', '--samples-per-insert', '250',
                  '--min-size', '7', '--max-times-sampled', '1')[0]
  assert options.exponent == tables.PRIORITY_EXPONENT
  assert options.buffer == 250  # Reverb's least, more than the default 100.
  server = reverb.Server([tables.table(options)])
  try:
    info = reverb.Client(f'localhost:{server.port}').server_info(30)['a']
  finally:
    server.stop()
  assert (selector_text(info.sampler_options),
          selector_text(info.remover_options), info.max_times_sampled,
          capacity.limiter_text(info)) == (
              'prioritized(0.8)', 'prioritized(0.8)', 1,
              'SampleToInsertRatio(samples_per_insert=250, '
              'min_size_to_sample=7, min_diff=1500, max_diff=2000)')


ARGUMENT = 'rlds-reverb serve: error: argument'
USAGE_ERRORS = {
    'duplicate_table': (
        ['--table', 'a', '--table', 'a'],
        f"{ARGUMENT} --table: table 'a' is given twice: table names must "
        'differ'),
    'empty_table_name': (
        ['--table', ''], f'{ARGUMENT} --table: a table name must not be empty'),
    'unknown_sampler': (
        ['--table', 'a', '--sampler', 'random'],
        f"{ARGUMENT} --sampler: table 'a': must be one of uniform, "
        "prioritized, fifo, lifo, got 'random'"),
    'unknown_remover': (
        ['--table', 'a', '--remover', 'oldest'],
        f"{ARGUMENT} --remover: table 'a': must be one of uniform, "
        "prioritized, fifo, lifo, got 'oldest'"),
    'negative_max_size': (
        ['--table', 'a', '--max-size', '-5'],
        f"{ARGUMENT} --max-size: table 'a': must be an integer from 1 to "
        "2147483647, got '-5'"),
    'max_size_beyond_reverbs_32_bits': (
        ['--table', 'a', '--max-size', '2147483648'],
        f"{ARGUMENT} --max-size: table 'a': must be an integer from 1 to "
        "2147483647, got '2147483648'"),
    'zero_max_size_for_every_table': (
        ['--max-size', '0', '--table', 'a'],
        f"{ARGUMENT} --max-size: must be an integer from 1 to 2147483647, got "
        "'0'"),
    'negative_max_times_sampled': (
        ['--table', 'a', '--max-times-sampled', '-1'],
        f"{ARGUMENT} --max-times-sampled: table 'a': must be an integer from 0 "
        "to 2147483647, got '-1'"),
    'zero_min_size': (
        ['--table', 'a', '--min-size', '0'],
        f"{ARGUMENT} --min-size: table 'a': must be an integer from 1 to "
        "2147483647, got '0'"),
    'min_size_not_a_number': (
        ['--table', 'a', '--min-size', 'ten'],
        f"{ARGUMENT} --min-size: table 'a': must be an integer from 1 to "
        "2147483647, got 'ten'"),
    'zero_ratio': (
        ['--table', 'a', '--samples-per-insert', '0'],
        f"{ARGUMENT} --samples-per-insert: table 'a': must be a finite number "
        "> 0, got '0'"),
    'nan_ratio': (
        ['--table', 'a', '--samples-per-insert', 'nan'],
        f"{ARGUMENT} --samples-per-insert: table 'a': must be a finite number "
        "> 0, got 'nan'"),
    'negative_error_buffer': (
        ['--table', 'a', '--samples-per-insert', '1', '--error-buffer', '-1'],
        f"{ARGUMENT} --error-buffer: table 'a': must be a finite number > 0, "
        "got '-1'"),
    'negative_exponent': (
        ['--table', 'a', '--sampler', 'prioritized', '--priority-exponent',
         '-1'],
        f"{ARGUMENT} --priority-exponent: table 'a': must be a finite number "
        ">= 0, got '-1'"),
    'option_twice_for_a_table': (
        ['--table', 'a', '--sampler', 'fifo', '--table', 'b', '--sampler',
         'fifo', '--sampler', 'lifo'],
        f"{ARGUMENT} --sampler: table 'b': given twice"),
    'option_twice_before_any_table': (
        ['--max-size', '5', '--max-size', '6'],
        f'{ARGUMENT} --max-size: given twice before any --table (where it '
        'applies to every table)'),
    'error_buffer_without_ratio': (
        ['--table', 'a', '--table', 'b', '--error-buffer', '5'],
        "rlds-reverb: error: Table 'b': --error-buffer is for the "
        'SampleToInsertRatio rate limiter: give --samples-per-insert too'),
    'exponent_without_prioritized': (
        ['--table', 'a', '--sampler', 'fifo', '--priority-exponent', '0.5'],
        "rlds-reverb: error: Table 'a': --priority-exponent is for a "
        'prioritized sampler or remover, and this table has --sampler fifo '
        '--remover fifo'),
    'min_size_above_max_size': (
        ['--table', 'a', '--table', 'b', '--max-size', '10', '--min-size',
         '11'],
        "rlds-reverb: error: Table 'b': --min-size 11 is more than --max-size "
        '10: the table never holds enough items to sample'),
    'error_buffer_below_ratio': (
        ['--table', 'a', '--samples-per-insert', '8', '--error-buffer', '4'],
        "rlds-reverb: error: Table 'a': --error-buffer 4 is less than max(1, "
        '--samples-per-insert 8): SampleToInsertRatio would block both '
        'inserts and samples'),
}


@pytest.mark.parametrize('case', USAGE_ERRORS)
def test_usage_errors_name_the_table_and_the_option(case, capsys):
  args, expected = USAGE_ERRORS[case]
  try:
    code = cli.main(['serve', '--dataset', 'unused', *args])
  except SystemExit as exited:  # argparse's own errors.
    code = exited.code
  captured = capsys.readouterr()
  assert code == 2
  assert captured.out == ''
  assert captured.err.splitlines()[-1] == expected


# --- The memory model, by hand. ------------------------------------------------

F32 = tf.TensorSpec([], tf.float32)
MEMORY_CASES = {
    # name: (row spec, stride, tables, bytes per item, unsized columns)
    'vector_in_chunks_of_32': (
        {'obs': tf.TensorSpec([17], tf.float32), 'r': F32}, 1, 1,
        1600 + (68 + 915 / 32) + (4 + 915 / 32), ()),
    'frames_in_chunks_of_2': (
        {'pixels': tf.TensorSpec([72, 96, 3], tf.uint8), 'r': F32}, 1, 1,
        1600 + (20736 + 915 / 2) + (4 + 915 / 32), ()),
    'embedding_in_chunks_of_4': (
        {'e': tf.TensorSpec([512], tf.float32)}, 1, 1, 1600 + 2048 + 915 / 4,
        ()),
    'stride_2_adds_two_rows': (
        {'r': F32}, 2, 1, 1600 + 2 * (4 + 915 / 32), ()),
    'twenty_tables_chunks_of_1': (
        {'r': F32}, 1, 20, 1600 + 4 + 915, ()),
    'strings_and_open_shapes_unsized': (
        {'img': tf.TensorSpec([None, None, 3], tf.uint8), 'r': F32,
         'text': tf.TensorSpec([], tf.string)}, 1, 1,
        1600 + 3 * 915 / 32 + 4, ('img', 'text')),
}


def test_measured_bytes_size_what_the_spec_cannot():
  """Encoded frames (strings): counted at their measured bytes per row."""
  spec = {'img': tf.TensorSpec([], tf.string), 'r': F32}
  got = memory.item_memory(spec, measured={'img': 1000.0})
  assert got.bytes_per_item == pytest.approx(
      1600 + (1000 + 915 / 8) + (4 + 915 / 32))
  assert got.unsized == ()


@pytest.mark.parametrize('case', MEMORY_CASES)
def test_item_memory(case):
  spec, stride, num_tables, per_item, unsized = MEMORY_CASES[case]
  got = memory.item_memory(spec, stride_length=stride, num_tables=num_tables)
  assert got.bytes_per_item == pytest.approx(per_item)
  assert got.unsized == unsized


def test_memory_lines_of_unbounded_and_unsized_tables():
  bounded = reverb_tables.fifo_table('bounded', max_size=1000)
  unbounded = reverb_tables.fifo_table('unbounded', max_size=tables.LARGEST)
  server = reverb.Server([bounded, unbounded])
  try:
    infos = reverb.Client(f'localhost:{server.port}').server_info(30)
  finally:
    server.stop()
  row = {'pixels': tf.TensorSpec([72, 96, 3], tf.uint8),
         'text': tf.TensorSpec([], tf.string)}
  per_item = 1600 + 20736 + 915 / 2 + 915 / 32
  in_order = {name: infos[name] for name in ('bounded', 'unbounded')}
  assert serve_checks.memory_lines(row, in_order) == [
      "memory estimate: table 'bounded': about 23 KB per item; max_size "
      f'1,000 -> about {wording.size(per_item * 1000)}',
      "memory estimate: table 'unbounded': about 23 KB per item; max_size "
      f'2,147,483,647 (unbounded) -> about 23 GB per million items',
      "memory estimate: not counting the data of 'text' (strings or shapes "
      'the spec leaves open: their size is not known before a push)',
  ]
  assert wording.size(per_item * 1000) == '23 MB'
