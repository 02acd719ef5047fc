"""Every problem of an RLDS dataset, with its position, in one read.

Conversion stops at the first malformed episode; `validate` lists them all.
It applies the converter's own rules (`step_types.classify`) to each whole
episode's flags, so the two always agree:

    episodes --enumerate--> (index, episode)
             --map: steps' flags as [T] vectors, and the float fields,
               one episode per element-->
             --classify with the pad step after the last step-->
             (index, length, steps with a problem, their Problem, flagged,
              float fields)
             --numpy, per episode and float field: a sum, and only if it is
               NaN or infinite, NaN / +inf / -inf counts and the first step-->

The step after an episode's last one is taken to be a first step, as the
converter does: the next episode matters only through its own start rule
(`episode_not_first`). Not problems, but reported:
  * empty episodes (no steps): the converter skips them silently;
  * episodes flagged in their metadata by a top-level bool field 'invalid' or
    'is_invalid' next to 'steps': `rlds-reverb push` skips them;
  * NaN and infinite values of float step fields (`NonFinite`): the converter
    and Reverb carry them as they are, and a push or build writes them;
    `rlds-reverb validate --strict` fails on them.
`episode_problems` and `is_flagged_invalid` apply the same rules to one
episode held as numpy arrays (what a Beam worker has).
"""

import dataclasses
import functools
from typing import Any, Callable, Dict, List, Optional, Sequence

import numpy as np
import tensorflow as tf

from rlds_reverb._util import pipelines
from rlds_reverb._util import wording
from rlds_reverb.convert import encoded
from rlds_reverb.convert import episodes as episodes_lib
from rlds_reverb.convert import step_types
from rlds_reverb.sources import whole_reads
from rlds_reverb.specs import fields
from rlds_reverb.specs import paths
from rlds_reverb.specs import step_spec as step_spec_lib

INVALID_FLAG_FIELDS = fields.INVALID_FLAG_FIELDS


@dataclasses.dataclass(frozen=True)
class StepProblem:
  """One malformed step; `kind` is a `step_types.Problem` name, lower-cased."""
  episode: int
  step: int
  kind: str
  message: str


@dataclasses.dataclass(frozen=True)
class NonFinite:
  """The NaN and infinite values of one float step field ('observation/
  position'), over every element of every step; integers have none.

  Not a problem for the converter (it carries them, and so does Reverb), but
  a normalizer's mean or a loss that meets one is NaN from then on.
  `episode` and `step` (0-based) are where the first one is.
  """
  field: str
  nan: int
  posinf: int
  neginf: int
  episodes: int
  episode: int
  step: int

  @property
  def count(self) -> int:
    return self.nan + self.posinf + self.neginf

  @property
  def message(self) -> str:
    """'observation: 2 non-finite values (1 NaN, 1 +inf) in 1 episode, the
    first at episode 1, step 1'."""
    kinds = ', '.join(f'{wording.number(number)} {name}' for number, name in (
        (self.nan, 'NaN'), (self.posinf, '+inf'), (self.neginf, '-inf'))
                      if number)
    return (f'{self.field}: {wording.count(self.count, "non-finite value")} '
            f'({kinds}) in {wording.count(self.episodes, "episode")}, the '
            f'first at episode {self.episode}, step {self.step}')

  def as_dict(self) -> Dict[str, Any]:
    return {**dataclasses.asdict(self), 'count': self.count}


