"""Field names, step specs, trajectory specs and table signatures.

Names load lazily (`rlds_reverb._util.lazy`): `fields`, `paths` and `step_spec`
need only TensorFlow, and what reads datasets (`rlds_reverb.load`) imports
them without TF-Agents (and gym, which it imports).
"""

from rlds_reverb._util import lazy

__getattr__, __dir__, __all__ = lazy.attach(__name__, {
    'get_rlds_step_features': 'rlds_reverb.specs.fields',
    'check_item_signature': 'rlds_reverb.specs.signature',
    'check_table_signature': 'rlds_reverb.specs.signature',
    'table_signature': 'rlds_reverb.specs.signature',
    'step_format': 'rlds_reverb.specs.step_spec',
    'StepFormat': 'rlds_reverb.specs.step_spec',
    'steps_spec': 'rlds_reverb.specs.step_spec',
    'create_trajectory_data_spec': 'rlds_reverb.specs.trajectory_specs',
    'trajectory_spec': 'rlds_reverb.specs.trajectory_specs',
})
