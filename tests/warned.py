"""The package's warnings among those that `pytest.warns` recorded.

`pytest.warns` records every warning issued inside its block, and the
garbage collector may finalize there an object an earlier test left
unclosed: a `ResourceWarning` ('unclosed file <_io.BufferedRandom
name=18>') failed test_checked_push.py in the .ci/run of 2026-12-07. What a
test compares is what the package says: each of its own warnings, in order.
"""

import rlds_reverb


def ours(warned) -> list:
  """The messages of the package's warnings (`RldsReverbWarning`s)."""
  return [str(w.message) for w in warned
          if issubclass(w.category, rlds_reverb.RldsReverbWarning)]
