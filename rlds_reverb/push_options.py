"""What a push writes, as one frozen value made where the push is asked for.

    push(.., sequence_length=3, images='encoded')    keywords, as always
    push(.., options=PushOptions(sequence_length=3,   or one value
              image_storage=ImageStorage('encoded')))
    rlds-reverb push --sequence-length 3 ...          (cli/push.py)
      -> PushOptions: every value checked here, one line for a bad one,
         before the data is opened or the server asked
      -> passed down whole: CheckedPush -> write_trajectories ->
         SequenceWriter; pickled to each `push_shards` / `--workers` process
         and Beam worker; `key()` is what a resume file records of it

What the checks do with bad input and earlier runs (malformed episodes, a
resume file) is not what a push writes: `CheckOptions`, the checked push's
own. This module imports no TensorFlow: the `--workers` parent and the
command line build both before TensorFlow loads.
"""

import dataclasses
import enum
import math
import operator
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from rlds_reverb.errors import OptionsError

DEFAULT_TIMEOUT_S = 30.0
IMAGE_MODES = ('raw', 'encoded')
IMAGE_FORMATS = ('png', 'jpeg')

# None (by each column's bytes per step), one int for every column, or ints
# by field path or path prefix ({'observation/pixels': 2}).
ChunkLength = Union[None, int, Mapping[str, int]]


def choice(kind, value, name: str):
  """`value` as a member of the enum `kind` (or a member's value)."""
  if isinstance(value, kind):
    return value
  try:
    return kind(value)
  except ValueError:
    raise OptionsError(f'{name} must be one of {[m.value for m in kind]}, got '
                       f'{value!r}.') from None


class EndOfEpisode(enum.Enum):
  """What happens to the tail of an episode shorter than an item."""
  DROP = 'drop'  # TF-Agents' default: no item reaches past the boundary step.
  PAD = 'pad'  # pad_end_of_episodes: pad a short episode to one full item.
  TILE = 'tile'  # pad_end_of_episodes + tile_end_of_episodes: L - 1 pad steps.

  @classmethod
  def from_observer_flags(cls, pad: bool, tile: bool) -> 'EndOfEpisode':
    if tile:
      return cls.TILE
    return cls.PAD if pad else cls.DROP


class OnInvalid(enum.Enum):
  """What a push does with a malformed episode."""
  RAISE = 'raise'  # Read ahead; fail before writing anything.
  SKIP = 'skip'  # Read ahead; leave malformed episodes out.
  STOP = 'stop'  # Read once; stop at the first one, keeping what came before.

  @classmethod
  def of(cls, value: Union[str, 'OnInvalid']) -> 'OnInvalid':
    """`value` as an `OnInvalid`; the strings are the members' values."""
    return choice(cls, value, 'on_invalid')


@dataclasses.dataclass(frozen=True)
class ImageStorage:
  """How a push stores image fields in Reverb.

  'raw': decoded uint8 frames, as TF-Agents' observer writes them.
  'encoded': PNG/JPEG bytes, a string per step, which the reader decodes
  (`convert.encoded`); `format` says how raw uint8 fields are encoded (a
  TFDS dataset's Image fields keep their own bytes), `fields` which step
  fields ('observation/pixels'; None: the source's Image features, else
  every uint8 [H, W, C] field). `push`'s keywords `images`, `image_format`
  and `image_fields` are these three.
  """
  mode: str = 'raw'
  format: str = 'png'
  fields: Optional[Tuple[str, ...]] = None

  def __post_init__(self):
    if self.mode not in IMAGE_MODES:
      raise OptionsError(f'images must be one of {list(IMAGE_MODES)}, got '
                         f'{self.mode!r}.')
    if self.format not in IMAGE_FORMATS:
      raise OptionsError(f'image_format must be one of {list(IMAGE_FORMATS)}, '
                         f'got {self.format!r}.')
    if not self.encoded and (self.fields is not None or self.format != 'png'):
      raise OptionsError(
          "image_fields and image_format apply to images='encoded' only.")
    if self.fields is not None:
      if isinstance(self.fields, str):
        raise OptionsError(f'image_fields must be a sequence of step field '
                           f'paths, got the string {self.fields!r}.')
      object.__setattr__(self, 'fields', tuple(self.fields))

  @property
  def encoded(self) -> bool:
    return self.mode == 'encoded'

  @classmethod
  def of(cls, images: Union[str, 'ImageStorage'] = 'raw',
         image_format: str = 'png',
         image_fields: Optional[Sequence[str]] = None) -> 'ImageStorage':
    """From `push`'s keywords (`images` may be an `ImageStorage` itself)."""
    if isinstance(images, ImageStorage):
      return images
    return cls(images, image_format,
               None if image_fields is None else tuple(image_fields))


