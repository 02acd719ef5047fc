"""`RldsRecorder` under real TF-Agents drivers, read back by TFDS.

Each test runs a real driver with the recorder and a list observer; the list
gives the driver's own trajectories, split per environment into episodes
(`record_envs.episodes_in_end_order`), which the directory must hold, in
that order, as the conversion's rules (`to_rlds`) make them: nested
observations with an image, dict policy_info, batch sizes 1 and 4,
PyDriver and TF drivers, episodes cut by a time limit or by the driver's
step budget. Then every refusal, with its message.
"""

import json
import os
import re
import warnings

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')

import numpy as np  # pylint: disable=g-import-not-at-top
import pytest  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import dynamic_episode_driver  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import dynamic_step_driver  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.environments import py_environment  # pylint: disable=g-import-not-at-top
from tf_agents.specs import array_spec  # pylint: disable=g-import-not-at-top
from tf_agents.trajectories import time_step as ts  # pylint: disable=g-import-not-at-top
from tf_agents.utils import common  # pylint: disable=g-import-not-at-top
import tree  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top
from rlds_reverb import errors  # pylint: disable=g-import-not-at-top
from rlds_reverb.record import RldsRecorder  # pylint: disable=g-import-not-at-top
from rlds_reverb.record import UnfinishedEpisodesWarning  # pylint: disable=g-import-not-at-top
from tests import docs_blocks  # pylint: disable=g-import-not-at-top
from tests import driver_data  # pylint: disable=g-import-not-at-top
from tests import record_envs  # pylint: disable=g-import-not-at-top
from tests import rlds_dirs  # pylint: disable=g-import-not-at-top
from tests.record_envs import numpy_list_observer  # pylint: disable=g-import-not-at-top
from tests.record_envs import tf_setup  # pylint: disable=g-import-not-at-top


def run_py_driver(directory, driver_env, policy, *, max_steps=None,
                  max_episodes=None,
                  end_episode_on_boundary=True, **recorder_options):
  """A PyDriver with the recorder and a list; (recorder, trajectories,
  final time step). The recorder is left open."""
  recorder = RldsRecorder(directory, policy.trajectory_spec,
                          **recorder_options)
  trajectories = []
  driver = py_driver.PyDriver(
      driver_env, policy, [recorder, trajectories.append],
      max_steps=max_steps, max_episodes=max_episodes,
      end_episode_on_boundary=end_episode_on_boundary)
  final, _ = driver.run(driver_env.reset())
  return recorder, trajectories, final


def expected_in_end_order(trajectories, batch_size, truncated=None):
  return [record_envs.expected_episode(episode, index,
                                       truncated=bool(truncated and
                                                      truncated[index]))
          for index, (episode, _, _) in enumerate(
              record_envs.episodes_in_end_order(trajectories, batch_size))]


@pytest.mark.parametrize('batch_size', [None, 4])
def test_py_driver_episodes_read_back_as_the_driver_gave_them(tmp_path,
                                                              batch_size):
  if batch_size is None:
    env = record_envs.random_env(seed=3)
  else:
    env = record_envs.batched([record_envs.random_env(seed=3 + i)
                               for i in range(batch_size)])
  recorder, trajectories, final = run_py_driver(
      tmp_path, env, record_envs.policy(env, seed=5), max_episodes=12,
      shard_episodes=5)
  open_envs = int(np.sum(np.atleast_1d(final.step_type) != ts.StepType.FIRST))
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    summary = recorder.close()  # Without the final time step: open ones out.
  assert [w.category for w in caught] == (
      [UnfinishedEpisodesWarning] if open_envs else [])
  expected = expected_in_end_order(trajectories, batch_size)
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path), expected)
  assert [bool(e['terminated']) for e in expected].count(True) not in (
      0, len(expected))  # Both kinds of ending are there.
  assert rlds_dirs.shard_lengths(tmp_path) == [5, 5] + [len(expected) - 10]
  assert (summary.episodes, summary.steps, summary.open_at_close,
          summary.partial, summary.total_episodes) == (
              len(expected), sum(len(e['steps']['is_last']) for e in expected),
              open_envs, 0, len(expected))
  assert summary.left_out_trajectories == (
      len(trajectories) * (batch_size or 1) - summary.steps)
  # rlds_reverb.load reads the same episodes, in the same order.
  loaded = [int(e['episode_id']) for e in rlds_reverb.load(str(tmp_path))]
  assert loaded == list(range(len(expected)))


