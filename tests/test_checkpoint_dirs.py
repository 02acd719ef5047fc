"""Nothing outside Reverb's own checkpoints is ever handed to Reverb's
checkpointer, which keeps the newest entry of its root and deletes the rest
(issue 39: `serve --checkpoint-dir` deleted a project's files and the build
it started from).

  * `checkpoints.find` sorts a directory's entries: Reverb's own (complete,
    incomplete), builds (whole, unfinished), roots of many servers, a build's
    parts, anything else.
  * `serve --checkpoint-dir` refuses, with one line and exit 2 before Reverb
    starts, every directory holding something else; `--from-checkpoint`
    refuses what it cannot start from; nothing is changed either way.
  * `build --out` refuses a directory that is not new or empty; `--append`
    is gone and says what to do instead; a build that fails leaves no --out.
  * A damaged checkpoint is named, file and fault, before Reverb loads it.
  * A checkpoint of n-step items or encoded images served without the
    option says which option.

The commands run in this process (`run_cli_here`): every refusal comes before
a server starts. `tests/test_cli_build.py` serves a build as a real process.
"""

import importlib
import os
import pathlib

import pytest
import reverb

import rlds_reverb
from rlds_reverb import checkpoints
from rlds_reverb.checkpoints import directories
from rlds_reverb.cli import build as build_cli
from rlds_reverb.cli import serve_loop
from tests import image_data
from tests import reverb_tables
from tests import rlds_data
from tests.cli_data import CLEAN
from tests.cli_runs import run_cli_here
from tests.serve_command import TABLE
from tests.serve_command import dataset  # pylint: disable=unused-import
from tests.serve_command import signature  # pylint: disable=unused-import

STOPPED = 'a server stopped while writing?'
DELETED = ("and the server's first checkpoint (SIGUSR1, stop, export "
           "--server) would delete {it}, as Reverb's checkpointer keeps only "
           'the newest entry of its directory')


def tree(path) -> list:
  """Every file and directory under `path`, with each file's bytes."""
  found = []
  for parent, names, files in sorted(os.walk(path)):
    found.append((parent, sorted(names)))
    found += [(os.path.join(parent, name),
               pathlib.Path(parent, name).read_bytes()) for name in files]
  return found


@pytest.fixture(scope='module')
def built(dataset, tmp_path_factory) -> pathlib.Path:
  """A build of CLEAN (6 items in TABLE), made once for the module."""
  root = tmp_path_factory.mktemp('built') / 'b'
  result = run_cli_here('build', '--dataset', dataset, '--out', root)
  assert result.returncode == 0, result.stderr
  return root


@pytest.fixture(scope='module')
def own(signature, tmp_path_factory) -> pathlib.Path:
  """A root holding a checkpoint Reverb wrote itself (6 items of CLEAN)."""
  root = tmp_path_factory.mktemp('own') / 'own'
  server = reverb.Server(
      [reverb_tables.fifo_table(TABLE, signature)],
      checkpointer=reverb.checkpointers.DefaultCheckpointer(str(root)))
  try:
    rlds_reverb.push(rlds_data.as_rlds(CLEAN), reverb_tables.address(server),
                     TABLE)
    reverb.Client(reverb_tables.address(server)).checkpoint()
  finally:
    server.stop()
  return root


def newest(root) -> pathlib.Path:
  found = checkpoints.find(str(root))
  return pathlib.Path(found.path(found.newest))


def project(root: pathlib.Path) -> pathlib.Path:
  """A folder of a user's: sources, a README, results that sort last."""
  (root / 'src').mkdir(parents=True)
  (root / 'src' / 'train.py').write_text('print(1)')
  (root / 'README.md').write_text('mine')
  (root / 'zz_results.csv').write_text('step,return\n')
  return root


def unfinished_build(root: pathlib.Path) -> pathlib.Path:
  """What a build killed mid-write leaves: its mark and part of a file."""
  checkpoint = root / '2026-11-28T07:00:00.5+00:00'
  checkpoint.mkdir(parents=True)
  (checkpoint / directories.BUILD_MARK).write_text('{}')
  (checkpoint / directories.CHUNKS).write_bytes(b'\0' * 3000)
  return root


