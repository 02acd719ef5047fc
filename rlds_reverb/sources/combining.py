"""Several sources read one after the other, as one dataset of episodes.

    [a, b, c] --steps the same? (exactly: no relaxed shapes)--> a + b + c
              --episode metadata: what all share alike, and the flags of
                invalid episodes (False where a source has none)
              --image fields: a format where all agree, None where not
"""

import functools
from typing import List

import tensorflow as tf

from rlds_reverb import errors
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths


def combine(sources: List[str], datasets: List[tf.data.Dataset]
            ) -> tf.data.Dataset:
  """The sources' datasets, one after the other (`_concatenate`)."""
  return functools.reduce(
      _concatenate, zip(sources[1:], datasets[1:]), datasets[0])


def image_fields(found_builders) -> dict:
  """The Image step fields of the sources; a format where they all agree
  (the steps were checked to be the same), None where they differ."""
  images = [whole_reads.images_of(builder) for builder in found_builders]
  return {path: (image_format if all(other.get(path) == image_format
                                     for other in images) else None)
          for path, image_format in images[0].items()}


def _concatenate(dataset: tf.data.Dataset, source_and_next) -> tf.data.Dataset:
  """Appends one source; steps must match exactly, not just be compatible.

  tf.data would relax float32[3] and float32[5] to float32[None], which no
  Reverb table signature can hold. Episode metadata that differs (a field
  one source lacks, or stores otherwise) is dropped, as conversion drops
  it; a flag marking invalid episodes is kept, False where a source has none.
  """
  source, next_dataset = source_and_next
  before, after = dataset.element_spec, next_dataset.element_spec
  if not (_is_rlds(before) and _is_rlds(after)):
    differences = _spec_differences(before, after)
  else:
    differences = _spec_differences({fields.STEPS: before[fields.STEPS]},
                                    {fields.STEPS: after[fields.STEPS]})
  if differences:
    raise errors.SourceError(
        f'Cannot concatenate {source}: its episode spec differs from the '
        f'datasets before it at {"; ".join(differences)}.')
  if before == after:
    return dataset.concatenate(next_dataset)
  kept = _shared_metadata(before, after)
  return _with_metadata(dataset, kept).concatenate(
      _with_metadata(next_dataset, kept))


def _is_rlds(spec) -> bool:
  return isinstance(spec, dict) and fields.STEPS in spec


def _shared_metadata(before: dict, after: dict) -> List[str]:
  """Metadata fields both have alike, and the invalid flags either has."""
  shared = [name for name in before
            if name != fields.STEPS and before[name] == after.get(name)]
  flags = [name for name in fields.INVALID_FLAG_FIELDS
           if name not in shared and _is_flag(before.get(name),
                                              after.get(name))]
  return shared + flags


def _is_flag(*specs) -> bool:
  """Bool scalars where present, in one spec at least."""
  present = [spec for spec in specs if spec is not None]
  return bool(present) and all(
      isinstance(spec, tf.TensorSpec) and spec.dtype == tf.bool and
      spec.shape.rank == 0 for spec in present)


def _with_metadata(dataset: tf.data.Dataset, names: List[str]):
  """Episodes with `steps` and the metadata `names`; a missing flag False."""
  return dataset.map(functools.partial(_select_metadata, names=names))


def _select_metadata(episode, names):
  selected = {fields.STEPS: episode[fields.STEPS]}
  for name in names:
    selected[name] = episode.get(name, tf.constant(False))
  return selected


def _spec_differences(before, after) -> List[str]:
  """'path (spec before vs spec after)' for each field that differs."""
  lines = []
  for path, first, second in paths.spec_differences(before, after):
    first_text, second_text = paths.difference_texts(first, second)
    lines.append(f'{path} ({first_text} vs {second_text})')
  return lines
