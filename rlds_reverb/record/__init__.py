"""Recording what a TF-Agents agent collects as an RLDS dataset (online -> offline).

    driver -> RldsRecorder (observer) -> TFDS dataset directory
                                         -> rlds_reverb.load / push / CLI
    killed? -> rlds-reverb recover DIR, or RldsRecorder(..., append=True)
"""

from rlds_reverb.record.recorder import RecordingSummary
from rlds_reverb.record.recorder import RldsRecorder
from rlds_reverb.errors import UnfinishedEpisodesWarning