@dataclasses.dataclass(frozen=True)
class Report:
  """What `validate` found; positions are 0-based."""
  episodes: int
  steps: int
  problems: List[StepProblem]
  empty_episodes: List[int]
  flagged_invalid: List[int]
  # Steps per episode, in order (not in `as_dict`: one number per episode).
  lengths: List[int] = dataclasses.field(default_factory=list, repr=False)
  # Fields read otherwise than stored: defaults, one-element scalars
  # (`StepFormat.notes`); not problems.
  notes: List[str] = dataclasses.field(default_factory=list)
  # Float fields holding NaN or infinities, by path; not problems.
  nonfinite: List[NonFinite] = dataclasses.field(default_factory=list)

  @property
  def malformed_episodes(self) -> List[int]:
    """Episodes with at least one problem, in order."""
    return sorted({problem.episode for problem in self.problems})

  def as_dict(self) -> Dict[str, Any]:
    return {
        'episodes': self.episodes,
        'steps': self.steps,
        'problems': [dataclasses.asdict(p) for p in self.problems],
        'empty_episodes': self.empty_episodes,
        'flagged_invalid': self.flagged_invalid,
        'notes': self.notes,
        'nonfinite': [found.as_dict() for found in self.nonfinite],
    }


def validate(rlds_data: tf.data.Dataset, strict: bool = False,
             on_read: Optional[Callable[[int, int], None]] = None,
             frames: Optional[Dict[str, Any]] = None) -> Report:
  """Reads all of `rlds_data` and reports every problem.

  `on_read(episodes, steps)`, if given, is called after each episode with
  the counts read so far (for a progress bar). `frames`, {step field path:
  `specs.encoded.EncodedImage`}, names fields of encoded frames (episodes
  read whole) whose headers must fit: a push of encoded images checks them
  ahead, reading headers only (`convert.encoded.check_frames`).

  The report's `nonfinite` counts the NaN and infinite values of every float
  step field (`NonFinite`, by path): not problems, for the caller to judge
  (`rlds-reverb validate --strict` fails on them; a push does not).

  Raises:
    StepSpecError: the step spec cannot be converted (checked before reading;
      `strict` as for `convert_rlds_to_trajectories`).
    ColumnMismatchError: a frame of `frames` that does not fit (episode,
      step and field named).
  """
  step_format = step_spec_lib.step_format(rlds_data, strict)
  # The rules need the flags only: images are left encoded.
  rlds_data = whole_reads.whole(rlds_data, keep_encoded=True)
  flag_field = invalid_flag_field(rlds_data.element_spec)
  indexed = rlds_data.enumerate()
  frames = dict(frames or {})
  if episodes_lib.is_whole(rlds_data):  # A map: no dataset per episode.
    flags = indexed.map(functools.partial(
        _whole_episode_flags, flag_field=flag_field, step_format=step_format,
        frames=sorted(frames)))
  elif frames:
    raise ValueError('Frames are checked in episodes read whole only.')
  else:
    flags = indexed.flat_map(functools.partial(
        _episode_flags, flag_field=flag_field, step_format=step_format))
  nonfinite = _NonFiniteCounts()
  checked = flags.map(_check_episode)
  episodes = steps = 0
  problems, empty, flagged, lengths = [], [], [], []
  for element in pipelines.numpy_of(checked):
    index, length, problem_steps, kinds, is_flagged, values, floats = element
    for path, value in zip(sorted(frames), values):
      encoded.check_frames(path, frames[path], value, f'episode {index}')
    episodes += 1
    steps += int(length)
    lengths.append(int(length))
    if length == 0:
      empty.append(int(index))
    if is_flagged:
      flagged.append(int(index))
    problems.extend(_step_problems(int(index), problem_steps, kinds))
    nonfinite.add(int(index), floats)
    if on_read is not None:
      on_read(episodes, steps)
  return Report(episodes, steps, problems, empty, flagged, lengths,
                step_format.notes(), nonfinite.found())


def invalid_flag_field(episode_spec: Any) -> Optional[str]:
  """The metadata field that flags invalid episodes, if the data has one."""
  if not isinstance(episode_spec, dict):
    return None
  for name in INVALID_FLAG_FIELDS:
    spec = episode_spec.get(name)
    if (isinstance(spec, tf.TensorSpec) and spec.dtype == tf.bool and
        spec.shape.rank == 0):
      return name
  return None


