"""RLDS field names and the types shared by the package (cf. `rlds/rlds_types.py`).

Kept as plain strings so that importing them costs nothing; they equal the
constants of the `rlds` package.
"""

from typing import Any, Callable, Dict, List

STEPS = 'steps'
OBSERVATION = 'observation'
ACTION = 'action'
REWARD = 'reward'
DISCOUNT = 'discount'
IS_FIRST = 'is_first'
IS_LAST = 'is_last'
IS_TERMINAL = 'is_terminal'

# The fields every RLDS step has, in TF-Agents' order.
STEP_FEATURES = (
    OBSERVATION, ACTION, REWARD, DISCOUNT, IS_FIRST, IS_LAST, IS_TERMINAL)
# The step flags: boolean scalars.
FLAGS = (IS_FIRST, IS_LAST, IS_TERMINAL)
# Fields a dataset may lack (13 Open X-Embodiment sets have no discount,
# `mt_opt/rlds` no reward either), with the value every step then gets, as
# float32. A terminal last step's discount is still 0: the conversion's rule.
DEFAULTS = {DISCOUNT: 1.0, REWARD: 0.0}
# Episode metadata fields that mark a whole episode as invalid, in order.
INVALID_FLAG_FIELDS = ('invalid', 'is_invalid')

Step = Dict[str, Any]
PolicyInfoFn = Callable[[Step, Step], Any]


def get_rlds_step_features() -> List[str]:
  """Returns the features of an RLDS step, as TF-Agents' function does."""
  return list(STEP_FEATURES)
