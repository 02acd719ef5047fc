"""`statistics(rlds_data)`: per-field statistics of the steps, in one pass.

    episodes, read whole (`whole_reads`; images left encoded, never decoded)
      --map, per episode: its numeric fields [T, ...], and per step whether
        it is the episode's last, the episode's length and return (an empty
        episode: one row that is no step, so that it still counts)
      --rebatch(block_steps): blocks of steps, episodes cut anywhere
      --numpy, per field: Moments.add (Chan's merge, float64) and
        QuantileSketch.add, per element and pooled over the field
      --> DatasetStatistics

Memory: one block and the episodes tf.data reads ahead, plus per field
`Moments` (6 numbers an element) and sketches (48 KB an element): none
of it grows with the number of episodes or steps.

Which fields: every step field of a number type (ints, floats) with a fixed
shape. Left out, and named in `skipped`: images (a TFDS Image feature, or
uint8 [H, W, C] with 1, 3 or 4 channels: per-pixel statistics are rarely
what a normalizer wants, and would cost a sketch per pixel), strings, bools
(the RLDS flags among them) and fields whose shape varies.
"""

import dataclasses
import functools
import math
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

import numpy as np
import tensorflow as tf

from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields as fields_lib
from rlds_reverb.specs import paths
from rlds_reverb.specs import step_spec as step_spec_lib
from rlds_reverb.step_stats import moments as moments_lib
from rlds_reverb.step_stats import result
from rlds_reverb.step_stats import sketch as sketch_lib

PERCENTILES = (1.0, 99.0)
# Steps per block handed to numpy: large enough that numpy's per-call cost
# vanishes, small enough to hold a few of.
BLOCK_STEPS = 16384
# Fields with more elements get percentiles pooled over the field only.
MAX_SKETCHED_ELEMENTS = 512

# (lengths, returns) of the episodes that end in a block, numpy arrays.
OnEpisodes = Callable[[np.ndarray, np.ndarray], None]


def statistics(rlds_data: tf.data.Dataset,
               percentiles: Sequence[float] = PERCENTILES,
               relative_accuracy: float = sketch_lib.RELATIVE_ACCURACY,
               *,
               max_sketched_elements: int = MAX_SKETCHED_ELEMENTS,
               block_steps: int = BLOCK_STEPS,
               on_episodes: Optional[OnEpisodes] = None,
               ) -> result.DatasetStatistics:
  """Count, mean, std, min, max and percentiles of every numeric step field.

  One pass over `rlds_data` (RLDS episodes; `load`'s are read fastest, whole),
  in memory that does not grow with its size. Per element of each field's
  shape, as a normalizer needs (`observation/position` [3]: three means), and
  pooled over the field (`whole`). Exact but for the percentiles, which are
  within `relative_accuracy` * |x| of the value x of rank
  floor(q/100 * (count - 1)) (a DDSketch, `step_stats.sketch`). NaN and
  infinite values are counted apart (`nonfinite`) and left out of the rest.

  Args:
    rlds_data: RLDS episodes (`load`, or a dataset of {'steps': Dataset}).
    percentiles: the percentiles to give, each in [0, 100].
    relative_accuracy: the percentiles' bound, in (0, 1).
    max_sketched_elements: fields with more elements than this get pooled
      percentiles only (a sketch per element is 48 KB).
    block_steps: steps handed to numpy at once.
    on_episodes: called with the lengths and returns of the episodes ending
      in each block, in order (progress; `inspect` keeps them).

  Raises:
    StepSpecError: the data are not RLDS episodes.
    ValueError: percentiles or accuracy out of range.
  """
  percentiles = _checked(percentiles, relative_accuracy, block_steps)
  step_spec_lib.step_format(rlds_data)  # RLDS, or the package's own error.
  read = whole_reads.whole(rlds_data, keep_encoded=True)
  kept, skipped = numeric_fields(_step_spec(read),
                                 whole_reads.image_fields(rlds_data))
  rewards = [path for path, _ in paths.flatten_with_paths(
      _step_spec(read).get(fields_lib.REWARD, {}), fields_lib.REWARD)]
  blocks = _blocks(read, kept, rewards, block_steps)
  accumulators = {path: _Field(spec, relative_accuracy, max_sketched_elements)
                  for path, spec in kept.items()}
  lengths = _Field(tf.TensorSpec([], tf.int64), relative_accuracy, 1)
  returns = _Field(tf.TensorSpec([], tf.float64), relative_accuracy, 1)
  steps = 0
  for block in blocks.as_numpy_iterator():
    episode = block['episode']
    real = None if episode['real'].all() else episode['real']
    for path, accumulator in accumulators.items():
      accumulator.add(block['fields'][path], real)
    last = episode['last']
    steps += int(episode['length'][last].sum())
    lengths.add(episode['length'][last], None)
    returns.add(episode['return'][last], None)
    if on_episodes is not None:
      on_episodes(episode['length'][last], episode['return'][last])
  length = lengths.summary(percentiles)
  return result.DatasetStatistics(
      episodes=int(length.count.sum()),
      steps=steps,
      fields={path: accumulator.field(percentiles, kept[path])
              for path, accumulator in accumulators.items()},
      length=length,
      returns=returns.summary(percentiles) if rewards else None,
      skipped=skipped,
      relative_accuracy=relative_accuracy)


