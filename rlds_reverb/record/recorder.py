"""`RldsRecorder`: what a TF-Agents driver collects, as an RLDS dataset.

    PyDriver(env, policy, observers=[recorder])            numpy trajectories
    DynamicStepDriver(tf_env, policy, observers=[recorder.tf_observer])
      -> each driver step: copied into per-leaf columns (`columns`), [B, ...]
      -> env i's boundary (LAST -> FIRST): its episode is whole
           truncated? (`infos`: gym's TimeLimit.truncated, if env is given)
           -> tfds_out.TrajectoryWriter.write (the exporter's writer too):
              RLDS steps + metadata, one record, flushed before the driver
              steps again
    close(final_time_step)   open episodes written as truncations
    close()                  open episodes left out, and said so

Episodes are written as they end, so a batch's episodes come interleaved in
the order they ended. The directory reads back with TFDS, `rlds_reverb.load`
and the command line; a process killed while recording loses no finished
episode (`rlds-reverb recover DIR`, or `append=True`, registers them).
"""

import collections.abc
import dataclasses
import warnings
from typing import Any, List, Optional

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import trajectory as trajectory_lib
import tree

from rlds_reverb._util import wording
from rlds_reverb.convert import step_types
from rlds_reverb.convert import to_rlds
from rlds_reverb.errors import DatasetDirectoryError
from rlds_reverb.errors import FeaturesError
from rlds_reverb.errors import UnfinishedEpisodesWarning
from rlds_reverb.record import episodes
from rlds_reverb.record import infos as infos_lib
from rlds_reverb.record.columns import StepColumns
from rlds_reverb.specs import paths
from rlds_reverb.tfds_out import Durability
from rlds_reverb.tfds_out import ImageEncoding
from rlds_reverb.tfds_out.features import ImageEncodings
from rlds_reverb.tfds_out.trajectories import TrajectoryWriter

_NO_EPISODE = -1


@dataclasses.dataclass(frozen=True)
class RecordingSummary:
  """What a recorder wrote, and what it left out, when it closed."""
  directory: str
  episodes: int  # Written by this recorder.
  steps: int  # Their RLDS steps.
  truncated_at_close: int  # Open episodes close(final_time_step) wrote.
  open_at_close: int  # Open episodes close() left out (no final time step).
  partial: int  # Left out: begun before the recorder saw them, or
  #               restarted (a FIRST step) before they ended.
  left_out_trajectories: int  # Trajectories of the episodes left out.
  total_episodes: int  # In the split, earlier runs' included.

  def __str__(self) -> str:
    text = (f'{self.directory}: recorded '
            f'{wording.count(self.episodes, "episode")}, '
            f'{wording.count(self.steps, "step")} '
            f'({wording.number(self.truncated_at_close)} truncated at '
            f'close); the split has '
            f'{wording.count(self.total_episodes, "episode")}')
    if self.open_at_close or self.partial:
      text += (f'; left out {wording.number(self.open_at_close)} open at '
               f'close and {wording.number(self.partial)} partial episodes '
               f'({_trajectories(self.left_out_trajectories)})')
    return text + '.'


