"""rlds_reverb: RLDS datasets to TF-Agents trajectories in Reverb tables.

A drop-in for `tf_agents.replay_buffers.rlds_to_reverb` (the first four names)
plus a push API that needs no TF-Agents observer.
"""

from rlds_reverb.convert import convert_rlds_to_nstep_transitions
from rlds_reverb.convert import convert_rlds_to_trajectories
from rlds_reverb.convert import create_nstep_transition_spec
from rlds_reverb.convert import NStepTransition
from rlds_reverb.errors import ReverbTimeoutError
from rlds_reverb.errors import RldsReverbError
from rlds_reverb.errors import ServerUnavailableError
from rlds_reverb.errors import SignatureMismatchError
from rlds_reverb.errors import StepSpecError
from rlds_reverb.errors import TableNotFoundError
from rlds_reverb.specs import create_trajectory_data_spec
from rlds_reverb.specs import get_rlds_step_features
from rlds_reverb.write import EndOfEpisode
from rlds_reverb.write import push
from rlds_reverb.write import push_nstep_transitions
from rlds_reverb.write import push_rlds_to_reverb
from rlds_reverb.write import PushResult

__all__ = [
    'get_rlds_step_features',
    'create_trajectory_data_spec',
    'convert_rlds_to_trajectories',
    'push_rlds_to_reverb',
    'push',
    'PushResult',
    'push_nstep_transitions',
    'convert_rlds_to_nstep_transitions',
    'create_nstep_transition_spec',
    'NStepTransition',
    'EndOfEpisode',
    'RldsReverbError',
    'StepSpecError',
    'SignatureMismatchError',
    'ReverbTimeoutError',
    'ServerUnavailableError',
    'TableNotFoundError',
]
