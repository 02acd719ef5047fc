"""`rlds_reverb.tables`: each recipe as a real server serves it and as its
checkpoint records it, and each bad option as one line.

One server (module scope) holds a table per case, with a checkpointer: its
`server_info()` gives what Reverb made of the options, and the checkpoint it
writes gives the settings `tables.settings` must equal without a server.
"""

import dataclasses
import functools
import math
import os

import pytest
import reverb
import tensorflow as tf
from tensorflow.core.protobuf import struct_pb2

import rlds_reverb
from rlds_reverb import _reading as reading
from rlds_reverb import tables
from rlds_reverb.checkpoints import directories
from rlds_reverb.checkpoints import records
from rlds_reverb.checkpoints import table_settings
from rlds_reverb.write import capacity
from tests import export_data

SIGNATURE = {'observation': tf.TensorSpec([2, 3], tf.float32, 'observation'),
             'reward': tf.TensorSpec([2], tf.float64, 'reward')}
RATIO = ('SampleToInsertRatio(samples_per_insert={}, min_size_to_sample={}, '
         'min_diff={}, max_diff={})')
OFFLINE, ONLINE = tables.offline_online(100)

# name: (options, (sampler, remover, max_size, max_times_sampled, rate
# limiter) as the server reports them)
RECIPES = {
    'uniform': (tables.uniform('uniform', 1000),
                ('uniform', 'fifo', 1000, 0, 'MinSize(1)')),
    'uniform_from_50': (tables.uniform('uniform_from_50', 1000, min_size=50),
                        ('uniform', 'fifo', 1000, 0, 'MinSize(50)')),
    'fifo': (tables.fifo('fifo', 500), ('fifo', 'fifo', 500, 1, 'MinSize(1)')),
    'prioritized': (tables.prioritized('prioritized'),
                    ('prioritized 0.8', 'fifo', 1_000_000, 0, 'MinSize(1)')),
    'prioritized_06': (
        tables.prioritized('prioritized_06', 100, priority_exponent=0.6,
                           min_size=10),
        ('prioritized 0.6', 'fifo', 100, 0, 'MinSize(10)')),
    'ratio': (
        tables.sample_to_insert_ratio('ratio', 4, min_size=1000,
                                      error_buffer=400),
        ('uniform', 'fifo', 1_000_000, 0, RATIO.format(4, 1000, 3600, 4400))),
    # The error buffer defaults to 100, or R if larger (Reverb's least).
    'ratio_of_250': (
        tables.sample_to_insert_ratio('ratio_of_250', 250, min_size=7),
        ('uniform', 'fifo', 1_000_000, 0, RATIO.format(250, 7, 1500, 2000))),
    'offline': (OFFLINE,
                ('uniform', 'fifo', 2**31 - 1, 0, 'MinSize(1)')),
    'online': (ONLINE, ('uniform', 'fifo', 100, 0, 'MinSize(1)')),
    'serve_default': (tables.TableOptions('serve_default'),
                      ('uniform', 'fifo', 1_000_000, 0, 'MinSize(1)')),
    'replaced': (
        dataclasses.replace(tables.prioritized('replaced', 64), remover='lifo',
                            max_times_sampled=3, samples_per_insert=2.0),
        ('prioritized 0.8', 'lifo', 64, 3, RATIO.format(2, 1, -98, 102))),
}


def selector(options) -> str:
  """'fifo', 'prioritized 0.8': a KeyDistributionOptions proto, read."""
  kind = options.WhichOneof('distribution')
  exponent = options.prioritized.priority_exponent
  return f'{kind} {exponent:g}' if kind == 'prioritized' else kind


@pytest.fixture(scope='module')
def served(tmp_path_factory):
  """(server_info of every case's table, settings its checkpoint records)."""
  server = export_data.checkpointed_server(
      [tables.table(options, SIGNATURE) for options, _ in RECIPES.values()],
      tmp_path_factory.mktemp('ckpt'))
  try:
    infos = reverb.Client(f'localhost:{server.port}').server_info(timeout=30)
    path = export_data.checkpoint(server)
  finally:
    server.stop()
  recorded = [table_settings.read_record(record)[0] for record in
              records.read_records(os.path.join(path, directories.TABLES))]
  return infos, {settings.name: settings for settings in recorded}


@pytest.mark.parametrize('name', RECIPES)
def test_each_recipe_is_served_as_it_says(served, name):
  options, expected = RECIPES[name]
  info = served[0][name]
  assert (selector(info.sampler_options), selector(info.remover_options),
          info.max_size, info.max_times_sampled,
          capacity.limiter_text(info)) == expected
  assert info.signature == SIGNATURE
  assert options.removes_sampled_items == reading.removes_items(info)


@pytest.mark.parametrize('name', RECIPES)
def test_settings_are_what_the_servers_checkpoint_records(served, name):
  """What a built checkpoint must hold (issue 33), made without a server,
  equals the server's own record and `TableSettings.of` the Reverb table."""
  options, _ = RECIPES[name]
  settings = tables.settings(options, SIGNATURE)
  assert readable(settings) == readable(served[1][name])
  assert settings == table_settings.TableSettings.of(
      tables.table(options, SIGNATURE))


