"""Marks for tests that need one of the package's extras installed.

The default install (`pip install ".[test]"`, docs/development_tiers.md)
runs every tier without failures: a test that needs an extra is skipped
without it, and the skip names the extra to install. CI installs every
extra, so there they all run.
"""

import importlib.util

import pytest

# extra: the module it installs.
_MODULES = {'beam': 'apache_beam', 'plot': 'matplotlib'}


def installed(extra: str) -> bool:
  return importlib.util.find_spec(_MODULES[extra]) is not None


def needs(extra: str) -> pytest.MarkDecorator:
  """`@needs('beam')`, or `pytest.param(..., marks=needs('beam'))`."""
  return pytest.mark.skipif(
      not installed(extra),
      reason=f'needs the {extra} extra: pip install ".[test,{extra}]"')
