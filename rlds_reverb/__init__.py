"""rlds_reverb: RLDS datasets to TF-Agents trajectories in Reverb tables.

A drop-in for `tf_agents.replay_buffers.rlds_to_reverb` (the first four names)
plus a checked push that needs no TF-Agents observer, n-step transitions,
RLDS sources, pushes in several processes, Reverb tables as data
(`rlds_reverb.tables`: the usual recipes, one builder), mixed
offline/online replay for offline-to-online training and replay mixtures
over many servers and datasets (exact shares in every batch), and the way
back:
`RldsRecorder` records what a TF-Agents driver collects as an RLDS dataset,
and `export` writes a Reverb table (a checkpoint's) as one. Apache Beam
transforms are in `rlds_reverb.beam` (needs `pip install
"rlds_reverb[beam]"`).

Names load lazily (PEP 562): `import rlds_reverb` imports neither TensorFlow
nor Beam, so the command line can silence TensorFlow before it starts. It
registers one exit hook (`clean_exit`): scripts end without tracebacks; and
one import hook (`known_lines`): TensorFlow's start-up lines and gym's
notice are dropped when the package is what imports them.
"""

import importlib
from typing import Any, List

from rlds_reverb import known_lines
from rlds_reverb._util import clean_exit
from rlds_reverb.errors import AddressError
from rlds_reverb.errors import CapacityWarning
from rlds_reverb.errors import CheckpointError
from rlds_reverb.errors import CheckpointReadError
from rlds_reverb.errors import CheckpointWriteError
from rlds_reverb.errors import ColumnMismatchError
from rlds_reverb.errors import DataError
from rlds_reverb.errors import DataReadError
from rlds_reverb.errors import DatasetDirectoryError
from rlds_reverb.errors import DatasetNotPreparedError
from rlds_reverb.errors import ExportError
from rlds_reverb.errors import FeaturesError
from rlds_reverb.errors import ImageFieldError
from rlds_reverb.errors import LostEpisodesWarning
from rlds_reverb.errors import MalformedEpisodeError
from rlds_reverb.errors import MixedReplayError
from rlds_reverb.errors import OptionsError
from rlds_reverb.errors import PipelineFailedError
from rlds_reverb.errors import ResumeStateError
from rlds_reverb.errors import ReverbTimeoutError
from rlds_reverb.errors import RldsReverbError
from rlds_reverb.errors import RldsReverbWarning
from rlds_reverb.errors import RunnerError
from rlds_reverb.errors import ServerError
from rlds_reverb.errors import ServerLostWarning
from rlds_reverb.errors import ServerUnavailableError
from rlds_reverb.errors import ServersFileError
from rlds_reverb.errors import SettingError
from rlds_reverb.errors import ShardsFailedError
from rlds_reverb.errors import ShortEpisodesWarning
from rlds_reverb.errors import SignatureMismatchError
from rlds_reverb.errors import SourceError
from rlds_reverb.errors import StepSpecError
from rlds_reverb.errors import TableNotEmptyWarning
from rlds_reverb.errors import TableNotFoundError
from rlds_reverb.errors import TableOptionsError
from rlds_reverb.errors import UnfinishedEpisodesWarning
from rlds_reverb.known_lines import quiet_known_lines

# A script's module-level servers and datasets are freed before the modules
# their __del__ needs are emptied, even after `import tensorflow_datasets`.
clean_exit.register()
# Before any module of ours imports TensorFlow or gym: their start-up lines.
known_lines.install()

# Public name -> the module that defines it.
_LAZY = {
    'get_rlds_step_features': 'rlds_reverb.specs.fields',
    'create_trajectory_data_spec': 'rlds_reverb.specs.trajectory_specs',
    'convert_rlds_to_trajectories': 'rlds_reverb.convert.trajectories',
    'push_rlds_to_reverb': 'rlds_reverb.write',
    'push': 'rlds_reverb.checked_push',
    'PushOptions': 'rlds_reverb.push_options',
    'ImageStorage': 'rlds_reverb.push_options',
    'OnInvalid': 'rlds_reverb.push_options',
    'PushResult': 'rlds_reverb.checked_push',
    'SkippedEpisode': 'rlds_reverb.checked_push',
    'EndOfEpisode': 'rlds_reverb.push_options',
    'push_nstep_transitions': 'rlds_reverb.checked_push',
    'convert_rlds_to_nstep_transitions': 'rlds_reverb.convert.nstep',
    'create_nstep_transition_spec': 'rlds_reverb.convert.nstep',
    'NStepTransition': 'rlds_reverb.convert.nstep',
    'load': 'rlds_reverb.sources.opening',
    'push_shards': 'rlds_reverb.parallel',
    'build_checkpoint': 'rlds_reverb.build',
    'build_nstep_checkpoint': 'rlds_reverb.build',
    'build_shards': 'rlds_reverb.parallel',
    'BuildResult': 'rlds_reverb.build',
    'BuildProgress': 'rlds_reverb.build',
    'mixed_replay': 'rlds_reverb.mixed',
    'mixed_replay_tables': 'rlds_reverb.mixed',
    'replay_mixture': 'rlds_reverb.mixture.replay',
    'ShardedReplayBuffer': 'rlds_reverb.sharded_buffer',
    'check_port_free': 'rlds_reverb.addresses',
    'RldsRecorder': 'rlds_reverb.record',
    'ImageEncoding': 'rlds_reverb.tfds_out.features',
    'RecordingSummary': 'rlds_reverb.record',
    'recover': 'rlds_reverb.tfds_out.recovery',
    'export': 'rlds_reverb.exporter',
    'ExportReport': 'rlds_reverb.exporter',
    'EncodedReplayBuffer': 'rlds_reverb.decoded',
    'decode_images': 'rlds_reverb.decoded',
    'statistics': 'rlds_reverb.step_stats.reading',
    'DatasetStatistics': 'rlds_reverb.step_stats.result',
}

__all__ = [
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


_SUBPACKAGES = ('convert', 'specs', 'write', 'sources', 'cli', 'validation',
                'stats', 'parallel', 'checked_push', 'beam',
                'tfds_out', 'record', 'decoded', 'tables', 'build',
                'step_stats')


def __getattr__(name: str) -> Any:
  if name in _SUBPACKAGES:  # `rlds_reverb.specs.table_signature` works.
    return importlib.import_module(f'rlds_reverb.{name}')
  if name not in _LAZY:
    raise AttributeError(f"module 'rlds_reverb' has no attribute {name!r}")
  value = getattr(importlib.import_module(_LAZY[name]), name)
  globals()[name] = value
  return value


def __dir__() -> List[str]:
  return sorted(set(globals()) | set(__all__))
