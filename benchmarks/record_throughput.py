"""Recording cost: `RldsRecorder` on a PyDriver against EnvLogger 1.2's TFDS
backend on the same environment, in one run.

    pip install ".[record]"        # envlogger==1.2, for this comparison only
    python benchmarks/record_throughput.py [--repeats 3] [--scale 1.0]

The same precomputed data feeds both sides (`PoolSource`): a TF-Agents
`PyEnvironment` stepped by a `PyDriver`, and a `dm_env.Environment` stepped
by a plain loop (EnvLogger wraps dm_env environments). What recording costs
is timed where it happens, free of the noise a difference of two runs
carries on a shared machine:

    ours       time in the recorder's observer calls, plus opening and
               closing it (durability FLUSH, the default)
    envlogger  time in EnvLogger's reset and steps minus the wrapped
               environment's own, plus opening and closing it

and the recording rate is 1e6 / (us per step). Cases: halfcheetah-shaped
vectors (float32[17] observation, float32[6] action) in 1,000-step and
20-step episodes; 84x84x3 frames (benchmarks/common.py's blocky scene) in
100-step episodes stored raw (plain uint8 Tensor features, int64 lists) and
as PNG. Each recorder of each case runs in its own process (peak RSS is that
process's VmHWM); times are medians over --repeats. Also: bytes on disk per
step, CartPole-v1's PyDriver with and without the recorder under a random
and a balancing policy (the goal: <= 5% more per step), and RSS after 300
and after 3,300 recorded 20-step episodes (flat). Rates move between runs
on a shared machine: read the ratios."""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict

import common  # pylint: disable=g-bad-import-order

import dm_env  # pylint: disable=g-import-not-at-top
import numpy as np  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
import tensorflow_datasets as tfds  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.environments import py_environment  # pylint: disable=g-import-not-at-top
from tf_agents.policies import py_policy  # pylint: disable=g-import-not-at-top
from tf_agents.specs import array_spec  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import policy_step  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top

from rlds_reverb import RldsRecorder  # pylint: disable=g-import-not-at-top

FRAME = (84, 84, 3)
POOL = 200  # Distinct observations and actions, cycled through.
CASES = {  # name: (kind, episode length in transitions, driver steps, images)
    'vector_1000': ('vector', 1000, 20_000, None),
    'vector_20': ('vector', 20, 20_000, None),
    'frames_raw': ('frames', 100, 2_000, 'none'),
    'frames_png': ('frames', 100, 2_000, 'png'),
}
MODES = ('ours', 'envlogger')
_ONE, _ZERO = np.float32(1), np.float32(0)  # float32 discounts, as specified.


class PoolSource:
  """Observations, actions and rewards of one case, cycled: both sides see
  the same values."""

  def __init__(self, kind: str, length: int):
    rng = np.random.default_rng(0)
    self.kind, self.length = kind, length
    if kind == 'vector':
      self.observations = rng.standard_normal((POOL, 17)).astype(np.float32)
      self.actions = rng.standard_normal((POOL, 6)).astype(np.float32)
    else:
      self.observations = common.frame_episode_arrays(
          POOL, 0, FRAME)['observation']['pixels']
      self.actions = rng.integers(0, 15, POOL).astype(np.int64)
    self.rewards = rng.standard_normal(POOL).astype(np.float32)

  def observation_spec(self):
    return array_spec.ArraySpec(self.observations.shape[1:],
                                self.observations.dtype)

  def action_spec(self):
    return array_spec.ArraySpec(self.actions.shape[1:], self.actions.dtype)


class PoolPyEnv(py_environment.PyEnvironment):
  """Episodes of `length` transitions, the last a termination."""

  def __init__(self, source: PoolSource):
    super().__init__(handle_auto_reset=True)
    self._source, self._index, self._count = source, 0, 0

  def observation_spec(self):
    return self._source.observation_spec()

  def action_spec(self):
    return self._source.action_spec()

  def _reset(self):
    self._count = 0
    return ts.restart(self._next_observation())

  def _step(self, action):
    self._count += 1
    observation = self._next_observation()
    reward = self._source.rewards[self._index % POOL]
    if self._count < self._source.length:
      return ts.transition(observation, reward)
    return ts.termination(observation, reward)

  def _next_observation(self):
    self._index += 1
    return self._source.observations[self._index % POOL]


class PoolPolicy(py_policy.PyPolicy):
  def __init__(self, env: PoolPyEnv, source: PoolSource):
    super().__init__(env.time_step_spec(), env.action_spec())
    self._actions, self._index = source.actions, 0

  def _action(self, time_step, policy_state):
    self._index += 1
    return policy_step.PolicyStep(self._actions[self._index % POOL],
                                  policy_state, ())