class RldsRecorder:
  """An observer of TF-Agents drivers that writes their episodes as RLDS.

  Usage:

      recorder = RldsRecorder('/data/run1', agent.collect_data_spec, env=env)
      driver = py_driver.PyDriver(env, policy, [replay_observer, recorder],
                                  max_steps=1000)
      time_step, _ = driver.run(env.reset())
      recorder.close(final_time_step=time_step)

  For TF drivers pass `recorder.tf_observer`. Batched environments
  (`batch_size > 1`) are recorded per environment.

  Each episode is one RLDS episode: trajectory t is step t, the boundary
  trajectory (LAST -> FIRST) the last step, holding the final observation;
  `policy_info` is a step field; metadata `episode_id` (0, 1, ... across
  runs appended), `episode_length` (steps), `episode_return` and
  `terminated` (False when a time limit or the recording's end cut it).

  Attributes:
    directory: the dataset's directory.
    recovery: what `append=True` recovered (`tfds_out.Recovery`), else None.
  """

  def __init__(
      self,
      directory: str,
      data_spec: trajectory_lib.Trajectory,
      *,
      name: str = 'recording',
      env: Any = None,
      image_encoding: ImageEncodings = ImageEncoding.PNG,
      policy_info_field: str = to_rlds.POLICY_INFO,
      shard_episodes: int = 1000,
      shard_seconds: Optional[float] = None,
      append: bool = False,
      durability: Durability = Durability.FLUSH,
      version: str = '1.0.0',
      split: str = 'train',
  ):
    """Opens `directory` for recording.

    Args:
      directory: the TFDS dataset directory to write; made if missing,
        needs to be empty unless `append`.
      data_spec: the `Trajectory` spec of what the driver gives
        (`agent.collect_data_spec`, `policy.trajectory_spec`), unbatched.
      name: the dataset's name (letters, digits, _), in its file names.
      env: the environment the driver steps (py, batched or TF), to read
        gym's `TimeLimit.truncated` from its infos; None: episodes end as
        their discounts say (see `rlds_reverb.record.infos`).
      image_encoding: how uint8 [H, W, C] fields are stored: 'png', 'jpeg',
        'none' or {field path: encoding} (`tfds_out.features_from_specs`).
      policy_info_field: the step field holding `policy_info`.
      shard_episodes: episodes per shard file at most.
      shard_seconds: close a shard once this old (checked as episodes end),
        so readers see episodes at least this often; None: never.
      append: add to the dataset in `directory` (recovering it first if a
        recorder was killed there); episode ids continue.
      durability: `Durability.FLUSH` (default: each episode handed to the
        OS before the driver steps again; survives the process being
        killed) or `Durability.FSYNC` (on disk; survives a machine crash,
        ~0.5-1 ms per episode).
      version: the dataset's version, 'X.Y.Z'.
      split: the split written.

    Raises:
      FeaturesError: a spec the recorder or TFDS cannot hold.
      DatasetDirectoryError: `directory` is not empty (and not `append`),
        or holds another dataset.
      ValueError: a bad name, version, split or shard option.
    """
    data_spec = _plain(data_spec)
    self._leaves = episodes.leaves_of(data_spec)
    self._data_spec = data_spec
    self._writer = TrajectoryWriter(
        directory, data_spec, name=name, image_encoding=image_encoding,
        policy_info_field=policy_info_field, version=version, split=split,
        shard_episodes=shard_episodes, shard_seconds=shard_seconds,
        append=append, durability=durability)
    self.directory = self._writer.directory
    self.recovery = self._writer.recovery
    self._env = env
    self._step_type = _field_index(self._leaves, 'step_type')
    self._next_step_type = _field_index(self._leaves, 'next_step_type')
    self._driving: Optional[_Driving] = None
    self._counts = _Counts()
    self._summary: Optional[RecordingSummary] = None

  @property
  def num_episodes(self) -> int:
    """Episodes in the split so far, earlier runs' included."""
    return self._writer.num_episodes

  def __call__(self, trajectory: trajectory_lib.Trajectory) -> None:
    """Records one driver step (PyDriver's observer): numpy values, [B, ...]
    for a batched environment.

    Raises:
      FeaturesError: the trajectory does not fit `data_spec` (structure,
        shape, kind of dtype).
      DatasetDirectoryError: the recorder is closed.
    """
    if self._driving is None:
      self._check_structure(trajectory)
    self._observe(tree.flatten(trajectory))

  def tf_observer(self, trajectory: trajectory_lib.Trajectory) -> tf.Tensor:
    """The observer of TF drivers (`DynamicStepDriver`, ...): records the
    batched trajectory through `tf.numpy_function`, in order with the
    driver's steps; works in `tf.function` and eagerly."""
    self._check_structure(trajectory)
    return tf.numpy_function(self._observe_leaves, tf.nest.flatten(trajectory),
                             tf.bool, stateful=True, name='rlds_recorder')

  def close(self, final_time_step: Any = None) -> RecordingSummary:
    """Writes what can be written, closes the dataset; returns a summary.

    Args:
      final_time_step: the time step the driver's last `run()` returned
        (numpy or tensors, batched as the driver's). With it, each episode
        still open ends with a step holding its final observation: cut by
        the driver's step budget, it is written as a truncation; ended on
        the driver's last step, as its discount and info say. Without it,
        open episodes are left out (an `UnfinishedEpisodesWarning` says how
        many).

    Raises:
      ValueError: `final_time_step` is not the batch's next time step (a
        step type or shape that does not follow what was recorded); nothing
        is written then, and the recorder stays open.
    """
    if self._summary is not None:
      return self._summary
    if self._driving is not None:
      if final_time_step is None:
        self._counts.open_at_close = self._driving.open_episodes
      else:
        self._close_open_episodes(final_time_step)
      self._counts.left_out_trajectories = (
          self._driving.trajectories - self._counts.trajectories)
    self._writer.close()
    self._summary = self._counts.summary(self.directory,
                                         self._writer.num_episodes)
    if self._summary.open_at_close or self._summary.partial:
      warnings.warn(UnfinishedEpisodesWarning(_left_out_text(self._summary)),
                    stacklevel=2)
    return self._summary

  def __enter__(self) -> 'RldsRecorder':
    return self

  def __exit__(self, *exc_info) -> None:
    """Closes without a final time step: open episodes are left out."""
    self.close()

  def _check_structure(self, trajectory) -> None:
    try:
      tree.assert_same_structure(self._data_spec, trajectory)
    except (TypeError, ValueError) as e:
      raise FeaturesError(
          f'The trajectory does not have the structure of data_spec: {e}'
      ) from None

  def _observe_leaves(self, *leaves) -> np.bool_:
    self._observe(leaves)
    return np.bool_(True)

  def _observe(self, leaves) -> None:
    """One driver step's flat leaves: kept, and episodes that end written."""
    if self._summary is not None:
      raise DatasetDirectoryError(
          f'The recorder of {self.directory} is closed; open another with '
          f'append=True to record more.')
    if self._driving is None:
      self._driving = self._start(leaves)
    driving = self._driving
    driving.check(leaves)
    index = driving.columns.append(leaves)
    step_type = leaves[self._step_type]
    next_step_type = leaves[self._next_step_type]
    if driving.batch_size is None:
      if step_type != step_types.MID or next_step_type == step_types.LAST:
        self._advance(0, int(step_type), int(next_step_type), index)
    else:
      for env in np.flatnonzero((step_type != step_types.MID) |
                                (next_step_type == step_types.LAST)):
        self._advance(int(env), int(step_type[env]),
                      int(next_step_type[env]), index)
    if not driving.open_episodes:
      driving.columns.release(index + 1)

  def _start(self, leaves) -> '_Driving':
    """The state of a recording, from its first trajectory's batch shape."""
    driving = _Driving(self._leaves, leaves, self._step_type)
    if self._env is not None:
      driving.infos = infos_lib.Infos(self._env, driving.batch_size)
    step_type = np.atleast_1d(leaves[self._step_type])
    self._counts.partial += int(np.sum(step_type != step_types.FIRST))
    return driving

  def _advance(self, env: int, step_type: int, next_step_type: int,
               index: int) -> None:
    """Env `env`'s episode after the trajectory of driver step `index`."""
    driving = self._driving
    if step_type == step_types.FIRST:
      if driving.starts[env] != _NO_EPISODE:
        self._counts.partial += 1  # Restarted before it ended.
      driving.begin(env, index)
    elif driving.starts[env] == _NO_EPISODE:
      return  # Its beginning came before the recorder's.
    if next_step_type == step_types.LAST and driving.infos is not None:
      driving.truncated[env] = driving.infos.truncated(env)
    if step_type == step_types.LAST:
      start = driving.end(env)
      self._write(driving.columns.window(
          start, index + 1, None if driving.batch_size is None else env),
                  truncated=driving.truncated[env])

  def _write(self, leaves: List[np.ndarray], truncated: bool,
             synthetic_steps: int = 0) -> None:
    trajectory = tree.unflatten_as(self._data_spec, list(leaves))
    steps = self._writer.write(trajectory, truncated=truncated)
    self._counts.add(steps, steps - synthetic_steps)

  def _close_open_episodes(self, final_time_step) -> None:
    """Each open episode ended by a step built from `final_time_step`;
    all are checked before any is written."""
    driving = self._driving
    final = _FinalTimeStep(final_time_step, driving.batch_size)
    closing = []
    for env in driving.open_envs():
      window = [np.array(leaf) for leaf in driving.columns.window(
          driving.starts[env], driving.columns.next_step,
          None if driving.batch_size is None else env)]
      last = int(window[self._next_step_type][-1])
      final.check(env, last, self._leaves)
      truncated = driving.truncated[env]
      if last == step_types.MID:  # Cut by the driver's step budget.
        window[self._next_step_type][-1] = step_types.LAST
        truncated = True
      step = episodes.closing_step(self._leaves, final.observation(env))
      closing.append(([np.concatenate([w, s]) for w, s in zip(window, step)],
                      truncated))
    for leaves, truncated in closing:
      self._write(leaves, truncated, synthetic_steps=1)
      self._counts.truncated_at_close += int(truncated)


