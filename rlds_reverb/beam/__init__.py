"""Apache Beam transforms: RLDS datasets into Reverb from many workers.

    pipeline
      | ReadEpisodes(SRC, split)          parts of record files, in parallel
                                          -> (position, numpy episode)
      | WriteToReverb(servers, tables)    the push's checks per episode, its
                                          converter and writer; confirmed at
                                          each bundle's end; counters
      .skipped                            malformed / flagged / empty ones

      | BuildCheckpoints(DIR, tables,     or, with no server: a checkpoint
          step_spec, servers=S)           per server (episode I -> I % S),
                                          parts per bundle merged per server

`push(SRC, servers, tables, runner=..., options=...)` runs the same steps
per part of the data (`PushParts`) and sums the parts' records, once every
episode is there: what `rlds-reverb push --runner` runs; `build(SRC, DIR,
tables, servers=S, runner=...)` builds the checkpoints (`BuildParts`).
Both run on any runner, Dask's too (`runner='dask'`, `runners`,
`rlds_reverb.dask_worker`).
Needs `pip install "rlds_reverb[beam]"`; `import rlds_reverb` never imports
this package.
"""

from rlds_reverb.beam.build_checkpoints import BuildCheckpoints
from rlds_reverb.beam.pipeline import build
from rlds_reverb.beam.pipeline import push
from rlds_reverb.beam.read import ReadEpisodes
from rlds_reverb.beam.write import COUNTERS
from rlds_reverb.beam.write import NAMESPACE
from rlds_reverb.beam.write import SKIPPED
from rlds_reverb.beam.write import WriteToReverb

__all__ = ['ReadEpisodes', 'WriteToReverb', 'BuildCheckpoints', 'push',
           'build', 'NAMESPACE', 'COUNTERS',
           'SKIPPED']
