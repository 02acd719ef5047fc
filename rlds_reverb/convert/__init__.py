"""Conversion of RLDS episodes to TF-Agents trajectories (no Reverb here)."""

from rlds_reverb.convert.trajectories import convert_rlds_to_trajectories
from rlds_reverb.convert.trajectories import trajectory_blocks
from rlds_reverb.convert.trajectories import TrajectoryBlock
from rlds_reverb.convert.nstep import convert_rlds_to_nstep_transitions
from rlds_reverb.convert.nstep import create_nstep_transition_spec
from rlds_reverb.convert.nstep import NStepTransition