@dataclasses.dataclass
class _Counts:
  episodes: int = 0
  steps: int = 0
  trajectories: int = 0  # The driver's, written (closing steps excluded).
  truncated_at_close: int = 0
  open_at_close: int = 0
  partial: int = 0
  left_out_trajectories: int = 0

  def add(self, steps: int, trajectories: int) -> None:
    self.episodes += 1
    self.steps += steps
    self.trajectories += trajectories

  def summary(self, directory: str, total: int) -> RecordingSummary:
    return RecordingSummary(
        directory, self.episodes, self.steps, self.truncated_at_close,
        self.open_at_close, self.partial, self.left_out_trajectories, total)


class _Driving:
  """A recording's state once the driver's batch shape is known."""

  def __init__(self, leaves: List[episodes.Leaf], first: List[Any],
               step_type_index: int):
    outer = np.shape(first[step_type_index])
    if len(outer) > 1:
      raise FeaturesError(
          f'The trajectory has step_type of shape '
          f'{paths.shape_text(outer)}; expected '
          f'[] (unbatched) or [batch_size].')
    self.batch_size = outer[0] if outer else None
    self._leaves = leaves
    self._shapes = [outer + leaf.shape for leaf in leaves]
    self._check_kinds(first)
    self.columns = StepColumns([leaf.dtype for leaf in leaves], self._shapes)
    count = self.batch_size or 1
    self.starts = [_NO_EPISODE] * count
    self.truncated = [False] * count
    self.open_episodes = 0
    self.infos: Optional[infos_lib.Infos] = None

  @property
  def trajectories(self) -> int:
    """The driver's trajectories recorded so far, all environments'."""
    return self.columns.next_step * (self.batch_size or 1)

  def check(self, leaves) -> None:
    """Every leaf has the shape of its spec (batched as the first step)."""
    if len(leaves) != len(self._shapes):
      raise FeaturesError(
          f'The trajectory has {len(leaves)} leaves; data_spec has '
          f'{len(self._shapes)}.')
    for leaf, shape, spec in zip(leaves, self._shapes, self._leaves):
      # Arrays' own shape first: np.shape per leaf costs more than the rest
      # of a step's bookkeeping.
      if getattr(leaf, 'shape', None) != shape and np.shape(leaf) != shape:
        raise FeaturesError(
            f'Trajectory field {spec.path} has shape '
            f'{paths.shape_text(np.shape(leaf))}; expected '
            f'{paths.shape_text(shape)} (data_spec '
            f'{paths.shape_text(spec.shape)}'
            f'{", batched" if self.batch_size else ""}).')

  def _check_kinds(self, leaves) -> None:
    for leaf, spec in zip(leaves, self._leaves):
      kind = np.asarray(leaf).dtype.kind
      if kind not in _ACCEPTED_KINDS[spec.dtype.kind]:
        raise FeaturesError(
            f'Trajectory field {spec.path} holds '
            f'{paths.dtype_text(np.asarray(leaf).dtype)} values; data_spec '
            f'says {paths.dtype_text(spec.dtype)}.')

  def begin(self, env: int, index: int) -> None:
    if self.starts[env] == _NO_EPISODE:
      self.open_episodes += 1
    self.starts[env] = index
    self.truncated[env] = False
    self._release()

  def end(self, env: int) -> int:
    """Env `env`'s episode ended; returns the step where it began."""
    start = self.starts[env]
    self.starts[env] = _NO_EPISODE
    self.open_episodes -= 1
    self._release()
    return start

  def open_envs(self) -> List[int]:
    return [env for env, start in enumerate(self.starts)
            if start != _NO_EPISODE]

  def _release(self) -> None:
    """Rows before the oldest open episode are not needed any more."""
    open_starts = [s for s in self.starts if s != _NO_EPISODE]
    if open_starts:
      self.columns.release(min(open_starts))


