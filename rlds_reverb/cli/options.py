"""Options the commands share: the dataset to read, --json, positive counts."""

import argparse
import contextlib
import math
from typing import List

from rlds_reverb.cli.output import CliError
from rlds_reverb.cli.output import EXIT_USAGE
from rlds_reverb.cli.output import error_line
from rlds_reverb.push_options import ImageStorage

BUNDLED = 'bundled:cartpole'  # Equals rlds_reverb.sources.BUNDLED.


def add_dataset_arguments(parser: argparse.ArgumentParser,
                          required: bool = True, default=None) -> None:
  """--dataset (repeatable), --split and --data-dir, read by `load`."""
  parser.add_argument(
      '--dataset', required=required, default=default, action='append',
      metavar='SRC',
      help=('a TFDS dataset directory, a TFDS catalog name, or '
            f"'{BUNDLED}'; repeat to read several directories in order"))
  parser.add_argument('--split', default='train',
                      help='TFDS split to read (default: %(default)s)')
  parser.add_argument('--data-dir', default=None, metavar='DIR',
                      help='TFDS data_dir for catalog names')
  parser.add_argument('--strict', action='store_true',
                      help=('refuse steps without discount or reward, or '
                            'with a discount or flag of shape (1,), as '
                            "TF-Agents does (default: read them with "
                            'defaults and as scalars, and say so)'))


def add_json_flag(parser: argparse.ArgumentParser, what: str) -> None:
  """--json: print `what` as one JSON object instead of text."""
  parser.add_argument('--json', action='store_true',
                      help=f'print {what} as one JSON object')


def load(args: argparse.Namespace, shard=None):
  """The RLDS dataset the options name; an unreadable one is a usage error.

  `shard` is `(index, count)` to read one part of it (`sources.load`).
  """
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import RldsReverbError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  dataset = args.dataset
  if isinstance(dataset, list) and len(dataset) == 1:
    dataset = dataset[0]
  try:
    return sources.load(dataset, split=args.split, data_dir=args.data_dir,
                        shard=shard)
  except (RldsReverbError, OSError, ValueError) as e:
    raise CliError(error_line(e), EXIT_USAGE) from e


def episode_count(rlds_data):
  """Episodes in the dataset if tf.data knows (TFDS does), else None."""
  count = int(rlds_data.cardinality())
  return count if count >= 0 else None


