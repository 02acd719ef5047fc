"""Field names, step specs, trajectory specs and table signatures."""

from rlds_reverb.specs.fields import get_rlds_step_features
from rlds_reverb.specs.signature import check_item_signature
from rlds_reverb.specs.signature import check_table_signature
from rlds_reverb.specs.signature import table_signature
from rlds_reverb.specs.step_spec import step_format
from rlds_reverb.specs.step_spec import StepFormat
from rlds_reverb.specs.step_spec import steps_spec
from rlds_reverb.specs.trajectory_spec import create_trajectory_data_spec
from rlds_reverb.specs.trajectory_spec import trajectory_spec
