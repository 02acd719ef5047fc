"""Offline-to-online DQN on CartPole-v1, seeded from RLDS data through Reverb.

    RLDS episodes --rlds_reverb.push--> Reverb table <--ReverbAddTrajectoryObserver--+
    (bundled CartPole)                      |                                          |
                                ReverbReplayBuffer.as_dataset                 PyDriver, epsilon-greedy
                                (batches of 2-step trajectories)              collect policy (online)
                                            |                                          |
                                            +--> DqnAgent.train ---> greedy policy ----+
                                                                         |
                                                     evaluation: average return of 10 episodes

Offline phase: the table holds only the RLDS data; the agent trains from it
without touching the environment. Online phase: the same table, training goes
on while an epsilon-greedy collect policy adds one step per train step, so
batches mix logged and fresh experience.

    python examples/offline_to_online_dqn.py                  # full run, ~4 min on 2 cores
    python examples/offline_to_online_dqn.py --quick          # smoke test, < 2 min
    python examples/offline_to_online_dqn.py --dataset DIR --plot curve.png

Prints a table (phase, train step, average return) and the average return of
the random policy, after the offline phase and after the online phase; writes
the learning curve to `--plot` (default learning_curve.png). Reverb's uniform
sampler is not seeded, so runs with the same --seed differ a little.

The agent is a DdqnAgent (double Q-learning; `--agent dqn` for DqnAgent):
with Adam at 1e-3 and a target update every 100 steps, plain DQN's Q-values
diverged on the bundled data within 10,000 offline steps (loss 1e5) and never
recovered online. What offline training alone reaches on this small
mixed-quality dataset is modest; see examples/README.md for measured runs.
"""

import argparse
import dataclasses
import functools
import os
import random
import sys
import time

from rlds_reverb import quiet

quiet.silence()  # Before TensorFlow and gym load.

import numpy as np  # pylint: disable=g-import-not-at-top
import reverb  # pylint: disable=g-import-not-at-top
import tensorflow as tf  # pylint: disable=g-import-not-at-top
from tf_agents.agents.dqn import dqn_agent  # pylint: disable=g-import-not-at-top
from tf_agents.drivers import py_driver  # pylint: disable=g-import-not-at-top
from tf_agents.environments import suite_gym  # pylint: disable=g-import-not-at-top
from tf_agents.environments import tf_py_environment  # pylint: disable=g-import-not-at-top
from tf_agents.networks import q_network  # pylint: disable=g-import-not-at-top
from tf_agents.policies import py_tf_eager_policy  # pylint: disable=g-import-not-at-top
from tf_agents.policies import random_py_policy  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_replay_buffer  # pylint: disable=g-import-not-at-top
from tf_agents.replay_buffers import reverb_utils  # pylint: disable=g-import-not-at-top
from tf_agents.specs import tensor_spec  # pylint: disable=g-import-not-at-top
from tf_agents.utils import common  # pylint: disable=g-import-not-at-top

import rlds_reverb  # pylint: disable=g-import-not-at-top

ENV_NAME = 'CartPole-v1'
TABLE = 'experience'
SEQUENCE_LENGTH = 2  # One transition per item: what DqnAgent trains on.
GOAL = 195.0
MAX_RETURN = 500.0  # CartPole-v1's time limit.


@dataclasses.dataclass(frozen=True)
class Budget:
  offline_steps: int   # train steps from the RLDS data alone
  online_steps: int    # train steps, each after collect_steps env steps
  collect_steps: int
  eval_interval: int   # train steps between evaluations
  eval_episodes: int


FULL = Budget(offline_steps=5_000, online_steps=15_000, collect_steps=1,
              eval_interval=1_000, eval_episodes=10)
QUICK = Budget(offline_steps=300, online_steps=300, collect_steps=1,
               eval_interval=150, eval_episodes=2)


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
  fc_layers: tuple = (100, 50)
  # Measured on the bundled data: DQN with Adam 1e-3 and a target update every
  # 100 steps diverges offline (Q-values, and the loss, grow without bound);
  # double Q-learning, a smaller step and rarer target updates do not.
  learning_rate: float = 2.5e-4
  gamma: float = 0.99
  target_update_period: int = 500
  double_q: bool = True
  epsilon_greedy: float = 0.1
  batch_size: int = 64
  table_size: int = 100_000