def test_features_come_from_the_spec_and_images_are_png(tmp_path):
  env = record_envs.random_env(seed=1)
  recorder, _, _ = run_py_driver(tmp_path, env, record_envs.policy(env, 1),
                                 max_episodes=1)
  recorder.close()
  features = json.loads((tmp_path / 'features.json').read_text())
  steps = features['featuresDict']['features']['steps']['sequence'][
      'feature']['featuresDict']['features']
  pixels = steps['observation']['featuresDict']['features']['pixels']
  assert pixels['pythonClassName'].endswith('Image')
  assert pixels['image']['encodingFormat'] == 'png'
  assert sorted(steps) == ['action', 'discount', 'is_first', 'is_last',
                           'is_terminal', 'observation', 'policy_info',
                           'reward']
  assert sorted(steps['policy_info']['featuresDict']['features']) == [
      'log_probability', 'mode']
  metadata = {name: value['tensor']['dtype'] for name, value in
              features['featuresDict']['features'].items() if name != 'steps'}
  assert metadata == {'episode_id': 'int64', 'episode_length': 'int64',
                      'episode_return': 'float32', 'terminated': 'bool'}


def test_images_none_stores_plain_tensors(tmp_path):
  env = record_envs.random_env(seed=1)
  recorder, trajectories, _ = run_py_driver(
      tmp_path, env, record_envs.policy(env, 1), max_episodes=2,
      image_encoding='none')
  recorder.close()
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path),
                                 expected_in_end_order(trajectories, None))
  assert 'Image' not in (tmp_path / 'features.json').read_text()


# --- Episodes cut by the driver's step budget: close(final_time_step). -----


def test_close_with_the_final_time_step_writes_open_episodes_as_truncations(
    tmp_path):
  env = record_envs.batched([record_envs.random_env(seed=20 + i, time_limit=9)
                             for i in range(3)])
  recorder, trajectories, final = run_py_driver(
      tmp_path, env, record_envs.policy(env, seed=2), max_steps=14)
  summary = recorder.close(final_time_step=final)
  streams = record_envs.per_env(trajectories, 3)
  whole = record_envs.episodes_in_end_order(trajectories, 3)
  got = rlds_dirs.read_episodes(tmp_path)
  assert len(got) == len(whole) + summary.truncated_at_close
  expected_open = [env_index for env_index in range(3)
                   if final.step_type[env_index] == ts.StepType.MID]
  assert summary.truncated_at_close == len(expected_open) > 0
  rlds_dirs.assert_same_episodes(
      got[:len(whole)], expected_in_end_order(trajectories, 3))
  for written, env_index in zip(got[len(whole):], expected_open):
    stream = streams[env_index]
    begin = max(i for i, t in enumerate(stream)
                if t.step_type == ts.StepType.FIRST)
    mine = driver_data.stack(stream[begin:])
    steps = written['steps']
    length = len(mine.step_type) + 1  # The driver's, and the final one.
    assert len(steps['is_last']) == length
    assert steps['is_last'].tolist() == [False] * (length - 1) + [True]
    assert not steps['is_terminal'].any() and not written['terminated']
    final_pixels = final.observation['pixels'][env_index]
    np.testing.assert_array_equal(
        steps['observation']['pixels'],
        np.concatenate([mine.observation['pixels'], final_pixels[None]]))
    np.testing.assert_array_equal(steps['reward'],
                                  np.append(mine.reward, np.float32(0)))
    np.testing.assert_array_equal(steps['discount'],
                                  np.append(mine.discount, np.float32(1)))
    np.testing.assert_array_equal(steps['action'], np.append(mine.action, 0))
    assert steps['policy_info']['mode'][-1].tolist() == [0, 0]
  assert summary.open_at_close == summary.partial == 0
  assert summary.left_out_trajectories == 0


