"""Every RLDS dataset structure of the installed TFDS catalog, as features.

TFDS 4.9.4 ships builder code for RLDS datasets in a dozen families. Most
builders can be instantiated offline (a throwaway data_dir; nothing is read or
downloaded) and give their exact `info.features`. Configs whose features are
identical (same tree, classes, shapes, dtypes, image encodings) are one
`Structure`:

    builder/config --info.features--> structure key --group--> Structure
                                                                 family, name,
                                                                 configs, features

Two families cannot be instantiated offline: Open X-Embodiment
(`robotics/rtx`) and `rlu_rwrl` read their feature files from GCS. Their
structures are written out here from TFDS's catalog pages
(docs/catalog/<name>.md in tensorflow/datasets). The pages do not say whether
images are stored PNG or JPEG (the real Open X-Embodiment data is JPEG), so each
Open X-Embodiment structure comes twice, once per encoding.

`structures()` lists them all, family by family; `fast_structures()` picks one
per family (its structure with the most fields), the subset CI runs.
The builder modules below were found by instantiating every builder of
`tfds.list_builders()` once: all the RLDS ones live there.
"""

import contextlib
import dataclasses
import functools
import os
import re
from typing import Callable, Dict, List, Tuple
from unittest import mock

import numpy as np
import tensorflow_datasets as tfds
from tensorflow_datasets.core.utils import gcs_utils

# TFDS module prefix -> family, in the order families are listed.
FAMILY_MODULES = (
    ('tensorflow_datasets.d4rl.d4rl_mujoco', 'd4rl_mujoco'),
    ('tensorflow_datasets.d4rl.d4rl_adroit', 'd4rl_adroit'),
    ('tensorflow_datasets.d4rl.d4rl_antmaze', 'd4rl_antmaze'),
    ('tensorflow_datasets.rl_unplugged.rlu_atari', 'rlu_atari'),
    ('tensorflow_datasets.rl_unplugged.rlu_control_suite',
     'rlu_control_suite'),
    ('tensorflow_datasets.rl_unplugged.rlu_dmlab', 'rlu_dmlab'),
    ('tensorflow_datasets.rl_unplugged.rlu_locomotion', 'rlu_locomotion'),
    ('tensorflow_datasets.datasets.robomimic', 'robomimic'),
    ('tensorflow_datasets.rlds.locomotion', 'rlds_locomotion'),
    ('tensorflow_datasets.rlds.robosuite_panda_pick_place_can', 'robosuite'),
    ('tensorflow_datasets.robotics.mt_opt', 'mt_opt'),
)
# Builders whose features are on GCS: from the catalog pages instead.
NOT_OFFLINE = ('rlu_rwrl',)
RWRL = 'rlu_rwrl'
OPEN_X = 'open_x_embodiment'
FAMILIES = tuple(family for _, family in FAMILY_MODULES) + (RWRL, OPEN_X)
IMAGE_ENCODINGS = ('jpeg', 'png')  # Open X-Embodiment's real data is JPEG.


@dataclasses.dataclass(frozen=True, eq=False)
class Structure:
  """One distinct set of RLDS features and every config that has it."""
  family: str
  name: str  # The first config, or 'name:jpeg' for a catalog-page structure.
  configs: Tuple[str, ...]
  features: tfds.features.FeaturesDict
  origin: str  # 'builder' or 'catalog page'

  @property
  def fields(self) -> int:
    return len(leaf_keys(self.features))


def structures() -> List[Structure]:
  """Every structure: the builders' grouped, then rwrl's and Open X's."""
  return list(_all_structures())


def fast_structures() -> List[Structure]:
  """One structure per family: the one with the most fields (first on ties)."""
  by_family: Dict[str, Structure] = {}
  for structure in structures():
    best = by_family.get(structure.family)
    if best is None or structure.fields > best.fields:
      by_family[structure.family] = structure
  return [by_family[family] for family in FAMILIES]


@functools.lru_cache(maxsize=None)
def _all_structures() -> Tuple[Structure, ...]:
  return tuple(builder_structures() + rwrl_structures() + open_x_structures())


# --- Structures of the builders that can be built offline. -----------------

def builder_structures() -> List[Structure]:
  """The offline builders' configs, grouped by identical features.

  A structure shared by two families (D4RL's v0 MuJoCo sets and `locomotion`'s
  SAC sets) counts once, in the family of its first config.
  """
  groups: Dict[Tuple, List[Tuple[str, str, object]]] = {}
  for family, name, features in _rlds_configs():
    groups.setdefault(structure_key(features), []).append(
        (family, name, features))
  return [Structure(members[0][0], members[0][1],
                    tuple(m[1] for m in members), members[0][2], 'builder')
          for members in groups.values()]


