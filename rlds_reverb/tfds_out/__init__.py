"""RLDS episodes out to TFDS dataset directories (the way back from Reverb).

    specs -> features_from_specs -> EpisodeWriter(dir).write(episode) -> dir
                                                  recover(dir) after a crash

The recorder (TF-Agents drivers) and the exporter (Reverb tables) build on
this; `rlds_reverb.convert.to_rlds` turns their trajectories into steps.
"""

from rlds_reverb.tfds_out.features import features_from_specs
from rlds_reverb.tfds_out.features import ImageEncoding
from rlds_reverb.tfds_out.records import Durability
from rlds_reverb.tfds_out.recovery import LostEpisodesWarning
from rlds_reverb.tfds_out.recovery import recover
from rlds_reverb.tfds_out.recovery import Recovery
from rlds_reverb.tfds_out.writer import EpisodeWriter
