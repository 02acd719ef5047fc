"""A mixture that goes on without a lost server (`on_server_loss='drop'`).

Reverb's sampler waits without end for a row of a server that is down, so a
batch being built when the server dies would wait for good. With 'drop',
each source's stream can be answered without its server:

    source i: as_dataset(B) batches, tagged True per row
      beside (`watchdog.beside`: an interleave, each input on its thread)
    fillers, one after another: each waits WAIT_S (in C++), then yields
      nothing while source i's server lives, or once `Lost` has it (a
      variable's flag) a batch of B zero rows tagged False
      -> unbatch -> (row, tag)
                          |
    choose_from_datasets(rows, choices).batch(B)
      -> batches with a row tagged False dropped whole (`whole`), tags dropped
      -> watchdog.guarded, as without 'drop'

When the watchdog finds a server silent for `timeout` seconds (and another
server still in the mixture), `Lost.drop` warns once (`ServerLostWarning`),
zeroes its sources' weights for the batches computed from then on
(`weights.WithoutLost`), and turns on their fillers: a batch already waiting
for its rows gets fillers and is dropped (a few, those built ahead), the
later batches take no rows from it. Batches keep B rows and their exact
shares; a schedule's steps run ahead of the iterator's batches by the
batches dropped. A server that comes back is not sampled again: its
streams were left waiting, and its items may be gone. The last server
lost fails the dataset, as without 'drop'.

Why fillers that wait, not a filter that waits for the flag: each filler
ends after WAIT_S, so the interleave gets its thread back and an iterator
dropped early (`take(n)`) is not held (a filler under way ends within
WAIT_S; with fillers that read the watchdog's verdicts instead, one by one,
`take(5)` ended 1.5 s after its fifth batch against 0.5 s without 'drop';
with these waits, 0.5 s). No Python runs in them, so nothing of them is
left to settle at exit (`at_exit`).

Cost, measured 2026-11-29 (two in-process servers of 2-step CartPole items,
B = 64, 'size', 3 rounds on a shared 2-core machine): 'drop' sampled
1.25-1.43x the items/s of 'raise' (1.05-1.2x per CPU-second): each
source's batches are sampled on the interleave's thread ahead of the
unbatch. Rough numbers; no extra cost shows.
"""

import enum
import threading
import warnings
from typing import FrozenSet, Sequence

import tensorflow as tf

from rlds_reverb.errors import MixedReplayError
from rlds_reverb.errors import ServerLostWarning
from rlds_reverb.mixture import watchdog as watchdog_lib
from rlds_reverb.specs import paths


class OnServerLoss(str, enum.Enum):
  """What a mixture does when a server has not answered for `timeout`."""
  RAISE = 'raise'  # Fail the dataset, naming the server (the default).
  DROP = 'drop'  # Go on with the other servers' sources; warn once.


DROP = OnServerLoss.DROP
# A filler's wait. It cannot be cut short: dropping an iterator waits for
# the fillers' waits under way (each on its own: about WAIT_S in all).
WAIT_S = 0.1


def check_on_server_loss(value) -> OnServerLoss:
  try:
    return OnServerLoss(value)
  except (ValueError, TypeError):
    raise MixedReplayError(
        f"on_server_loss must be 'raise' or 'drop', got {value!r}."
    ) from None


class Lost:
  """The servers a mixture has dropped: read in Python by the weights (per
  batch) and in the graph by the fillers (`flags`, per source)."""

  def __init__(self, places: Sequence[watchdog_lib.Place]):
    self._addresses = [place.address for place in places]
    self._lock = threading.Lock()
    self._lost: FrozenSet[str] = frozenset()
    self.flags = tf.Variable(tf.zeros([len(places)], tf.bool),
                             trainable=False, name='lost_sources')

  def __call__(self) -> FrozenSet[str]:
    """The addresses dropped so far."""
    return self._lost

  def drop(self, address: str, message: str) -> None:
    """From now on no rows from `address`'s sources; warns with `message`."""
    with self._lock:
      self._lost = self._lost | {address}
      self.flags.assign([source in self._lost for source in self._addresses])
    warnings.warn(message, ServerLostWarning, stacklevel=2)


def answered(sampled: tf.data.Dataset, index: int, name: str,
             batch_size: int, lost: Lost) -> tf.data.Dataset:
  """Source `index`'s rows `(row, True)`, and `(zero row, False)` rows
  once its server is lost, so that no wait for one of its rows is endless.

  Raises:
    MixedReplayError: a field of the source's items whose shape is not
      known (`name` says which source).
  """
  check_known_shapes(sampled.element_spec[0], name)
  tagged = sampled.map(lambda *batch: (batch, tf.ones([batch_size], tf.bool)))
  spec = tagged.element_spec
  return watchdog_lib.beside(
      tagged, lambda: filler(lost, index, spec, batch_size)).unbatch()


def check_known_shapes(trajectory_spec, name: str) -> None:
  """Filler rows are zeros of the rows' shapes, batched with real rows: the
  shapes must be known (a batch of B rows, then known dimensions)."""
  for path, leaf in paths.flatten_with_paths(trajectory_spec):
    if not leaf.shape[1:].is_fully_defined():
      raise MixedReplayError(
          f"on_server_loss='drop' needs the shape of every field known, but "
          f'the {name} field {path} is {paths.spec_text(leaf)} (B first): '
          f"its filler rows could not be batched with its rows; use 'raise'.")


def filler(lost: Lost, index: int, spec, batch_size: int) -> tf.data.Dataset:
  """A wait of WAIT_S; then nothing, or a batch of zero rows tagged False
  (bool zeros) if source `index`'s server is lost."""
  return waited(tf.data.Dataset.from_tensors(0), WAIT_S).filter(
      lambda _: lost.flags[index]).map(
          lambda _: zero_batch(spec, batch_size))


def zero_batch(spec, batch_size: int):
  """`batch_size` zero rows of `spec`'s (known) row shapes."""
  return tf.nest.map_structure(
      lambda leaf: tf.zeros([batch_size] + leaf.shape[1:].as_list(),
                            leaf.dtype), spec)


def waited(dataset: tf.data.Dataset, seconds: float) -> tf.data.Dataset:
  """`dataset`, each element `seconds` late (TensorFlow's SleepDataset: the
  wait is in C++, each on its own, no Python)."""
  flat = tf.nest.flatten(dataset.element_spec)
  variant = tf.raw_ops.SleepDataset(
      input_dataset=tf.data.experimental.to_variant(dataset),
      sleep_microseconds=round(seconds * 1e6),
      output_types=[leaf.dtype for leaf in flat],
      output_shapes=[leaf.shape for leaf in flat])
  return tf.data.experimental.from_variant(variant, dataset.element_spec)


def whole(batches: tf.data.Dataset) -> tf.data.Dataset:
  """Batches of `(rows, tags)` as rows, those holding a filler row
  dropped."""
  return batches.filter(_all_real).map(_rows)


def _all_real(rows, tags) -> tf.Tensor:
  del rows
  return tf.reduce_all(tags)


def _rows(rows, tags):
  del tags
  return rows
