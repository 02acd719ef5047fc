"""Encoded images (issue 23): pushed as PNG/JPEG bytes, sampled decoded.

Every comparison is on real servers, frame for frame: the encoded push,
decoded, against the raw push and TF-Agents' observer of the same data.
"""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
import tree  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import rlds_to_reverb  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import specs  # pylint: disable=g-import-not-at-top
from rlds_reverb.convert import encoded  # pylint: disable=g-import-not-at-top
from rlds_reverb.specs import encoded as encoded_spec  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top
from tests.image_data import C  # pylint: disable=g-import-not-at-top
from tests.image_data import H  # pylint: disable=g-import-not-at-top
from tests.image_data import LENGTHS  # pylint: disable=g-import-not-at-top
from tests.image_data import W  # pylint: disable=g-import-not-at-top
from tests.image_data import image_features  # pylint: disable=g-import-not-at-top
from tests.image_data import plain_dataset  # pylint: disable=g-import-not-at-top
from tests.image_data import steps_of  # pylint: disable=g-import-not-at-top
from tests.image_data import tables_for  # pylint: disable=g-import-not-at-top
from tests.image_data import write_image_dir  # pylint: disable=g-import-not-at-top


@pytest.fixture(scope='module')
def png_dir(tmp_path_factory):
  return write_image_dir(tmp_path_factory.mktemp('png'))


@pytest.fixture(scope='module')
def jpeg_dir(tmp_path_factory):
  return write_image_dir(tmp_path_factory.mktemp('jpeg'), 'jpeg')


def decoded(items, stored_signature):
  """Flat stored items (as `drain_flat` gives them), decoded by
  `decode_images`, flat again, in order."""
  dataset = tf.data.Dataset.from_generator(
      lambda: (tree.unflatten_as(stored_signature, item) for item in items),
      output_signature=tree.map_structure(
          lambda spec: tf.TensorSpec(spec.shape, spec.dtype),
          stored_signature))
  decoded_items = rlds_reverb.decode_images(dataset, stored_signature)
  return [[np.asarray(leaf) for leaf in tree.flatten(element)]
          for element in decoded_items.as_numpy_iterator()]


def decoded_items(address: str, table: str, stored_signature):
  """Every item of a fifo table, decoded by `decode_images`, flat, in order."""
  return decoded(reverb_tables.drain_flat(address, table), stored_signature)


