"""Package names that import their module on first use (PEP 562).

    __getattr__, __dir__, __all__ = lazy.attach(__name__, {
        'load': 'rlds_reverb.sources.opening', ...})

Why: a package's `__init__` runs whenever one of its modules is imported.
Eager re-exports made `from rlds_reverb.specs import fields` import TF-Agents
(and with it gym, which prints a notice on stderr, TensorFlow Probability
and every agent) for `rlds_reverb.load`, which needs none of them. Each name
imports only the module that defines it.
"""

import importlib
import sys
from typing import Any, Callable, Dict, List, Tuple


def attach(package: str, names: Dict[str, str]
           ) -> Tuple[Callable[[str], Any], Callable[[], List[str]], List[str]]:
  """`__getattr__`, `__dir__` and `__all__` for `package`, whose public
  `names` each live in the module named with them."""

  def __getattr__(name: str) -> Any:  # pylint: disable=invalid-name
    if name not in names:
      raise AttributeError(f'module {package!r} has no attribute {name!r}')
    value = getattr(importlib.import_module(names[name]), name)
    setattr(sys.modules[package], name, value)  # Once: later reads are plain.
    return value

  def __dir__() -> List[str]:  # pylint: disable=invalid-name
    return sorted(set(vars(sys.modules[package])) | set(names))

  return __getattr__, __dir__, list(names)
