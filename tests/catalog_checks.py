"""The sweep's checks of one catalog structure, through public APIs only.

    ours (rlds_reverb)                      TF-Agents (rlds_to_reverb)
    validate: no problem, every step        create_trajectory_data_spec: the
    episode_stats: lengths and returns        data's dtypes and shapes
    create_trajectory_data_spec: the        convert_rlds_to_trajectories: the
      data's dtypes and shapes                rules' values, step by step
    convert_rlds_to_trajectories: the       push_rlds_to_reverb through a
      rules' values, step by step             ReverbAddTrajectoryObserver(2):
    push (2-step items) into a table          every item, read back equal
      signed table_signature(spec): every
      item, read back equal, in order

Each check raises at the first difference (AssertionError), or lets the
library's own error through. Items are read back from real Reverb servers on
localhost, FIFO tables drained once (`drain`), and compared in insertion
order with `catalog_data.expected_items` of what TFDS decodes from the
directory.
"""

import dataclasses
import functools
import warnings
from typing import Callable, List, Optional, Sequence

import numpy as np
import tensorflow as tf
import tensorflow_datasets as tfds
from tf_agents.replay_buffers import reverb_utils
from tf_agents.replay_buffers import rlds_to_reverb as tfa_rlds
from tf_agents.specs import tensor_spec
import tree

import rlds_reverb
from rlds_reverb import stats
from rlds_reverb import validation
from rlds_reverb._util import wording
from tests import catalog
from tests import catalog_data
from tests import reverb_tables
from tests.reverb_tables import client_of
from tests.reverb_tables import drain

TABLE = 'items'
SEQUENCE_LENGTH = 2


@dataclasses.dataclass(frozen=True)
class Case:
  """A structure's synthetic TFDS directory and its decoded source."""
  structure: catalog.Structure
  directory: str
  episodes: List[catalog_data.Episode]

  @functools.cached_property
  def trajectories(self):
    return catalog_data.expected_trajectories(self.episodes)

  @functools.cached_property
  def items(self):
    return catalog_data.expected_items(self.episodes)

  @functools.cached_property
  def loaded(self) -> tf.data.Dataset:
    """The directory loaded once: each check reads it anew, as a user who
    validates, then pushes, does (its whole-read dataset is built once)."""
    return rlds_reverb.load(self.directory)

  @property
  def lengths(self) -> List[int]:
    return [len(e['steps']['is_first']) for e in self.episodes]


def prepare(structure: catalog.Structure, data_dir: str) -> Case:
  directory = catalog_data.write(structure, data_dir)
  return Case(structure, directory, catalog_data.source_episodes(directory))


# --- Ours. -------------------------------------------------------------------

def check_validation(case: Case) -> None:
  report = validation.validate(case.loaded)
  got = (report.episodes, report.steps, report.problems)
  want = (len(case.lengths), sum(case.lengths), [])
  assert got == want, f'validate: (episodes, steps, problems) {got}, not {want}'


def check_statistics(case: Case) -> None:
  result = stats.episode_stats(case.loaded)
  assert result.lengths.tolist() == case.lengths, (
      f'episode_stats: lengths {result.lengths.tolist()}, not {case.lengths}')
  returns = [_episode_return(e) for e in case.episodes]
  np.testing.assert_allclose(result.returns, returns, rtol=1e-6,
                             err_msg='episode_stats: returns')


def check_spec(case: Case) -> None:
  spec = rlds_reverb.create_trajectory_data_spec(
      case.loaded)
  catalog_data.assert_spec_matches(spec, case.trajectories[0], 'spec')


def check_conversion(case: Case) -> None:
  got = list(rlds_reverb.convert_rlds_to_trajectories(
      case.loaded))
  _assert_all_equal(case.trajectories, got, 'trajectory')