@pytest.mark.parametrize('end', ['drop', 'pad', 'tile'])
@pytest.mark.parametrize('source_format', ['png', 'jpeg'])
def test_encoded_push_decodes_to_the_raw_push_and_the_observer(
    png_dir, jpeg_dir, make_server, end, source_format):
  directory = png_dir if source_format == 'png' else jpeg_dir
  data = rlds_reverb.load(directory)
  raw_sig, stored_sig = tables_for(data, format=source_format)
  server = make_server([
      reverb_tables.fifo_table('raw', raw_sig),
      reverb_tables.fifo_table('observer', raw_sig),
      reverb_tables.fifo_table('encoded', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 'raw', sequence_length=3,
                   end_of_episode=end)
  result = rlds_reverb.push(data, address, 'encoded', sequence_length=3,
                            end_of_episode=end, images='encoded')
  observer = reverb_utils.ReverbAddTrajectoryObserver(
      reverb.Client(address), 'observer', sequence_length=3,
      pad_end_of_episodes=end != 'drop', tile_end_of_episodes=end == 'tile')
  rlds_to_reverb.push_rlds_to_reverb(rlds_reverb.load(directory), observer)
  observer.close()
  assert result.items > 0
  got = decoded_items(address, 'encoded', stored_sig)
  reverb_tables.assert_same_flat_items(got, reverb_tables.drain_flat(address, 'raw'))
  reverb_tables.assert_same_flat_items(got, reverb_tables.drain_flat(address, 'observer'))


def test_the_stored_frames_are_the_datasets_own_bytes(png_dir, make_server):
  data = rlds_reverb.load(png_dir)
  _, stored_sig = tables_for(data)
  server = make_server([reverb_tables.fifo_table('t', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 't', images='encoded')
  builder = tfds.builder_from_directory(png_dir)
  stored = builder.as_dataset(split='train', decoders={'steps': {
      'observation': tfds.decode.SkipDecoding()}})
  first_episode = next(iter(stored))['steps']
  want = [step['observation'].numpy() for step in first_episode.take(2)]
  item = tree.unflatten_as(stored_sig, reverb_tables.drain_flat(address, 't')[0])
  assert list(item.observation) == want


def test_a_plain_source_is_encoded_losslessly_at_push_time(make_server):
  data = plain_dataset()
  raw_sig, stored_sig = tables_for(data, fields=['observation/pixels'])
  server = make_server([reverb_tables.fifo_table('raw', raw_sig),
                        reverb_tables.fifo_table('png', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 'raw', end_of_episode='tile')
  rlds_reverb.push(data, address, 'png', end_of_episode='tile',
                   images='encoded')
  reverb_tables.assert_same_flat_items(decoded_items(address, 'png', stored_sig),
                         reverb_tables.drain_flat(address, 'raw'))


def test_jpeg_at_push_time_stores_jpeg_bytes_the_signature_names(make_server):
  data = plain_dataset()
  _, stored_sig = tables_for(data, fields=['observation/pixels'],
                             format='jpeg')
  assert stored_sig.observation['pixels'].name == (
      f'rlds_reverb_image.jpeg.uint8.{H}x{W}x{C}')
  server = make_server([reverb_tables.fifo_table('t', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 't', images='encoded',
                   image_format='jpeg')
  items = [tree.unflatten_as(stored_sig, item)
           for item in reverb_tables.drain_flat(address, 't')]
  assert items and all(frame[:2] == b'\xff\xd8' and
                       encoded.frame_shape(frame) == (H, W, C)
                       for item in items
                       for frame in item.observation['pixels'])


def test_nstep_transitions_decode_to_the_raw_ones(png_dir, make_server):
  data = rlds_reverb.load(png_dir)
  raw_sig = rlds_reverb.create_nstep_transition_spec(data)
  stored_sig = encoded_spec.encoded_spec(raw_sig, ['observation',
                                                   'next_observation'])
  server = make_server([reverb_tables.fifo_table('raw', raw_sig),
                        reverb_tables.fifo_table('encoded', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push_nstep_transitions(data, address, 'raw', n=2, discount=0.9)
  rlds_reverb.push_nstep_transitions(data, address, 'encoded', n=2,
                                     discount=0.9, images='encoded')
  reverb_tables.assert_same_flat_items(decoded_items(address, 'encoded', stored_sig),
                         reverb_tables.drain_flat(address, 'raw'))


def test_agent_train_input_is_the_raw_tables(png_dir, make_server):
  """What `agent.train` gets: (Trajectory [B, 2, ...], SampleInfo) batches
  of the spec a raw table's buffer gives, each row, decoded, an item of the
  raw table, leaf for leaf."""
  from tf_agents.replay_buffers import reverb_replay_buffer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  data = rlds_reverb.load(png_dir)
  raw_sig, stored_sig = tables_for(data)
  raw_table, _ = rlds_reverb.mixed_replay_tables(raw_sig, 100, offline='raw')
  encoded_table, _ = rlds_reverb.mixed_replay_tables(stored_sig, 100,
                                                     offline='encoded')
  server = make_server([raw_table, encoded_table])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 'raw', end_of_episode='pad')
  rlds_reverb.push(data, address, 'encoded', end_of_episode='pad',
                   images='encoded')
  raw_buffer = reverb_replay_buffer.ReverbReplayBuffer(
      rlds_reverb.create_trajectory_data_spec(data), 'raw',
      sequence_length=2, server_address=address)
  buffer = rlds_reverb.EncodedReplayBuffer(
      table_name='encoded', sequence_length=2, server_address=address)
  assert buffer.data_spec == raw_buffer.data_spec
  assert encoded_spec.is_encoded(buffer.stored_spec)
  got = buffer.as_dataset(sample_batch_size=4, num_steps=2)
  want = raw_buffer.as_dataset(sample_batch_size=4, num_steps=2)
  assert got.element_spec == want.element_spec
  raw_rows = {_row_key(item) for item in _peek(address, 'raw', raw_sig)}
  for trajectory, _ in got.take(5).as_numpy_iterator():
    leaves = tree.flatten(trajectory)
    for row in range(4):
      assert _row_key([leaf[row] for leaf in leaves]) in raw_rows


def _row_key(leaves) -> tuple:
  return tuple((np.asarray(leaf).dtype.str, np.asarray(leaf).tobytes())
               for leaf in leaves)


def test_mixed_replay_decodes_an_encoded_offline_table(png_dir, make_server):
  from tf_agents.replay_buffers import reverb_replay_buffer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  data = rlds_reverb.load(png_dir)
  raw_sig, stored_sig = tables_for(data)
  offline, _ = rlds_reverb.mixed_replay_tables(stored_sig, 100)
  _, online = rlds_reverb.mixed_replay_tables(raw_sig, 100)
  server = make_server([offline, online])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 'offline', images='encoded')
  rlds_reverb.push(data, address, 'online')
  online_buffer = reverb_replay_buffer.ReverbReplayBuffer(
      rlds_reverb.create_trajectory_data_spec(data), 'online',
      sequence_length=2, server_address=address)
  mixed = rlds_reverb.mixed_replay((address, 'offline'), online_buffer, 0.5,
                                   sample_batch_size=4)
  want = online_buffer.as_dataset(sample_batch_size=4, num_steps=2)
  assert mixed.element_spec == want.element_spec
  raw_pairs = {frames_pair.tobytes() for item in
               [tree.unflatten_as(raw_sig, leaves)
                for leaves in _peek(address, 'online', raw_sig)]
               for frames_pair in [item.observation]}
  trajectory, _ = next(iter(mixed))
  rows = trajectory.observation.numpy()
  assert rows.dtype == np.uint8 and {row.tobytes() for row in rows} <= (
      raw_pairs)


def _peek(address, table, signature):
  """Every item of a table that keeps its items, each once (by key)."""
  client = reverb.Client(address)
  count = reverb_tables.table_size(client, table)
  seen = {}
  while len(seen) < count:
    for sample in client.sample(table, num_samples=count * 4,
                                emit_timesteps=False):
      seen[int(sample.info.key)] = [np.asarray(x) for x in sample.data]
  del signature
  return list(seen.values())


def test_chunk_lengths_follow_the_encoded_bytes_per_step(png_dir,
                                                         make_server):
  from rlds_reverb import convert  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import chunks  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import items as items_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import server as server_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.write import writer as writer_lib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  data, encoding = encoded.prepare(rlds_reverb.load(png_dir), 'encoded')
  spec = specs.trajectory_spec(encoding.named(specs.step_format(data)).spec)
  server = make_server([reverb_tables.fifo_table('t')])
  writer = writer_lib.SequenceWriter(
      server_lib.Target.of(reverb_tables.address(server), ['t']), spec,
      items_lib.SequenceItems(2, 1, items_lib.EndOfEpisode.DROP),
      rlds_reverb.PushOptions(timeout=10.0))
  block = next(convert.trajectory_blocks(data).as_numpy_iterator())
  writer.write_episode(block.trajectory, 0)
  writer.close()
  frames_bytes = np.mean([len(f) for f in block.trajectory.observation])
  column = tree.flatten(spec).index(spec.observation)
  longest = chunks.max_chunk_length(1, 1)
  assert writer.chunk_lengths[column] == chunks.rule(frames_bytes, longest)
  assert chunks.rule(frames_bytes, longest) != chunks.rule(H * W * C, longest)


def png_of(shape) -> bytes:
  return tf.io.encode_png(np.zeros(shape, np.uint8)).numpy()


@pytest.mark.parametrize('frame, problem', [
    (png_of((8, 8, 3)), 'a frame of 8x8x3'),
    (png_of((H, W, 1)), f'a frame of {H}x{W}x1'),
    (b'not an image', 'the bytes are no PNG or JPEG image'),
])
def test_a_frame_that_does_not_fit_is_refused_before_writing(
    tmp_path, make_server, frame, problem):
  """A TFDS Image feature stores bytes given to it as they are."""
  steps = steps_of(0, 3)
  good = [tf.io.encode_png(f).numpy() for f in steps['observation']]
  path = tmp_path / 'odd.png'
  path.write_bytes(frame)
  episodes = [(0, {'steps': steps_of(0, 2)}),
              (1, {'steps': {**steps, 'observation': [
                  good[0], good[1], str(path)]}})]
  builder = tfds.dataset_builders.store_as_tfds_dataset(
      name='odd', version='1.0.0', features=image_features(),
      split_datasets={'train': episodes}, data_dir=str(tmp_path / 'd'),
      disable_shuffling=True)
  data = rlds_reverb.load(builder.data_dir)
  _, stored_sig = tables_for(data)
  server = make_server([reverb_tables.fifo_table('t', stored_sig)])
  address = reverb_tables.address(server)
  with pytest.raises(rlds_reverb.ColumnMismatchError) as caught:
    rlds_reverb.push(data, address, 't', images='encoded')
  assert str(caught.value) == (
      f"Field 'observation' of episode 1, step 2: {problem}, the table holds "
      f'png frames of {H}x{W}x{C}; nothing of the episode was written.')
  assert reverb_tables.table_size(reverb.Client(address), 't') == 0
  # Without reading ahead, the writer refuses the episode before its rows.
  with pytest.raises(rlds_reverb.ColumnMismatchError, match='episode 1, '):
    rlds_reverb.push(data, address, 't', images='encoded', on_invalid='stop')


@pytest.mark.parametrize('kwargs, error, message', [
    (dict(images='pixels'), ValueError,
     "images must be one of ['raw', 'encoded'], got 'pixels'."),
    (dict(image_format='jpeg'), ValueError,
     "image_fields and image_format apply to images='encoded' only."),
    (dict(images='encoded', image_format='gif'), ValueError,
     "image_format must be one of ['png', 'jpeg'], got 'gif'."),
    (dict(images='encoded', image_fields=['observation/depth']),
     rlds_reverb.ImageFieldError,
     "Image field 'observation/depth' is no field of the steps; they are "
     'action, discount, is_first, is_last, is_terminal, '
     'observation/pixels, observation/speed, reward.'),
    (dict(images='encoded', image_fields=['observation/speed']),
     rlds_reverb.ImageFieldError,
     "Field 'observation/speed' cannot be stored as an encoded image: it is "
     'float32[], an image must be uint8[H,W,C] with C 1, 3 or 4.'),
])
def test_bad_image_options_are_refused_before_the_server_is_asked(
    kwargs, error, message):
  with pytest.raises(error) as caught:
    rlds_reverb.push(plain_dataset(), 'localhost:1', 't', **kwargs)
  assert str(caught.value) == message


def test_encoded_without_any_image_field_says_how_to_name_them():
  data = plain_dataset().map(lambda e: {'steps': e['steps'].map(
      lambda s: {**s, 'observation': s['observation']['speed']})})
  with pytest.raises(rlds_reverb.ImageFieldError, match='image_fields'):
    rlds_reverb.push(data, 'localhost:1', 't', images='encoded')


def test_decode_images_refuses_elements_of_another_structure(png_dir):
  _, stored_sig = tables_for(rlds_reverb.load(png_dir))
  with pytest.raises(rlds_reverb.ImageFieldError, match='structure'):
    rlds_reverb.decode_images(tf.data.Dataset.range(3), stored_sig)


def test_an_unsigned_table_needs_the_stored_spec(make_server):
  server = make_server([reverb_tables.fifo_table('t')])
  with pytest.raises(rlds_reverb.ImageFieldError) as caught:
    rlds_reverb.EncodedReplayBuffer(table_name='t', sequence_length=2,
                                    local_server=server)
  assert str(caught.value) == (
      f"Table 't' at localhost:{server.port} has no signature: pass the "
      f'stored data_spec to EncodedReplayBuffer.')


def test_the_decoded_spec_comes_back_from_the_stored_one():
  decoded = {'pixels': tf.TensorSpec([None, 84, 84, 1], tf.uint8),
             'speed': tf.TensorSpec([None], tf.float32)}
  stored = encoded_spec.encoded_spec(decoded, ['pixels'], 'png')
  assert stored['pixels'] == tf.TensorSpec(
      [None], tf.string, name='rlds_reverb_image.png.uint8.84x84x1')
  assert encoded_spec.decoded_spec(stored) == decoded
  with pytest.raises(rlds_reverb.ImageFieldError, match="'speed' cannot"):
    encoded_spec.encoded_spec(decoded, ['speed'])


def test_the_command_line_pushes_encoded_frames(png_dir, make_server):
  from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  data = rlds_reverb.load(png_dir)
  raw_sig, stored_sig = tables_for(data)
  server = make_server([reverb_tables.fifo_table('raw', raw_sig),
                        reverb_tables.fifo_table('encoded', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 'raw')
  result = run_cli_here('push', '--dataset', png_dir, '--server', address,
                        '--table', 'encoded', '--images', 'encoded', '--json')
  assert result.returncode == 0, result.stderr
  reverb_tables.assert_same_flat_items(decoded_items(address, 'encoded', stored_sig),
                         reverb_tables.drain_flat(address, 'raw'))


@pytest.mark.parametrize('command', ['push', 'serve'])
def test_image_options_without_encoded_are_a_usage_error(png_dir, command):
  from tests.cli_runs import error_lines  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tests.cli_runs import run_cli_here  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  extra = (['--server', 'localhost:1'] if command == 'push' else [])
  result = run_cli_here(command, '--dataset', png_dir, '--table', 't',
                        *extra, '--image-format', 'jpeg')
  assert result.returncode == 2
  assert error_lines(result.stderr) == [
      'rlds-reverb: error: --image-format goes with --images encoded']


def test_resume_of_an_encoded_push_naming_its_fields_continues(
    png_dir, make_server, tmp_path):
  """The resume file records the image fields as JSON reads them back (a
  list): run again, the same push is the same push, and writes nothing."""
  data = rlds_reverb.load(png_dir)
  _, stored_sig = tables_for(data)
  server = make_server([reverb_tables.fifo_table('t', stored_sig)])
  address, state = reverb_tables.address(server), str(tmp_path / 's.json')
  first = rlds_reverb.push(data, address, 't', images='encoded',
                           image_fields=['observation'], resume=state)
  again = rlds_reverb.push(data, address, 't', images='encoded',
                           image_fields=('observation',), resume=state)
  assert (again.episodes, again.resumed_after_episodes) == (0, len(LENGTHS))
  assert reverb_tables.table_size(reverb.Client(address), 't') == (
      first.items)


def test_mean_encoded_bytes_are_the_first_episodes_own(png_dir):
  """What serve's memory estimate counts for an encoded field: the mean size
  of the first episode's PNG bytes, as stored in the TFDS files."""
  builder = tfds.builder_from_directory(png_dir)
  stored = builder.as_dataset(split='train', decoders={
      'steps': {'observation': tfds.decode.SkipDecoding()}})
  first = next(iter(stored))
  sizes = [len(b) for b in
           tfds.as_numpy(first['steps'].map(lambda s: s['observation']))]
  got = encoded.mean_encoded_bytes(rlds_reverb.load(png_dir))
  assert got == {'observation': pytest.approx(np.mean(sizes))}


def test_a_beam_push_writes_what_the_encoded_push_writes(png_dir,
                                                          make_server):
  """Beam's ReadEpisodes/WriteToReverb keep the frames encoded the same way:
  the table holds the dataset's bytes, which decode to the raw push's items."""
  beam = pytest.importorskip('rlds_reverb.beam')
  data = rlds_reverb.load(png_dir)
  raw_sig, stored_sig = tables_for(data)
  server = make_server([reverb_tables.fifo_table('raw', raw_sig),
                        reverb_tables.fifo_table('encoded', stored_sig),
                        reverb_tables.fifo_table('beam', stored_sig)])
  address = reverb_tables.address(server)
  rlds_reverb.push(data, address, 'raw')
  rlds_reverb.push(data, address, 'encoded', images='encoded')
  result = beam.push(png_dir, address, 'beam', images='encoded')
  assert result.items == sum(n - 1 for n in LENGTHS)
  # Beam writes episodes in any order: the same items, as multisets.
  beam_items = reverb_tables.drain(address, 'beam')
  encoded_items = reverb_tables.drain(address, 'encoded')
  assert (reverb_tables.as_multiset(beam_items)
          == reverb_tables.as_multiset(encoded_items))
  reverb_tables.assert_same_flat_items(
      decoded([tree.flatten(data) for _, data in encoded_items], stored_sig),
      reverb_tables.drain_flat(address, 'raw'))


@pytest.mark.parametrize('table_side, push_images, hint', [
    ('raw', 'encoded', "the push keeps frames encoded and the table holds "
     "them raw: push without images='encoded', or serve the table with "
     '--images encoded)'),
    ('encoded', 'raw', "the table holds frames encoded: push them with "
     "images='encoded', --images encoded)"),
])
def test_a_table_of_the_other_image_mode_is_refused_saying_which(
    png_dir, make_server, table_side, push_images, hint):
  data = rlds_reverb.load(png_dir)
  raw_sig, stored_sig = tables_for(data)
  server = make_server([reverb_tables.fifo_table(
      't', raw_sig if table_side == 'raw' else stored_sig)])
  with pytest.raises(rlds_reverb.SignatureMismatchError) as caught:
    rlds_reverb.push(data, reverb_tables.address(server), 't',
                     images=push_images)
  [note] = caught.value.__notes__[-1:]
  assert note.startswith("table 't': observation: table has "), note
  assert note.endswith(hint), note
  assert reverb_tables.table_size(
      reverb.Client(reverb_tables.address(server)), 't') == 0
