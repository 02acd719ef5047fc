"""Which items an episode yields, as TF-Agents' observers would write them.

Pure numpy: given an episode's length, the rows to append (its trajectories,
then zero boundary rows when padding) and the rows after which an item ends.

`ReverbAddTrajectoryObserver(L, stride S)` counts the steps of an episode
k = 1, 2, ... and writes the last L steps whenever k >= L and (k - L) % S == 0.
At the episode's boundary step it stops (DROP) or appends zero boundary steps,
continuing to count: up to L steps in all (PAD), or L - 1 of them (TILE):

    steps F M M L, L=3, S=1:  DROP -> [F M M] [M M L]
                              PAD  -> the same (the episode already has 3)
                              TILE -> ... [M L P] [L P P]
    steps F L,     L=3:       DROP -> nothing; PAD -> [F L P]

`ReverbAddEpisodeObserver(max_sequence_length)` writes one item per episode,
its whole length, if it has at most `max_sequence_length` steps.

Every plan says, for an episode of T steps, `plan(T)` (pad rows, item ends)
and `item_length(T)` (rows per item), and bounds them: `max_item_length`
(rows a writer must keep referable), `stride_length` (rows between item
ends), `squeeze` (items without a time axis).
"""

import dataclasses
from typing import List, Sequence, Union

import numpy as np

from rlds_reverb import push_options
from rlds_reverb.push_options import EndOfEpisode


def table_names(tables: Union[str, Sequence[str]]) -> List[str]:
  """One table name or several as a list, each named once.

  A table named twice would get every item twice.
  """
  names = [tables] if isinstance(tables, str) else list(tables)
  if not names:
    raise ValueError('No table given: name at least one.')
  repeated = sorted({name for name in names if names.count(name) > 1})
  if repeated:
    raise ValueError(
        f'Table {repeated[0]!r} is named {names.count(repeated[0])} times: '
        f'each item would be written that many times into it; name each '
        f'table once.')
  return names


@dataclasses.dataclass(frozen=True)
class EpisodePlan:
  num_pad_rows: int  # Zero boundary rows appended after the episode's rows.
  item_ends: np.ndarray  # 0-based rows (of rows + pad rows) that end an item.


@dataclasses.dataclass(frozen=True)
class SequenceItems:
  """Fixed-length items, `ReverbAddTrajectoryObserver`'s."""
  sequence_length: int
  stride_length: int = 1
  end_of_episode: EndOfEpisode = EndOfEpisode.DROP
  squeeze = False  # Items keep their time axis.

  def __post_init__(self):
    push_options.check_lengths(self.sequence_length, self.stride_length)

  @classmethod
  def of(cls, options: push_options.PushOptions) -> 'SequenceItems':
    """The items a push with these options writes."""
    return cls(options.sequence_length, options.stride_length,
               options.end_of_episode)

  @property
  def max_item_length(self) -> int:
    return self.sequence_length

  def item_length(self, num_steps: int) -> int:
    del num_steps
    return self.sequence_length

  def plan(self, num_steps: int) -> EpisodePlan:
    length = self.sequence_length
    if self.end_of_episode is EndOfEpisode.TILE:
      num_pad_rows = length - 1
    elif self.end_of_episode is EndOfEpisode.PAD:
      num_pad_rows = max(length - num_steps, 0)
    else:
      num_pad_rows = 0
    counts = np.arange(length, num_steps + num_pad_rows + 1,
                       self.stride_length)
    return EpisodePlan(num_pad_rows, counts - 1)


@dataclasses.dataclass(frozen=True)
class TransitionItems:
  """One item per row without a time axis: n-step transitions, as Acme's."""
  max_item_length = 1
  stride_length = 1
  squeeze = True

  def item_length(self, num_steps: int) -> int:
    del num_steps
    return 1

  def plan(self, num_steps: int) -> EpisodePlan:
    return EpisodePlan(0, np.arange(num_steps))


@dataclasses.dataclass(frozen=True)
class EpisodeItems:
  """Whole-episode items, `ReverbAddEpisodeObserver`'s.

  An episode longer than `max_sequence_length` does not fit: the push fails,
  or skips it with `bypass_partial_episodes`, before its rows are written.
  """
  max_sequence_length: int
  bypass_partial_episodes: bool = False
  stride_length = 1  # At most one item ends per row (episodes of one step).
  squeeze = False

  @property
  def max_item_length(self) -> int:
    return self.max_sequence_length

  def item_length(self, num_steps: int) -> int:
    return num_steps

  def fits(self, num_steps: int) -> bool:
    return num_steps <= self.max_sequence_length

  def plan(self, num_steps: int) -> EpisodePlan:
    return EpisodePlan(0, np.array([num_steps - 1]))


# Any plan: what a `SequenceWriter` takes.
ItemPlan = Union[SequenceItems, TransitionItems, EpisodeItems]
