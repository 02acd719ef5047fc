"""Items' records, framed, filled in as rows of fixed layouts: the fast path
of `messages.item_messages` + `record_writer.framed`.

Items of one table differ in their numbers, rarely in their shape: a 2-step
item has one chunk slice per column, or two where it straddles chunks. So
every varint of a batch is written with the width of its field's largest
value (padded varints: 0x81 0x80 0x00 is 1, as protobuf reads it), and the
items of one shape (slices per column) share one layout:

    record   length | crc(length) | key | table | priority | [times_sampled]
             | inserted_at {seconds, nanos} | flat_trajectory {columns
             [{chunk_slices [{chunk_key, offset, length, [index]}],
             [squeeze]}]} | crc(data)

    template  the constant bytes (tags, lengths, table, the framing's
              length and its CRC), one row per layout
    rows      the template tiled, each field's bytes written as a column
              of the [items, record bytes] array
    CRC       linear: crc(row) = crc(template) ^ XOR over the bytes that
              differ of E_p[row_p ^ template_p] (`_Crc`), the varying bytes
              being few (keys, times, slices)
    order     layouts' rows taken in the items' order, run by run

A loaded item is the same message as with minimal varints (the server's own
checkpoints write them minimal again). 2-step items of 6 columns: 1.35 us an
item here against 1.55 (`serialize`), min of 15 batches of 8,192; keys
counted up rather than random would make it 1.03 (2 of a key's 10 bytes
vary), but a server loads such keys 1.7x slower (its hash maps), so `Keys`
stay random-looking.
"""

import dataclasses
from typing import Dict, List, Tuple

import google_crc32c
import numpy as np

from rlds_reverb._util import wire
from rlds_reverb.checkpoints import messages

_HEADER = 12
_FOOTER = 4
_POLYNOMIAL = 0x82F63B78  # CRC32C, reflected.


def framed(table: str, items: messages.Items) -> Tuple[np.ndarray, int]:
  """(buffer, records): the items' PrioritizedItem records, framed as
  TFRecord records, in order. `items` are checked (`messages.check_items`).
  """
  count, width = len(items), items.num_columns
  messages.check_items(table, items, count * width)
  if not count:
    return np.empty(0, np.uint8), 0
  fields = _Fields.of(items)
  counts = np.asarray(items.slice_counts, np.int64).reshape(count, width)
  shapes, layout_of = _layouts(counts)
  first_slice = (np.cumsum(counts.ravel()) - counts.ravel()).reshape(
      count, width)
  rows = []
  for index, shape in enumerate(shapes):
    members = np.flatnonzero(layout_of == index)
    layout = _layout(fields, table, shape)
    rows.append(layout.rows(fields, members, first_slice[members]))
  return _in_order(rows, layout_of), count


def _layouts(counts: np.ndarray) -> Tuple[np.ndarray, np.ndarray]:
  """(the distinct rows of `counts`, each item's row among them): slice
  counts per column as one number per item where they fit, then sorted
  (numpy's unique of rows sorts rows of bytes: 100x slower)."""
  base = int(counts.max()) + 1
  if base ** counts.shape[1] >= 2**62:
    shapes, layout_of = np.unique(counts, axis=0, return_inverse=True)
    return shapes, layout_of.reshape(-1)
  codes = counts @ (base ** np.arange(counts.shape[1], dtype=np.int64))
  distinct, firsts, layout_of = np.unique(codes, return_index=True,
                                          return_inverse=True)
  del distinct
  return counts[firsts], layout_of.reshape(-1)


@dataclasses.dataclass
class _Fields:
  """The batch's values as varint bytes of one width per field."""
  keys: np.ndarray  # [items, width] each.
  priorities: np.ndarray
  times_sampled: np.ndarray  # Width 0: left out.
  seconds: np.ndarray
  nanos: np.ndarray
  chunk_keys: np.ndarray  # [slices, width] each.
  chunk_key_values: np.ndarray  # uint64 [slices].
  offsets: np.ndarray
  lengths: np.ndarray
  indexes: np.ndarray  # Width 0: left out.
  squeeze: np.ndarray  # [items, columns] 0/1, or [items, 0]: left out.

  @classmethod
  def of(cls, items: messages.Items) -> '_Fields':
    count, width = len(items), items.num_columns
    seconds, nanos = np.divmod(np.asarray(items.times, np.int64),
                               messages.NANOS)
    squeeze = np.broadcast_to(
        np.asarray(items.squeeze, bool).reshape(-1, width),
        (count, width)).astype(np.uint8)
    sampled = (np.zeros(count, np.int64) if items.times_sampled is None
               else np.asarray(items.times_sampled, np.int64))
    return cls(
        keys=varints(items.keys),
        priorities=np.ascontiguousarray(
            np.asarray(items.priorities, '<f8')).view(np.uint8).reshape(
                count, 8),
        times_sampled=varints(sampled, omit_zeros=True),
        seconds=varints(seconds), nanos=varints(nanos),
        chunk_keys=varints(items.chunk_keys),
        chunk_key_values=np.asarray(items.chunk_keys, np.uint64),
        offsets=varints(items.offsets),
        lengths=varints(items.lengths),
        indexes=varints(items.indexes, omit_zeros=True),
        squeeze=squeeze if squeeze.any() else squeeze[:, :0])


