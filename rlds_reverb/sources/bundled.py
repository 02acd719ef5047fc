"""The bundled dataset: CartPole-v1 episodes that ship in the package, so
that `rlds-reverb demo` and the docs run on a machine without data.

    'bundled:cartpole' -> rlds_reverb/data/cartpole/ (a TFDS directory)
"""

import importlib.resources


BUNDLED = 'bundled:cartpole'


def bundled_dataset_dir() -> str:
  """The bundled CartPole TFDS directory, wherever the package is installed."""
  return str(importlib.resources.files('rlds_reverb') / 'data' / 'cartpole')
