"""Reverb checkpoints read without Reverb: which one a path means, and what
it holds.

    directories   which checkpoint Reverb would load (`find`, `DONE`)
    records       a checkpoint file's records, as a stream (zlib TFRecords)
    schema        the proto fields read, declared by number
    wire          the fields of many records at once, read by numpy
    tensors       a chunk's tensors as numpy (snappy, deltas, strings)
    contents      `chunk_lengths`: what push's chunking left on the server

Plain `os`, protobuf, numpy and cramjam: the command line imports
TensorFlow and Reverb late. `rlds_reverb.export` builds on this.
"""

from rlds_reverb.checkpoints.contents import chunk_lengths
from rlds_reverb.checkpoints.directories import checkpoint_path
from rlds_reverb.checkpoints.directories import Checkpoints
from rlds_reverb.checkpoints.directories import CHUNKS
from rlds_reverb.checkpoints.directories import DONE
from rlds_reverb.checkpoints.directories import find
from rlds_reverb.checkpoints.directories import in_temporary_root
from rlds_reverb.checkpoints.directories import ITEMS
from rlds_reverb.checkpoints.directories import TABLES
from rlds_reverb.checkpoints.directories import writable_error
from rlds_reverb.checkpoints.records import read_records