def _rlds_configs():
  """(family, 'builder/config', features) of every offline RLDS config."""
  data_dir = os.devnull  # Instantiating reads nothing: no dataset is there.
  found = []
  with _without_gcs():
    for family, builder_name in _rlds_builders():
      builder_cls = tfds.builder_cls(builder_name)
      configs = [c.name for c in builder_cls.BUILDER_CONFIGS] or [None]
      for config in configs:
        name = f'{builder_name}/{config}' if config else builder_name
        features = tfds.builder(name, data_dir=data_dir).info.features
        if is_rlds(features):
          found.append((family, name, features))
  return found


@contextlib.contextmanager
def _without_gcs():
  """TFDS's lookup of published dataset infos on GCS, off (as in its tests).

  A builder without prepared data asks gs://tfds-data for its info: 0.2 s per
  config without network, minutes for the catalog. The features come from the
  installed code either way.
  """
  with mock.patch.object(gcs_utils, '_is_gcs_disabled', True):
    yield


def _rlds_builders() -> List[Tuple[str, str]]:
  """(family, builder name) for the builders in the RLDS modules, in order."""
  found = []
  for name in tfds.list_builders(with_community_datasets=False):
    if name in NOT_OFFLINE:
      continue
    module = tfds.builder_cls(name).__module__
    for prefix, family in FAMILY_MODULES:
      if module.startswith(prefix):
        found.append((family, name))
  order = {family: i for i, family in enumerate(FAMILIES)}
  return sorted(found, key=lambda pair: order[pair[0]])


def is_rlds(features) -> bool:
  return (isinstance(features, tfds.features.FeaturesDict)
          and 'steps' in features
          and isinstance(features['steps'], tfds.features.Dataset))


def structure_key(feature) -> Tuple:
  """What decides how data is stored and read back; descriptions left out."""
  if isinstance(feature, tfds.features.FeaturesDict):
    return tuple((key, structure_key(value))
                 for key, value in sorted(feature.items()))
  if isinstance(feature, tfds.features.Dataset):
    return ('Dataset', structure_key(feature.feature))
  encoding = (feature.encoding_format,) if isinstance(
      feature, tfds.features.Image) else ()
  return (type(feature).__name__, tuple(feature.shape),
          np.dtype(feature.np_dtype).str) + encoding


def leaf_keys(feature, prefix: str = '') -> List[str]:
  if isinstance(feature, tfds.features.FeaturesDict):
    return [key for name, value in feature.items()
            for key in leaf_keys(value, f'{prefix}{name}/')]
  if isinstance(feature, tfds.features.Dataset):
    return leaf_keys(feature.feature, prefix)
  return [prefix.rstrip('/')]


# --- rlu_rwrl: tensorflow/datasets docs/catalog/rlu_rwrl.md (1.0.1). -------

def _vectors(**sizes: int) -> Dict[str, tfds.features.Tensor]:
  return {name: tfds.features.Tensor(
      shape=(size,), dtype=np.float32) for name, size in sizes.items()}


# Each domain's observation; the 'easy' combined challenge adds dummy-0..9.
RWRL_OBSERVATIONS: Dict[str, Callable[[], Dict[str, object]]] = {
    'cartpole': lambda: _vectors(position=3, velocity=2),
    'quadruped': lambda: _vectors(egocentric_state=44, force_torque=24, imu=6,
                                  torso_upright=1, torso_velocity=3),
    'walker': lambda: _vectors(height=1, orientations=14, velocity=9),
    'humanoid': lambda: _vectors(com_velocity=3, extremities=12,
                                 head_height=1, joint_angles=21,
                                 torso_vertical=3, velocity=27),
}
RWRL_ACTION_SIZES = {'cartpole': 1, 'quadruped': 12, 'walker': 6,
                     'humanoid': 21}


def rwrl_features(domain: str, challenge: str) -> tfds.features.FeaturesDict:
  """discount and reward are float32 of shape (1,), as in every rwrl config."""
  observation = RWRL_OBSERVATIONS[domain]()
  if challenge == 'easy':
    observation.update({f'dummy-{i}': tfds.features.Tensor(
        shape=(1,), dtype=np.float32) for i in range(10)})
  one = lambda: tfds.features.Tensor(shape=(1,), dtype=np.float32)
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'action': tfds.features.Tensor(
              shape=(RWRL_ACTION_SIZES[domain],), dtype=np.float32),
          'discount': one(),
          'is_first': np.bool_,
          'is_last': np.bool_,
          'is_terminal': np.bool_,
          'observation': observation,
          'reward': one(),
      }),
      'episode_return': np.float32,
  })