def test_an_episode_ended_on_the_drivers_last_step_is_whole_with_the_final_step(
    tmp_path):
  """PyDriver(end_episode_on_boundary=False) stops after the step that ends
  an episode: the boundary trajectory never comes, the final time step
  (LAST) holds the final observation."""
  env = record_envs.random_env(seed=4)
  recorder, trajectories, final = run_py_driver(
      tmp_path, env, record_envs.policy(env, seed=4), max_episodes=3,
      end_episode_on_boundary=False)
  assert final.step_type == ts.StepType.LAST
  recorder.close(final_time_step=final)
  got = rlds_dirs.read_episodes(tmp_path)
  # The same as the driver would give with the boundary trajectory, but for
  # the action and policy_info on that step (zeros: never taken).
  boundary = driver_data.stack([trajectories[-1]])._replace(
      step_type=np.array([ts.StepType.LAST], np.int32),
      observation=tree.map_structure(lambda x: x[None], final.observation),
      next_step_type=np.array([ts.StepType.FIRST], np.int32),
      action=np.zeros([1], np.int64), reward=np.zeros([1], np.float32),
      discount=np.ones([1], np.float32),
      policy_info=tree.map_structure(np.zeros_like,
                                     driver_data.stack([trajectories[-1]])
                                     .policy_info))
  begin = max(i for i, t in enumerate(trajectories)
              if t.step_type == ts.StepType.FIRST)
  episode = tree.map_structure(lambda *x: np.concatenate(x),
                               driver_data.stack(trajectories[begin:]),
                               boundary)
  expected = expected_in_end_order(trajectories, None) + [
      record_envs.expected_episode(episode, 2)]
  rlds_dirs.assert_same_episodes(got, expected)
  assert got[-1]['terminated'] == (trajectories[-1].discount == 0)


def test_close_without_the_final_time_step_leaves_open_episodes_out(tmp_path):
  env = record_envs.batched([record_envs.random_env(seed=30 + i)
                             for i in range(2)])
  recorder, trajectories, final = run_py_driver(
      tmp_path, env, record_envs.policy(env, seed=3), max_steps=11)
  open_envs = int(np.sum(final.step_type != ts.StepType.FIRST))
  assert open_envs
  with pytest.warns(UnfinishedEpisodesWarning) as caught:
    summary = recorder.close()
  whole = record_envs.episodes_in_end_order(trajectories, 2)
  left = len(trajectories) * 2 - sum(len(e.step_type) for e, _, _ in whole)
  assert str(caught[0].message) == (
      f'{tmp_path}: left out {open_envs} still open at close() (pass '
      f'final_time_step=, the time step run() returned, to write them as '
      f'truncations): {left} trajectories not recorded.')
  assert str(summary) == (
      f'{tmp_path}: recorded {len(whole)} episodes, {summary.steps} steps (0 '
      f'truncated at close); the split has {len(whole)} episodes; left out '
      f'{open_envs} open at close and 0 partial episodes ({left} '
      f'trajectories).')
  assert recorder.close() is summary  # Closing again changes nothing.