def episode_flags(rlds_data: tf.data.Dataset) -> np.ndarray:
  """Per episode, whether its metadata flags it invalid; reads no steps."""
  flag_field = invalid_flag_field(rlds_data.element_spec)
  if flag_field is None:
    flags = rlds_data.map(_unflagged)
  else:
    flags = rlds_data.map(functools.partial(_flag_of, flag_field=flag_field))
  batches = list(flags.batch(1024).as_numpy_iterator())
  return np.concatenate(batches) if batches else np.zeros([0], bool)


def episode_problems(position: int,
                     steps: Dict[str, np.ndarray]) -> List[StepProblem]:
  """The problems of one episode's numpy steps ({field: [T, ...]}).

  The same rules as `validate`, run eagerly on the [T] flags (about 1 ms).
  """
  if not len(steps[fields.IS_FIRST]):  # pylint: disable=g-explicit-length-test
    return []
  problem = step_types.classify_episode(
      steps[fields.IS_FIRST], steps[fields.IS_LAST],
      steps[fields.IS_TERMINAL]).problem.numpy()
  where = np.flatnonzero(problem)
  return _step_problems(position, where, problem[where])


def is_flagged_invalid(episode: Dict[str, Any]) -> bool:
  """Whether a numpy episode's metadata flags it invalid, as `validate` says."""
  for name in INVALID_FLAG_FIELDS:
    value = episode.get(name)
    if value is not None and np.ndim(value) == 0 and (
        np.asarray(value).dtype == np.bool_):
      return bool(value)
  return False


def shifted(report: Report, offset: int) -> Report:
  """`report` of data that starts at position `offset` of a whole (a part
  of it), its positions counted from the whole's start, as errors and
  skipped lists name them."""
  return dataclasses.replace(
      report,
      problems=[dataclasses.replace(p, episode=p.episode + offset)
                for p in report.problems],
      empty_episodes=[p + offset for p in report.empty_episodes],
      flagged_invalid=[p + offset for p in report.flagged_invalid])


def without_episodes(rlds_data: tf.data.Dataset,
                     skip: Sequence[int]) -> tf.data.Dataset:
  """`rlds_data` without the episodes at positions `skip`."""
  if not skip:
    return rlds_data
  skip_set = tf.constant(sorted(set(skip)), tf.int64)
  return rlds_data.enumerate().filter(
      functools.partial(_is_kept, skip=skip_set)).map(_episode_of)


def _episode_flags(index, episode, flag_field, step_format):
  """(index, the step flags as [T] vectors, flagged, (), the float fields
  [T, ...] by path); T may be 0.

  The steps are batched before the flags are selected: a whole-episode batch
  after a `map` of TFDS steps never returns (tf.data reserves the batch size
  when it cannot see the count).
  """
  flagged = (episode[flag_field] if flag_field is not None
             else tf.constant(False))
  found = episodes_lib.whole_steps(episode, step_format).map(
      _flags_and_floats)
  nothing = tf.data.Dataset.from_tensors(
      tf.nest.map_structure(_no_steps, found.element_spec))
  return found.concatenate(nothing).take(1).map(
      functools.partial(_with_index_and_flag, index, flagged))


def _whole_episode_flags(index, episode, flag_field, step_format, frames):
  """`_episode_flags` of an episode read whole: no batch, no fallback;
  with the values of the fields `frames` (paths)."""
  steps = episodes_lib.completed_steps(episode, step_format)
  flags, floats = _flags_and_floats(steps)
  flagged = (episode[flag_field] if flag_field is not None
             else tf.constant(False))
  values = tuple(_at(steps, path) for path in frames)
  return index, flags, flagged, values, floats


def _at(steps, path: str):
  for key in path.split('/'):
    steps = steps[key]
  return steps


def _with_index_and_flag(index, flagged, flags, floats):
  return index, flags, flagged, (), floats