def varints(values, omit_zeros: bool = False) -> np.ndarray:
  """[values, width] bytes: each value as a varint of the largest one's
  width (none if `omit_zeros` and all are 0; negative as protobuf writes
  int32 and int64: 10 bytes)."""
  values = np.asarray(values)
  if values.dtype.kind in 'ib':
    values = values.astype(np.int64, copy=False).view(np.uint64)
  values = values.astype(np.uint64, copy=False)
  largest = int(values.max()) if len(values) else 0
  if omit_zeros and not largest:
    return np.zeros((len(values), 0), np.uint8)
  width = len(wire.varint(largest))
  out = np.empty((len(values), width), np.uint8)
  values = values.copy()
  for place in range(width):  # A byte place at a time: cache-sized passes.
    low = values.astype(np.uint8)
    out[:, place] = low & 0x7F | (0x80 if place < width - 1 else 0)
    values >>= np.uint64(7)
  return out


_LAYOUTS = {}  # (table, shape, widths) -> _Layout: batches share them.


def _layout(fields: _Fields, table: str, shape: np.ndarray) -> '_Layout':
  widths = tuple(getattr(fields, f.name).shape[1]
                 for f in dataclasses.fields(fields) if f.name not in (
                     'chunk_key_values',))
  key = (table, tuple(shape.tolist()), widths)
  layout = _LAYOUTS.get(key)
  if layout is None:
    if len(_LAYOUTS) >= 256:
      _LAYOUTS.clear()
    layout = _LAYOUTS[key] = _Layout(fields, table, shape)
  return layout


class _Layout:
  """The record of items with `shape[c]` slices in column c: a template
  and where each field goes."""

  def __init__(self, fields: _Fields, table: str, shape: np.ndarray):
    self.shape = shape
    out = bytearray()
    self.places: Dict[str, List[int]] = {}

    def put(name, tag, data_width):
      out.append(tag)
      self.places.setdefault(name, []).append(_HEADER + len(out))
      out.extend(bytes(data_width))

    def length_delimited(tag, body: bytes):
      out.append(tag)
      out.extend(wire.varint(len(body)))
      out.extend(body)

    def slice_body():
      return (1 + fields.chunk_keys.shape[1] + 1 + fields.offsets.shape[1] +
              1 + fields.lengths.shape[1] +
              (1 + fields.indexes.shape[1] if fields.indexes.shape[1] else 0))

    put('keys', 0x08, fields.keys.shape[1])
    length_delimited(0x12, table.encode())
    put('priorities', 0x29, 8)
    if fields.times_sampled.shape[1]:
      put('times_sampled', 0x30, fields.times_sampled.shape[1])
    out.append(0x3A)
    out.extend(wire.varint(2 + fields.seconds.shape[1] +
                                fields.nanos.shape[1]))
    put('seconds', 0x08, fields.seconds.shape[1])
    put('nanos', 0x10, fields.nanos.shape[1])
    slice_size = slice_body()
    squeezed = fields.squeeze.shape[1] > 0
    column_sizes = [int(k) * (2 + slice_size) + (2 if squeezed else 0)
                    for k in shape]
    trajectory = sum(1 + len(wire.varint(size)) + size
                     for size in column_sizes)
    out.append(0x42)
    out.extend(wire.varint(trajectory))
    for column, (k, size) in enumerate(zip(shape, column_sizes)):
      out.append(0x0A)
      out.extend(wire.varint(size))
      for _ in range(int(k)):
        out.append(0x0A)
        out.append(slice_size)
        put('chunk_keys', 0x08, fields.chunk_keys.shape[1])
        put('offsets', 0x10, fields.offsets.shape[1])
        put('lengths', 0x18, fields.lengths.shape[1])
        if fields.indexes.shape[1]:
          put('indexes', 0x20, fields.indexes.shape[1])
      if squeezed:
        put(f'squeeze{column}', 0x10, 1)
    data = np.frombuffer(bytes(out), np.uint8)
    header = np.array([len(data)], np.uint64)
    self.size = _HEADER + len(data) + _FOOTER
    template = np.zeros(self.size, np.uint8)
    template[:8] = header.astype('<u8').view(np.uint8)
    template[8:12] = wire.mask(wire.crc32c_of_uint64(
        header)).astype('<u4').view(np.uint8)
    template[_HEADER:_HEADER + len(data)] = data
    self.template = template
    self.data_size = len(data)

  def rows(self, fields: _Fields, members: np.ndarray,
           first_slice: np.ndarray) -> np.ndarray:
    """[members, size]: the framed records of items `members`, whose
    slices start at `first_slice` ([members, columns])."""
    template = self.template.copy()
    varying = []  # (place in the record, bytes [members]).
    runs = []  # (place, bytes [runs, width], each member's run).
    for place, values, run_of in self._fields_of(fields, members,
                                                 first_slice):
      # Bytes the same in every record go into the template.
      template[place:place + values.shape[1]] = values[0]
      if run_of is not None:
        if len(values) > 1:
          runs.append((place, values, run_of))
        continue
      for k in np.flatnonzero((values[1:] != values[0]).any(axis=0)):
        varying.append((place + k, values[:, k]))
    rows = np.empty((len(members), self.size), np.uint8)
    rows[:] = template
    data = template[_HEADER:_HEADER + self.data_size]
    effects = _effects(self.data_size)
    crc = np.full(len(members), _crc32c(data.tobytes()), np.uint32)
    for place, values in varying:
      rows[:, place] = values
      crc ^= effects[place - _HEADER][values ^ template[place]]
    for place, values, run_of in runs:  # A chunk's key: once per run.
      change = np.zeros(len(values), np.uint32)
      for k in range(values.shape[1]):
        change ^= effects[place - _HEADER + k][values[:, k] ^
                                               template[place + k]]
      crc ^= change[run_of]
      rows[:, place:place + values.shape[1]] = values[run_of]
    rows[:, -_FOOTER:] = wire.mask(crc).astype('<u4').view(
        np.uint8).reshape(-1, 4)
    return rows

  def _fields_of(self, fields: _Fields, members, first_slice):
    """(place, bytes [members, width], None) of every field that is not
    constant in the layout; for chunk keys, which consecutive items mostly
    share, (place, bytes [runs, width], each member's run)."""
    for name in ('keys', 'priorities', 'times_sampled', 'seconds', 'nanos'):
      for place in self.places.get(name, ()):
        yield place, getattr(fields, name)[members], None
    slice_fields = [name for name in ('chunk_keys', 'offsets', 'lengths',
                                      'indexes') if name in self.places]
    at = 0
    for column, k in enumerate(self.shape):
      for j in range(int(k)):
        index = first_slice[:, column] + j
        keys = fields.chunk_key_values[index]
        starts = np.ones(len(keys), bool)
        starts[1:] = keys[1:] != keys[:-1]
        yield (self.places['chunk_keys'][at],
               fields.chunk_keys[index[starts]], np.cumsum(starts) - 1)
        for name in slice_fields[1:]:
          yield self.places[name][at], getattr(fields, name)[index], None
        at += 1
      if f'squeeze{column}' in self.places:
        yield (self.places[f'squeeze{column}'][0],
               fields.squeeze[members, column:column + 1], None)


