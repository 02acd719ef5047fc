"""`ReadEpisodes`: RLDS episodes as numpy, read in parallel over record files.

    SRC, split --(launcher: dataset_info only)--> Parts, each a range of
                 episodes inside one record file: 'train[120:180]'
      --Create (reshuffled over workers)-->
      --Read: sources.load(part) -> each episode whole, steps [T, ...]-->
      (position, {'steps': {field: ndarray}, **metadata})

A part reads its file from the start, skipping (not parsing) the records
before its range: `parts_per_file=k` reads within files in parallel at the
cost of reading each file's head up to k times. By default a split of few
files is cut into at least `MIN_PARTS` parts, so that workers share it.
`position` is the episode's place in `rlds_reverb.load(SRC, split)`'s
order, so errors, the skipped list and server assignment name episodes as
every other entry point does.

TFDS's own `tfds.beam.ReadFromTFDS` reads the same parts, but gives no
positions, pickles the builder, and needs `SkipDecoding` on the nested steps
(which leaves images encoded); here each worker opens the dataset by name and
TFDS decodes it as `load` does.
"""

import functools
from typing import Any, Dict, Iterator, Optional, Sequence, Tuple, Union

import apache_beam as beam
import tensorflow as tf

from rlds_reverb import push_options
from rlds_reverb import sources
from rlds_reverb import specs
from rlds_reverb._util import pipelines
from rlds_reverb.convert import encoded
from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.push_options import ImageStorage
from rlds_reverb.push_options import PushOptions
from rlds_reverb.sources import whole_reads
from rlds_reverb.sources.ranges import MIN_PARTS  # pylint: disable=unused-import
from rlds_reverb.sources.ranges import Part
from rlds_reverb.sources.ranges import plan_parts
from rlds_reverb.specs import fields

Episode = Tuple[int, Dict[str, Any]]  # (position, numpy episode)


class ReadEpisodes(beam.PTransform):
  """Reads RLDS episodes as `(position, numpy episode)` pairs.

  Args:
    src: what `rlds_reverb.load` opens: a TFDS directory, a catalog name, the
      bundled dataset, or a list of them (read in order).
    split: a TFDS split, optionally sliced ('train[:10%]').
    data_dir: where catalog datasets are prepared.
    parts_per_file: ranges each record file is split into, read in
      parallel; None: enough for `MIN_PARTS` parts in all.

  `step_format` is the data's `StepFormat`, `step_spec` the steps as the
  episodes come out (missing `discount`/`reward` added, one-element fields
  as scalars; for `WriteToReverb`). `strict` refuses data that needs either,
  as for `rlds_reverb.push`. `images`, `image_format` and `image_fields`
  as for `rlds_reverb.push`: with images='encoded', image fields come as
  [T] encoded bytes and `step_spec` says so (`specs.encoded`), which
  `WriteToReverb(step_spec=...)` needs. `options` gives them (a
  `PushOptions`: its `strict` and `image_storage`) instead of the keywords.
  Raises `SourceError`, `DatasetNotPreparedError`, `StepSpecError` or
  `ImageFieldError` when built. `parts` are the ranges read (`Part`s),
  `episodes` how many episodes they hold (from the dataset info).
  """

  def __init__(self, src: Union[str, Sequence[str]], split: str = 'train',
               data_dir: Optional[str] = None, *,
               parts_per_file: Optional[int] = None, strict: bool = False,
               images: str = 'raw', image_format: str = 'png',
               image_fields: Optional[Sequence[str]] = None,
               options: Optional[PushOptions] = None):
    super().__init__()
    if parts_per_file is not None and parts_per_file < 1:
      raise ValueError(f'parts_per_file must be >= 1, got {parts_per_file}.')
    options = push_options.of(options, strict=strict, images=images,
                              image_format=image_format,
                              image_fields=image_fields)
    self.image_storage = options.image_storage
    rlds_data, encoding = encoded.prepare(sources.load(src, split, data_dir),
                                          self.image_storage)
    self.step_format = specs.step_format(rlds_data, options.strict)
    if encoding is not None:
      self.step_format = encoding.named(self.step_format)
    self.step_spec = self.step_format.spec
    self.parts = plan_parts(src, split, data_dir, parts_per_file)
    self.episodes = sum(part.end - part.start for part in self.parts)

  def expand(self, pbegin):
    return (pbegin
            | 'Parts' >> beam.Create(self.parts)
            | 'Read' >> beam.FlatMap(read_part, storage=self.image_storage))


def read_part(part: Part, storage: ImageStorage = ImageStorage()
              ) -> Iterator[Episode]:
  """The part's episodes, each whole, with its position; image fields
  stored as `storage` says."""
  rlds_data, _ = encoded.prepare(
      sources.load(part.source, split=part.split_text(),
                   data_dir=part.data_dir), storage)
  for index, episode in enumerate(numpy_episodes(rlds_data)):
    yield part.first_position + index, episode


def numpy_episodes(rlds_data: tf.data.Dataset) -> Iterator[Dict[str, Any]]:
  """Each episode with its steps as [T, ...] arrays, as the conversion reads
  them (`StepFormat.complete`); empty ones too."""
  rlds_data = whole_reads.whole(rlds_data)
  step_format = specs.step_format(rlds_data)
  if episodes_lib.is_whole(rlds_data):  # A map: no dataset per episode.
    return pipelines.numpy_of(rlds_data.map(functools.partial(
        _completed, step_format=step_format)))
  dense = rlds_data.interleave(
      functools.partial(
          _dense_episode, step_format=step_format,
          empty=episodes_lib.zero_steps(step_format.spec, 0)),
      cycle_length=2, num_parallel_calls=2, deterministic=True)
  return pipelines.numpy_of(dense)


def _dense_episode(episode, step_format, empty) -> tf.data.Dataset:
  """One element: the episode's metadata and its steps batched whole."""
  steps = episodes_lib.whole_steps(episode, step_format).concatenate(
      tf.data.Dataset.from_tensors(empty)).take(1)
  metadata = {k: v for k, v in episode.items() if k != fields.STEPS}
  return steps.map(functools.partial(_with_metadata, metadata=metadata))


def _completed(episode, step_format):
  """An episode read whole, its steps as the conversion reads them."""
  return {**episode,
          fields.STEPS: episodes_lib.completed_steps(episode, step_format)}


def _with_metadata(steps, metadata):
  return {fields.STEPS: steps, **metadata}
