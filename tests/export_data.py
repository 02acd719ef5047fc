"""Reverb servers with a checkpointer, filled and checkpointed, for export tests.

    source TFDS dir (EpisodeWriter) --load, push--> table of a real server
      --client.checkpoint()--> checkpoint dir --export--> RLDS dir
      --read by TFDS--> compared with the source's steps

`nested_episode` holds every kind of field export must bring back: a PNG
image, a vector and a string in a nested observation, a dict action, a dict
policy_info. Its discounts follow the conversion's rules (a terminated
episode has discount 0 on its last two steps), so that the whole round trip
is exact; episode metadata never reaches a table and is left out.
"""

import os
from typing import Any, Dict, List, Sequence

import numpy as np
import reverb
import tensorflow as tf

from rlds_reverb import tables
from rlds_reverb.convert import to_rlds
from rlds_reverb.specs import paths as specs_paths
from rlds_reverb.specs import signature as signature_lib
from rlds_reverb.tfds_out import EpisodeWriter
from rlds_reverb.tfds_out import features_from_specs
from tests import rlds_dirs

Episode = Dict[str, Any]


def checkpointed_server(tables: Sequence[reverb.Table],
                        directory: str) -> reverb.Server:
  """A server on a free port that checkpoints into `directory`."""
  return reverb.Server(
      list(tables), port=None,
      checkpointer=reverb.checkpointers.DefaultCheckpointer(
          os.fspath(directory)))


def signed_table(name: str, trajectory_spec: Any, **options) -> reverb.Table:
  """A FIFO table signed as TF-Agents signs replay tables; never blocks.
  `options`: other `tables.TableOptions` fields (`max_size=500`)."""
  return tables.table(
      tables.TableOptions(name, **{'sampler': 'fifo', **options}),
      signature_lib.table_signature(trajectory_spec))


def checkpoint(server: reverb.Server) -> str:
  """A new checkpoint of `server`: its directory."""
  return reverb.Client(f'localhost:{server.port}').checkpoint()


def nested_episode(index: int, length: int) -> Episode:
  """`rlds_dirs.episode` with the discounts of a consistent episode."""
  episode = rlds_dirs.episode(index, length)
  if episode['steps']['is_terminal'][-1]:
    episode['steps']['discount'][-2:] = 0.0
  return episode


def nested_episodes(count: int = 12):
  """`count` nested episodes of `rlds_dirs.episode`'s own lengths (one of
  them a single step): the statistics tests' data."""
  return [nested_episode(index, 0) for index in range(count)]


def policy_info(current, following):
  """The `policy_info_fn` of push: the step's own policy_info field."""
  del following
  return current['policy_info']


def leaf_index(trajectory_spec, name: str) -> int:
  """Where the field `name` is among a trajectory's flat leaves."""
  names = [name for name, _ in specs_paths.flatten_with_paths(
      to_rlds.as_dicts(trajectory_spec))]
  return names.index(name)


def write_source(directory: str, episodes: List[Episode],
                 step_spec=None) -> str:
  """`episodes` as a TFDS directory (shards of 4 episodes), for `load`."""
  features = features_from_specs(step_spec or rlds_dirs.step_spec(),
                                 rlds_dirs.metadata_spec())
  with EpisodeWriter(os.fspath(directory), features, name='source',
                     shard_episodes=4) as writer:
    for episode in episodes:
      writer.write(episode)
  return os.fspath(directory)


def steps_of(directory: str) -> List[Episode]:
  """The steps of each episode of a dataset directory, read by TFDS."""
  return [{'steps': episode['steps']}
          for episode in rlds_dirs.read_episodes(os.fspath(directory))]


def trajectory_spec_of(rlds_data: tf.data.Dataset, with_policy_info: bool):
  """The trajectory spec push writes for `rlds_data`."""
  import rlds_reverb  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return rlds_reverb.create_trajectory_data_spec(
      rlds_data, policy_info_fn=policy_info if with_policy_info else None)


def item_count(server: reverb.Server, table: str) -> int:
  return reverb.Client(f'localhost:{server.port}').server_info(
      timeout=10)[table].current_size


def lengths(episodes: List[Episode]) -> List[int]:
  return [len(np.asarray(e['steps']['is_first'])) for e in episodes]
