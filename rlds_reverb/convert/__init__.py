"""Conversion of RLDS episodes to TF-Agents trajectories (no Reverb here)."""

from rlds_reverb.convert.trajectories import convert_rlds_to_trajectories
from rlds_reverb.convert.trajectories import trajectory_blocks
from rlds_reverb.convert.trajectories import TrajectoryBlock