def two_servers(built_root: pathlib.Path, root: pathlib.Path) -> pathlib.Path:
  """A build's root of two servers, each a copy of `built_root`."""
  for k in range(2):
    copy_tree(built_root, root / f'server-{k}-of-2')
  return root


def copy_tree(source: pathlib.Path, target: pathlib.Path) -> None:
  import shutil  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  shutil.copytree(source, target)


def test_find_sorts_what_a_directory_holds(built, own, tmp_path):
  root = tmp_path / 'mixed'
  copy_tree(own, root)
  copy_tree(built, tmp_path / 'b')
  [own_name] = os.listdir(own)
  [built_name] = os.listdir(built)
  os.rename(tmp_path / 'b' / built_name, root / built_name)
  incomplete = root / '2026-01-01T00:00:00+00:00'
  incomplete.mkdir()
  (incomplete / directories.TABLES).write_bytes(b'')
  unfinished_build(root)
  (root / 'server-1-of-2').mkdir()
  (root / 'server-0-of-2').mkdir()
  (root / directories.PARTS).mkdir()
  (root / 'notes.txt').write_text('mine')
  (root / '2026-02-02T00:00:00+00:00').mkdir()
  (root / '2026-02-02T00:00:00+00:00' / 'mine.csv').write_text('')

  found = checkpoints.find(str(root))

  assert found.complete == tuple(sorted([own_name, built_name]))
  assert found.built == (built_name,)
  assert found.own == (own_name, incomplete.name)
  assert found.incomplete == (incomplete.name,)
  assert found.unfinished == ('2026-11-28T07:00:00.5+00:00',)
  assert directories.server_roots(found) == ('server-0-of-2',
                                             'server-1-of-2')
  assert found.parts
  assert found.others == ('2026-02-02T00:00:00+00:00', 'notes.txt')
  assert not found.is_checkpoint and not found.empty
  assert checkpoints.find(found.path(own_name)).is_checkpoint
  assert checkpoints.find(str(tmp_path / 'missing')).empty


def checkpoint_dir_cases(built, own, tmp_path):
  """(--checkpoint-dir, the message after 'error: --checkpoint-dir: ')."""
  user = project(tmp_path / 'project')
  server_root = two_servers(built, tmp_path / 'multi2')
  killed = unfinished_build(tmp_path / 'killed')
  parts = tmp_path / 'parts'
  (parts / directories.PARTS).mkdir(parents=True)
  one_built, one_own = newest(built), newest(own)
  return [
      (user, f'{user} holds README.md, src, zz_results.csv, which are not '
             f'Reverb checkpoints, {DELETED.format(it="them")}: give a new '
             'or empty directory, or one only servers have checkpointed to'),
      (built, f'{built} holds a build ({one_built.name}), '
              f'{DELETED.format(it="it")}: start from it with '
              f'--from-checkpoint {built}, and give --checkpoint-dir a new '
              "directory for the server's own checkpoints"),
      (one_built, f'{one_built} is one checkpoint, not a directory of them, '
                  "and the server's first checkpoint would delete its files: "
                  f'start from it with --from-checkpoint {one_built}'),
      (one_own, f'{one_own} is one checkpoint, not a directory of them, and '
                "the server's first checkpoint would delete its files: give "
                f'its parent, --checkpoint-dir {own}, to restart from it, or '
                f'--from-checkpoint {one_own} to start from it'),
      (server_root,
       f'{server_root} holds a build of 2 servers, and each server\'s first '
       'checkpoint would delete its part: start from it with '
       f'--from-checkpoint {server_root}, and give --checkpoint-dir a new '
       "directory for the servers' own checkpoints"),
      (killed, f'{killed} holds an unfinished build '
               '(2026-11-28T07:00:00.5+00:00, 3.0 KB without a DONE file, '
               f'left by a build that was killed), {DELETED.format(it="it")}'
               ': remove it, or give another --checkpoint-dir'),
      (parts, f"{parts} holds a build's parts (.parts: a build running "
              f'there, or killed), {DELETED.format(it="it")}: give another '
              '--checkpoint-dir'),
  ]