@contextlib.contextmanager
def reading(args: argparse.Namespace):
  """A failure to read the dataset's records is bad input (exit 2), in one
  line naming the dataset, and the file and offset of a cut record."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    yield
  except tf.errors.OpError as e:
    name = sources.display_name(args.dataset, args.data_dir)
    reason = sources.read_error_text(e, args.dataset, args.data_dir)
    raise CliError(f'Cannot read {name}: {reason}', EXIT_USAGE) from e


def add_image_arguments(parser: argparse.ArgumentParser) -> None:
  """--images, --image-format, --image-field: how image fields are stored
  (push and serve must agree: the table signature says it)."""
  parser.add_argument('--images', choices=('raw', 'encoded'), default='raw',
                      help=('store image fields as decoded uint8 frames '
                            '(raw, TF-Agents\' way) or as PNG/JPEG bytes '
                            'that the reader decodes (encoded: a TFDS '
                            "dataset's own bytes; about a third of the "
                            'server memory); default: %(default)s'))
  parser.add_argument('--image-format', choices=('png', 'jpeg'),
                      default='png',
                      help=('with --images encoded: how raw uint8 frames '
                            'are encoded (default: %(default)s, lossless)'))
  parser.add_argument('--image-field', action='append', default=None,
                      metavar='PATH',
                      help=('with --images encoded: a step field to store '
                            "encoded ('observation/pixels'); repeat; "
                            "default: the dataset's Image features, else "
                            'every uint8 [H, W, C] field'))


def image_storage(args: argparse.Namespace):
  """How the push stores image fields (`ImageStorage`), from --images,
  --image-format and --image-field (checked by `image_usage_problems`)."""
  return ImageStorage.of(getattr(args, 'images', 'raw'),
                         getattr(args, 'image_format', 'png'),
                         getattr(args, 'image_field', None))


def image_usage_problems(args: argparse.Namespace) -> list:
  """(failed, message) pairs: image options that need --images encoded."""
  raw = getattr(args, 'images', 'raw') == 'raw'
  return [(raw and getattr(args, 'image_format', 'png') != 'png',
           '--image-format goes with --images encoded'),
          (raw and getattr(args, 'image_field', None) is not None,
           '--image-field goes with --images encoded')]


def step_format(args: argparse.Namespace, rlds_data):
  """The dataset's `StepFormat` (refusing defaults with --strict), and its
  trajectory spec; an unusable step spec is a usage error naming the dataset.
  With --images encoded, the spec stores the image fields encoded (what the
  push writes and the table signature says).
  """
  from rlds_reverb import sources  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import specs  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import ImageFieldError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import StepSpecError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    found = specs.step_format(rlds_data, strict=args.strict)
    storage = image_storage(args)
    if storage.encoded:
      from rlds_reverb.convert import encoded  # pylint: disable=g-import-not-at-top,import-outside-toplevel
      found = encoded.encoding_of(rlds_data, storage).named(found)
  except (StepSpecError, ImageFieldError) as e:
    name = sources.display_name(args.dataset, args.data_dir)
    raise CliError(f'{name}: {error_line(e)}', EXIT_USAGE) from e
  return found, specs.trajectory_spec(found.spec)


def positive_int(text: str) -> int:
  """argparse type: an int >= 1."""
  value = int(text)
  if value < 1:
    raise argparse.ArgumentTypeError(f'must be >= 1, got {value}')
  return value


def priority(text: str) -> float:
  """argparse type: a finite number >= 0 (`push_options.check_priority`'s
  rule: Reverb refuses NaN mid-push and cannot sample by a negative or
  infinite priority)."""
  return _number(text, lambda value: math.isfinite(value) and value >= 0,
                 'finite and >= 0')


def gamma(text: str) -> float:
  """argparse type: a discount factor, 0 <= gamma <= 1."""
  return _number(text, lambda value: 0 <= value <= 1, 'in [0, 1]')


def seconds(text: str) -> float:
  """argparse type: a finite number of seconds > 0."""
  return _number(text, lambda value: math.isfinite(value) and value > 0,
                 'finite and > 0')


def _number(text: str, fits, wanted: str) -> float:
  """`text` as a float for which `fits` holds; else 'must be `wanted`'."""
  try:
    value = float(text)
  except ValueError as e:
    raise argparse.ArgumentTypeError(f"must be a number, got '{text}'") from e
  if not fits(value):
    raise argparse.ArgumentTypeError(f"must be {wanted}, got '{text}'")
  return value


def server_address(text: str) -> str:
  """argparse type: 'HOST:PORT' ('[::1]:8000'), checked before any work."""
  from rlds_reverb import addresses  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import AddressError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    addresses.parse(text, 'address')
  except AddressError as e:
    raise argparse.ArgumentTypeError(str(e)) from e
  return text


def server_or_servers_file(text: str) -> str:
  """argparse type: 'HOST:PORT', or a servers file (a path ending in .json,
  read once the arguments are parsed: `servers_of`)."""
  from rlds_reverb import servers_file  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  if servers_file.is_servers_file(text):
    return text
  return server_address(text)


def servers_of(given: str) -> List[str]:
  """A --server value's addresses: itself, or a servers file's servers in
  server order, each HOST:PORT; else exit 2, naming the file."""
  from rlds_reverb import addresses  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb import servers_file  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import AddressError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from rlds_reverb.errors import ServersFileError  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    found = servers_file.addresses_of(given)
    for address in found:
      addresses.parse(address, f'{given}: server address')
  except (ServersFileError, AddressError) as e:
    raise CliError(f'--server {e}', EXIT_USAGE) from e
  return found


def shard(text: str):
  """argparse type: 'I/N' -> (I, N), the I-th (0-based) of N parts."""
  try:
    index, count = (int(part) for part in text.split('/'))
  except ValueError as e:
    raise argparse.ArgumentTypeError(
        f"must be I/N, e.g. 0/4 for the first of 4 parts, got '{text}'") from e
  if count < 1 or not 0 <= index < count:
    raise argparse.ArgumentTypeError(
        f"must have N >= 1 and 0 <= I < N, got '{text}'")
  return index, count


def key_value(text: str):
  """argparse type: 'KEY=VALUE' -> (KEY, VALUE), KEY not empty."""
  key, equals, value = text.partition('=')
  if not key or not equals:
    raise argparse.ArgumentTypeError(
        f"must be KEY=VALUE, e.g. direct_num_workers=2, got '{text}'")
  return key, value


def chunk_length(text: str):
  """argparse type: 'N' -> ('', N) for every field, 'FIELD=N' -> (FIELD, N)."""
  field, _, number = text.rpartition('=')
  try:
    return field, positive_int(number)
  except (ValueError, argparse.ArgumentTypeError) as e:
    raise argparse.ArgumentTypeError(
        f"must be N or FIELD=N with N >= 1, e.g. 16 or observation/pixels=2, "
        f"got '{text}'") from e


def chunk_length_option(pairs):
  """`push`'s chunk_length from repeated --chunk-length: None, int or dict."""
  if not pairs:
    return None
  option = dict(pairs)
  if list(option) == ['']:
    return option['']
  return option