def test_partial_episodes_are_left_out_and_counted(tmp_path):
  """Begun before the recorder saw them, or restarted before they ended."""
  env = record_envs.random_env(seed=8, time_limit=50)
  policy = record_envs.policy(env, seed=8)
  trajectories = []
  collect = py_driver.PyDriver(env, policy, [trajectories.append], max_steps=2)
  time_step, _ = collect.run(env.reset())  # Mid-episode (seed 8: no end).
  assert time_step.step_type == ts.StepType.MID
  recorder = RldsRecorder(tmp_path, policy.trajectory_spec)
  driver = py_driver.PyDriver(env, policy, [recorder, trajectories.append],
                              max_episodes=1)
  driver.run(time_step)  # Ends the episode begun before: left out.
  driver = py_driver.PyDriver(env, policy, [recorder, trajectories.append],
                              max_steps=2)
  driver.run(env.reset())  # Begun, then restarted below: left out.
  driver = py_driver.PyDriver(env, policy, [recorder, trajectories.append],
                              max_episodes=1)
  driver.run(env.reset())  # Whole.
  with pytest.warns(UnfinishedEpisodesWarning, match=r'left out 2 partial '
                    r'\(begun before the recorder saw them, or restarted '
                    r'before they ended\): \d+ trajectories not recorded'):
    summary = recorder.close()
  assert (summary.episodes, summary.partial, summary.open_at_close) == (1, 2,
                                                                        0)
  last_first = max(i for i, t in enumerate(trajectories)
                   if t.step_type == ts.StepType.FIRST)
  rlds_dirs.assert_same_episodes(
      rlds_dirs.read_episodes(tmp_path),
      [record_envs.expected_episode(
          driver_data.stack(trajectories[last_first:]), 0)])


# --- Termination against truncation. ---------------------------------------


class CountdownEnv(py_environment.PyEnvironment):
  """Episodes of 3 steps ended dm_env's way: odd ones by `ts.truncation`
  (discount 1), even ones by `ts.termination` (discount 0)."""

  def __init__(self):
    super().__init__(handle_auto_reset=True)
    self._episode = -1
    self._count = 0

  def observation_spec(self):
    return array_spec.ArraySpec((2,), np.float32)

  def action_spec(self):
    return array_spec.BoundedArraySpec((), np.int32, 0, 1)

  def _reset(self):
    self._episode += 1
    self._count = 0
    return ts.restart(self._observation())

  def _step(self, action):
    self._count += 1
    if self._count < 3:
      return ts.transition(self._observation(), np.float32(1))
    if self._episode % 2:
      return ts.truncation(self._observation(), np.float32(1))
    return ts.termination(self._observation(), np.float32(1))

  def _observation(self):
    return np.array([self._episode, self._count], np.float32)


@pytest.mark.parametrize('kind', ['gym_time_limit', 'gym_time_limit_no_env',
                                  'gym_batched', 'dm_env_truncation'])
def test_time_limits_are_truncations(tmp_path, kind):
  limit = 14
  if kind == 'dm_env_truncation':
    env, batch_size = CountdownEnv(), None
  elif kind == 'gym_batched':
    env = record_envs.batched([record_envs.cartpole(limit) for _ in range(2)])
    batch_size = 2
  else:
    env, batch_size = record_envs.cartpole(limit), None
  if kind != 'dm_env_truncation':
    for index, one in enumerate(getattr(env, 'envs', [env])):
      one.seed(index)
  recorder, trajectories, _ = run_py_driver(
      tmp_path, env, record_envs.policy(env, seed=0, info_spec=()),
      max_episodes=12, env=None if kind.endswith('no_env') else env)
  recorder.close()
  got = rlds_dirs.read_episodes(tmp_path)
  whole = record_envs.episodes_in_end_order(trajectories, batch_size)
  if kind == 'dm_env_truncation':
    truncated = [bool(e.observation[0][0] % 2) for e, _, _ in whole]
  else:  # gym's TimeLimit: `limit` transitions, unless the pole fell then.
    truncated = [len(e.step_type) == limit + 1 and not _fell(e)
                 for e, _, _ in whole]
    assert all(e.discount[-2] == 0 for e, _, _ in whole)  # As gym ends.
  assert True in truncated and False in truncated
  if kind == 'gym_time_limit_no_env':  # Only the info tells: all terminal.
    truncated = [False] * len(whole)
  assert [bool(e['terminated']) for e in got] == [not t for t in truncated]
  assert [bool(e['steps']['is_terminal'][-1]) for e in got] == [
      not t for t in truncated]
  rlds_dirs.assert_same_episodes(
      got, expected_in_end_order(trajectories, batch_size, truncated))