class PoolDmEnv(dm_env.Environment):
  """The same episodes as a dm_env environment (what EnvLogger wraps)."""

  def __init__(self, source: PoolSource):
    self._source, self._index, self._count = source, 0, 0

  def reset(self):
    self._count = 0
    self._index += 1
    return dm_env.restart(self._source.observations[self._index % POOL])

  def step(self, action):
    if self._count >= self._source.length:
      return self.reset()
    self._count += 1
    self._index += 1
    observation = self._source.observations[self._index % POOL]
    reward = self._source.rewards[self._index % POOL]
    if self._count < self._source.length:
      return dm_env.transition(reward, observation, _ONE)
    return dm_env.TimeStep(dm_env.StepType.LAST, reward, _ZERO, observation)

  def observation_spec(self):
    spec = self._source.observation_spec()
    return dm_env.specs.Array(spec.shape, spec.dtype)

  def action_spec(self):
    spec = self._source.action_spec()
    return dm_env.specs.Array(spec.shape, spec.dtype)


def envlogger_config(source: PoolSource, images: str):
  if source.kind == 'frames' and images == 'png':
    observation = tfds.features.Image(shape=FRAME)
  else:
    observation = tfds.features.Tensor(
        shape=source.observations.shape[1:],
        dtype=tf.as_dtype(source.observations.dtype))
  return tfds.rlds.rlds_base.DatasetConfig(
      name='bench', observation_info=observation,
      action_info=tfds.features.Tensor(
          shape=source.actions.shape[1:],
          dtype=tf.as_dtype(source.actions.dtype)),
      reward_info=tf.float32, discount_info=tf.float32)


def run_driver(source, steps: int, directory: str, images: str) -> float:
  """A PyDriver recorded; the seconds spent recording: in the recorder's
  calls, its opening and its closing."""
  env = PoolPyEnv(source)
  policy = PoolPolicy(env, source)
  opened = time.perf_counter()
  recorder = RldsRecorder(directory, policy.trajectory_spec, name='bench',
                          image_encoding=images or 'png')
  seconds = time.perf_counter() - opened
  observer = TimedObserver(recorder)
  final, _ = py_driver.PyDriver(env, policy, [observer],
                                max_steps=steps).run(env.reset())
  closing = time.perf_counter()
  recorder.close(final_time_step=final)
  return seconds + observer.seconds + time.perf_counter() - closing


class TimedDmEnv(dm_env.Environment):
  """A dm_env environment, with the seconds spent in its own steps."""

  def __init__(self, env: dm_env.Environment):
    self._env, self.seconds = env, 0.0

  def reset(self):
    start = time.perf_counter()
    time_step = self._env.reset()
    self.seconds += time.perf_counter() - start
    return time_step

  def step(self, action):
    start = time.perf_counter()
    time_step = self._env.step(action)
    self.seconds += time.perf_counter() - start
    return time_step

  def observation_spec(self):
    return self._env.observation_spec()

  def action_spec(self):
    return self._env.action_spec()


def run_envlogger(source, steps: int, directory: str, images: str) -> float:
  """A loop over EnvLogger(env); the seconds spent recording: in its steps
  but not the environment's, its opening and its closing."""
  import envlogger  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from envlogger.backends import tfds_backend_writer  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  inner = TimedDmEnv(PoolDmEnv(source))
  os.makedirs(directory)
  opened = time.perf_counter()
  writer = tfds_backend_writer.TFDSBackendWriter(
      data_directory=directory, split_name='train',
      ds_config=envlogger_config(source, images), max_episodes_per_file=1000)
  env = envlogger.EnvLogger(inner, backend=writer)
  seconds = time.perf_counter() - opened
  actions = source.actions
  start = time.perf_counter()
  env.reset()
  for step in range(steps):
    env.step(actions[step % POOL])
  seconds += time.perf_counter() - start - inner.seconds
  closing = time.perf_counter()
  env.close()
  return seconds + time.perf_counter() - closing


def disk_bytes(directory: str) -> int:
  return sum(os.path.getsize(os.path.join(directory, name))
             for name in os.listdir(directory) if '.tfrecord' in name)


