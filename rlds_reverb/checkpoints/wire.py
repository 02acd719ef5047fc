"""Protobuf's wire format, read for many messages at once with numpy.

A checkpoint holds about one item per step, and parsing each item with
protobuf, then walking its columns and chunk slices in Python, costs ~10 us:
it capped export at ~40k steps/s. Here the fields of a whole batch of
messages are read together, one field of every message per round:

    buffer  the records joined; message m is buffer[starts[m]:ends[m]]
    round   per message still open: tag (varint), then a varint value, or
            a length and the payload's place (length-delimited), or 4 or 8
            fixed bytes -> `Fields` (message, field number, value, payload)

Nested messages are read by calling `fields` again on the payloads' places.
Only the wire format is known here, not the schema: `schema.py` names the
field numbers, and callers check them.
"""

import dataclasses

import numpy as np

from rlds_reverb.errors import CheckpointError

VARINT, FIXED64, LENGTH_DELIMITED, FIXED32 = 0, 1, 2, 5
_MAX_VARINT = 10
PADDING = bytes(_MAX_VARINT)  # Appended to buffers: varints read 10 bytes.


@dataclasses.dataclass(frozen=True)
class Fields:
  """Every field of the messages read, in order within each message."""
  messages: np.ndarray  # int64: which message (index into starts).
  rounds: np.ndarray  # int64: the field's place in its message (0, 1, ...).
  numbers: np.ndarray  # int64 field numbers.
  values: np.ndarray  # uint64: a varint's value, or a payload's length.
  payloads: np.ndarray  # int64: where a length-delimited payload starts.

  def __len__(self) -> int:
    return len(self.messages)

  def of(self, number: int) -> 'Fields':
    """Only the fields numbered `number`."""
    keep = self.numbers == number
    return Fields(*(getattr(self, f.name)[keep]
                    for f in dataclasses.fields(self)))

  def first_value(self, count: int, number: int, default: int = 0
                  ) -> np.ndarray:
    """Per message (of `count`), the varint `number` (its last occurrence,
    as protobuf takes it), or `default`."""
    chosen = self.of(number)
    values = np.full(count, default, np.uint64)
    values[chosen.messages] = chosen.values
    return values


def buffer_of(records) -> tuple:
  """(buffer, starts, ends) of `records` (bytes) joined, padded."""
  lengths = np.fromiter((len(r) for r in records), np.int64, len(records))
  ends = np.cumsum(lengths)
  starts = ends - lengths
  buffer = np.frombuffer(b''.join(records) + PADDING, np.uint8)
  return buffer, starts, ends


def varints(buffer: np.ndarray, positions: np.ndarray) -> tuple:
  """(values as uint64, their lengths in bytes) of the varints at
  `positions`; a length of 0 marks one longer than 10 bytes.

  Most varints (tags, lengths, offsets) are one byte: the next bytes are
  read only for the varints that go on.
  """
  values = buffer[positions].astype(np.uint64)
  lengths = np.ones(len(positions), np.int64)
  going = np.flatnonzero(values >= 0x80)
  values[going] &= np.uint64(0x7F)
  for place in range(1, _MAX_VARINT):
    if not going.size:
      break
    byte = buffer[positions[going] + place]
    values[going] |= (byte & 0x7F).astype(np.uint64) << np.uint64(7 * place)
    lengths[going] += 1
    going = going[byte >= 0x80]
  lengths[going] = 0
  return values, lengths


def fields(buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray,
           where: str) -> Fields:
  """Every field of the messages buffer[starts[m]:ends[m]].

  Raises:
    CheckpointError: a field runs past its message's end, a varint is too
      long, or a wire type protobuf does not write (groups); `where` names
      the file.
  """
  positions = starts.astype(np.int64).copy()
  open_ = np.flatnonzero(positions < ends)
  parts = []
  round_ = 0
  while open_.size:
    at = positions[open_]
    tags, tag_lengths = varints(buffer, at)
    kinds = tags & np.uint64(7)
    after_tag = at + tag_lengths
    values, value_lengths = varints(buffer, after_tag)
    payloads = after_tag + value_lengths
    following = payloads.copy()
    delimited = kinds == LENGTH_DELIMITED
    following[delimited] += values[delimited].astype(np.int64)
    if (kinds != VARINT).any() and (kinds != LENGTH_DELIMITED).any():
      for kind, size in ((FIXED64, 8), (FIXED32, 4)):
        fixed = kinds == kind
        following[fixed] = after_tag[fixed] + size
        value_lengths[fixed] = 1  # Not a varint: never too long.
      following[(kinds > LENGTH_DELIMITED) & (kinds != FIXED32)] = -1
    bad = ((tag_lengths == 0) | (value_lengths == 0) | (following < 0) |
           (following > ends[open_]))
    if bad.any():
      message = int(open_[np.argmax(bad)])
      raise CheckpointError(
          f'{where}: record {message:,} of the batch read is not a valid '
          f'message (a field at byte '
          f'{int(at[np.argmax(bad)] - starts[message]):,} runs past its end): '
          f'the file is damaged.')
    parts.append((open_, np.full(open_.size, round_),
                  (tags >> np.uint64(3)).astype(np.int64), values, payloads))
    positions[open_] = following
    open_ = open_[following < ends[open_]]
    round_ += 1
  if not parts:
    empty = np.empty(0, np.int64)
    return Fields(empty, empty, empty, np.empty(0, np.uint64), empty)
  return Fields(*(np.concatenate(column) for column in zip(*parts)))