def readable(settings: table_settings.TableSettings):
  """The settings with the signature as specs: a server writes a dict's
  entries (a proto map) in an order of its own."""
  signature = tf.__internal__.saved_model.decode_proto(
      struct_pb2.StructuredValue.FromString(settings.signature))
  return dataclasses.replace(settings, signature=None), signature


def test_settings_without_a_signature_are_unsigned():
  settings = tables.settings(tables.fifo('f', 10))
  assert settings.signature is None
  assert settings == table_settings.TableSettings.of(
      tables.table(tables.fifo('f', 10)))


def test_mixed_replay_tables_are_the_offline_online_recipe():
  built = rlds_reverb.mixed_replay_tables(SIGNATURE, 100)
  assert [table_settings.TableSettings.of(table) for table in built] == [
      tables.settings(OFFLINE, SIGNATURE), tables.settings(ONLINE, SIGNATURE)]


PREFIX = "Table 'replay': "
# case: (options made by..., the exact message)
BAD_OPTIONS = {
    'zero_max_size': (
        lambda: tables.uniform('replay', 0),
        f'{PREFIX}max_size must be an integer from 1 to 2147483647, got 0.'),
    'max_size_beyond_reverbs_32_bits': (
        lambda: tables.fifo('replay', 2**31),
        f'{PREFIX}max_size must be an integer from 1 to 2147483647, got '
        '2147483648.'),
    'float_max_size': (
        lambda: tables.uniform('replay', 1e6),
        f'{PREFIX}max_size must be an integer from 1 to 2147483647, got '
        '1000000.0.'),
    'bool_min_size': (
        lambda: tables.uniform('replay', min_size=True),
        f'{PREFIX}min_size must be an integer from 1 to 2147483647, got True.'),
    'negative_max_times_sampled': (
        lambda: tables.TableOptions('replay', max_times_sampled=-1),
        f'{PREFIX}max_times_sampled must be an integer from 0 to 2147483647, '
        'got -1.'),
    'unknown_sampler': (
        lambda: tables.TableOptions('replay', sampler='random'),
        f'{PREFIX}sampler must be one of uniform, prioritized, fifo, lifo, got '
        "'random'."),
    'empty_name': (
        lambda: tables.uniform(''),
        "Table '': name must be a non-empty string, got ''."),
    'negative_exponent': (
        lambda: tables.prioritized('replay', priority_exponent=-1),
        f'{PREFIX}priority_exponent must be a finite number >= 0, got -1.'),
    'zero_ratio': (
        lambda: tables.sample_to_insert_ratio('replay', 0),
        f'{PREFIX}samples_per_insert must be a finite number > 0, got 0.'),
    'nan_ratio': (
        lambda: tables.sample_to_insert_ratio('replay', math.nan),
        f'{PREFIX}samples_per_insert must be a finite number > 0, got nan.'),
    'error_buffer_below_ratio': (
        lambda: tables.sample_to_insert_ratio('replay', 8, error_buffer=4),
        f'{PREFIX}error_buffer 4 is less than max(1, samples_per_insert 8): '
        'SampleToInsertRatio would block both inserts and samples.'),
    'exponent_without_prioritized': (
        lambda: tables.TableOptions('replay', sampler='fifo',
                                    priority_exponent=0.5),
        f'{PREFIX}priority_exponent is for a prioritized sampler or remover, '
        'and this table has sampler fifo, remover fifo.'),
    'error_buffer_without_ratio': (
        lambda: dataclasses.replace(tables.uniform('replay'), error_buffer=5),
        f'{PREFIX}error_buffer is for the SampleToInsertRatio rate limiter: '
        'give samples_per_insert too.'),
    'min_size_above_max_size': (
        lambda: tables.uniform('replay', 10, min_size=11),
        f'{PREFIX}min_size 11 is more than max_size 10: the table never holds '
        'enough items to sample.'),
    'offline_online_of_no_online_items': (
        lambda: tables.offline_online(0, online='replay'),
        f'{PREFIX}max_size must be an integer from 1 to 2147483647, got 0.'),
}


@pytest.mark.parametrize('case', BAD_OPTIONS)
def test_bad_options_are_one_line_naming_table_and_option(case):
  """Raised by the recipe, or by `check`, `table` and `settings` alike."""
  make, expected = BAD_OPTIONS[case]
  calls = [make]
  try:
    options = make()
  except rlds_reverb.TableOptionsError:
    pass
  else:  # Unchecked options: each way of using them checks.
    calls = [functools.partial(use, options)
             for use in (tables.check, tables.table, tables.settings)]
  for call in calls:
    with pytest.raises(rlds_reverb.TableOptionsError) as raised:
      call()
    assert str(raised.value) == expected


def test_every_public_name_exists():
  assert [name for name in tables.__all__ if not hasattr(tables, name)] == []


def test_table_options_error_is_a_value_error():
  assert issubclass(rlds_reverb.TableOptionsError, ValueError)
  assert issubclass(rlds_reverb.TableOptionsError, rlds_reverb.RldsReverbError)


def test_mixed_replay_tables_refuse_bad_sizes_in_one_line():
  with pytest.raises(rlds_reverb.TableOptionsError) as raised:
    rlds_reverb.mixed_replay_tables(SIGNATURE, 2**31)
  assert str(raised.value) == (
      "Table 'online': max_size must be an integer from 1 to 2147483647, got "
      '2147483648.')
