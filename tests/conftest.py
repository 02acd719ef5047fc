"""Shared fixtures: quiet TensorFlow, real Reverb servers, RLDS datasets."""

import os

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import pytest  # pylint: disable=g-import-not-at-top

from tests import rlds_data  # pylint: disable=g-import-not-at-top
from tests import reverb_tables  # pylint: disable=g-import-not-at-top


@pytest.fixture
def make_server():
  """Starts real Reverb servers on localhost; stops them after the test."""
  servers = []

  def start(tables, **kwargs):
    server = reverb_tables.start_server(tables, **kwargs)
    servers.append(server)
    return server

  yield start
  for server in servers:
    server.stop()


__all__ = ['rlds_data', 'reverb_tables']