def child(case: str, mode: str, repeats: int, scale: float) -> Dict[str, Any]:
  """One recorder on one case, `repeats` times: median recording time."""
  kind, length, steps, images = CASES[case]
  steps = max(length * 2, int(steps * scale))
  source = PoolSource(kind, length)
  run = run_driver if mode == 'ours' else run_envlogger
  seconds, on_disk = [], 0
  for repeat in range(repeats):
    with tempfile.TemporaryDirectory() as root:
      directory = os.path.join(root, f'run{repeat}')
      seconds.append(run(source, steps, directory, images))
      on_disk = disk_bytes(directory)
  return {'us_per_step': statistics.median(seconds) / steps * 1e6,
          'bytes_per_step': on_disk / steps,
          'peak_rss_mb': common.proc_status_bytes('VmHWM') / 2**20}


class BalancingPolicy(py_policy.PyPolicy):
  """Pushes the cart toward where the pole falls: CartPole-v1 episodes of
  hundreds of steps, many cut by the time limit (500), as a trained agent's."""

  def _action(self, time_step, policy_state):
    _, _, angle, angular_velocity = time_step.observation
    return policy_step.PolicyStep(
        np.int64(angle + 0.5 * angular_velocity > 0), policy_state, ())


class TimedObserver:
  """Calls an observer and adds up the time spent in it: what recording
  costs within the driver's own steps, free of the run-to-run noise that a
  difference of two runs carries."""

  def __init__(self, observer):
    self._observer, self.seconds = observer, 0.0

  def __call__(self, trajectory) -> None:
    start = time.perf_counter()
    self._observer(trajectory)
    self.seconds += time.perf_counter() - start


def cartpole_child(repeats: int, scale: float,
                   policy_kind: str) -> Dict[str, Any]:
  """CartPole-v1 under a random (~22-step episodes) or a balancing policy:
  PyDriver alone and with the recorder, alternated; median us per step of
  each while the driver runs, and the recording's open and close, once per
  recording."""
  from tf_agents.environments import suite_gym  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from tf_agents.policies import random_py_policy  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  steps = int(5000 * scale)
  env = suite_gym.load('CartPole-v1')
  env.seed(0)
  if policy_kind == 'random':
    policy = random_py_policy.RandomPyPolicy(env.time_step_spec(),
                                             env.action_spec(), seed=0)
  else:
    policy = BalancingPolicy(env.time_step_spec(), env.action_spec())
  timings = {'driver': [], 'ours': [], 'inside_recorder': [],
             'open_close_ms': [], 'episode_length': []}
  for _ in range(repeats):
    for mode in ('driver', 'ours'):
      with tempfile.TemporaryDirectory() as root:
        observers, recorder = [], None
        opened = time.perf_counter()
        if mode == 'ours':
          recorder = RldsRecorder(os.path.join(root, 'rec'),
                                  policy.trajectory_spec, env=env)
          observers.append(TimedObserver(recorder))
        start = time.perf_counter()
        final, _ = py_driver.PyDriver(env, policy, observers,
                                      max_steps=steps).run(env.reset())
        stop = time.perf_counter()
        timings[mode].append((stop - start) / steps * 1e6)
        if observers:
          timings['inside_recorder'].append(observers[0].seconds / steps * 1e6)
        if recorder is not None:
          summary = recorder.close(final_time_step=final)
          timings['open_close_ms'].append(
              (time.perf_counter() - stop + start - opened) * 1e3)
          timings['episode_length'].append(summary.steps / summary.episodes)
  return {mode: statistics.median(values) for mode, values in timings.items()}


def memory_child(scale: float) -> Dict[str, Any]:
  """RSS after 300, then after 3,300 recorded 20-step vector episodes."""
  source = PoolSource('vector', 20)
  env = PoolPyEnv(source)
  policy = PoolPolicy(env, source)
  with tempfile.TemporaryDirectory() as root:
    recorder = RldsRecorder(os.path.join(root, 'rec'), policy.trajectory_spec)
    driver = py_driver.PyDriver(env, policy, [recorder], max_steps=None,
                                max_episodes=int(300 * scale))
    time_step, _ = driver.run(env.reset())
    first = common.proc_status_bytes('VmRSS')
    driver = py_driver.PyDriver(env, policy, [recorder], max_steps=None,
                                max_episodes=int(3000 * scale))
    time_step, _ = driver.run(time_step)
    second = common.proc_status_bytes('VmRSS')
    episodes = recorder.close(final_time_step=time_step).total_episodes
  return {'episodes': episodes, 'rss_mb_after_300': first / 2**20,
          'rss_mb_after_3300': second / 2**20}


