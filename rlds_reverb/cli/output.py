"""What the commands print: errors as one line, results as text or JSON.

    rlds-reverb: error: <one line>
      <one indented line per field, for an error that lists fields>
"""

import json
import os
import re
import shutil
import signal
import sys
import textwrap
from typing import Any, Dict, List, Optional, Sequence

from rlds_reverb import errors
from rlds_reverb._util import wording

PROG = 'rlds-reverb'

# Exit codes shared by every command.
EXIT_OK = 0
EXIT_FAILURE = 1  # The command ran and failed (server, data, problems found).
EXIT_USAGE = 2  # Bad arguments or input that cannot be read (argparse's too).
EXIT_INTERRUPTED = 130  # 128 + SIGINT, as the shell reports Ctrl-C.
# The reader of stdout or stderr went away (`| head`): 128 + SIGPIPE, as the
# shell reports a Unix tool that SIGPIPE ended.
EXIT_BROKEN_PIPE = 128 + signal.SIGPIPE

# Errors whose notes name one differing field each: a line per note.
_NOTES_PER_FIELD = (errors.SignatureMismatchError,)
# Lines under the first of a multi-line error start with it.
DETAIL_INDENT = '  '

# The text inside TF's "assertion failed: [...]" of a malformed episode.
_ASSERT_TEXT = re.compile(r'assertion failed: \[(.*?)\]', re.S)
_POSITION = re.compile(r'\(episode (\d+), step (\d+)\)')


class CliError(Exception):
  """A failure to report as one line, with the command's exit code."""

  def __init__(self, message: str, exit_code: int = EXIT_FAILURE):
    super().__init__(message)
    self.exit_code = exit_code


def error_line(error: BaseException) -> str:
  """One line for `error`: its message and notes, TF's node dumps dropped."""
  parts = [_message(error)] + list(getattr(error, '__notes__', ()))
  return ' '.join(wording.one_line(part) for part in parts)


def error_text(error: BaseException) -> str:
  """`error_line`, but an error that lists fields gets a line per field.

  The message first, then each note on its own line, indented: a signature
  mismatch of ten fields reads as a table, not as one line of 1,700
  characters.
  """
  if not isinstance(error, _NOTES_PER_FIELD):
    return error_line(error)
  return with_details(wording.one_line(_message(error)),
                      [wording.one_line(note)
                       for note in getattr(error, '__notes__', ())])


def lists_fields(error_type: str) -> bool:
  """Whether errors of the type named `error_type` have a note per field."""
  return error_type in {kind.__name__ for kind in _NOTES_PER_FIELD}


def with_details(summary: str, details: Sequence[str]) -> str:
  """`summary`, then each detail on a line of its own, indented."""
  return '\n'.join([summary] + [f'{DETAIL_INDENT}{d}' for d in details])


def _message(error: BaseException) -> str:
  if isinstance(error, KeyboardInterrupt):
    return 'interrupted.'
  return _op_error_text(error) or str(error) or type(error).__name__


def _op_error_text(error: BaseException) -> Optional[str]:
  message = getattr(error, 'message', None)
  if not isinstance(message, str):
    return None
  match = _ASSERT_TEXT.search(message)
  if match:
    return match.group(1)
  return message.split('\n')[0]


def remap_episode(message: str, original_indices: Sequence[int]) -> str:
  """Rewrites '(episode E, step S)' of a filtered dataset to original indices."""
  def replace(match):
    episode = int(match.group(1))
    if 0 <= episode < len(original_indices):
      episode = original_indices[episode]
    return f'(episode {episode}, step {match.group(2)})'
  return _POSITION.sub(replace, message)


def print_error(message: str) -> None:
  """'rlds-reverb: error: ' and `message`, whose later lines are indented."""
  print(f'{PROG}: error: {message}', file=sys.stderr, flush=True)


def reader_gone() -> int:
  """After a BrokenPipeError: quiet, and EXIT_BROKEN_PIPE.

  A stream whose reader is gone still holds what it could not write; Python
  would try again at exit and print 'Exception ignored ... BrokenPipeError'
  (and exit 120). It writes to /dev/null instead.
  """
  for stream in (sys.stdout, sys.stderr):
    try:
      stream.flush()
    except BrokenPipeError:
      devnull = os.open(os.devnull, os.O_WRONLY)
      os.dup2(devnull, stream.fileno())
      os.close(devnull)
  return EXIT_BROKEN_PIPE


def print_json(value: Any) -> None:
  print(json.dumps(value, indent=None, sort_keys=False), flush=True)


def wrapped(text: str) -> str:
  """`text` filled to the terminal's width, as argparse fills option help:
  for texts that a raw help formatter prints as given (descriptions)."""
  width = max(shutil.get_terminal_size().columns - 2, 40)
  return textwrap.fill(text, width)


def note(message: str) -> None:
  """A side remark for people: stderr, so stdout stays parseable."""
  print(f'{PROG}: {message}', file=sys.stderr, flush=True)


def note_data(notes: Sequence[str], prefix: str = '') -> None:
  """Fields of the data read otherwise than stored (`StepFormat.notes`)."""
  for message in notes:
    note(f'{prefix}note: {message}')


def spec_fields(structure: Any) -> List[Dict[str, Any]]:
  """[{'field', 'dtype', 'shape'}] of every TensorSpec leaf, in nest order."""
  from rlds_reverb.specs import paths  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return [{'field': path or '<root>', 'dtype': spec.dtype.name,
           'shape': spec.shape.as_list()}
          for path, spec in paths.flatten_with_paths(structure)]


def spec_text(structure: Any) -> str:
  """'observation float32[4], action int64[]' for a nest of specs."""
  from rlds_reverb.specs import paths  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  return paths.nest_text(structure)