def _fell(episode) -> bool:
  """CartPole-v1's own end: the pole past 12 degrees or the cart out."""
  x, theta = episode.observation[-1][0], episode.observation[-1][2]
  return abs(x) > 2.4 or abs(theta) > 12 * 2 * np.pi / 360


# --- TF drivers. ------------------------------------------------------------


@pytest.mark.parametrize('driver_kind', ['episode', 'step'])
def test_tf_drivers_in_tf_function(tmp_path, driver_kind):
  tf_env, policy = tf_setup(batch_size=3, seed=40)
  recorder = RldsRecorder(tmp_path, policy.trajectory_spec, env=tf_env)
  trajectories = []
  observers = [recorder.tf_observer, numpy_list_observer(trajectories)]
  if driver_kind == 'episode':
    driver = dynamic_episode_driver.DynamicEpisodeDriver(
        tf_env, policy, observers, num_episodes=6)
  else:
    driver = dynamic_step_driver.DynamicStepDriver(tf_env, policy, observers,
                                                   num_steps=8)
  run = common.function(driver.run)
  time_step, _ = run()
  time_step, _ = run(time_step)
  summary = recorder.close(final_time_step=time_step)
  trajectories = [tree.map_structure(np.asarray, t) for t in trajectories]
  expected = expected_in_end_order(trajectories, 3)
  got = rlds_dirs.read_episodes(tmp_path)
  rlds_dirs.assert_same_episodes(got[:len(expected)], expected)
  final_types = time_step.step_type.numpy()
  # Open at the end: cut (MID) or ended on the last step (LAST), both written.
  assert len(got) == len(expected) + int(np.sum(final_types != ts.StepType.FIRST))
  assert summary.truncated_at_close == int(
      np.sum(final_types == ts.StepType.MID))


def test_tf_driver_eagerly(tmp_path):
  tf_env, policy = tf_setup(batch_size=1, seed=50)
  recorder = RldsRecorder(tmp_path, policy.trajectory_spec)
  trajectories = []
  driver = dynamic_episode_driver.DynamicEpisodeDriver(
      tf_env, policy, [recorder.tf_observer, numpy_list_observer(trajectories)],
      num_episodes=2)
  driver.run()
  recorder.close()
  trajectories = [tree.map_structure(np.asarray, t) for t in trajectories]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path),
                                 expected_in_end_order(trajectories, 1))


# --- Appending after a restart. ---------------------------------------------


def test_append_after_an_unclosed_recorder_recovers_and_continues_ids(
    tmp_path):
  env = record_envs.random_env(seed=60)
  policy = record_envs.policy(env, seed=60)
  first, trajectories, _ = run_py_driver(tmp_path, env, policy,
                                         max_episodes=3, shard_episodes=2)
  del first  # Never closed: its last shard is not registered.
  assert rlds_dirs.shard_lengths(tmp_path) == [2]
  second, more, _ = run_py_driver(tmp_path, env, policy, max_episodes=2,
                                  append=True, shard_episodes=2)
  assert second.recovery.recovered_episodes == 1
  assert second.num_episodes == 5
  second.close()
  expected = expected_in_end_order(trajectories, None) + [
      record_envs.expected_episode(episode, 3 + index)
      for index, (episode, _, _) in enumerate(
          record_envs.episodes_in_end_order(more, None))]
  rlds_dirs.assert_same_episodes(rlds_dirs.read_episodes(tmp_path), expected)


# --- Refusals. ---------------------------------------------------------------


def spec_of(env, info_spec=driver_data.DICT_INFO_SPEC):
  return record_envs.policy(env, 0, info_spec).trajectory_spec


