"""The package's exception base.

Our own errors derive from `RldsReverbError`; where TF-Agents' module raises a
built-in type (`ValueError`), ours also derives from it, so code written against
TF-Agents keeps catching what it caught.
"""


class RldsReverbError(Exception):
  """Base class of every error this package raises itself."""


class StepSpecError(RldsReverbError, ValueError):
  """The RLDS step spec cannot be converted to trajectories."""


class SignatureMismatchError(RldsReverbError, ValueError):
  """A Reverb table's signature does not match the data's trajectory spec."""


class ColumnMismatchError(RldsReverbError, ValueError):
  """Rows do not fit a table's column (dtype, shape): Reverb would reject them."""


class ReverbTimeoutError(RldsReverbError, TimeoutError):
  """Reverb did not confirm in time: dead server, or a blocking rate limiter."""


class ServerUnavailableError(RldsReverbError, ConnectionError):
  """No Reverb server answered at the address."""


class TableNotFoundError(RldsReverbError, ValueError):
  """The Reverb server has no table of that name."""


class SourceError(RldsReverbError, ValueError):
  """The RLDS data cannot be opened: not a TFDS directory, bad split, ..."""


class DatasetNotPreparedError(RldsReverbError, FileNotFoundError):
  """A TFDS catalog dataset has no prepared files in the data dir.

  We never download: preparing needs internet and can take hours, so the user
  prepares it elsewhere and copies it in.
  """


class ResumeStateError(RldsReverbError, ValueError):
  """A push's resume file is unreadable or records a different push."""


class ShardsFailedError(RldsReverbError):
  """One or more processes of a sharded push or build failed; says which and
  why. Also what a script gets that calls `push_shards` or `build_shards`
  without `if __name__ == '__main__':` (its workers import it again)."""


class MalformedEpisodeError(RldsReverbError, ValueError):
  """An episode breaks the converter's rules; raised before it is written."""


class DataReadError(RldsReverbError):
  """Reading the data ahead of a push failed (a corrupt record): nothing written."""


class PipelineFailedError(RldsReverbError):
  """A Beam pipeline failed; names the runner and the first error a worker hit."""


class MixedReplayError(RldsReverbError, ValueError):
  """A mixed replay or replay mixture cannot be built: bad fraction or
  weights, tables that do not fit, tables that would drain."""


class TableOptionsError(RldsReverbError, ValueError):
  """Table options that cannot make a Reverb table (`rlds_reverb.tables`): a
  value out of range (Reverb's sizes are 32-bit), an unknown selector, or
  options that contradict each other; names the table and the option."""


class AddressError(RldsReverbError, ValueError):
  """A server address or port that cannot be used; raised before any work.

  Not HOST:PORT, a port outside 1..65535, or a port that another server
  already listens on.
  """


class FeaturesError(RldsReverbError, ValueError):
  """Specs that TFDS features cannot hold, or an episode that does not fit a
  dataset's features (raised before any of the episode is written)."""


class DatasetDirectoryError(RldsReverbError, ValueError):
  """A directory cannot be written, appended to or recovered as an RLDS
  dataset: not one, another dataset, missing or misnamed record files."""


class CheckpointError(RldsReverbError, ValueError):
  """A Reverb checkpoint that cannot be read: a file missing, cut short or
  damaged, or contents that contradict each other; names the file."""


class CheckpointWriteError(RldsReverbError, ValueError):
  """A Reverb checkpoint that cannot be written as asked: a root that holds
  one already, or settings and records a server would refuse or crash on at
  load; names the table, item or chunk."""


class ExportError(RldsReverbError, ValueError):
  """A table that cannot be exported as RLDS (its items are not
  trajectories), or an export that lost data under `strict=True`."""


class ImageFieldError(RldsReverbError, ValueError):
  """Fields that cannot be stored as encoded images (not uint8 [H, W, C], no
  such field, no image field at all, an unknown format)."""


class ServersFileError(RldsReverbError, ValueError):
  """A servers file (servers.json, written by a serve of many servers) that
  is missing or cannot be read."""


class ServerLostWarning(UserWarning):
  """A replay mixture built with `on_server_loss='drop'` goes on without a
  server that did not answer for its timeout; names the server and its
  tables. Issued once per server and mixture."""
