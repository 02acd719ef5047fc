"""What each entry point imports: only what it needs (issue 31, item 8).

`rlds_reverb.load(...)` alone printed gym's "Gym has been unmaintained"
notice: reading a dataset imported TF-Agents (through the eager re-exports of
`rlds_reverb.specs` and `rlds_reverb.convert`), whose `__init__` imports
every agent, TensorFlow Probability and gym. And the TensorFlow it imports
printed its start-up lines (cuDNN, cuFFT, cuBLAS, TensorRT; issue 39, item
15), which the package now drops. Each path runs in a fresh interpreter, as a
user's script does; stderr is read whole.
"""

import importlib
import os
import pathlib
import pkgutil
import subprocess
import sys
import types

import pytest

from rlds_reverb.tfds_out import EpisodeWriter
from tests import rlds_dirs
from tests.library_lines import library_lines

ROOT = pathlib.Path(__file__).resolve().parent.parent
# Imported by TF-Agents' own __init__, which reading and recovering do not need.
TF_AGENTS_AND_WHAT_IT_PULLS = ('tf_agents', 'gym', 'tensorflow_probability')
REPORT = ('import sys; print(sorted(m for m in {names!r} if m in sys.modules))')


def imported(code: str, names, tmp_path) -> subprocess.CompletedProcess:
  """Runs `code` in a new interpreter (TensorFlow's own logs left on, as a
  user's script has them); prints which of `names` it imported."""
  environment = dict(os.environ)
  environment.pop('TF_CPP_MIN_LOG_LEVEL', None)
  environment.pop('RLDS_REVERB_QUIET', None)
  environment['PYTHONPATH'] = os.pathsep.join(  # This checkout's package.
      filter(None, [str(ROOT), environment.get('PYTHONPATH')]))
  return subprocess.run(
      [sys.executable, '-c', f'{code}\n{REPORT.format(names=names)}'],
      capture_output=True, text=True, env=environment, cwd=tmp_path,
      check=False)


def written(tmp_path) -> str:
  """A dataset of one episode, written by `EpisodeWriter` in this process."""
  directory = tmp_path / 'data'
  with EpisodeWriter(directory, rlds_dirs.features(), name='ours') as writer:
    writer.write(rlds_dirs.episode(0))
  return os.fspath(directory)


PATHS = {  # name -> code a user writes
    'load': 'import rlds_reverb\n'
            'data = rlds_reverb.load({directory!r})\n'
            'episode = next(iter(data))\n'
            'print(len(list(episode["steps"])))',
    'load_bundled': 'import rlds_reverb\n'
                    'print(len(list(rlds_reverb.load("bundled:cartpole"))))',
    'recover': 'import rlds_reverb\n'
               'print(rlds_reverb.recover({directory!r}).episodes)',
}


@pytest.mark.parametrize('path', list(PATHS))
def test_reading_and_recovering_import_no_tf_agents_and_print_no_gym_notice(
    path, tmp_path):
  code = PATHS[path].format(directory=written(tmp_path))
  result = imported(code, TF_AGENTS_AND_WHAT_IT_PULLS, tmp_path)
  assert result.returncode == 0, result.stderr
  *_, modules = result.stdout.splitlines()
  assert modules == '[]'
  # Reading imports TensorFlow (recovering does not): quietly.
  assert library_lines(result.stderr)['TensorFlow'] == [], result.stderr
  assert 'Gym has been unmaintained' not in result.stderr


def test_addresses_and_the_command_line_import_no_tensorflow(tmp_path):
  # Quieting too: the parent of a serve of many servers or of --workers
  # needs no TensorFlow, and once loaded it for this alone (~460 MiB).
  code = ('import rlds_reverb\n'
          'rlds_reverb.check_port_free\n'
          'rlds_reverb.push_shards\n'
          'from rlds_reverb import cli\n'
          'from rlds_reverb._util import quiet\n'
          'cli.build_parser()\n'
          'quiet.silence()\n'
          'with quiet.quieted():\n'
          '  pass')
  result = imported(code, ('tensorflow', 'reverb', 'tf_agents'), tmp_path)
  assert result.returncode == 0, result.stderr
  assert result.stdout.splitlines() == ['[]']
  assert result.stderr == ''


# What the `--workers` parent and the command line build before TensorFlow
# loads, and send to worker processes.
PICKLED_OPTIONS = (
    'import pickle\n'
    'import rlds_reverb\n'
    'options = rlds_reverb.PushOptions(\n'
    '    sequence_length=3, end_of_episode="pad", chunk_length=4,\n'
    '    image_storage=rlds_reverb.ImageStorage("encoded", "jpeg"))\n'
    'assert pickle.loads(pickle.dumps(options)) == options\n'
    'assert options.end_of_episode is rlds_reverb.EndOfEpisode.PAD')


def test_push_options_are_made_and_pickled_without_tensorflow(tmp_path):
  result = imported(PICKLED_OPTIONS, ('tensorflow', 'reverb', 'tf_agents'),
                    tmp_path)
  assert (result.returncode, result.stdout) == (0, '[]\n'), result.stderr


LAZY_PACKAGES = ('rlds_reverb.specs', 'rlds_reverb.convert',
                 'rlds_reverb.tfds_out')


@pytest.mark.parametrize('name', LAZY_PACKAGES)
def test_lazy_names_stay_what_they_name_once_every_module_is_imported(name):
  """A name shared with a module of its package (`specs.trajectory_spec`,
  once a function beside a module of that name) would become the module
  when the import system binds it: every name is a function or class."""
  package = importlib.import_module(name)
  for module in pkgutil.iter_modules(package.__path__):
    importlib.import_module(f'{name}.{module.name}')
  assert package.__all__
  for exported in package.__all__:
    value = getattr(package, exported)
    assert not isinstance(value, types.ModuleType), f'{name}.{exported}'
    assert value.__name__ == exported


def test_table_options_and_their_settings_import_no_tensorflow(tmp_path):
  """The command line checks table options before TensorFlow loads, and a
  checkpoint's table settings need no Reverb (issue 32)."""
  code = ('from rlds_reverb import tables\n'
          "options = tables.prioritized('replay', 1000)\n"
          'tables.check(options)\n'
          'print(tables.settings(options).sampler)')
  result = imported(code, ('tensorflow', 'reverb', 'tf_agents'), tmp_path)
  assert result.returncode == 0, result.stderr
  *_, modules = result.stdout.splitlines()
  assert modules == '[]'