@dataclasses.dataclass(frozen=True, kw_only=True)
class PushOptions:
  """What a push writes: its items, their priority, how the server stores
  them, how strictly the data is read, and how long the server may take.

  Each value is checked when the options are made (`OptionsError`, a
  `ValueError`, one line).
  The keywords of `rlds_reverb.push`, `push_shards`, `push_nstep_transitions`
  and `rlds_reverb.beam.push` are these fields (`images`, `image_format` and
  `image_fields` those of `image_storage`); each of them also takes the
  options whole (`options=`; `push_options=` for `beam.push`), not both for
  one setting.

  Attributes:
    sequence_length: steps per item.
    stride_length: steps between the starts of consecutive items.
    end_of_episode: what happens at an episode's end (`EndOfEpisode`, or its
      value 'drop', 'pad', 'tile').
    priority: every item's priority, finite and >= 0.
    chunk_length: steps per chunk on the server: None (by each column's bytes
      per step), one int for every column, or ints by field path or prefix
      ({'observation/pixels': 2}); the items are the same.
    image_storage: how image fields are stored (`ImageStorage`, or its mode
      'raw' or 'encoded').
    strict: refuse data without `discount` or `reward`, or with a discount
      or flag of shape (1,), as TF-Agents does; else they are read with
      defaults and as scalars, and the result's `notes` say so.
    timeout: seconds to wait for the server at any one point, finite, > 0.
  """
  sequence_length: int = 2
  stride_length: int = 1
  end_of_episode: EndOfEpisode = EndOfEpisode.DROP
  priority: float = 1.0
  chunk_length: ChunkLength = None
  image_storage: ImageStorage = ImageStorage()
  strict: bool = False
  timeout: float = DEFAULT_TIMEOUT_S

  def __post_init__(self):
    checked = dict(
        end_of_episode=choice(EndOfEpisode, self.end_of_episode,
                              'end_of_episode'),
        priority=check_priority(self.priority),
        chunk_length=check_chunk_length(self.chunk_length),
        image_storage=_image_storage(self.image_storage),
        strict=_boolean(self.strict, 'strict'),
        timeout=_timeout(self.timeout))
    checked.update(zip(('sequence_length', 'stride_length'), check_lengths(
        self.sequence_length, self.stride_length)))
    for name, value in checked.items():
      object.__setattr__(self, name, value)

  def keywords(self) -> Dict[str, Any]:
    """The options as `push`'s keywords."""
    storage = self.image_storage
    return {**{field.name: getattr(self, field.name)
               for field in dataclasses.fields(self)
               if field.name != 'image_storage'},
            'images': storage.mode, 'image_format': storage.format,
            'image_fields': storage.fields}

  def key(self) -> Dict[str, Any]:
    """What a resume file records of them (chunk lengths change no item;
    JSON values, as the file reads back)."""
    key = {'sequence_length': self.sequence_length,
           'stride': self.stride_length,
           'end_of_episode': self.end_of_episode.value,
           'priority': self.priority}
    storage = self.image_storage
    if storage.encoded:  # Raw: the key of files written before them.
      key.update(images=storage.mode, image_format=storage.format,
                 image_fields=(None if storage.fields is None
                               else list(storage.fields)))
    return key


def of(options: Optional[PushOptions] = None, **keywords) -> PushOptions:
  """The options a push was given: `options`, or one made of `keywords`
  (`push`'s, by name).

  Beside `options`, a keyword must keep its default: a setting is given once.
  """
  defaults = PushOptions().keywords()
  unknown = sorted(set(keywords) - set(defaults))
  if unknown:
    raise TypeError(f'{unknown[0]!r} is no push setting; they are '
                    f'{", ".join(defaults)}.')
  if options is None:
    return from_keywords(**keywords)
  if not isinstance(options, PushOptions):
    raise OptionsError(f'options must be a PushOptions, got '
                       f'{type(options).__name__}.')
  given = options.keywords()
  for name, value in keywords.items():
    if not _same(value, defaults[name]):
      raise OptionsError(
          f'{name} is given both as a keyword ({value!r}) and in options '
          f'({given[name]!r}); give it in one of them.')
  return options


