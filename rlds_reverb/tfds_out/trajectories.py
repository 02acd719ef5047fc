"""`TrajectoryWriter`: TF-Agents trajectories, an episode at a time, as an RLDS
dataset; the one writer of the recorder and the exporter.

    TrajectoryWriter(dir, trajectory_spec, name=..., image_encoding=...)
      features: to_rlds.rlds_step_spec(spec) + metadata_spec(spec)
    write(trajectory of one whole episode, [T, ...] leaves, truncated=...)
      -> to_rlds.trajectories_to_steps             the T RLDS steps
      -> + episode_id, episode_length, episode_return, terminated
      -> EpisodeWriter.write: checked, one record, durable on return

The metadata, the same in a recording and an export:

    episode_id      the episode's index in the split: 0, 1, ... in the order
                    written (a recording continues it across appends; an
                    export numbers its episodes from 0, in the order they
                    were written to the table)
    episode_length  its RLDS steps: its trajectories (a recording's include
                    the boundary step that holds the final observation)
    episode_return  the sum of its rewards, in the reward's dtype and shape
                    (the boundary's reward is 0)
    terminated      `is_terminal` of its last step: to_rlds's rule (the
                    trajectory before the boundary has discount 0), unless
                    the writer is told the episode was truncated (a
                    recording knows a time limit or its own end cut it; an
                    export only has the discounts)
"""

from typing import Any, Dict

import numpy as np
import tensorflow as tf
from tf_agents.trajectories import trajectory as trajectory_lib

from rlds_reverb.convert import to_rlds
from rlds_reverb.specs import fields
from rlds_reverb.tfds_out import features as features_lib
from rlds_reverb.tfds_out import writer as writer_lib

EPISODE_ID = 'episode_id'
EPISODE_LENGTH = 'episode_length'
EPISODE_RETURN = 'episode_return'
TERMINATED = 'terminated'


class TrajectoryWriter:
  """Writes whole episodes of TF-Agents trajectories as RLDS episodes with
  their metadata (see the module), in order, into a TFDS dataset directory.

  Usage:

      with TrajectoryWriter('/data/out', spec, name='out') as writer:
        writer.write(trajectory)  # One episode: FIRST ... LAST -> FIRST.
  """

  def __init__(
      self,
      directory: str,
      trajectory_spec: trajectory_lib.Trajectory,
      *,
      name: str,
      image_encoding: features_lib.ImageEncodings = (
          features_lib.ImageEncoding.PNG),
      policy_info_field: str = to_rlds.POLICY_INFO,
      **options: Any,
  ):
    """Opens `directory` for writing.

    Args:
      directory: the dataset directory (`EpisodeWriter`'s rules).
      trajectory_spec: the `Trajectory` spec of one row (no time axis), with
        namedtuples or dicts; its namedtuples come back as dicts.
      name: the dataset's name (letters, digits, _).
      image_encoding: how uint8 [H, W, C] fields are stored
        (`features_from_specs`).
      policy_info_field: the step field holding `policy_info`.
      **options: `EpisodeWriter`'s (version, split, shard_episodes,
        shard_seconds, append, durability).

    Raises:
      As `features_from_specs` and `EpisodeWriter`.
    """
    self._policy_info_field = policy_info_field
    features = features_lib.features_from_specs(
        to_rlds.rlds_step_spec(trajectory_spec,
                               policy_info_field=policy_info_field),
        metadata_spec(trajectory_spec), image_encoding=image_encoding)
    self._writer = writer_lib.EpisodeWriter(
        directory, features, name=name, **options)
    self.directory = self._writer.directory
    self.recovery = self._writer.recovery

  @property
  def num_episodes(self) -> int:
    """Episodes in the split, earlier runs' included: the next one's id."""
    return self._writer.num_episodes

  def write(self, trajectory: trajectory_lib.Trajectory, *,
            truncated: bool = False) -> int:
    """Writes one whole episode's trajectories; returns its RLDS steps.

    Args:
      trajectory: numpy leaves with a leading time axis, in order (see
        `to_rlds.trajectories_to_steps`).
      truncated: a time limit or the end of the data cut the episode,
        whatever its last discount: it is not terminated.

    Raises:
      MalformedEpisodeError: the trajectories are not one whole episode.
      FeaturesError: they do not fit the spec; nothing of them written.
      DatasetDirectoryError: the writer is closed.
    """
    episode = _rlds_episode(trajectory, self._writer.num_episodes,
                            truncated=truncated,
                            policy_info_field=self._policy_info_field)
    self._writer.write(episode)
    return int(episode[EPISODE_LENGTH])

  def close(self) -> None:
    """Closes the dataset: every episode written is registered."""
    self._writer.close()

  def __enter__(self) -> 'TrajectoryWriter':
    return self

  def __exit__(self, *exc_info) -> None:
    self.close()


def metadata_spec(trajectory_spec: trajectory_lib.Trajectory
                  ) -> Dict[str, Any]:
  """The spec of each episode's metadata (see the module)."""
  reward = tf.nest.map_structure(
      lambda spec: tf.TensorSpec(spec.shape, spec.dtype),
      trajectory_spec.reward)
  return {
      EPISODE_ID: tf.TensorSpec([], tf.int64),
      EPISODE_LENGTH: tf.TensorSpec([], tf.int64),
      EPISODE_RETURN: reward,
      TERMINATED: tf.TensorSpec([], tf.bool),
  }


def _rlds_episode(trajectory: trajectory_lib.Trajectory, episode_id: int, *,
                  truncated: bool, policy_info_field: str) -> Dict[str, Any]:
  """{'steps': ..., **metadata} of one whole episode's trajectories."""
  steps = to_rlds.trajectories_to_steps(
      trajectory, terminal=False if truncated else None,
      policy_info_field=policy_info_field)
  return {
      fields.STEPS: steps,
      EPISODE_ID: np.int64(episode_id),
      EPISODE_LENGTH: np.int64(len(steps[fields.IS_LAST])),
      EPISODE_RETURN: tf.nest.map_structure(_total, steps[fields.REWARD]),
      TERMINATED: np.bool_(steps[fields.IS_TERMINAL][-1]),
  }


def _total(rewards: np.ndarray) -> np.ndarray:
  with np.errstate(over='ignore'):  # inf is the sum then, as TF would say.
    return np.asarray(rewards.sum(axis=0), rewards.dtype)
