"""The public API: exactly these names, all importable, drop-ins as TF-Agents'."""

import inspect
import subprocess
import sys
import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import rlds_to_reverb  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top

EXPORTED = [
    'get_rlds_step_features',
    'create_trajectory_data_spec',
    'convert_rlds_to_trajectories',
    'push_rlds_to_reverb',
    'push',
    'PushOptions',
    'ImageStorage',
    'OnInvalid',
    'CapacityWarning',
    'ShortEpisodesWarning',
    'TableNotEmptyWarning',
    'PushResult',
    'SkippedEpisode',
    'EndOfEpisode',
    'push_nstep_transitions',
    'convert_rlds_to_nstep_transitions',
    'create_nstep_transition_spec',
    'NStepTransition',
    'load',
    'push_shards',
    'build_checkpoint',
    'build_nstep_checkpoint',
    'build_shards',
    'BuildResult',
    'BuildProgress',
    'mixed_replay',
    'mixed_replay_tables',
    'replay_mixture',
    'ShardedReplayBuffer',
    'check_port_free',
    'RldsRecorder',
    'ImageEncoding',
    'RecordingSummary',
    'UnfinishedEpisodesWarning',
    'recover',
    'LostEpisodesWarning',
    'export',
    'ExportReport',
    'EncodedReplayBuffer',
    'decode_images',
    'statistics',
    'DatasetStatistics',
    'quiet_known_lines',
    'RldsReverbError',
    'ServerError',
    'DataError',
    'SettingError',
    'RunnerError',
    'StepSpecError',
    'SignatureMismatchError',
    'ColumnMismatchError',
    'ReverbTimeoutError',
    'ServerUnavailableError',
    'TableNotFoundError',
    'SourceError',
    'DatasetNotPreparedError',
    'ShardsFailedError',
    'MalformedEpisodeError',
    'DataReadError',
    'ResumeStateError',
    'PipelineFailedError',
    'MixedReplayError',
    'OptionsError',
    'TableOptionsError',
    'AddressError',
    'CheckpointError',
    'CheckpointReadError',
    'CheckpointWriteError',
    'ExportError',
    'ImageFieldError',
    'FeaturesError',
    'DatasetDirectoryError',
    'ServersFileError',
    'RldsReverbWarning',
    'ServerLostWarning',
]

DROP_INS = ['get_rlds_step_features', 'create_trajectory_data_spec',
            'convert_rlds_to_trajectories', 'push_rlds_to_reverb']

ERRORS = ['RldsReverbError', 'StepSpecError', 'SignatureMismatchError',
          'ColumnMismatchError',
          'ReverbTimeoutError', 'ServerUnavailableError', 'TableNotFoundError',
          'SourceError', 'DatasetNotPreparedError', 'ShardsFailedError',
          'MalformedEpisodeError', 'DataReadError', 'ResumeStateError',
          'PipelineFailedError', 'MixedReplayError', 'TableOptionsError',
          'AddressError',
          'CheckpointError', 'CheckpointWriteError', 'ExportError',
          'ImageFieldError', 'FeaturesError', 'DatasetDirectoryError',
          'ServersFileError', 'ServerError', 'DataError', 'SettingError',
          'RunnerError', 'CheckpointReadError', 'OptionsError']

# Each error's group, and the built-in class it derives from (what a caller
# of TF-Agents' module, or of this package before the groups, caught).
ERROR_TREE = {
    'ReverbTimeoutError': ('ServerError', TimeoutError),
    'ServerUnavailableError': ('ServerError', ConnectionError),
    'TableNotFoundError': ('ServerError', ValueError),
    'SignatureMismatchError': ('ServerError', ValueError),
    'StepSpecError': ('DataError', ValueError),
    'ColumnMismatchError': ('DataError', ValueError),
    'SourceError': ('DataError', ValueError),
    'DatasetNotPreparedError': ('DataError', FileNotFoundError),
    'MalformedEpisodeError': ('DataError', ValueError),
    'DataReadError': ('DataError', Exception),
    'FeaturesError': ('DataError', ValueError),
    'DatasetDirectoryError': ('DataError', ValueError),
    'ImageFieldError': ('DataError', ValueError),
    'ExportError': ('DataError', ValueError),
    'CheckpointReadError': ('CheckpointError', ValueError),
    'CheckpointWriteError': ('CheckpointError', ValueError),
    'OptionsError': ('SettingError', ValueError),
    'TableOptionsError': ('SettingError', ValueError),
    'MixedReplayError': ('SettingError', ValueError),
    'AddressError': ('SettingError', ValueError),
    'ResumeStateError': ('SettingError', ValueError),
    'ServersFileError': ('SettingError', ValueError),
    'ShardsFailedError': ('RunnerError', Exception),
    'PipelineFailedError': ('RunnerError', Exception),
}
GROUPS = ('ServerError', 'DataError', 'CheckpointError', 'SettingError',
          'RunnerError')
WARNINGS = ['CapacityWarning', 'ShortEpisodesWarning', 'TableNotEmptyWarning',
            'ServerLostWarning', 'UnfinishedEpisodesWarning',
            'LostEpisodesWarning']


def test_all_is_pinned():
  assert rlds_reverb.__all__ == EXPORTED


@pytest.mark.parametrize('name', EXPORTED)
def test_name_is_importable(name):
  namespace = {}
  exec(f'from rlds_reverb import {name}', namespace)  # pylint: disable=exec-used
  assert namespace[name] is getattr(rlds_reverb, name)
  assert namespace[name] is not None


def test_star_import_gives_exactly_all():
  namespace = {}
  exec('from rlds_reverb import *', namespace)  # pylint: disable=exec-used
  assert sorted(set(namespace) - {'__builtins__'}) == sorted(EXPORTED)