@dataclasses.dataclass(frozen=True)
class Point:
  phase: str
  train_step: int
  average_return: float


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--dataset', default='bundled:cartpole',
                      help='RLDS source for rlds_reverb.load: a TFDS directory '
                           'of CartPole-v1 episodes (default: %(default)s)')
  parser.add_argument('--plot', default='learning_curve.png',
                      help='PNG file for the learning curve (default: '
                           '%(default)s)')
  parser.add_argument('--quick', action='store_true',
                      help=f'tiny budgets (smoke test): {QUICK}')
  parser.add_argument('--offline-steps', type=int,
                      help=f'default {FULL.offline_steps}')
  parser.add_argument('--online-steps', type=int,
                      help=f'default {FULL.online_steps}')
  parser.add_argument('--eval-interval', type=int,
                      help=f'default {FULL.eval_interval}')
  parser.add_argument('--eval-episodes', type=int,
                      help=f'default {FULL.eval_episodes}')
  parser.add_argument('--seed', type=int, default=0)
  defaults = Hyperparameters()
  parser.add_argument('--gamma', type=float, default=defaults.gamma)
  parser.add_argument('--learning-rate', type=float,
                      default=defaults.learning_rate)
  parser.add_argument('--target-update-period', type=int,
                      default=defaults.target_update_period)
  parser.add_argument('--agent', choices=('dqn', 'ddqn'),
                      default='ddqn' if defaults.double_q else 'dqn',
                      help='DqnAgent or DdqnAgent (double Q-learning)')
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's and Reverb's own log lines")
  return parser.parse_args(argv)


def budget_from(args: argparse.Namespace) -> Budget:
  budget = QUICK if args.quick else FULL
  overrides = {name: getattr(args, name)
               for name in ('offline_steps', 'online_steps', 'eval_interval',
                            'eval_episodes')
               if getattr(args, name) is not None}
  return dataclasses.replace(budget, **overrides)


def seed_everything(seed: int) -> None:
  random.seed(seed)
  np.random.seed(seed)
  tf.random.set_seed(seed)


def make_env(seed: int):
  env = suite_gym.load(ENV_NAME)
  env.seed(seed)
  return env


def make_agent(tf_env, hp: Hyperparameters) -> dqn_agent.DqnAgent:
  q_net = q_network.QNetwork(tf_env.observation_spec(), tf_env.action_spec(),
                             fc_layer_params=hp.fc_layers)
  agent_class = dqn_agent.DdqnAgent if hp.double_q else dqn_agent.DqnAgent
  agent = agent_class(
      tf_env.time_step_spec(), tf_env.action_spec(), q_network=q_net,
      optimizer=tf.keras.optimizers.Adam(learning_rate=hp.learning_rate),
      epsilon_greedy=hp.epsilon_greedy, gamma=hp.gamma,
      target_update_period=hp.target_update_period,
      train_step_counter=tf.Variable(0, dtype=tf.int64))
  agent.initialize()
  agent.train = common.function(agent.train)
  return agent


def check_dataset_fits(rlds_spec, collect_data_spec, dataset: str) -> None:
  """The logged steps must look like the environment's, field by field."""
  problems = [
      f'{name}: dataset {getattr(rlds_spec, name)} vs environment '
      f'{getattr(collect_data_spec, name)}'
      for name in ('observation', 'action', 'reward', 'discount')
      if not _same_leaves(getattr(rlds_spec, name),
                          getattr(collect_data_spec, name))]
  if problems:
    sys.exit(f'{dataset} does not hold {ENV_NAME} steps: '
             + '; '.join(problems))


