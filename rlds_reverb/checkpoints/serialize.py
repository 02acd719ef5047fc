"""Protobuf messages written many at once with numpy: the inverse of `parse`.

A checkpoint holds about one item per step, and a protobuf object per item
costs microseconds to build and serialize: more than the whole budget of a
build that should outrun the server's load. Here a batch of messages of one
type is described field by field, each field an array over the batch, and
serialized in two passes over the fields, never over the messages:

    sizes   bottom-up: each field's bytes in each message (0 where proto3
            leaves it out: a zero number, an empty string), nested first
    write   top-down: each message's place in one buffer, then each field's
            tag and value, for the whole batch at once

    Messages(count)
      .varint(1, keys)                tag | varint          left out where 0
      .double(5, priorities)          tag | 8 bytes         left out where +0.0
      .constant_bytes(2, b'replay')   tag | length | bytes  the same in each
      .ragged_bytes(4, payloads)      tag | length | bytes  one bytes each
      .message(7, child)              tag | length | child  one child each
      .repeated(8, child, counts)     (tag | length | child) * counts[m]
      .serialized(payloads)           payloads[m] as it is (made elsewhere)

Fields are declared in ascending number, the order protobuf writes them in,
so that a record equals what Reverb's own protos serialize, byte for byte
(`tests/test_checkpoint_records.py` compares them). Only the wire format is
known here (`rlds_reverb._util.wire`: tags, varints); `schema.py` names the fields.
"""

from typing import List, Optional, Sequence, Tuple

import numpy as np

from rlds_reverb._util import wire


def _as_uint64(values, count: int) -> np.ndarray:
  """`values` (a scalar or `count` numbers) as uint64; negative integers as
  protobuf writes an int32 or int64 (two's complement, 10 bytes)."""
  values = np.asarray(values)
  if values.dtype.kind in 'ib':
    values = values.astype(np.int64, copy=False).view(np.uint64)
  return np.broadcast_to(values.astype(np.uint64, copy=False), (count,))


class Messages:
  """`count` messages of one type, declared field by field (in ascending
  field number); `serialize` writes them all."""

  def __init__(self, count: int):
    self.count = count
    self._fields: List[_Field] = []
    self._sizes: Optional[np.ndarray] = None

  def varint(self, number: int, values) -> 'Messages':
    """An integer or bool field: `values` a scalar or one per message."""
    values = _as_uint64(values, self.count)
    return self._add(_Varint(wire.tag(number, wire.VARINT), values))

  def double(self, number: int, values) -> 'Messages':
    """A double field (8 little-endian bytes)."""
    values = np.broadcast_to(np.asarray(values, '<f8'), (self.count,))
    return self._add(_Double(wire.tag(number, wire.FIXED64),
                             np.ascontiguousarray(values).view('<u8')))

  def constant_bytes(self, number: int, data: bytes) -> 'Messages':
    """A bytes or string field holding `data` in every message."""
    return self._add(_Constant(wire.tag(number, wire.LENGTH_DELIMITED),
                               data, self.count))

  def ragged_bytes(self, number: int, payloads: Sequence[bytes]) -> 'Messages':
    """A bytes field: message m holds payloads[m] (any bytes-like object)."""
    if len(payloads) != self.count:
      raise ValueError(f'{len(payloads)} payloads for {self.count} messages')
    return self._add(_Ragged(wire.tag(number, wire.LENGTH_DELIMITED),
                             payloads))

  def serialized(self, payloads: Sequence[bytes]) -> 'Messages':
    """Bytes already serialized (whole messages, or fields), as they are."""
    if len(payloads) != self.count:
      raise ValueError(f'{len(payloads)} payloads for {self.count} messages')
    return self._add(_Ragged(None, payloads))

  def message(self, number: int, child: 'Messages') -> 'Messages':
    """A message field set in every message: child message m."""
    return self.repeated(number, child, None)

  def repeated(self, number: int, child: 'Messages',
               counts: Optional[np.ndarray]) -> 'Messages':
    """A repeated message field: message m holds the next counts[m] of
    `child`'s messages (None: exactly one each, written even if empty)."""
    expected = self.count if counts is None else int(np.sum(counts))
    if child.count != expected:
      raise ValueError(f'{child.count} child messages for {expected}')
    return self._add(_Nested(wire.tag(number, wire.LENGTH_DELIMITED), child,
                             counts, self.count))

  def sizes(self) -> np.ndarray:
    """Each message's serialized size in bytes (int64)."""
    if self._sizes is None:
      sizes = np.zeros(self.count, np.int64)
      for field in self._fields:
        if field.sizes is not None:
          sizes += field.sizes
      self._sizes = sizes
    return self._sizes

  def write(self, out: np.ndarray, starts: np.ndarray) -> None:
    """Writes message m at out[starts[m]:starts[m] + sizes()[m]]."""
    cursor = starts.astype(np.int64, copy=True)
    for field in self._fields:
      if field.sizes is not None:  # None: in no message.
        field.write(out, cursor)
        cursor += field.sizes

  def _add(self, field: '_Field') -> 'Messages':
    self._fields.append(field)
    self._sizes = None
    return self