@pytest.mark.parametrize('make_spec, message', [
    (lambda spec: spec._asdict(),
     'data_spec is a dict; expected the Trajectory spec of the data '
     '(agent.collect_data_spec, policy.trajectory_spec).'),
    (lambda spec: spec._replace(reward=3.0),
     'data_spec reward is a float, not a spec.'),
    (lambda spec: spec._replace(reward=tf.TensorSpec([None], tf.float32)),
     'data_spec reward has shape [?]; the recorder needs fully known '
     'shapes.'),
])
def test_specs_the_recorder_refuses(tmp_path, make_spec, message):
  spec = make_spec(spec_of(record_envs.random_env(0)))
  with pytest.raises(errors.FeaturesError) as error:
    RldsRecorder(tmp_path / 'new', spec)
  assert str(error.value) == message
  assert not (tmp_path / 'new').exists()


def first_trajectories(count: int = 2, batch_size=None):
  env = record_envs.random_env(seed=9)
  if batch_size:
    env = record_envs.batched([record_envs.random_env(seed=9 + i)
                               for i in range(batch_size)])
  trajectories = []
  py_driver.PyDriver(env, record_envs.policy(env, 9), [trajectories.append],
                     max_steps=count).run(env.reset())
  return trajectories


@pytest.mark.parametrize('change, message', [
    (lambda t: t._replace(policy_info=()),
     re.escape('The trajectory does not have the structure of data_spec: ')),
    (lambda t: t._replace(reward=np.float32([1, 2])),
     re.escape('Trajectory field reward has shape [2]; expected [] '
               '(data_spec []).')),
    (lambda t: t._replace(observation={**t.observation,
                                       'position': np.zeros(3, np.int64)}),
     None),  # Integers into a float field are fine.
    (lambda t: t._replace(observation={**t.observation,
                                       'pixels': t.observation['pixels'] * 1.5}),
     re.escape('Trajectory field observation/pixels holds float64 values; '
               'data_spec says uint8.')),
    (lambda t: t._replace(step_type=np.zeros([1, 1], np.int32)),
     re.escape('The trajectory has step_type of shape [1,1]; expected [] '
               '(unbatched) or [batch_size].')),
])
def test_first_trajectories_the_recorder_refuses(tmp_path, change, message):
  first = first_trajectories(1)[0]
  recorder = RldsRecorder(tmp_path, spec_of(record_envs.random_env(0)))
  if message is None:
    recorder(change(first))
  else:
    with pytest.raises(errors.FeaturesError, match=f'^{message}'):
      recorder(change(first))


def test_later_trajectories_that_do_not_fit_are_refused(tmp_path):
  first, second = first_trajectories(2)
  recorder = RldsRecorder(tmp_path, spec_of(record_envs.random_env(0)))
  recorder(first)
  with pytest.raises(errors.FeaturesError) as error:
    recorder(second._replace(observation={
        **second.observation, 'position': np.zeros(4, np.float32)}))
  assert str(error.value) == (
      'Trajectory field observation/position has shape [4]; expected [3] '
      '(data_spec [3]).')
  with pytest.raises(errors.FeaturesError) as error:  # The TF path's check.
    recorder._observe(tree.flatten(second)[:-1])  # pylint: disable=protected-access
  assert str(error.value) == 'The trajectory has 8 leaves; data_spec has 9.'
  batched_recorder = RldsRecorder(tmp_path / 'b',
                                  spec_of(record_envs.random_env(0)))
  batched_first = first_trajectories(1, batch_size=2)[0]
  batched_recorder(batched_first)
  with pytest.raises(errors.FeaturesError) as error:
    batched_recorder(first)
  assert str(error.value) == (
      'Trajectory field step_type has shape []; expected [2] (data_spec [], '
      'batched).')


def test_recording_after_close_is_refused(tmp_path):
  first, second = first_trajectories(2)
  recorder = RldsRecorder(tmp_path, spec_of(record_envs.random_env(0)))
  recorder(first)
  with warnings.catch_warnings():
    warnings.simplefilter('ignore', UnfinishedEpisodesWarning)
    recorder.close()
  with pytest.raises(errors.DatasetDirectoryError) as error:
    recorder(second)
  assert str(error.value) == (
      f'The recorder of {tmp_path} is closed; open another with append=True '
      f'to record more.')


