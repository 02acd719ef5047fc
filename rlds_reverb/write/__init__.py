"""Writing converted trajectories into Reverb (no conversion here)."""

from rlds_reverb.write.items import EndOfEpisode
from rlds_reverb.write.push import push_rlds_to_reverb
from rlds_reverb.write.push import write_trajectories
from rlds_reverb.write.push import write_transitions
from rlds_reverb.write.push import Written