def check_push(case: Case) -> None:
  data = case.loaded
  signature = rlds_reverb.specs.table_signature(
      rlds_reverb.create_trajectory_data_spec(data))
  server = reverb_tables.start_server(
      [reverb_tables.fifo_table(TABLE, signature)])
  try:
    with warnings.catch_warnings(record=True) as caught:
      warnings.simplefilter('always')
      result = rlds_reverb.push(data, reverb_tables.address(server), TABLE,
                                sequence_length=SEQUENCE_LENGTH)
    got = [item for _, item in drain(server, TABLE)]
  finally:
    server.stop()
  assert (result.episodes, result.items) == (len(case.lengths),
                                             len(case.items)), (
      f'push: (episodes, items) ({result.episodes}, {result.items}), not '
      f'({len(case.lengths)}, {len(case.items)})')
  _assert_all_equal(case.items, got, 'item')
  # The data has a single-step episode on purpose: the push must say so.
  short = [w for w in caught
           if issubclass(w.category, rlds_reverb.ShortEpisodesWarning)]
  assert len(short) == int(min(case.lengths) < SEQUENCE_LENGTH), (
      f'push: {len(short)} ShortEpisodesWarning(s) for episode lengths '
      f'{case.lengths}')


OURS = (check_validation, check_statistics, check_spec, check_conversion,
        check_push)


# --- TF-Agents' own module, on the same data. --------------------------------

def tfa_data(case: Case):
  """The directory as a TF-Agents user reads it: TFDS, in written order."""
  return tfds.builder_from_directory(case.directory).as_dataset(split='train')


def tfa_check_spec(case: Case) -> None:
  spec = tfa_rlds.create_trajectory_data_spec(tfa_data(case))
  catalog_data.assert_spec_matches(spec, case.trajectories[0], 'spec')


def tfa_check_conversion(case: Case) -> None:
  got = list(tfa_rlds.convert_rlds_to_trajectories(tfa_data(case)))
  _assert_all_equal(case.trajectories, got, 'trajectory')


def tfa_check_push(case: Case) -> None:
  data = tfa_data(case)
  signature = tensor_spec.add_outer_dim(
      tfa_rlds.create_trajectory_data_spec(data))
  server = reverb_tables.start_server(
      [reverb_tables.fifo_table(TABLE, signature)])
  try:
    observer = reverb_utils.ReverbAddTrajectoryObserver(
        client_of(server), TABLE, SEQUENCE_LENGTH)
    tfa_rlds.push_rlds_to_reverb(data, observer)
    observer.flush()
    observer.close()
    got = [item for _, item in drain(server, TABLE)]
  finally:
    server.stop()
  _assert_all_equal(case.items, got, 'item')


TF_AGENTS = (tfa_check_spec, tfa_check_conversion, tfa_check_push)


def first_failure(checks: Sequence[Callable[[Case], None]],
                  case: Case) -> Optional[str]:
  """None if every check passes, else the first failure on one line."""
  for check in checks:
    try:
      check(case)
    except Exception as e:  # pylint: disable=broad-except
      name = check.__name__.replace('tfa_', '').replace('check_', '')
      return wording.one_line(f'{name}: {type(e).__name__}: {last_line(e)}')
  return None


def last_line(error: Exception) -> str:
  """The line that says what went wrong (TF puts its traceback first)."""
  lines = [line for line in str(error).splitlines() if line.strip()]
  return lines[-1][:240] if lines else ''


def _assert_all_equal(expected, got, kind: str) -> None:
  assert len(got) == len(expected), (
      f'{len(got)} {kind}s, expected {len(expected)}')
  for i, (want, have) in enumerate(zip(expected, got)):
    catalog_data.assert_equal(want, have, f'{kind} {i}')


def _episode_return(episode) -> float:
  steps = episode['steps']
  if 'reward' not in steps:
    return 0.0
  return float(sum(np.sum(np.asarray(leaf, np.float64))
                   for leaf in tree.flatten(steps['reward'])))