def in_child(*args: str) -> Dict[str, Any]:
  result = subprocess.run(
      [sys.executable, os.path.abspath(__file__), '--child', *args],
      capture_output=True, text=True, check=False)
  if result.returncode:
    raise RuntimeError(f'{" ".join(args)} failed:\n{result.stderr[-3000:]}')
  return json.loads(result.stdout.strip().splitlines()[-1])


def measure(repeats: int, scale: float, cases_wanted) -> Dict[str, Any]:
  cases = {}
  for case in cases_wanted:
    modes = {mode: in_child('case', case, mode, str(repeats), str(scale))
             for mode in MODES}
    ours = modes['ours']['us_per_step']
    theirs = modes['envlogger']['us_per_step']
    cases[case] = {
        'modes': modes,
        'ours_us_added': ours, 'envlogger_us_added': theirs,
        'ours_steps_per_s': 1e6 / ours, 'envlogger_steps_per_s': 1e6 / theirs,
        'ratio': theirs / ours,
    }
  cartpole = {}
  for policy_kind in ('random', 'balancing'):
    result = in_child('cartpole', str(max(repeats, 7)), str(scale),
                      policy_kind)
    result['overhead'] = result['ours'] / result['driver'] - 1
    result['overhead_inside'] = result['inside_recorder'] / (
        result['ours'] - result['inside_recorder'])
    cartpole[policy_kind] = result
  return {'machine': common.machine(), 'repeats': repeats, 'scale': scale,
          'cases': cases, 'cartpole': cartpole,
          'memory': in_child('memory', str(scale))}


def print_report(report: Dict[str, Any]) -> None:
  print(report['machine'])
  print(f'{"case":12} {"ours us/step":>13} {"envlogger":>10} {"ours/s":>9} '
        f'{"envlogger/s":>12} {"ratio":>6} {"B/step ours":>12} '
        f'{"envlogger":>10} {"RSS MB ours":>12} {"envlogger":>10}')
  for case, row in report['cases'].items():
    modes = row['modes']
    print(f'{case:12} {row["ours_us_added"]:13.1f} '
          f'{row["envlogger_us_added"]:10.1f} {row["ours_steps_per_s"]:9,.0f} '
          f'{row["envlogger_steps_per_s"]:12,.0f} {row["ratio"]:5.2f}x '
          f'{modes["ours"]["bytes_per_step"]:12,.0f} '
          f'{modes["envlogger"]["bytes_per_step"]:10,.0f} '
          f'{modes["ours"]["peak_rss_mb"]:12.0f} '
          f'{modes["envlogger"]["peak_rss_mb"]:10.0f}')
  print('us/step: spent recording (see the docstring); ratio: ours over '
        "EnvLogger's steps/s; RSS: the process's peak (TensorFlow and "
        'TF-Agents loaded: ~490 MB)')
  for policy_kind, cartpole in report['cartpole'].items():
    print(f'CartPole-v1 PyDriver, {policy_kind} policy (episodes of '
          f'{cartpole["episode_length"]:.0f} steps): '
          f'{cartpole["driver"]:.0f} us/step alone, {cartpole["ours"]:.0f} '
          f'with the recorder: {cartpole["overhead"]:+.1%}; time inside the '
          f'recorder {cartpole["inside_recorder"]:.1f} us/step = '
          f'{cartpole["overhead_inside"]:+.1%} of the rest (goal <= +5%); '
          f'opening and closing the recording: '
          f'{cartpole["open_close_ms"]:.0f} ms once')
  memory = report['memory']
  print(f'RSS recording 20-step episodes: {memory["rss_mb_after_300"]:.0f} MB '
        f'after 300, {memory["rss_mb_after_3300"]:.0f} MB after '
        f'{memory["episodes"]:,}')


def main() -> None:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--repeats', type=int, default=3)
  parser.add_argument('--scale', type=float, default=1.0)
  parser.add_argument('--json', metavar='FILE')
  parser.add_argument('--cases', nargs='*', choices=tuple(CASES),
                      default=list(CASES),
                      help='the recording cases to run (CartPole and memory '
                           'always run)')
  parser.add_argument('--child', nargs='+', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    what, *rest = args.child
    if what == 'case':
      case, mode, repeats, scale = rest
      result = child(case, mode, int(repeats), float(scale))
    elif what == 'cartpole':
      result = cartpole_child(int(rest[0]), float(rest[1]), rest[2])
    else:
      result = memory_child(float(rest[0]))
    print(json.dumps(result))
    return
  report = measure(args.repeats, args.scale, args.cases)
  print_report(report)
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(report, f, indent=1)


if __name__ == '__main__':
  main()