def serialize(messages: Messages, before: int = 0, after: int = 0
              ) -> Tuple[np.ndarray, np.ndarray, np.ndarray]:
  """(buffer, starts, ends): message m at buffer[starts[m]:ends[m]], with
  `before` bytes left free ahead of each and `after` behind (a record's
  framing), uninitialized."""
  sizes = messages.sizes()
  spans = sizes + (before + after)
  ends = np.cumsum(spans) - after
  starts = ends - sizes
  buffer = np.empty(int(spans.sum()), np.uint8)
  messages.write(buffer, starts)
  return buffer, starts, ends


class _Field:
  sizes: Optional[np.ndarray]  # Per message: the field's bytes in it.

  def write(self, out: np.ndarray, cursor: np.ndarray) -> None:
    """The field of message m at out[cursor[m]:]."""
    raise NotImplementedError


def _present(values: np.ndarray):
  """The messages holding a nonzero value: a slice (all of them, no copy) or
  their indices."""
  if not len(values) or values.min():
    return slice(None)
  return np.flatnonzero(values)


class _Varint(_Field):

  def __init__(self, tag: int, values: np.ndarray):
    self.tag = tag
    smallest, largest = (values.min(), values.max()) if len(values) else (1, 1)
    if not largest:  # proto3 writes no zeros: in no message.
      self.sizes = None
      return
    if smallest:
      self.present = slice(None)
      self.values = values
      self.lengths = wire.varint_lengths(values, smallest, largest)
      self.sizes = self.lengths + 1
      return
    self.present = np.flatnonzero(values)
    self.values = values[self.present]
    self.lengths = wire.varint_lengths(self.values)
    self.sizes = np.zeros(len(values), np.int64)
    self.sizes[self.present] = 1 + self.lengths

  def write(self, out, cursor):
    at = cursor[self.present]
    out[at] = self.tag
    wire.put_varints(out, at + 1, self.values, self.lengths)


class _Double(_Field):

  def __init__(self, tag: int, bits: np.ndarray):
    self.tag = tag
    self.present = _present(bits)
    self.bytes = bits[self.present].view(np.uint8).reshape(-1, 8)
    self.sizes = np.zeros(len(bits), np.int64)
    self.sizes[self.present] = 9

  def write(self, out, cursor):
    at = cursor[self.present]
    out[at] = self.tag
    for place in range(8):
      out[at + (1 + place)] = self.bytes[:, place]


class _Constant(_Field):

  def __init__(self, tag: int, data: bytes, count: int):
    header = bytes([tag]) + wire.varint(len(data)) if data else b''
    self.field = np.frombuffer(header + bytes(data), np.uint8)
    self.sizes = np.full(count, len(self.field), np.int64)

  def write(self, out, cursor):
    for place, byte in enumerate(self.field.tolist()):
      out[cursor + place] = byte


class _Ragged(_Field):
  """Bytes per message, after a tag and length (or bare: tag None)."""

  def __init__(self, tag: Optional[int], payloads: Sequence[bytes]):
    self.tag, self.payloads = tag, payloads
    lengths = np.fromiter(map(len, payloads), np.int64, len(payloads))
    self.present = _present(lengths)
    self.lengths = lengths[self.present]
    self.length_bytes = (
        wire.varint_lengths(self.lengths.astype(np.uint64))
        if tag is not None else 0)
    self.sizes = np.zeros(len(payloads), np.int64)
    self.sizes[self.present] = (tag is not None) + self.length_bytes + (
        self.lengths)

  def write(self, out, cursor):
    at = cursor[self.present]
    if self.tag is not None:
      out[at] = self.tag
      wire.put_varints(out, at + 1, self.lengths.astype(np.uint64),
                  self.length_bytes)
      at = at + 1 + self.length_bytes
    indices = np.arange(len(self.payloads))[self.present].tolist()
    payloads = self.payloads
    view = memoryview(out)  # Copies from any buffer, no array per payload.
    for index, start, length in zip(indices, at.tolist(),
                                    self.lengths.tolist()):
      view[start:start + length] = payloads[index]


class _Nested(_Field):
  """A message field (counts None: one child each) or a repeated one."""

  def __init__(self, tag: int, child: Messages, counts: Optional[np.ndarray],
               count: int):
    self.tag, self.child = tag, child
    child_sizes = child.sizes()
    self.length_bytes = wire.varint_lengths(child_sizes.astype(np.uint64))
    entries = 1 + self.length_bytes + child_sizes  # Per child: its field.
    self.counts = counts
    if counts is None:
      self.sizes = entries
      return
    counts = np.asarray(counts, np.int64)
    self.counts = counts
    if len(counts) and counts.min() == counts.max():  # k children each.
      per_parent = entries.reshape(count, -1)
      within = np.cumsum(per_parent, axis=1)
      self.sizes = within[:, -1] if per_parent.shape[1] else np.zeros(
          count, np.int64)
      # Per child: where its field starts within its parent's field run.
      self.offsets = (within - per_parent).reshape(-1)
      return
    ends = np.concatenate([[0], np.cumsum(entries)])
    group_ends = np.cumsum(counts)
    before_group = ends[group_ends - counts]
    self.sizes = ends[group_ends] - before_group
    self.offsets = ends[:-1] - np.repeat(before_group, counts)

  def write(self, out, cursor):
    if self.counts is None:
      at = cursor
    else:
      at = np.repeat(cursor, self.counts) + self.offsets
    out[at] = self.tag
    wire.put_varints(out, at + 1, self.child.sizes().astype(np.uint64),
                self.length_bytes)
    self.child.write(out, at + 1 + self.length_bytes)
