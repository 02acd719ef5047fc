"""Protobuf messages read many at once with numpy: the inverse of
`serialize`.

A checkpoint holds about one item per step, and parsing each item with
protobuf, then walking its columns and chunk slices in Python, costs ~10 us:
it capped export at ~40k steps/s. Here the fields of a whole batch of
messages are read together, one field of every message per round:

    buffer  the records joined (`wire.buffer_of`, or a block padded with
            `wire.PADDING`); message m is buffer[starts[m]:ends[m]]
    round   per message still open: tag (varint), then a varint value, or
            a length and the payload's place (length-delimited), or 4 or 8
            fixed bytes -> `Fields` (message, field number, value, payload)

Nested messages are read by calling `fields` again on the payloads' places.
Only the wire format is known here (`rlds_reverb._util.wire`), not the schema:
`schema.py` names the field numbers, and callers check them.
"""

import dataclasses

import numpy as np

from rlds_reverb._util import wire
from rlds_reverb.errors import CheckpointReadError


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


def fields(buffer: np.ndarray, starts: np.ndarray, ends: np.ndarray,
           where: str) -> Fields:
  """Every field of the messages buffer[starts[m]:ends[m]].

  Raises:
    CheckpointReadError: a field runs past its message's end, a varint is too
      long, or a wire type protobuf does not write (groups); `where` names
      the file.
  """
  positions = starts.astype(np.int64).copy()
  open_ = np.flatnonzero(positions < ends)
  parts = []
  round_ = 0
  while open_.size:
    at = positions[open_]
    tags, tag_lengths = wire.read_varints(buffer, at)
    kinds = tags & np.uint64(7)
    after_tag = at + tag_lengths
    values, value_lengths = wire.read_varints(buffer, after_tag)
    payloads = after_tag + value_lengths
    following = payloads.copy()
    delimited = kinds == wire.LENGTH_DELIMITED
    following[delimited] += values[delimited].astype(np.int64)
    if (kinds != wire.VARINT).any() and (
        kinds != wire.LENGTH_DELIMITED).any():
      for kind, size in ((wire.FIXED64, 8), (wire.FIXED32, 4)):
        fixed = kinds == kind
        following[fixed] = after_tag[fixed] + size
        value_lengths[fixed] = 1  # Not a varint: never too long.
      following[(kinds > wire.LENGTH_DELIMITED) & (kinds != wire.FIXED32)] = -1
    bad = ((tag_lengths == 0) | (value_lengths == 0) | (following < 0) |
           (following > ends[open_]))
    if bad.any():
      message = int(open_[np.argmax(bad)])
      raise CheckpointReadError(
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