def test_serve_refuses_a_checkpoint_dir_holding_what_is_not_reverbs(
    dataset, built, own, tmp_path):
  for root, message in checkpoint_dir_cases(built, own, tmp_path):
    before = tree(root)
    result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                          '--checkpoint-dir', root)
    assert (result.returncode, result.stdout) == (2, ''), result.stderr
    assert result.stderr.splitlines() == [
        f'rlds-reverb: error: --checkpoint-dir: {message}'], root
    assert tree(root) == before


def test_serve_refuses_what_it_cannot_start_from(dataset, built, own,
                                                 tmp_path):
  server_root = two_servers(built, tmp_path / 'multi2')
  cut = tmp_path / 'cut'
  copy_tree(newest(own), cut)
  (cut / checkpoints.DONE).unlink()
  killed = unfinished_build(tmp_path / 'killed')
  user = project(tmp_path / 'project')
  three = tmp_path / 'three'  # Where 3 servers checkpointed before.
  for k in range(3):
    (three / f'server-{k}-of-3').mkdir(parents=True)
  half = tmp_path / 'half'
  copy_tree(built, half / 'server-0-of-2')
  copy_tree(built, half / 'server-1-of-3')
  # Listens where the second of two servers would.
  taken = reverb_tables.start_server([reverb.Table.queue('q', 10)])
  cases = [
      (('--from-checkpoint', tmp_path / 'missing'),
       f'--from-checkpoint: {tmp_path}/missing: no such directory'),
      (('--from-checkpoint', cut),
       f'--from-checkpoint: {cut} is an unfinished checkpoint (no DONE file: '
       'its writer failed or was killed)'),
      (('--from-checkpoint', killed),
       f'--from-checkpoint: {killed} holds no complete checkpoint (a '
       'directory with a DONE file); it holds unfinished ones: '
       '2026-11-28T07:00:00.5+00:00'),
      (('--from-checkpoint', user),
       f'--from-checkpoint: {user} holds no complete checkpoint (a directory '
       'with a DONE file)'),
      (('--from-checkpoint', newest(own), '--checkpoint-dir', own),
       f'--from-checkpoint {newest(own)} lies in --checkpoint-dir {own}, '
       "where the server's first checkpoint would delete it: give "
       '--checkpoint-dir a directory of its own'),
      # A build of many servers: refused whole, before any server starts.
      (('--from-checkpoint', server_root, '--checkpoint-dir', three),
       f'--from-checkpoint {server_root} holds a build of 2 servers, '
       f'--checkpoint-dir {three} the checkpoints of 3: give a new '
       '--checkpoint-dir'),
      (('--from-checkpoint', half),
       f'--from-checkpoint: {half} holds server-0-of-2, server-1-of-3, not '
       'one whole build of servers (server-0-of-S to server-(S-1)-of-S, all '
       'of one S)'),
      (('--from-checkpoint', server_root, '--port', str(taken.port - 1)),
       f'--port: server 1 of 2 would listen on {taken.port}: port '
       f'{taken.port} is already in use: another server listens there; '
       'choose another port, or stop that server first'),
      (('--from-checkpoint', server_root, '--port', '65535'),
       '--port 65535: 2 servers need ports 65535 to 65536, past 65535'),
      (('--keep-going',),
       '--keep-going goes with a build of many servers (--from-checkpoint '
       'DIR holding server-K-of-S)'),
      (('--from-checkpoint', newest(own), '--servers-file', tmp_path / 'f'),
       '--servers-file goes with a build of many servers (--from-checkpoint '
       'DIR holding server-K-of-S)'),
  ]
  try:
    for options, message in cases:
      result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                            *options)
      assert (result.returncode, result.stdout) == (2, ''), result.stderr
      assert result.stderr.splitlines() == [f'rlds-reverb: error: {message}']
  finally:
    taken.stop()