def _same_leaves(spec_a, spec_b) -> bool:
  """Same dtypes and shapes leaf by leaf; bounds and names may differ."""
  leaves_a, leaves_b = tf.nest.flatten(spec_a), tf.nest.flatten(spec_b)
  return len(leaves_a) == len(leaves_b) and all(
      a.dtype == b.dtype and a.shape == b.shape
      for a, b in zip(leaves_a, leaves_b))


def make_table(signature, hp: Hyperparameters) -> reverb.Table:
  return reverb.Table(
      name=TABLE, sampler=reverb.selectors.Uniform(),
      remover=reverb.selectors.Fifo(), max_size=hp.table_size,
      rate_limiter=reverb.rate_limiters.MinSize(1), signature=signature)


def average_return(env, policy, episodes: int) -> float:
  """Undiscounted return of `policy` averaged over whole episodes."""
  total = 0.0
  for _ in range(episodes):
    time_step = env.reset()
    while not time_step.is_last():
      time_step = env.step(policy.action(time_step).action)
      total += float(time_step.reward)
  return total / episodes


class Collector:
  """Steps the environment with a driver, carrying the time step across calls."""

  def __init__(self, env, policy, observer, steps: int):
    self._driver = py_driver.PyDriver(env, policy, [observer], max_steps=steps)
    self._time_step = env.reset()

  def __call__(self) -> None:
    self._time_step, _ = self._driver.run(self._time_step)


def train(agent, iterator, steps: int, budget: Budget, evaluate, phase: str,
          points, before_each=None) -> None:
  """`steps` train steps; evaluates every eval_interval and at the end."""
  for _ in range(steps):
    if before_each is not None:
      before_each()
    experience, _ = next(iterator)
    loss = agent.train(experience).loss
    step = int(agent.train_step_counter.numpy())
    if step % budget.eval_interval == 0 or step == budget.offline_steps or (
        step == budget.offline_steps + budget.online_steps):
      point = Point(phase, step, evaluate())
      points.append(point)
      print(f'{phase:8} {step:>10} {point.average_return:>14.1f}'
            f'   (loss {float(loss):.3f})', flush=True)


