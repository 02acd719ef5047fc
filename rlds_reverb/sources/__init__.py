"""RLDS data opened as a `tf.data.Dataset` of episodes; nothing downloaded.

    source(s) --opening--> TFDS builders --(a shard of) a split--> episodes
                                          one source after another (combining)
               `load` also remembers how to read them whole (whole_reads)
    a read error --read_errors--> the record file and byte it is at
    a source --naming--> a short name for logs; bundled: the CartPole data

    opening.py      `load`, `builders`: directory, catalog name or bundled
    shards.py       `shard_split`: the index-th of count parts of a split
    combining.py    several sources as one dataset; the metadata they share
    whole_reads.py  the same episodes with steps as [T, ...] tensors, faster
    read_errors.py  `read_error_text`: which file a cut or corrupt record is in
    naming.py       `display_name`: a source's short human name
    bundled.py      `BUNDLED`: the CartPole-v1 episodes in the package

Sources know nothing of specs beyond field names, of conversion or of Reverb.
The names below are what the rest of the package uses; `load` is public as
`rlds_reverb.load`.
"""

from rlds_reverb.sources.bundled import BUNDLED
from rlds_reverb.sources.bundled import bundled_dataset_dir
from rlds_reverb.sources.naming import display_name
from rlds_reverb.sources.opening import builders
from rlds_reverb.sources.opening import load
from rlds_reverb.sources.read_errors import read_error_text
from rlds_reverb.sources.shards import Shard
from rlds_reverb.sources.shards import shard_split