def test_unknown_name_is_an_attribute_error():
  with pytest.raises(AttributeError):
    getattr(rlds_reverb, 'no_such_name')


@pytest.mark.parametrize('name', ERRORS)
def test_errors_derive_from_package_base(name):
  error = getattr(rlds_reverb, name)
  assert issubclass(error, rlds_reverb.RldsReverbError)
  assert issubclass(error, Exception)


def test_every_error_but_the_base_and_groups_is_in_the_tree():
  assert sorted(ERROR_TREE) == sorted(
      set(ERRORS) - set(GROUPS) - {'RldsReverbError'})


@pytest.mark.parametrize('name', ERROR_TREE)
def test_each_error_is_in_one_group_and_keeps_its_builtin_base(name):
  group, builtin = ERROR_TREE[name]
  error = getattr(rlds_reverb, name)
  assert [g for g in GROUPS if issubclass(error, getattr(rlds_reverb, g))
          ] == [group]
  assert issubclass(error, builtin)


@pytest.mark.parametrize('name', WARNINGS)
def test_warnings_derive_from_the_package_warning(name):
  warning = getattr(rlds_reverb, name)
  assert issubclass(warning, rlds_reverb.RldsReverbWarning)
  assert issubclass(warning, UserWarning)
  assert warning.__module__ == 'rlds_reverb.errors'


def test_a_group_catches_what_the_package_raises(tmp_path):
  """Real raises, caught by their group: a dataset that is not there (the
  data), table options out of range and an address that is not HOST:PORT
  (settings), a push setting out of range (settings: `OptionsError`, a
  `ValueError` as before), a checkpoint file that is not there (a
  checkpoint)."""
  from rlds_reverb import tables  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.checkpoints import records  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  with pytest.raises(rlds_reverb.DataError):
    rlds_reverb.load(str(tmp_path / 'nowhere'))
  with pytest.raises(rlds_reverb.SettingError):
    tables.uniform('replay', max_size=0)
  with pytest.raises(rlds_reverb.SettingError):
    rlds_reverb.check_port_free('not a port')
  with pytest.raises(rlds_reverb.OptionsError):
    rlds_reverb.PushOptions(sequence_length=0)
  with pytest.raises(rlds_reverb.CheckpointError) as raised:
    list(records.read_records(str(tmp_path / 'tables.tfrecord')))
  assert type(raised.value) is rlds_reverb.CheckpointReadError


@pytest.mark.parametrize('name', ['StepSpecError', 'SignatureMismatchError'])
def test_drop_in_errors_are_value_errors(name):
  """TF-Agents raises ValueError there; code catching it keeps working."""
  assert issubclass(getattr(rlds_reverb, name), ValueError)


@pytest.mark.parametrize('name', DROP_INS)
def test_drop_in_signature_is_tf_agents(name):
  """TF-Agents' parameters first (names, kinds, defaults); extras optional.

  The issue asks for `create_trajectory_data_spec(rlds_data,
  policy_info_fn=None)`: one optional parameter TF-Agents lacks, which no
  call written for TF-Agents can notice; and `strict`, keyword-only.
  """
  ours = list(inspect.signature(getattr(rlds_reverb, name)).parameters.values())
  theirs = list(
      inspect.signature(getattr(rlds_to_reverb, name)).parameters.values())
  assert [(p.name, p.kind, p.default) for p in ours[:len(theirs)]] == [
      (p.name, p.kind, p.default) for p in theirs]
  extras = ours[len(theirs):]
  assert all(p.default is not inspect.Parameter.empty for p in extras)
  expected_extras = {'get_rlds_step_features': [],
                     'create_trajectory_data_spec': ['policy_info_fn',
                                                     'strict']}.get(
                                                         name, ['strict'])
  assert [p.name for p in extras] == expected_extras
  assert all(p.kind is inspect.Parameter.KEYWORD_ONLY and p.default is False
             for p in extras if p.name == 'strict')


def test_step_features_equal_tf_agents():
  assert (rlds_reverb.get_rlds_step_features() ==
          rlds_to_reverb.get_rlds_step_features())


def test_subpackages_load_on_attribute_access():
  """The lazy package still gives `rlds_reverb.specs`, etc., without imports."""
  code = ('import rlds_reverb, sys; '
          'assert "tensorflow" not in sys.modules; '
          'assert "apache_beam" not in sys.modules; '
          'print(rlds_reverb.specs.table_signature.__name__, '
          'rlds_reverb.convert.trajectory_blocks.__name__)')
  result = subprocess.run([sys.executable, '-c', code], capture_output=True,
                          text=True, check=False)
  assert result.returncode == 0, result.stderr
  assert result.stdout.split() == ['table_signature', 'trajectory_blocks']


def test_encoded_mode_keywords_are_pinned():
  """The encoded-image mode's keywords (issue 23), default 'raw' = before."""
  for function in (rlds_reverb.push, rlds_reverb.push_nstep_transitions,
                   rlds_reverb.push_shards, rlds_reverb.build_checkpoint,
                   rlds_reverb.build_nstep_checkpoint):
    parameters = inspect.signature(function).parameters
    assert [(name, parameters[name].default) for name in
            ('images', 'image_format', 'image_fields')] == [
                ('images', 'raw'), ('image_format', 'png'),
                ('image_fields', None)], function.__name__
  parameters = inspect.signature(rlds_reverb.decode_images).parameters
  assert list(parameters) == ['dataset', 'stored_spec_or_signature',
                              'num_parallel_calls']
  from tf_agents.replay_buffers import reverb_replay_buffer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  assert issubclass(rlds_reverb.EncodedReplayBuffer,
                    reverb_replay_buffer.ReverbReplayBuffer)