_TAIL = [np.zeros((0, 256), np.uint32)]  # tail[d][v]: v, then d zero bytes.


def _effects(size: int) -> np.ndarray:
  """[size, 256]: the CRC (linear part) of byte v at place p of `size`
  bytes, the others zero. crc(row) = crc(template) ^ XOR over the places
  where they differ of effects[p][row_p ^ template_p]: CRC is affine, and
  its initial and final inversions cancel between rows of one length."""
  tail = _TAIL[0]
  if len(tail) < size:
    grown = np.empty((size, 256), np.uint32)
    grown[0] = _byte_table()
    for distance in range(1, size):
      after = grown[distance - 1]
      grown[distance] = (after >> np.uint32(8)) ^ grown[0][after & 0xFF]
    _TAIL[0] = tail = grown
  return tail[size - 1::-1] if size else tail[:0]


def _byte_table() -> np.ndarray:
  table = np.zeros(256, np.uint32)
  for byte in range(256):
    crc = byte
    for _ in range(8):
      crc = (crc >> 1) ^ (_POLYNOMIAL if crc & 1 else 0)
    table[byte] = crc
  return table


def _crc32c(data: bytes) -> int:
  return google_crc32c.value(data)


def _in_order(rows: List[np.ndarray], layout_of: np.ndarray) -> np.ndarray:
  """The layouts' rows as one buffer, in the items' order (run by run)."""
  if len(rows) == 1:
    return rows[0].reshape(-1)
  changes = np.flatnonzero(np.diff(layout_of)) + 1
  starts = np.concatenate([[0], changes])
  ends = np.append(changes, len(layout_of))
  layouts = layout_of[starts]
  # Each run's first row within its layout's rows.
  rank = np.empty(len(layout_of), np.int64)
  for index in range(len(rows)):
    members = layout_of == index
    rank[members] = np.arange(int(members.sum()))
  firsts = rank[starts]
  return np.concatenate([
      rows[layout][first:first + (end - start)].reshape(-1)
      for layout, first, start, end in zip(layouts.tolist(), firsts.tolist(),
                                           starts.tolist(), ends.tolist())])