# Value kinds (numpy `dtype.kind`) each spec kind takes.
_ACCEPTED_KINDS = {'b': 'b', 'i': 'biu', 'u': 'biu', 'f': 'fiu', 'c': 'cfiu',
                   'O': 'SUO'}


class _FinalTimeStep:
  """`close`'s final time step, as numpy, checked against the recording."""

  def __init__(self, time_step: Any, batch_size: Optional[int]):
    time_step = tree.map_structure(np.asarray, time_step)
    self._batch_size = batch_size
    self._step_type = time_step.step_type
    outer = () if batch_size is None else (batch_size,)
    if np.shape(self._step_type) != outer:
      raise ValueError(
          f'final_time_step has step_type of shape '
          f'{paths.shape_text(np.shape(self._step_type))}; the driver gave '
          f'trajectories of batch shape {paths.shape_text(outer)}.')
    self._observation = tree.flatten(time_step.observation)

  def check(self, env: int, last_next_step_type: int,
            leaves: List[episodes.Leaf]) -> None:
    """The final time step is what env `env`'s last trajectory led to."""
    found = int(self._step_type if self._batch_size is None
                else self._step_type[env])
    if found != last_next_step_type:
      name = step_types.name
      raise ValueError(
          f'final_time_step of env {env} has step type {name(found)}, but '
          f'its last trajectory recorded leads to {name(last_next_step_type)}'
          f': pass the time step the last run() returned.')
    specs = [leaf for leaf in leaves if leaf.field == 'observation']
    if len(self._observation) != len(specs):
      raise ValueError(
          f'final_time_step has {len(self._observation)} observation leaves; '
          f'data_spec has {len(specs)}.')
    for value, spec in zip(self.observation(env), specs):
      if np.shape(value) != spec.shape:
        raise ValueError(
            f'final_time_step {spec.path} of env {env} has shape '
            f'{paths.shape_text(np.shape(value))}; expected '
            f'{paths.shape_text(spec.shape)}.')

  def observation(self, env: int) -> List[np.ndarray]:
    if self._batch_size is None:
      return self._observation
    return [leaf[env] for leaf in self._observation]