def test_build_refuses_an_out_that_is_not_new_or_empty(dataset, built,
                                                       tmp_path):
  user = project(tmp_path / 'project')
  killed = unfinished_build(tmp_path / 'killed')
  cases = [
      (('--out', user), f'--out: {user} is not empty: it holds README.md, '
                        'src, zz_results.csv; give a new or empty directory'),
      (('--out', built), f'--out: {built} already holds a checkpoint '
                         f'({newest(built).name}), which a server loads '
                         'instead of any other there; give a new or empty '
                         'directory'),
      (('--out', killed),
       f'--out: {killed} holds an unfinished build '
       '(2026-11-28T07:00:00.5+00:00, 3.0 KB without a DONE file, left by a '
       f'build that was killed; remove it to use {killed}); give a new or '
       'empty directory'),
      (('--out', tmp_path / 'new', '--append'), build_cli.APPEND_GONE),
  ]
  for options, message in cases:
    before = tree(options[1])
    result = run_cli_here('build', '--dataset', dataset, *options)
    assert (result.returncode, result.stdout) == (2, ''), result.stderr
    assert result.stderr.splitlines() == [f'rlds-reverb: error: {message}']
    assert tree(options[1]) == before


def test_a_build_that_fails_leaves_no_out(dataset, tmp_path):
  """Bad data, a misspelt source, a damaged source: --out is never made."""
  broken = tmp_path / 'broken'
  copy_tree(pathlib.Path(dataset), broken)
  for shard in broken.glob('*.tfrecord*'):
    shard.write_bytes(shard.read_bytes()[:40])
  for source in ('bundled:cartpol', tmp_path / 'missing', broken):
    out = tmp_path / 'out'
    result = run_cli_here('build', '--dataset', source, '--out', out)
    assert result.returncode in (1, 2), result.stderr
    assert not out.exists(), (source, result.stderr)


def cut_short(path: pathlib.Path) -> None:
  path.write_bytes(path.read_bytes()[:-5000])


def flipped(path: pathlib.Path) -> None:
  """64 bytes inverted in the middle of the file."""
  data = bytearray(path.read_bytes())
  middle = len(data) // 2
  data[middle:middle + 64] = bytes(b ^ 0xFF for b in data[middle:middle + 64])
  path.write_bytes(bytes(data))


def test_a_damaged_checkpoint_is_named_before_reverb_loads_it(
    dataset, signature, tmp_path):
  """dm-reverb says only 'corrupted record at 0 (Is this even a TFRecord
  file?)', naming no file; serve says which file and what, in export's
  words."""
  big = rlds_data.as_rlds([rlds_data.flat_episode_with(3000, 0)])
  built_root = tmp_path / 'big'
  rlds_reverb.build_checkpoint(big, built_root, TABLE)
  cases = [
      (directories.CHUNKS, cut_short,
       '{file} ends before its zlib stream does: the file is cut short (a '
       'checkpoint being written, or a copy that stopped).'),
      (directories.ITEMS, flipped,
       '{file} is not a readable zlib-compressed TFRecord file (Error -3 '
       'while decompressing data: incorrect data check): the checkpoint is '
       'damaged.'),
  ]
  for name, damage, message in cases:
    copy = tmp_path / f'copy-{name}'
    copy_tree(built_root, copy)
    path = newest(copy)
    damage(path / name)
    result = run_cli_here('serve', '--dataset', dataset, '--table', TABLE,
                          '--from-checkpoint', copy)
    assert (result.returncode, result.stdout) == (2, ''), result.stderr
    assert result.stderr.splitlines()[-1] == (
        f'rlds-reverb: error: cannot load checkpoint {path}: '
        + message.format(file=path / name))


def test_a_checkpoint_of_other_items_names_the_option_it_needs(
    dataset, tmp_path):
  nstep_root = tmp_path / 'nstep'
  result = run_cli_here('build', '--dataset', dataset, '--out', nstep_root,
                        '--n-step', '2', '--gamma', '0.9')
  assert result.returncode == 0, result.stderr
  images = image_data.write_image_dir(tmp_path / 'images')
  encoded_root = tmp_path / 'encoded'
  result = run_cli_here('build', '--dataset', images, '--out', encoded_root,
                        '--images', 'encoded')
  assert result.returncode == 0, result.stderr
  cases = [
      ((dataset, nstep_root), (),
       'its items are n-step transitions: serve with --n-step'),
      ((images, encoded_root), (),
       'it holds encoded images: serve with --images encoded'),
      ((images, encoded_root), ('--n-step',),
       'its items are trajectories: serve without --n-step; it holds encoded '
       'images: serve with --images encoded'),
  ]
  for (source, root), options, hint in cases:
    result = run_cli_here('serve', '--dataset', source, '--table', TABLE,
                          '--from-checkpoint', root, *options)
    assert result.returncode == 1, result.stderr
    first = result.stderr.splitlines()[0]
    assert first == (f"rlds-reverb: error: The checkpoint's table '{TABLE}' "
                     f'does not fit the dataset ({hint}):'), result.stderr


