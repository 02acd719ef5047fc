"""RLDS episodes out to TFDS dataset directories (the way back from Reverb).

    specs -> features_from_specs -> EpisodeWriter(dir).write(episode) -> dir
                                                  recover(dir) after a crash
    trajectories -> TrajectoryWriter(dir, spec).write(trajectory): to_rlds's
      steps and the episode's metadata, by an EpisodeWriter

The recorder (TF-Agents drivers) and the exporter (Reverb tables) both write
through `TrajectoryWriter`: the same steps, metadata, errors and files.
"""

from rlds_reverb._util import lazy

# Lazily (`rlds_reverb._util.lazy`): `recover` needs neither the encoder nor
# TF-Agents, which the writer's features import.
__getattr__, __dir__, __all__ = lazy.attach(__name__, {
    'features_from_specs': 'rlds_reverb.tfds_out.features',
    'ImageEncoding': 'rlds_reverb.tfds_out.features',
    'Durability': 'rlds_reverb.tfds_out.records',
    'LostEpisodesWarning': 'rlds_reverb.errors',
    'recover': 'rlds_reverb.tfds_out.recovery',
    'Recovery': 'rlds_reverb.tfds_out.recovery',
    'EpisodeWriter': 'rlds_reverb.tfds_out.writer',
    'TrajectoryWriter': 'rlds_reverb.tfds_out.trajectories',
})
