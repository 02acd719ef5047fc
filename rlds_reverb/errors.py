"""The package's errors and warnings, as a tree a caller can catch by group.

    RldsReverbError
      ServerError      a server, its address or its tables: not answering,
                       not confirming in time, a table missing or signed
                       for other data
      DataError        the data: a source that cannot be opened or read,
                       steps or episodes that cannot be converted, stored,
                       encoded or exported
      CheckpointError  a Reverb checkpoint that cannot be read
                       (CheckpointReadError) or written as asked
                       (CheckpointWriteError)
      SettingError     what the caller gave that cannot be used, refused
                       before any work: push and build options, table
                       options, a mixture's weights, an address, a resume
                       file, a servers file
      RunnerError      the processes or pipeline running the work failed
    RldsReverbWarning  (a UserWarning) what a push, record, recovery or
                       mixture did that the caller may not expect

Where TF-Agents' module raises a built-in type (`ValueError`), ours also
derives from it, so code written against TF-Agents keeps catching what it
caught; a group adds a base and takes none away.
"""


class RldsReverbError(Exception):
  """Base class of every error this package raises itself."""


# --- The groups. -------------------------------------------------------------

class ServerError(RldsReverbError):
  """A Reverb server, its address or its tables: not answering, not
  confirming in time, a table missing or signed for other data."""


class DataError(RldsReverbError):
  """The data: a source that cannot be opened or read, steps or episodes
  that cannot be converted, stored, encoded or exported."""


class CheckpointError(RldsReverbError, ValueError):
  """A Reverb checkpoint that cannot be read (`CheckpointReadError`) or
  written as asked (`CheckpointWriteError`); names the file, table, item or
  chunk."""


class SettingError(RldsReverbError, ValueError):
  """An argument or file the caller gave that cannot be used, refused before
  any work: push and build options, table options, a mixture's weights, an
  address, a resume file, a servers file."""


class RunnerError(RldsReverbError):
  """The processes or the pipeline running the work failed: says which, and
  what the first of them hit."""


# --- The server. -------------------------------------------------------------

class ReverbTimeoutError(ServerError, TimeoutError):
  """Reverb did not confirm in time: dead server, or a blocking rate limiter."""


class ServerUnavailableError(ServerError, ConnectionError):
  """No Reverb server answered at the address."""


class TableNotFoundError(ServerError, ValueError):
  """The Reverb server has no table of that name."""


class SignatureMismatchError(ServerError, ValueError):
  """A Reverb table's signature does not match the data's trajectory spec."""


# --- The data. ---------------------------------------------------------------

class StepSpecError(DataError, ValueError):
  """The RLDS step spec cannot be converted to trajectories."""


class ColumnMismatchError(DataError, ValueError):
  """Rows do not fit a table's column (dtype, shape): Reverb would reject them."""


class SourceError(DataError, ValueError):
  """The RLDS data cannot be opened: not a TFDS directory, bad split, ..."""


class DatasetNotPreparedError(DataError, FileNotFoundError):
  """A TFDS catalog dataset has no prepared files in the data dir.

  We never download: preparing needs internet and can take hours, so the user
  prepares it elsewhere and copies it in.
  """


class MalformedEpisodeError(DataError, ValueError):
  """An episode breaks the converter's rules; raised before it is written."""


class DataReadError(DataError):
  """Reading the data ahead of a push failed (a corrupt record): nothing written."""


class FeaturesError(DataError, ValueError):
  """Specs that TFDS features cannot hold, or an episode that does not fit a
  dataset's features (raised before any of the episode is written)."""


class DatasetDirectoryError(DataError, ValueError):
  """A directory cannot be written, appended to or recovered as an RLDS
  dataset: not one, another dataset, missing or misnamed record files."""


class ImageFieldError(DataError, ValueError):
  """Fields that cannot be stored as encoded images (not uint8 [H, W, C], no
  such field, no image field at all, an unknown format)."""


class ExportError(DataError, ValueError):
  """A table that cannot be exported as RLDS (its items are not
  trajectories), or an export that lost data under `strict=True`."""


# --- Checkpoints. ------------------------------------------------------------

class CheckpointReadError(CheckpointError):
  """A Reverb checkpoint that cannot be read: a file missing, cut short or
  damaged, or contents that contradict each other; names the file."""


class CheckpointWriteError(CheckpointError):
  """A Reverb checkpoint that cannot be written as asked: a root that holds
  one already, or settings and records a server would refuse or crash on at
  load; names the table, item or chunk."""


# --- Settings. ---------------------------------------------------------------

class OptionsError(SettingError):
  """A push's or build's setting that cannot be used: a number out of range,
  an unknown mode, a setting given twice, too few workers or servers; names
  the setting and the value."""


class TableOptionsError(SettingError):
  """Table options that cannot make a Reverb table (`rlds_reverb.tables`): a
  value out of range (Reverb's sizes are 32-bit), an unknown selector, or
  options that contradict each other; names the table and the option."""


class MixedReplayError(SettingError):
  """A mixed replay or replay mixture cannot be built: bad fraction or
  weights, tables that do not fit, tables that would drain."""


class AddressError(SettingError):
  """A server address or port that cannot be used; raised before any work.

  Not HOST:PORT, a port outside 1..65535, or a port that another server
  already listens on.
  """


class ResumeStateError(SettingError):
  """A push's resume file is unreadable or records a different push."""


class ServersFileError(SettingError):
  """A servers file (servers.json, written by a serve of many servers) that
  is missing or cannot be read."""


# --- Runners. ----------------------------------------------------------------

class ShardsFailedError(RunnerError):
  """One or more processes of a sharded push or build failed; says which and
  why. Also what a script gets that calls `push_shards` or `build_shards`
  without `if __name__ == '__main__':` (its workers import it again)."""


class PipelineFailedError(RunnerError):
  """A Beam pipeline failed; names the runner and the first error a worker hit."""


# --- Warnings. ---------------------------------------------------------------

class RldsReverbWarning(UserWarning):
  """Base class of every warning this package issues."""


class CapacityWarning(RldsReverbWarning):
  """A table would silently evict items, or its rate limiter would block."""


class ShortEpisodesWarning(RldsReverbWarning):
  """Episodes shorter than an item give none (padding gives them one)."""


class TableNotEmptyWarning(RldsReverbWarning):
  """A push writes into a table that already holds items (not its own)."""


class UnfinishedEpisodesWarning(RldsReverbWarning):
  """Episodes the driver did not finish were left out of the recording."""


class LostEpisodesWarning(RldsReverbWarning):
  """Recovery cut finished episodes: a registered shard had lost its end."""


class ServerLostWarning(RldsReverbWarning):
  """A replay mixture built with `on_server_loss='drop'` goes on without a
  server that did not answer for its timeout; names the server and its
  tables. Issued once per server and mixture."""
