"""A quiet Dask worker for `rlds_reverb.beam`'s pipelines: a preload module.

    dask worker tcp://SCHEDULER:8786 --preload rlds_reverb.dask_worker

Dask runs `dask_setup` in each worker process as it starts, before any task
imports TensorFlow (a worker does when it unpickles its first task). Without
it each worker prints TensorFlow's start-up and runtime lines, gym's notice
and TFDS' deprecation warnings. Outside `rlds_reverb.beam` on purpose:
importing that package imports TensorFlow, too early for its log level.
"""

import logging
import os


def dask_setup(worker=None) -> None:  # pylint: disable=unused-argument
  """TensorFlow's C++ lines off (unless the worker's environment sets their
  level), our import hook that drops gym's and TensorFlow's start-up lines
  (`rlds_reverb.known_lines`), absl's and Beam's Python warnings off."""
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel,unused-import
  logging.getLogger('absl').setLevel(logging.ERROR)
  logging.getLogger('apache_beam').setLevel(logging.ERROR)
