"""Whole episodes as tensors, each with its position and the step after it.

    episodes --enumerate--> (index, episode)
             --interleave, in order: steps.batch(all)--> (index, steps[T])
                   (read whole, `whole_reads`: a map)     (empty episodes vanish)
             --[StepFormat.complete: defaults, one-element fields as scalars]
             --> DenseEpisode(index, steps[T])

Every episode must begin with `is_first` (checked by the converter), so the
step after an episode's last one is always a first step. Step types and checks
then need nothing from the next episode: a `DenseEpisode` holds one episode.

Only `policy_info_fn` sees the next step's values; for it, `pair_episodes`
holds each episode back until the next one arrives (a scan, ~1 ms per episode)
and sets `next_step` to the next episode's first step, or to the pad step
(zeros with `is_first=True`) after the last episode. Memory: two episodes.

Reading the steps one by one is the costliest part of the conversion (~5 µs
per step here), so `_PARALLEL_EPISODES` episodes are read at once, in order;
episodes read whole from TFDS's records (`whole_reads`) skip it.
No `map` runs on single steps: a `map` followed by `batch(WHOLE_EPISODE)` is
fused by tf.data into one op that allocates the whole batch size up front and
never returns.
"""

from typing import Any, Dict, NamedTuple

import functools

import tensorflow as tf

from rlds_reverb.specs import fields
from rlds_reverb.specs import step_spec as step_spec_lib

# Batch size that takes a whole episode in one element (2**62 hangs tf.data).
WHOLE_EPISODE = 2**31 - 1
# Episodes read at the same time; each is held whole in memory.
_PARALLEL_EPISODES = 2
# Index of the pad episode in `pair_episodes`; never emitted.
_PAD_INDEX = -1


class DenseEpisode(NamedTuple):
  """One episode as tensors with a leading time axis."""
  index: tf.Tensor  # int64 position of the episode in the dataset, 0-based.
  steps: Dict[str, Any]  # Every field with shape [T, ...], T >= 1.
  # With `pair_episodes` only: the step after the episode's last one.
  next_step: Any = ()


def dense_episodes(
    rlds_data: tf.data.Dataset,
    step_format: step_spec_lib.StepFormat,
    pair_episodes: bool = False,
) -> tf.data.Dataset:
  """A dataset of `DenseEpisode`s, in order, without empty episodes.

  Args:
    rlds_data: RLDS episodes, or episodes read whole (`whole_reads`).
    step_format: the validated format of their steps (`step_format`).
    pair_episodes: give each episode the step after its last one as
      `next_step` (else `next_step` is `()`).
  """
  if not pair_episodes:
    if is_whole(rlds_data):
      return _whole_indexed(rlds_data, step_format).map(_as_episode)
    return _read_in_order(rlds_data, functools.partial(
        _dense_episode, step_format=step_format))
  step_spec = step_format.spec
  with_pad = indexed_steps(rlds_data, step_format).concatenate(
      tf.data.Dataset.from_tensors(
          (tf.constant(_PAD_INDEX, tf.int64), _pad_steps(step_spec))))
  initial = (False, tf.constant(_PAD_INDEX, tf.int64),
             zero_steps(step_spec, 0))
  return with_pad.scan(initial, _hold_back).filter(_is_held).map(_as_dense)


def indexed_steps(rlds_data: tf.data.Dataset,
                  step_format: step_spec_lib.StepFormat) -> tf.data.Dataset:
  """(index, steps [T, ...] as the conversion reads them) of each episode
  with steps, in order."""
  if is_whole(rlds_data):
    return _whole_indexed(rlds_data, step_format)
  return _read_in_order(rlds_data, functools.partial(
      _indexed_steps, step_format=step_format))


def is_whole(rlds_data: tf.data.Dataset) -> bool:
  """Whether the episodes' steps are whole [T, ...] tensors (`whole_reads`),
  not a dataset of steps."""
  spec = rlds_data.element_spec
  return isinstance(spec, dict) and isinstance(spec.get(fields.STEPS), dict)


def whole_steps(episode, step_format: step_spec_lib.StepFormat
                ) -> tf.data.Dataset:
  """One element, the episode's steps [T, ...] as the conversion reads them
  (`StepFormat.complete`); none when it has no steps.

  The map comes after the batch, and only for data that needs it: before
  the batch, tf.data would fuse it with the batch and allocate its size.
  """
  steps = episode[fields.STEPS].batch(WHOLE_EPISODE)
  return steps.map(step_format.complete) if step_format.changes else steps


def completed_steps(episode, step_format: step_spec_lib.StepFormat):
  """The steps of an episode read whole, as the conversion reads them."""
  return step_format.complete(episode[fields.STEPS])


def _whole_indexed(rlds_data, step_format) -> tf.data.Dataset:
  """`indexed_steps` of episodes read whole: a map, no dataset per episode
  (about 1 ms each)."""
  return rlds_data.enumerate().map(functools.partial(
      _index_and_steps, step_format=step_format)).filter(_has_steps)


def _index_and_steps(index, episode, step_format):
  return index, completed_steps(episode, step_format)


def _as_episode(index, steps) -> DenseEpisode:
  return DenseEpisode(index, steps)


def _has_steps(index, steps) -> tf.Tensor:
  del index
  return tf.shape(steps[fields.IS_FIRST])[0] > 0


def _read_in_order(rlds_data: tf.data.Dataset, read_episode) -> tf.data.Dataset:
  """`read_episode(index, episode)` datasets, concatenated in episode order."""
  return rlds_data.enumerate().interleave(
      read_episode, cycle_length=_PARALLEL_EPISODES,
      num_parallel_calls=_PARALLEL_EPISODES, deterministic=True)


def _indexed_steps(index, episode, step_format) -> tf.data.Dataset:
  """(index, steps[T]) of one episode; no element when it has no steps.

  A `zip`, not a `map`: it adds no function to run per episode.
  """
  return tf.data.Dataset.zip((
      tf.data.Dataset.from_tensors(index), whole_steps(episode, step_format)))


def _dense_episode(index, episode, step_format) -> tf.data.Dataset:
  """`_indexed_steps` as a `DenseEpisode` without `next_step`."""
  return tf.data.Dataset.zip(DenseEpisode(
      tf.data.Dataset.from_tensors(index), whole_steps(episode, step_format)))


def zero_steps(step_spec: Dict[str, Any], length: int) -> Dict[str, Any]:
  """`length` zero-valued steps, [length, ...]; unknown dimensions become 0."""
  def zeros(spec):
    shape = [length] + [dim if dim is not None else 0
                        for dim in spec.shape.as_list()]
    return tf.zeros(shape, spec.dtype)
  return tf.nest.map_structure(zeros, step_spec)


def _pad_steps(step_spec: Dict[str, Any]) -> Dict[str, Any]:
  """One zero step with is_first=True, with a time axis: what ends the data."""
  pad = zero_steps(step_spec, 1)
  pad[fields.IS_FIRST] = tf.ones([1], tf.bool)
  return pad


def _hold_back(held, episode):
  """Emits the held episode with the first step of `episode`; holds `episode`."""
  held_valid, held_index, held_steps = held
  index, steps = episode
  first_step = tf.nest.map_structure(lambda x: x[0], steps)
  return (True, index, steps), (held_valid, held_index, held_steps, first_step)


def _is_held(valid, index, steps, next_step):
  del index, steps, next_step
  return valid


def _as_dense(valid, index, steps, next_step):
  del valid
  return DenseEpisode(index, steps, next_step)