def from_keywords(*, images: Union[str, ImageStorage] = 'raw',
                  image_format: str = 'png',
                  image_fields: Optional[Sequence[str]] = None,
                  **settings) -> PushOptions:
  """`PushOptions` of `push`'s keywords."""
  return PushOptions(
      image_storage=ImageStorage.of(images, image_format, image_fields),
      **settings)


@dataclasses.dataclass(frozen=True, kw_only=True)
class CheckOptions:
  """What the checked push does with bad input and earlier runs.

  Not `PushOptions`: nothing written depends on them, the write layer never
  reads them (n-step transitions, the TF-Agents drop-in and Beam's workers
  write without them), and `resume` is a path of one process (each shard of
  `push_shards` has its own).

  Attributes:
    on_invalid: 'raise', 'skip' or 'stop' (`OnInvalid`).
    resume: the JSON file where progress is saved (`rlds_reverb.push`).
    resume_anyway: continue after what the resume file names even when a
      table lost it.
  """
  on_invalid: OnInvalid = OnInvalid.RAISE
  resume: Optional[str] = None
  resume_anyway: bool = False

  def __post_init__(self):
    object.__setattr__(self, 'on_invalid', OnInvalid.of(self.on_invalid))
    object.__setattr__(self, 'resume_anyway',
                       _boolean(self.resume_anyway, 'resume_anyway'))


def check_priority(priority: float) -> float:
  """`priority` as a float, if Reverb can sample by it: finite and >= 0.

  Reverb's writer refuses NaN only when the first item is created, with rows
  already sent; it takes a negative or infinite priority, which breaks a
  prioritized table's sampling. Checked before anything is written.
  """
  try:
    value = float(priority)
  except (TypeError, ValueError):
    raise OptionsError(
        f'priority must be a number, got {priority!r}.') from None
  if not (math.isfinite(value) and value >= 0):
    raise OptionsError(f'priority must be finite and >= 0, got {priority!r}.')
  return value


def check_lengths(sequence_length: int, stride_length: int) -> Tuple[int, int]:
  """Steps per item and between item starts, as ints >= 1."""
  lengths = tuple(_whole(value, name) for value, name in (
      (sequence_length, 'sequence_length'), (stride_length, 'stride_length')))
  if min(lengths) < 1:
    raise OptionsError(f'sequence_length and stride_length must be >= 1, got '
                       f'{sequence_length} and {stride_length}.')
  return lengths


def check_chunk_length(chunk_length: ChunkLength) -> ChunkLength:
  """The option's values are positive ints (a copy of a mapping); which
  fields it names, and how long chunks may be, is checked against the items
  (`write.chunks.check_option`)."""
  if chunk_length is None:
    return None
  if isinstance(chunk_length, Mapping):
    for key, value in chunk_length.items():
      check_chunk_steps(value, f'chunk_length[{key!r}]')
    return dict(chunk_length)
  check_chunk_steps(chunk_length, 'chunk_length')
  return chunk_length


def check_chunk_steps(value: Any, name: str) -> None:
  if isinstance(value, bool) or not _is_whole(value):
    raise OptionsError(f'{name} must be a positive int, got {value!r}.')
  if value < 1:
    raise OptionsError(f'{name} must be a positive int, got {value}.')


def _is_whole(value: Any) -> bool:
  """An int, or a numpy integer (without importing numpy)."""
  try:
    operator.index(value)
  except TypeError:
    return False
  return True


def _whole(value: Any, name: str) -> int:
  if isinstance(value, bool) or not _is_whole(value):
    raise OptionsError(f'{name} must be an int, got {value!r}.')
  return operator.index(value)


def _boolean(value: Any, name: str) -> bool:
  if not isinstance(value, bool):
    raise OptionsError(f'{name} must be True or False, got {value!r}.')
  return value


def _timeout(timeout: Any) -> float:
  if not (isinstance(timeout, (int, float)) and not isinstance(timeout, bool)
          and math.isfinite(timeout) and timeout > 0):
    raise OptionsError(f'timeout must be a finite number of seconds > 0, got '
                       f'{timeout!r}.')
  return timeout


def _image_storage(value: Union[str, ImageStorage]) -> ImageStorage:
  if isinstance(value, ImageStorage):
    return value
  if isinstance(value, str):
    return ImageStorage(value)
  raise OptionsError(f'image_storage must be an ImageStorage or one of '
                     f'{list(IMAGE_MODES)}, got {value!r}.')


def _same(value: Any, default: Any) -> bool:
  """A keyword left at its default (end_of_episode may be its value)."""
  if isinstance(default, enum.Enum) and not isinstance(value, enum.Enum):
    return value == default.value
  return value == default