def _no_steps(spec: tf.TensorSpec) -> tf.Tensor:
  """Zeros of `spec` with T = 0: what an episode with no steps gives (a
  [0] vector if its rank is unknown, as a `numpy_function`'s is)."""
  if spec.shape.rank is None:
    return tf.zeros([0], spec.dtype)
  return tf.zeros([0 if dim is None else dim for dim in spec.shape.as_list()],
                  spec.dtype)


@tf.function  # Traced once per element spec, reused by each dataset mapping it.
def _check_episode(index, flags, flagged, values, floats):
  is_first, is_last = flags[fields.IS_FIRST], flags[fields.IS_LAST]
  types = step_types.classify(
      is_first, is_last, flags[fields.IS_TERMINAL],
      _followed_by(is_first, True), _followed_by(is_last, False))
  problem_steps = tf.where(types.problem > 0)[:, 0]
  return (index, tf.shape(is_first, out_type=tf.int64)[0], problem_steps,
          tf.gather(types.problem, problem_steps), flagged, values, floats)


@tf.function  # Traced once per element spec, reused by each dataset mapping it.
def _flags_and_floats(steps):
  """The flags of [T] steps, and the float fields by path: numpy counts what
  they hold (`_NonFiniteCounts`), faster than ops traced per call would."""
  flags = {name: steps[name] for name in fields.FLAGS}
  floats = {path: values for path, values in paths.flatten_with_paths(steps)
            if values.dtype.is_floating}
  return flags, floats


class _NonFiniteCounts:
  """NaN, +inf and -inf values of each float field summed over episodes, with
  the episode and step of each field's first."""

  def __init__(self):
    self._counts = {}  # Path: [NaN, +inf, -inf, episodes].
    self._first = {}  # Path: (episode, step).

  def add(self, episode: int, floats: Dict[str, np.ndarray]) -> None:
    """Adds one episode's float fields, {path: [T, ...]}: a sum per field
    when all are finite (a NaN or an infinity makes it one; so does an
    overflow, which the second look tells apart)."""
    with np.errstate(over='ignore', invalid='ignore'):
      sums = [values.sum() for values in floats.values()]
    for (path, values), total in zip(floats.items(), sums, strict=True):
      if np.isfinite(total):
        continue
      finite = np.isfinite(values)
      if not finite.all():
        self._add(path, episode, values, finite)

  def _add(self, path, episode, values, finite) -> None:
    infinite = np.isinf(values)
    counts = self._counts.setdefault(path, np.zeros([4], np.int64))
    counts += (np.count_nonzero(np.isnan(values)),
               np.count_nonzero(infinite & (values > 0)),
               np.count_nonzero(infinite & (values < 0)), 1)
    steps_finite = finite.reshape(len(values), -1).all(axis=1)
    self._first.setdefault(path, (episode, int(np.argmin(steps_finite))))

  def found(self) -> List[NonFinite]:
    return [NonFinite(path, *(int(n) for n in self._counts[path]),
                      *self._first[path]) for path in sorted(self._counts)]


def _followed_by(values: tf.Tensor, pad_value: bool) -> tf.Tensor:
  """values[1:] then the pad step's value: each step's next step ([0] if T=0)."""
  return tf.concat([values[1:], [pad_value]], axis=0)[:tf.shape(values)[0]]


def _flag_of(episode, flag_field):
  return episode[flag_field]


def _unflagged(episode):
  del episode
  return tf.constant(False)


def _is_kept(index, episode, skip):
  del episode
  return tf.logical_not(tf.reduce_any(tf.equal(index, skip)))


def _episode_of(index, episode):
  del index
  return episode


def _step_problems(episode: int, steps: np.ndarray,
                   kinds: np.ndarray) -> List[StepProblem]:
  return [StepProblem(episode, int(step), _kind(kind),
                      step_types.MESSAGES[int(kind)])
          for step, kind in zip(steps, kinds, strict=True)]


def _kind(problem: int) -> str:
  return step_types.Problem(int(problem)).name.lower()