def test_an_env_of_another_batch_size_is_refused(tmp_path):
  envs = record_envs.batched([record_envs.random_env(seed=i)
                              for i in range(3)])
  recorder = RldsRecorder(tmp_path, spec_of(record_envs.random_env(0)),
                          env=envs)
  with pytest.raises(ValueError) as error:
    recorder(first_trajectories(1, batch_size=2)[0])
  assert str(error.value) == (
      'env holds 3 environments, but the driver gives trajectories of batch '
      'size 2: pass the environment the driver steps.')


def test_a_final_time_step_that_does_not_follow_is_refused(tmp_path):
  env = record_envs.batched([record_envs.random_env(seed=70 + i,
                                                    time_limit=30)
                             for i in range(2)])
  recorder, _, final = run_py_driver(tmp_path, env, record_envs.policy(env, 7),
                                     max_steps=2)
  assert final.step_type.tolist() == [ts.StepType.MID] * 2
  unbatched = tree.map_structure(lambda x: x[0], final)
  cases = [
      (unbatched, 'final_time_step has step_type of shape []; the driver '
                  'gave trajectories of batch shape [2].'),
      (final._replace(step_type=np.array([1, 2], np.int32)),
       'final_time_step of env 1 has step type LAST, but its last trajectory '
       'recorded leads to MID: pass the time step the last run() returned.'),
      (final._replace(observation={'pixels': final.observation['pixels']}),
       'final_time_step has 1 observation leaves; data_spec has 2.'),
      (final._replace(observation={**final.observation,
                                   'position': np.zeros((2, 5))}),
       'final_time_step observation/position of env 0 has shape [5]; '
       'expected [3].'),
  ]
  for bad, message in cases:
    with pytest.raises(ValueError) as error:
      recorder.close(final_time_step=bad)
    assert str(error.value) == message
  assert rlds_dirs.shard_lengths(tmp_path) == []  # Nothing written.
  summary = recorder.close(final_time_step=final)  # Still open: now right.
  assert summary.truncated_at_close == 2


def test_a_directory_with_other_files_or_a_file_is_refused(tmp_path):
  """The export's error and message for either (test_export.py)."""
  (tmp_path / 'other').mkdir()
  (tmp_path / 'other' / 'notes.txt').write_text('mine')
  (tmp_path / 'file').write_text('mine')
  for out, holds in [('other', 'is not empty: it holds files other than a '
                               'dataset.'),
                     ('file', 'is a file: a dataset is written into a '
                              'directory.')]:
    with pytest.raises(errors.DatasetDirectoryError) as error:
      RldsRecorder(tmp_path / out, spec_of(record_envs.random_env(0)))
    assert str(error.value) == f'{tmp_path / out} {holds}'
  assert os.listdir(tmp_path / 'other') == ['notes.txt']


# --- The docs' example (docs/recording_export.md). --------------------------


def test_the_docs_recording_example_runs(tmp_path, monkeypatch, capsys):
  code = docs_blocks.python_block('docs/recording_export.md',
                                  "## Recording an agent's experience")
  monkeypatch.chdir(tmp_path)
  with warnings.catch_warnings():
    warnings.simplefilter('error', UnfinishedEpisodesWarning)
    exec(code, {})  # pylint: disable=exec-used
  summary, count = capsys.readouterr().out.splitlines()
  found = re.fullmatch(r'recording: recorded (\d+) episodes, ([\d,]+) steps '
                       r'\([01] truncated at close\); the split has \1 '
                       r'episodes\.', summary)
  assert found, summary
  assert count == f'{found[1]} episodes'
  # 1000 driver steps, a boundary trajectory more per ended episode, and
  # the final observation's step of the one cut.
  assert int(found[2].replace(',', '')) == 1000 + int(found[1])
