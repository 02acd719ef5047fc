"""rlds_reverb: RLDS datasets to TF-Agents trajectories in Reverb tables."""
from rlds_reverb.convert import convert_rlds_to_trajectories
from rlds_reverb.specs import create_trajectory_data_spec
from rlds_reverb.specs import get_rlds_step_features