def run(args: argparse.Namespace) -> dict:
  budget = budget_from(args)
  hp = Hyperparameters(gamma=args.gamma, learning_rate=args.learning_rate,
                       target_update_period=args.target_update_period,
                       double_q=args.agent == 'ddqn')
  seed_everything(args.seed)
  started = time.perf_counter()

  collect_env, eval_env = make_env(args.seed), make_env(args.seed + 1)
  tf_env = tf_py_environment.TFPyEnvironment(make_env(args.seed + 2))
  agent = make_agent(tf_env, hp)
  greedy = py_tf_eager_policy.PyTFEagerPolicy(agent.policy,
                                              use_tf_function=True)

  evaluate = functools.partial(average_return, eval_env, greedy,
                               budget.eval_episodes)
  random_policy = random_py_policy.RandomPyPolicy(
      collect_env.time_step_spec(), collect_env.action_spec(), seed=args.seed)
  random_return = average_return(eval_env, random_policy,
                                 budget.eval_episodes)

  episodes = rlds_reverb.load(args.dataset)
  rlds_spec = rlds_reverb.create_trajectory_data_spec(episodes)
  check_dataset_fits(rlds_spec, agent.collect_data_spec, args.dataset)
  server = reverb.Server([make_table(tensor_spec.add_outer_dim(rlds_spec),
                                     hp)])
  try:
    client = reverb.Client(f'localhost:{server.port}')
    pushed = rlds_reverb.push(episodes, client, TABLE,
                              sequence_length=SEQUENCE_LENGTH)
    print(f'seeded table {TABLE!r} from {args.dataset}: {pushed.episodes} '
          f'episodes, {pushed.trajectories} steps, {pushed.items} items in '
          f'{pushed.seconds:.1f} s')
    print(f'budget: {budget}')

    replay_buffer = reverb_replay_buffer.ReverbReplayBuffer(
        agent.collect_data_spec, TABLE, sequence_length=SEQUENCE_LENGTH,
        local_server=server)
    iterator = iter(replay_buffer.as_dataset(
        sample_batch_size=hp.batch_size, num_steps=SEQUENCE_LENGTH,
        num_parallel_calls=2).prefetch(2))

    points = [Point('offline', 0, evaluate())]
    print(f'\n{"phase":8} {"train step":>10} {"average return":>14}')
    print(f'{"random":8} {"-":>10} {random_return:>14.1f}')
    print(f'{"offline":8} {0:>10} {points[0].average_return:>14.1f}')
    train(agent, iterator, budget.offline_steps, budget, evaluate, 'offline',
          points)
    offline_return = points[-1].average_return

    observer = reverb_utils.ReverbAddTrajectoryObserver(
        client, TABLE, sequence_length=SEQUENCE_LENGTH)
    collect_policy = py_tf_eager_policy.PyTFEagerPolicy(
        agent.collect_policy, use_tf_function=True)
    collect = Collector(collect_env, collect_policy, observer,
                        budget.collect_steps)
    train(agent, iterator, budget.online_steps, budget, evaluate, 'online',
          points, before_each=collect)
    observer.close()
    table_size = client.server_info()[TABLE].current_size
  finally:
    server.stop()

  online_return = points[-1].average_return
  seconds = time.perf_counter() - started
  print(f'\naverage return over {budget.eval_episodes} evaluation episodes '
        f'(greedy policy, {ENV_NAME}):')
  print(f'  random policy        {random_return:8.1f}')
  print(f'  after offline phase  {offline_return:8.1f}   '
        f'({budget.offline_steps} train steps from {pushed.items} RLDS items)')
  print(f'  after online phase   {online_return:8.1f}   '
        f'(+{budget.online_steps} train steps, '
        f'{budget.online_steps * budget.collect_steps} env steps collected; '
        f'table holds {table_size} items)')
  print(f'  goal {GOAL:.0f}: {"reached" if online_return >= GOAL else "not reached"}')
  print(f'wall time {seconds:.0f} s')
  write_plot(args.plot, points, random_return, budget)
  print(f'learning curve: {os.path.abspath(args.plot)}')
  return {'random': random_return, 'offline': offline_return,
          'online': online_return, 'seconds': seconds, 'points': points}


def write_plot(path: str, points, random_return: float, budget: Budget):
  import matplotlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  boundary = budget.offline_steps
  end = budget.offline_steps + budget.online_steps
  figure, axes = plt.subplots(figsize=(8, 5))
  axes.axvspan(0, boundary, color='tab:blue', alpha=0.08,
               label='offline: RLDS data only')
  axes.axvline(boundary, color='black', linestyle='--', linewidth=1,
               label='online: + epsilon-greedy collection')
  axes.plot([p.train_step for p in points],
            [p.average_return for p in points], marker='o', markersize=3,
            color='tab:blue', label='greedy policy')
  axes.axhline(random_return, color='tab:gray', linestyle=':',
               label=f'random policy ({random_return:.0f})')
  axes.axhline(GOAL, color='tab:green', linestyle='-.', linewidth=1,
               label=f'goal ({GOAL:.0f})')
  axes.set_xlim(0, end)
  axes.set_ylim(0, MAX_RETURN * 1.12)
  for x, text in ((boundary / 2, 'offline'), ((boundary + end) / 2, 'online')):
    axes.text(x, MAX_RETURN * 1.1, text, ha='center', va='top')
  axes.set_xlabel('train step')
  axes.set_ylabel(f'average return ({budget.eval_episodes} episodes)')
  axes.set_title(f'DQN on {ENV_NAME}: offline from RLDS via Reverb, '
                 'then online')
  axes.legend(loc='upper center', bbox_to_anchor=(0.5, -0.13), ncol=3,
              fontsize='small', frameon=False)
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)


def main(argv=None) -> None:
  args = parse_args(argv)
  with quiet.quieted(enabled=not args.verbose):
    result = run(args)
  if not all(np.isfinite([result['random'], result['offline'],
                          result['online']])):
    sys.exit('non-finite average return')


if __name__ == '__main__':
  main()