def rwrl_structures() -> List[Structure]:
  """One structure per (domain, challenge); its configs from the builder."""
  configs: Dict[Tuple[str, str], List[str]] = {}
  for config in tfds.builder_cls(RWRL).BUILDER_CONFIGS:
    challenge = str(config.combined_challenge).lower()
    configs.setdefault((config.domain, challenge), []).append(
        f'{RWRL}/{config.name}')
  return [Structure(RWRL, names[0], tuple(names),
                    rwrl_features(domain, challenge), 'catalog page')
          for (domain, challenge), names in configs.items()]


# --- Open X-Embodiment: tensorflow/datasets docs/catalog/<name>.md. --------

def _tensor(*shape, dtype=np.float32) -> tfds.features.Tensor:
  return tfds.features.Tensor(shape=shape, dtype=dtype)


def _image(height: int, width: int, encoding: str, channels: int = 3):
  return tfds.features.Image(shape=(height, width, channels),
                             encoding_format=encoding)


def _flags() -> Dict[str, object]:
  return {'is_first': np.bool_, 'is_last': np.bool_, 'is_terminal': np.bool_}


def _language() -> Dict[str, object]:
  """The observation's instruction and its embedding, as RT-1 stores them."""
  return {'natural_language_embedding': _tensor(512),
          'natural_language_instruction': tfds.features.Tensor(
              shape=(), dtype=np.object_)}


def fractal(encoding: str) -> tfds.features.FeaturesDict:
  """RT-1 (`fractal20220817_data`): no discount, session metadata."""
  return tfds.features.FeaturesDict({
      'aspects': {name: np.bool_ for name in (
          'already_success', 'feasible', 'has_aspects', 'success',
          'undesirable')},
      'attributes': {
          **{name: np.int64 for name in (
              'collection_mode', 'data_type', 'env', 'location',
              'objects_family', 'task_family')},
          **{f'{name}_name': tfds.features.Tensor(shape=(), dtype=np.object_)
             for name in ('collection_mode', 'data_type', 'env', 'location',
                          'objects_family', 'task_family')},
      },
      'steps': tfds.features.Dataset({
          'action': {
              'base_displacement_vector': _tensor(2),
              'base_displacement_vertical_rotation': _tensor(1),
              'gripper_closedness_action': _tensor(1),
              'rotation_delta': _tensor(3),
              'terminate_episode': _tensor(3, dtype=np.int32),
              'world_vector': _tensor(3),
          },
          **_flags(),
          'observation': {
              'base_pose_tool_reached': _tensor(7),
              'gripper_closed': _tensor(1),
              'gripper_closedness_commanded': _tensor(1),
              'height_to_bottom': _tensor(1),
              'image': _image(256, 320, encoding),
              **_language(),
              'orientation_box': _tensor(2, 3),
              'orientation_start': _tensor(4),
              'robot_orientation_positions_box': _tensor(3, 3),
              'rotation_delta_to_go': _tensor(3),
              'src_rotation': _tensor(4),
              'vector_to_go': _tensor(3),
              'workspace_bounds': _tensor(3, 3),
          },
          'reward': tfds.features.Scalar(dtype=np.float32),
      }),
  })


def bridge(encoding: str) -> tfds.features.FeaturesDict:
  """BridgeData V2 (`bridge`): no discount, a bool in a dict action."""
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'action': {
              'open_gripper': np.bool_,
              'rotation_delta': _tensor(3),
              'terminate_episode': np.float32,
              'world_vector': _tensor(3),
          },
          **_flags(),
          'observation': {
              'image': _image(480, 640, encoding),
              **_language(),
              'state': _tensor(7),
          },
          'reward': tfds.features.Scalar(dtype=np.float32),
      }),
  })


def kuka(encoding: str) -> tfds.features.FeaturesDict:
  """QT-Opt (`kuka`): no discount; observation keys with a '/' in them."""
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'action': {
              'base_displacement_vector': _tensor(2),
              'base_displacement_vertical_rotation': _tensor(1),
              'gripper_closedness_action': _tensor(1),
              'rotation_delta': _tensor(3),
              'terminate_episode': _tensor(3, dtype=np.int32),
              'world_vector': _tensor(3),
          },
          **_flags(),
          'observation': {
              'clip_function_input/base_pose_tool_reached': _tensor(7),
              'clip_function_input/workspace_bounds': _tensor(3, 3),
              'gripper_closed': _tensor(1),
              'height_to_bottom': _tensor(1),
              'image': _image(512, 640, encoding),
              **_language(),
              'task_id': _tensor(1),
          },
          'reward': tfds.features.Scalar(dtype=np.float32),
      }),
      'success': np.bool_,
  })