def _sizes(client):
  """What serve asks of its server at stop: {table: items}."""
  return lambda: {name: info.current_size
                  for name, info in client.server_info(timeout=5).items()}


def test_stopping_an_empty_table_discards_nothing(signature):
  server = reverb_tables.start_server(
      [reverb_tables.fifo_table(TABLE, signature),
       reverb_tables.fifo_table('other', signature)])
  try:
    client = reverb_tables.client_of(server)
    assert serve_loop.discarded_text(_sizes(client), [TABLE]) == (
        'stopped without --checkpoint-dir; the table was empty, nothing is '
        'discarded')
    rlds_reverb.push(rlds_data.as_rlds(CLEAN[:1]),
                     reverb_tables.address(server), TABLE)
    assert serve_loop.discarded_text(_sizes(client), [TABLE, 'other']) == (
        "stopped without --checkpoint-dir: the 2 items of table 'replay' are "
        'discarded (serve --checkpoint-dir DIR writes a checkpoint at stop '
        'and reloads it)')
  finally:
    server.stop()


def test_ctrl_c_after_every_done_says_the_build_is_whole(built, tmp_path):
  """A Ctrl-C during `--workers`' last steps, once every merge wrote its
  DONE: the checkpoints stay, and the message says they are whole (it said
  'interrupted after checkpoints were written', and the docs 'nothing')."""
  out = two_servers(built, tmp_path / 'multi2')
  roots = build_cli.server_roots(str(out), 2)
  paths = [newest(root) for root in roots]
  assert build_cli._interrupted_text(str(out), roots) == (  # pylint: disable=protected-access
      f'interrupted after the build was complete: its checkpoints '
      f'{paths[0]}, {paths[1]} are whole and kept')
  (paths[1] / checkpoints.DONE).unlink()
  assert build_cli._interrupted_text(str(out), roots) == (  # pylint: disable=protected-access
      f"interrupted; {paths[0]} is whole, but the other servers' checkpoints "
      f'were not written: remove {out} and build again')
  assert build_cli._interrupted_text(str(tmp_path / 'none'), [  # pylint: disable=protected-access
      str(tmp_path / 'none')]) == (
          f'interrupted; nothing was written ({tmp_path}/none was not made)')
  (tmp_path / 'given').mkdir()  # Empty before the build: left as it was.
  assert build_cli._interrupted_text(str(tmp_path / 'given'), [  # pylint: disable=protected-access
      str(tmp_path / 'given')]) == (
          f'interrupted; nothing was written ({tmp_path}/given holds no '
          'checkpoint)')


def test_library_builds_refuse_a_directory_that_is_not_new_or_empty(
    dataset, tmp_path):
  """`build_shards` and `beam.build` check before any process or pipeline
  starts (a merge refused it only after all the work)."""
  user = project(tmp_path / 'project')
  before = tree(user)
  message = (f'Cannot write a checkpoint: {user} is not empty: it holds '
             'README.md, src, zz_results.csv; a build writes into a new or '
             'empty directory.')
  with pytest.raises(rlds_reverb.CheckpointWriteError) as raised:
    rlds_reverb.build_shards(dataset, user, TABLE, workers=2, servers=2)
  assert str(raised.value) == message
  pytest.importorskip('apache_beam')
  beam = importlib.import_module('rlds_reverb.beam')
  with pytest.raises(rlds_reverb.CheckpointWriteError) as raised:
    beam.build(dataset, user, TABLE, servers=2)
  assert str(raised.value) == message
  assert tree(user) == before
