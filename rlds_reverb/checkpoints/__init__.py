"""Reverb checkpoints read and written without Reverb: which one a path
means, what it holds, and a new one built from chunks and items.

    directories   which checkpoint Reverb would load (`find`, `DONE`)
    records       a checkpoint file's records, as a stream (zlib TFRecords)
    schema        the proto fields read and written, declared by number
    parse         the fields of many records at once, read by numpy
    tensors       a chunk's tensors as numpy and back (snappy, deltas, strings)
    contents      `chunk_lengths`: what push's chunking left on the server;
                  `chunk_bytes`: what its chunks' data takes in memory
    loading       `checkpoint_load`: what a server starting from one loads
                  (items per table, size on disk, about how long), from
                  its tables file alone

    plan            episodes -> the `Chunks` and `Items` a push would leave
                    (write/cadence's flushes and confirmations), no server
    serialize       many messages at once, written by numpy (`wire` inverted)
    messages        `Chunks` and `Items` -> ChunkData, PrioritizedItem records
    item_records    items' records as rows of fixed layouts (the fast path)
    table_settings  `TableSettings` + `TableCounts` -> a table's record
    record_writer   records -> a zlib TFRecord file (masked CRC32C, fsync)
    writer          `CheckpointWriter`: root/<time>/ files, then `DONE`

Varints and TFRecord framing are `rlds_reverb._util.wire`'s, shared with the TFDS
writer. Plain `os`, protobuf, numpy, cramjam and google-crc32c: the command line
imports TensorFlow and Reverb late. `rlds_reverb.export` builds on the
readers.
"""

from rlds_reverb.checkpoints.contents import chunk_bytes
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
from rlds_reverb.checkpoints.loading import checkpoint_load
from rlds_reverb.checkpoints.loading import CheckpointLoad
from rlds_reverb.checkpoints.loading import LOAD_ITEMS_PER_S
from rlds_reverb.checkpoints.records import read_records
from rlds_reverb.checkpoints.messages import Chunks
from rlds_reverb.checkpoints.messages import Items
from rlds_reverb.checkpoints.table_settings import encode_signature
from rlds_reverb.checkpoints.table_settings import RateLimits
from rlds_reverb.checkpoints.table_settings import Selector
from rlds_reverb.checkpoints.table_settings import TableCounts
from rlds_reverb.checkpoints.table_settings import TableSettings
from rlds_reverb.checkpoints.writer import CheckpointWriter
from rlds_reverb.checkpoints.writer import Keys