def _plain(structure: Any) -> Any:
  """`structure` with plain dicts and namedtuples: the attributes of a
  tf.Module (policy.trajectory_spec) come wrapped for tracking."""
  structure = tf.nest.map_structure(lambda leaf: leaf, structure)  # Tuples.
  if isinstance(structure, collections.abc.Mapping):  # Not typing's.
    return {key: _plain(value) for key, value in structure.items()}
  if isinstance(structure, tuple) and hasattr(structure, '_fields'):
    return type(structure)(*[_plain(value) for value in structure])
  return structure


def _field_index(leaves: List[episodes.Leaf], field: str) -> int:
  return next(i for i, leaf in enumerate(leaves) if leaf.field == field)


def _left_out_text(summary: RecordingSummary) -> str:
  parts = []
  if summary.open_at_close:
    parts.append(f'{wording.number(summary.open_at_close)} still open at '
                 f'close() (pass final_time_step=, the time step run() '
                 f'returned, to write them as truncations)')
  if summary.partial:
    parts.append(f'{wording.number(summary.partial)} partial (begun before '
                 f'the recorder saw them, or restarted before they ended)')
  return (f'{summary.directory}: left out {" and ".join(parts)}: '
          f'{_trajectories(summary.left_out_trajectories)} not recorded.')


def _trajectories(count: int) -> str:
  return wording.count(count, 'trajectory', 'trajectories')