def numeric_fields(step_spec: Dict[str, Any], images: Dict[str, Any]
                   ) -> Tuple[Dict[str, tf.TensorSpec], Dict[str, str]]:
  """({path: spec} of the fields with statistics, {path: why not} of the
  others), in `tf.nest` order; `images` are the TFDS Image fields' paths."""
  kept, skipped = {}, {}
  for path, spec in paths.flatten_with_paths(step_spec):
    why = _why_skipped(path, spec, images)
    if why:
      skipped[path] = why
    else:
      kept[path] = spec
  return kept, skipped


def _why_skipped(path: str, spec: tf.TensorSpec, images) -> Optional[str]:
  text = paths.spec_text(spec)
  if path in images or _is_frame(spec):
    return 'an image' if path in images else f'an image: {text}'
  if not (spec.dtype.is_integer or spec.dtype.is_floating):
    return f'not a number: {text}'
  if not spec.shape.is_fully_defined():
    return f'a shape that varies: {text}'
  return None


def _is_frame(spec: tf.TensorSpec) -> bool:
  return (spec.dtype == tf.uint8 and spec.shape.rank == 3 and
          spec.shape[-1] in (1, 3, 4))


def _checked(percentiles, relative_accuracy, block_steps) -> Tuple[float, ...]:
  found = tuple(float(q) for q in percentiles)
  wrong = [q for q in found if not 0 <= q <= 100]
  if wrong:
    raise ValueError(f'percentiles must be in [0, 100], got {wrong[0]:g}')
  if not 0 < relative_accuracy < 1:
    raise ValueError(f'relative_accuracy must be in (0, 1), got '
                     f'{relative_accuracy}')
  if block_steps < 1:
    raise ValueError(f'block_steps must be >= 1, got {block_steps}')
  return found


def _step_spec(read: tf.data.Dataset) -> Dict[str, Any]:
  """One step's spec, of episodes read whole ([T, ...]) or as a Dataset."""
  steps = read.element_spec[fields_lib.STEPS]
  if isinstance(steps, tf.data.DatasetSpec):
    return steps.element_spec
  return tf.nest.map_structure(
      lambda spec: tf.TensorSpec(spec.shape[1:], spec.dtype), steps)


# --- tf.data: episodes -> blocks of rows. -------------------------------------

def _blocks(read: tf.data.Dataset, kept: Dict[str, tf.TensorSpec],
            rewards: Sequence[str], block_steps: int) -> tf.data.Dataset:
  select = functools.partial(_selected, kept=kept, rewards=rewards)
  if episodes_lib.is_whole(read):
    rows = read.map(functools.partial(_whole_rows, select=select))
  else:
    rows = read.flat_map(functools.partial(
        _episode_rows, select=select, empty=_empty(kept)))
  return rows.rebatch(block_steps).prefetch(1)


def _selected(steps, kept, rewards):
  """(the kept fields by path, the length, the return) of [T, ...] steps."""
  flat = dict(paths.flatten_with_paths(steps))
  length = tf.shape(steps[fields_lib.IS_FIRST], out_type=tf.int64)[0]
  parts = [tf.reduce_sum(tf.cast(flat[path], tf.float64)) for path in rewards]
  episode_return = tf.add_n(parts) if parts else tf.constant(0.0, tf.float64)
  return {path: flat[path] for path in kept}, length, episode_return