def taco_play(encoding: str) -> tfds.features.FeaturesDict:
  """TACO-RL (`taco_play`): no discount, float depth maps, two cameras."""
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'action': {
              'actions': _tensor(7),
              'rel_actions_gripper': _tensor(7),
              'rel_actions_world': _tensor(7),
              'terminate_episode': np.float32,
          },
          **_flags(),
          'observation': {
              'depth_gripper': _tensor(84, 84),
              'depth_static': _tensor(150, 200),
              **_language(),
              'rgb_gripper': _image(84, 84, encoding),
              'rgb_static': _image(150, 200, encoding),
              'robot_obs': _tensor(15),
              'structured_language_instruction': tfds.features.Tensor(
                  shape=(), dtype=np.object_),
          },
          'reward': tfds.features.Scalar(dtype=np.float32),
      }),
  })


def berkeley_autolab_ur5(encoding: str) -> tfds.features.FeaturesDict:
  """`berkeley_autolab_ur5`: no discount; a float32 depth Image (PNG only)."""
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'action': {
              'gripper_closedness_action': np.float32,
              'rotation_delta': _tensor(3),
              'terminate_episode': np.float32,
              'world_vector': _tensor(3),
          },
          **_flags(),
          'observation': {
              'hand_image': _image(480, 640, encoding),
              'image': _image(480, 640, encoding),
              # TFDS stores float32 images as PNG whatever the others use.
              'image_with_depth': tfds.features.Image(
                  shape=(480, 640, 1), dtype=np.float32),
              **_language(),
              'robot_state': _tensor(15),
          },
          'reward': tfds.features.Scalar(dtype=np.float32),
      }),
  })


def jaco_play(encoding: str) -> tfds.features.FeaturesDict:
  """`jaco_play`: no discount, int32 terminate_episode in the action."""
  return tfds.features.FeaturesDict({
      'steps': tfds.features.Dataset({
          'action': {
              'gripper_closedness_action': _tensor(1),
              'terminate_episode': _tensor(3, dtype=np.int32),
              'world_vector': _tensor(3),
          },
          **_flags(),
          'observation': {
              'end_effector_cartesian_pos': _tensor(7),
              'end_effector_cartesian_velocity': _tensor(6),
              'image': _image(224, 224, encoding),
              'image_wrist': _image(224, 224, encoding),
              'joint_pos': _tensor(8),
              **_language(),
          },
          'reward': tfds.features.Scalar(dtype=np.float32),
      }),
  })


def austin_sirius(encoding: str) -> tfds.features.FeaturesDict:
  """`austin_sirius_dataset_converted_externally_to_rlds`: has a discount."""
  return tfds.features.FeaturesDict({
      'episode_metadata': {'file_path': tfds.features.Text()},
      'steps': tfds.features.Dataset({
          'action': _tensor(7),
          'action_mode': _tensor(1),
          'discount': tfds.features.Scalar(dtype=np.float32),
          'intv_label': _tensor(1),
          **_flags(),
          'language_embedding': _tensor(512),
          'language_instruction': tfds.features.Text(),
          'observation': {
              'image': _image(84, 84, encoding),
              'state': _tensor(8),
              'state_ee': _tensor(16),
              'state_gripper': _tensor(1),
              'state_joint': _tensor(7),
              'wrist_image': _image(84, 84, encoding),
          },
          'reward': tfds.features.Scalar(dtype=np.float32),
      }),
  })


OPEN_X_FEATURES: Dict[str, Callable[[str], tfds.features.FeaturesDict]] = {
    'fractal20220817_data': fractal,
    'bridge': bridge,
    'kuka': kuka,
    'taco_play': taco_play,
    'berkeley_autolab_ur5': berkeley_autolab_ur5,
    'jaco_play': jaco_play,
    'austin_sirius_dataset_converted_externally_to_rlds': austin_sirius,
}


def open_x_structures() -> List[Structure]:
  return [Structure(OPEN_X, f'{name}:{encoding}', (name,), features(encoding),
                    'catalog page')
          for name, features in OPEN_X_FEATURES.items()
          for encoding in IMAGE_ENCODINGS]


def dataset_name(structure: Structure) -> str:
  """A TFDS dataset name (snake_case) for a structure's synthetic copy."""
  return 'catalog_' + re.sub(r'[^a-z0-9]+', '_', structure.name.lower()).strip(
      '_')
