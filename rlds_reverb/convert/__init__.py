"""Conversion of RLDS episodes to TF-Agents trajectories (no Reverb here).

Names load lazily (`rlds_reverb._util.lazy`): importing one module of the package
(`convert.episodes`, `convert.encoded`) does not import the others.
"""

from rlds_reverb._util import lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, {
    'convert_rlds_to_trajectories': 'rlds_reverb.convert.trajectories',
    'trajectory_blocks': 'rlds_reverb.convert.trajectories',
    'TrajectoryBlock': 'rlds_reverb.convert.trajectories',
    'convert_rlds_to_nstep_transitions': 'rlds_reverb.convert.nstep',
    'create_nstep_transition_spec': 'rlds_reverb.convert.nstep',
    'NStepTransition': 'rlds_reverb.convert.nstep',
})