def _whole_rows(episode, select):
  """The rows of an episode read whole: a map, no dataset per episode."""
  return _rows(*select(episode[fields_lib.STEPS]))


def _empty(kept):
  """`_selected` of an episode with no steps."""
  fields = {path: tf.zeros([0] + spec.shape.as_list(), spec.dtype)
            for path, spec in kept.items()}
  return fields, tf.constant(0, tf.int64), tf.constant(0.0, tf.float64)


def _episode_rows(episode, select, empty) -> tf.data.Dataset:
  """One element, the episode's rows; its steps batched, then selected
  (no map on single steps: `episodes` says why)."""
  steps = episode[fields_lib.STEPS].batch(episodes_lib.WHOLE_EPISODE)
  selected = steps.map(select).concatenate(
      tf.data.Dataset.from_tensors(empty)).take(1)
  return selected.map(_rows)


def _rows(fields, length, episode_return):
  """The episode's rows: its steps, or one row that is no step if it has
  none; each says whether it ends the episode and carries the episode's
  length and return."""
  rows = tf.maximum(length, 1)
  fields = tf.cond(length > 0, lambda: fields, lambda: {
      path: tf.zeros(tf.concat([[1], tf.shape(value)[1:]], 0), value.dtype)
      for path, value in fields.items()})
  return {
      'fields': fields,
      'episode': {
          'real': tf.fill([rows], length > 0),
          'last': tf.range(rows) == rows - 1,
          'length': tf.fill([rows], length),
          'return': tf.fill([rows], episode_return),
      },
  }


# --- numpy: blocks -> statistics. ---------------------------------------------

class _Field:
  """Moments and sketches of one field, per element and pooled."""

  def __init__(self, spec: tf.TensorSpec, relative_accuracy: float,
               max_sketched_elements: int):
    self.shape = tuple(spec.shape.as_list())
    self.elements = math.prod(self.shape)
    self.moments = moments_lib.Moments(self.elements)
    self.sketch = (sketch_lib.QuantileSketch(self.elements, relative_accuracy)
                   if self.elements <= max_sketched_elements else None)
    # Pooled from the elements' sketch at the end, else kept apart.
    self.pooled = (sketch_lib.QuantileSketch(1, relative_accuracy)
                   if self.sketch is None else None)

  def add(self, block: np.ndarray, real: Optional[np.ndarray]) -> None:
    values = block.reshape(len(block), self.elements).astype(np.float64)
    if real is not None:
      values = values[real]
    finite = np.isfinite(values)
    self.moments.add(values, finite)
    if self.sketch is not None:
      self.sketch.add(values, finite)
    if self.pooled is not None:
      self.pooled.add(values.reshape(-1, 1), finite.reshape(-1, 1))

  def summary(self, percentiles) -> result.Summary:
    """Per element, shaped as the field."""
    return _summary(self.moments, self.sketch, percentiles, self.shape)

  def field(self, percentiles, spec: tf.TensorSpec) -> result.FieldStatistics:
    pooled = self.pooled or self.sketch.pooled()
    whole = _summary(self.moments.pooled(), pooled, percentiles, ())
    per_element = self.summary(percentiles)
    return result.FieldStatistics(
        **{name.name: getattr(per_element, name.name)
           for name in dataclasses.fields(result.Summary)},
        dtype=spec.dtype.name, shape=self.shape, whole=whole)


def _summary(moments, sketch, percentiles, shape) -> result.Summary:
  low, high = moments.extremes()
  if sketch is None:
    found = {q: None for q in percentiles}
  else:
    values = sketch.percentiles(percentiles)
    found = {q: values[i].reshape(shape) for i, q in enumerate(percentiles)}
  return result.Summary(
      count=moments.count.reshape(shape),
      nonfinite=moments.nonfinite.reshape(shape),
      mean=moments.means().reshape(shape),
      std=moments.std().reshape(shape),
      min=low.reshape(shape), max=high.reshape(shape),
      percentiles=found)
