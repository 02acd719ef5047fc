"""Truncation read from the environments' infos (gym's `TimeLimit.truncated`).

gym's `TimeLimit` ends an episode with `done`, which TF-Agents' `GymWrapper`
turns into a LAST step with discount 0: a termination, as far as the time
step says. Only the step's info tells the time limit cut it. A driver's
observers see trajectories, not infos, so the recorder asks the environment
(`get_info()`, the info of its last step) when an episode's last step
arrives, before the driver steps again:

    PyEnvironment                  its get_info()
    BatchedPyEnvironment           each of its envs' get_info()
    TFPyEnvironment                the same, of the batched env it wraps

An environment without infos (`get_info` raises NotImplementedError, as
TF-Agents' default does; `ParallelPyEnvironment`'s envs in other processes)
tells nothing: its episodes end as their discounts say.
"""

from typing import Any, Callable, List, Mapping, Optional

TRUNCATED = 'TimeLimit.truncated'


class Infos:
  """Whether the last step of each environment of a driver was truncated."""

  def __init__(self, env: Any, batch_size: Optional[int]):
    """`env` is the environment the driver steps; `batch_size` the driver's
    (None: unbatched).

    Raises:
      ValueError: `env` holds another number of environments.
    """
    self._getters = _getters(env, batch_size)

  def truncated(self, index: int) -> bool:
    """Whether env `index`'s last step ended its episode by a time limit."""
    getter = self._getters[index]
    if getter is None:
      return False
    try:
      info = getter()
    except NotImplementedError:
      self._getters[index] = None  # It never will have infos.
      return False
    return isinstance(info, Mapping) and bool(info.get(TRUNCATED, False))


def _getters(env: Any, batch_size: Optional[int]) -> List[Optional[Callable]]:
  """One `get_info` per environment of the batch (one if unbatched)."""
  env = getattr(env, 'pyenv', env)  # A TFPyEnvironment: its py environment.
  envs = getattr(env, 'envs', None)
  if envs is None:
    if batch_size is not None and getattr(env, 'batched', False):
      return [None] * batch_size  # Batched infos of one env: no per-env view.
    envs = [env]
  count = batch_size or 1
  if len(envs) != count:
    raise ValueError(
        f'env holds {len(envs)} environments, but the driver gives '
        f'trajectories of batch size {batch_size}: pass the environment the '
        f'driver steps.')
  return [getattr(one, 'get_info', None) for one in envs]
