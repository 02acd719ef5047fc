"""Offline-to-online DQN on CartPole-v1 from RLDS data: four ways, compared.

    bundled RLDS episodes --rlds_reverb.push--> Reverb tables
                                        offline (kept)   online (FIFO)
    variant     offline phase (no env)         online phase (1 env step : 1 train step)
    scratch     -                              DDQN on the online table
    seeded      DDQN on the online table,      DDQN on the same table, logged + fresh
                seeded with the RLDS data
    cql_mixed   CQL-DQN on the offline table   CQL-DQN on rlds_reverb.mixed_replay:
                                               every batch half offline, half online
    cql_online  CQL-DQN on the offline table   CQL-DQN on the online table only

    online:  PyDriver, epsilon-greedy --ReverbAddTrajectoryObserver--> online table
             [--record DIR: and --rlds_reverb.RldsRecorder--> DIR/VARIANT_seedS,
              an RLDS dataset: the next experiment's offline data]
    evaluation: greedy policy, average return of 10 episodes, every 1,000 env steps

Each variant runs for every seed; the curves (return against environment
steps collected online; the offline phase collects none) go to one PNG, mean
and range over seeds, and with --json to a file. The summary says how many
environment steps each variant needed to reach an average return of 475.

    python examples/offline_to_online_dqn.py                  # full: 4 variants x 3 seeds, ~1 h
    python examples/offline_to_online_dqn.py --quick          # smoke test (CI)
    python examples/offline_to_online_dqn.py --offline-only --seed 1
    python examples/offline_to_online_dqn.py --variants cql_mixed --seeds 0 1 --json runs.json

Closing the loop: record the online phase, then seed a second run from the
bundled data plus that recording (--dataset repeats; all are read as one):

    python examples/offline_to_online_dqn.py --variants cql_mixed --seeds 0 --record runs/
    python examples/offline_to_online_dqn.py --variants cql_mixed --seeds 1 \
        --dataset bundled:cartpole --dataset runs/cql_mixed_seed0

--offline-only runs only the conservative (CQL) offline phase and prints one
JSON line {"seed", "offline_steps", "offline_return"}. Seeds set Python's,
NumPy's and TensorFlow's generators and the environments; Reverb's uniform
sampler is not seeded, so runs with the same seed differ a little. Measured
runs and what they show: examples/README.md.
"""

import argparse
import dataclasses
import json
import math
import os
import random
import statistics
import sys
import time
from typing import Dict, List, Optional, Sequence, Tuple

from rlds_reverb._util import quiet

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

import cql_dqn  # pylint: disable=g-import-not-at-top
import rlds_reverb  # pylint: disable=g-import-not-at-top

ENV_NAME = 'CartPole-v1'
SEQUENCE_LENGTH = 2  # One transition per item: what DqnAgent trains on.
GOAL = 475.0  # Average return counted as solved (CartPole-v1's threshold).
MAX_RETURN = 500.0  # CartPole-v1's time limit.
OFFLINE_TABLE, ONLINE_TABLE = 'offline', 'online'
DEFAULT_DATASET = 'bundled:cartpole'
RECORDING_NAME = 'cartpole_online'  # The recordings' TFDS dataset name.

VARIANTS = {
    'scratch': 'online from scratch (DDQN, no offline data)',
    'seeded': 'DDQN offline, then online on the seeded table',
    'cql_mixed': 'CQL offline, then CQL-DQN on mixed replay',
    'cql_online': 'CQL offline, then CQL-DQN on the online table only',
}
CONSERVATIVE = ('cql_mixed', 'cql_online')  # CqlDqnAgent; others DdqnAgent


@dataclasses.dataclass(frozen=True)
class Budget:
  offline_steps: int  # train steps from the RLDS data alone
  online_steps: int   # env steps collected online, one train step each
  eval_interval: int  # env steps between evaluations
  eval_episodes: int


FULL = Budget(offline_steps=5_000, online_steps=20_000, eval_interval=1_000,
              eval_episodes=10)
QUICK = Budget(offline_steps=100, online_steps=100, eval_interval=50,
               eval_episodes=2)
# Written by a full run unless --plot names another file; --quick writes none.
DEFAULT_PLOT = 'learning_curves.png'


@dataclasses.dataclass(frozen=True)
class Hyperparameters:
  fc_layers: tuple = (100, 50)
  # Measured on the bundled data: DQN with Adam 1e-3 and a target update every
  # 100 steps diverges offline (Q-values, and the loss, grow without bound);
  # double Q-learning, a smaller step and rarer target updates do not.
  learning_rate: float = 2.5e-4
  gamma: float = 0.99
  target_update_period: int = 500
  epsilon_greedy: float = 0.1
  batch_size: int = 64
  online_table_size: int = 100_000
  cql_alpha: float = 1.0         # offline phase of the cql_* variants
  online_cql_alpha: float = 1.0  # their online phase
  offline_fraction: float = 0.5  # of each mixed batch (RLPD's symmetric)


@dataclasses.dataclass
class Run:
  """One variant, one seed: the return after each evaluation."""
  variant: str
  seed: int
  offline_return: Optional[float]  # None without an offline phase
  curve: List[Tuple[int, float]]  # (env steps collected, average return)
  table_sizes: Dict[str, int]  # items in each table at the end
  seconds: float

  @property
  def steps_to_goal(self) -> Optional[int]:
    """Env steps at the first evaluation reaching GOAL; None if none did."""
    return next((steps for steps, value in self.curve if value >= GOAL),
                None)


def parse_args(argv=None) -> argparse.Namespace:
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--dataset', action='append', default=None,
                      help='RLDS source for rlds_reverb.load: a TFDS directory '
                           'of CartPole-v1 episodes; repeat it to read several '
                           f'as one (default: {DEFAULT_DATASET})')
  parser.add_argument('--record', metavar='DIR', default=None,
                      help='record each run\'s online phase as an RLDS '
                           'dataset in DIR/VARIANT_seedS (RldsRecorder)')
  parser.add_argument('--variants', nargs='+', choices=tuple(VARIANTS),
                      default=list(VARIANTS))
  parser.add_argument('--seeds', nargs='+', type=int,
                      help='default 0 1 2 (--quick: 0)')
  parser.add_argument('--seed', type=int, default=0,
                      help='the seed of --offline-only (default 0)')
  parser.add_argument('--plot', default=None, metavar='FILE.png',
                      help=f'PNG of the curves (default: {DEFAULT_PLOT}; '
                           'none with --quick)')
  parser.add_argument('--json', metavar='FILE',
                      help='write the curves and the summary as JSON')
  parser.add_argument('--offline-only', action='store_true',
                      help='only the CQL offline phase; prints one JSON line')
  parser.add_argument('--quick', action='store_true',
                      help=f'tiny budgets (smoke test): {QUICK}')
  for name in ('offline_steps', 'online_steps', 'eval_interval',
               'eval_episodes'):
    parser.add_argument(f'--{name.replace("_", "-")}', type=int,
                        help=f'default {getattr(FULL, name)}')
  defaults = Hyperparameters()
  for name in ('cql_alpha', 'online_cql_alpha', 'offline_fraction',
               'learning_rate', 'target_update_period'):
    parser.add_argument(f'--{name.replace("_", "-")}',
                        type=type(getattr(defaults, name)),
                        default=getattr(defaults, name))
  parser.add_argument('--verbose', action='store_true',
                      help="show TensorFlow's and Reverb's own log lines")
  args = parser.parse_args(argv)
  if args.record and args.offline_only:
    parser.error('--record records the online phase; --offline-only has none')
  args.dataset = args.dataset or [DEFAULT_DATASET]
  return args


def budget_from(args: argparse.Namespace) -> Budget:
  budget = QUICK if args.quick else FULL
  overrides = {field.name: getattr(args, field.name)
               for field in dataclasses.fields(Budget)
               if getattr(args, field.name) is not None}
  return dataclasses.replace(budget, **overrides)


def hyperparameters_from(args: argparse.Namespace) -> Hyperparameters:
  return Hyperparameters(
      learning_rate=args.learning_rate,
      target_update_period=args.target_update_period,
      cql_alpha=args.cql_alpha,
      online_cql_alpha=args.online_cql_alpha,
      offline_fraction=args.offline_fraction)


def limit_threads() -> None:
  """One TF thread each way: as fast for these tiny networks, fairer on a
  shared machine, and less run-to-run noise."""
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)


def seed_everything(seed: int) -> None:
  random.seed(seed)
  np.random.seed(seed)
  tf.random.set_seed(seed)


def make_env(seed: int):
  env = suite_gym.load(ENV_NAME)
  env.seed(seed)
  return env


def make_agent(tf_env, hp: Hyperparameters,
               conservative: bool) -> dqn_agent.DdqnAgent:
  """DdqnAgent, or CqlDqnAgent (DdqnAgent + CQL(H)) if `conservative`."""
  q_net = q_network.QNetwork(tf_env.observation_spec(), tf_env.action_spec(),
                             fc_layer_params=hp.fc_layers)
  extra = {'cql_alpha': hp.cql_alpha} if conservative else {}
  agent_class = cql_dqn.CqlDqnAgent if conservative else dqn_agent.DdqnAgent
  agent = agent_class(
      tf_env.time_step_spec(), tf_env.action_spec(), q_network=q_net,
      optimizer=tf.keras.optimizers.Adam(learning_rate=hp.learning_rate),
      epsilon_greedy=hp.epsilon_greedy, gamma=hp.gamma,
      target_update_period=hp.target_update_period,
      train_step_counter=tf.Variable(0, dtype=tf.int64), **extra)
  agent.initialize()
  agent.train = common.function(agent.train)
  return agent


def check_dataset_fits(rlds_spec, collect_data_spec,
                       dataset: Sequence[str]) -> None:
  """The logged steps must look like the environment's, field by field."""
  problems = [
      f'{name}: dataset {getattr(rlds_spec, name)} vs environment '
      f'{getattr(collect_data_spec, name)}'
      for name in ('observation', 'action', 'reward', 'discount')
      if not _same_leaves(getattr(rlds_spec, name),
                          getattr(collect_data_spec, name))]
  if problems:
    sys.exit(f'{" + ".join(dataset)} does not hold {ENV_NAME} steps: '
             + '; '.join(problems))


def _same_leaves(spec_a, spec_b) -> bool:
  """Same dtypes and shapes leaf by leaf; bounds and names may differ."""
  leaves_a, leaves_b = tf.nest.flatten(spec_a), tf.nest.flatten(spec_b)
  return len(leaves_a) == len(leaves_b) and all(
      a.dtype == b.dtype and a.shape == b.shape
      for a, b in zip(leaves_a, leaves_b))


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

  def __init__(self, env, policy, observers):
    self._driver = py_driver.PyDriver(env, policy, observers, max_steps=1)
    self.time_step = env.reset()

  def __call__(self) -> None:
    self.time_step, _ = self._driver.run(self.time_step)


class Experiment:
  """One seed's agent, environments and Reverb tables (offline, online)."""

  def __init__(self, dataset: Sequence[str], seed: int, hp: Hyperparameters,
               conservative: bool, record: Optional[str] = None):
    seed_everything(seed)
    self.hp = hp
    self.collect_env = make_env(seed)
    self.eval_env = make_env(seed + 1)
    tf_env = tf_py_environment.TFPyEnvironment(make_env(seed + 2))
    self.agent = make_agent(tf_env, hp, conservative)
    self.greedy = py_tf_eager_policy.PyTFEagerPolicy(self.agent.policy,
                                                     use_tf_function=True)
    self.episodes = rlds_reverb.load(dataset)
    rlds_spec = rlds_reverb.create_trajectory_data_spec(self.episodes)
    check_dataset_fits(rlds_spec, self.agent.collect_data_spec, dataset)
    self.server = reverb.Server(rlds_reverb.mixed_replay_tables(
        tensor_spec.add_outer_dim(rlds_spec), hp.online_table_size))
    self.client = reverb.Client(f'localhost:{self.server.port}')
    self.record = record  # The online phase's recording directory, if any.

  def push_rlds(self, table: str) -> None:
    rlds_reverb.push(self.episodes, self.client, table,
                     sequence_length=SEQUENCE_LENGTH)

  def buffer(self, table: str) -> reverb_replay_buffer.ReverbReplayBuffer:
    return reverb_replay_buffer.ReverbReplayBuffer(
        self.agent.collect_data_spec, table, sequence_length=SEQUENCE_LENGTH,
        local_server=self.server)

  def batches(self, table: str) -> tf.data.Dataset:
    return self.buffer(table).as_dataset(
        sample_batch_size=self.hp.batch_size, num_steps=SEQUENCE_LENGTH,
        num_parallel_calls=2)

  def mixed_batches(self) -> tf.data.Dataset:
    return rlds_reverb.mixed_replay(
        self.buffer(OFFLINE_TABLE), self.buffer(ONLINE_TABLE),
        self.hp.offline_fraction, self.hp.batch_size, SEQUENCE_LENGTH,
        num_parallel_calls=2)

  def evaluate(self, episodes: int) -> float:
    return average_return(self.eval_env, self.greedy, episodes)

  def train(self, dataset: tf.data.Dataset, steps: int) -> None:
    iterator = iter(dataset.prefetch(2))
    for _ in range(steps):
      experience, _ = next(iterator)
      self.agent.train(experience)

  def online(self, dataset: tf.data.Dataset, budget: Budget,
             label: str) -> List[Tuple[int, float]]:
    """One collected env step, then one train step; evaluated as it goes.

    The observer sends an item only once its steps are complete, and a
    sampler waits for items, so the first SEQUENCE_LENGTH steps are
    collected and flushed before any batch is drawn (they count as env
    steps, not train steps).
    """
    observer = reverb_utils.ReverbAddTrajectoryObserver(
        self.client, ONLINE_TABLE, sequence_length=SEQUENCE_LENGTH)
    observers = [observer]
    recorder = None
    if self.record:  # env: gym's TimeLimit.truncated, read from its infos.
      recorder = rlds_reverb.RldsRecorder(
          self.record, self.agent.collect_data_spec, name=RECORDING_NAME,
          env=self.collect_env)
      observers.append(recorder)
    collect = Collector(self.collect_env, py_tf_eager_policy.PyTFEagerPolicy(
        self.agent.collect_policy, use_tf_function=True), observers)
    curve = [self.point(0, budget, label)]
    for _ in range(SEQUENCE_LENGTH):
      collect()
    observer.flush()
    iterator = iter(dataset.prefetch(2))
    for step in range(SEQUENCE_LENGTH + 1, budget.online_steps + 1):
      collect()
      experience, _ = next(iterator)
      self.agent.train(experience)
      if step % budget.eval_interval == 0 or step == budget.online_steps:
        curve.append(self.point(step, budget, label))
    observer.close()
    if recorder is not None:  # The episode under way: written as truncated.
      print(f'{label} {recorder.close(final_time_step=collect.time_step)}')
    return curve

  def point(self, env_steps: int, budget: Budget,
            label: str) -> Tuple[int, float]:
    value = self.evaluate(budget.eval_episodes)
    print(f'{label} env steps {env_steps:>6} return {value:6.1f}', flush=True)
    return env_steps, value

  def table_sizes(self) -> Dict[str, int]:
    info = self.client.server_info(timeout=10)
    return {table: info[table].current_size
            for table in (OFFLINE_TABLE, ONLINE_TABLE)}

  def close(self) -> None:
    self.server.stop()


def run_variant(variant: str, seed: int, dataset: Sequence[str],
                budget: Budget, hp: Hyperparameters,
                record: Optional[str] = None) -> Run:
  """The variant's offline phase, then the online phase (recorded in
  `record`/VARIANT_seedS if `record` is given)."""
  started = time.perf_counter()
  conservative = variant in CONSERVATIVE
  experiment = Experiment(dataset, seed, hp, conservative,
                          record=recording_dir(record, variant, seed))
  label = f'{variant:10} seed {seed}'
  try:
    offline_phase(experiment, variant, budget)
    if conservative:
      experiment.agent.cql_alpha.assign(hp.online_cql_alpha)
    batches = (experiment.mixed_batches() if variant == 'cql_mixed'
               else experiment.batches(ONLINE_TABLE))
    curve = experiment.online(batches, budget, label)
    sizes = experiment.table_sizes()
  finally:
    experiment.close()
  seconds = time.perf_counter() - started
  print(f'{label} done in {seconds:.0f} s; items in the tables: '
        + ', '.join(f'{table} {size:,}' for table, size in sizes.items()))
  offline_return = None if variant == 'scratch' else curve[0][1]
  return Run(variant, seed, offline_return, curve, sizes, seconds)


def recording_dir(record: Optional[str], variant: str,
                  seed: int) -> Optional[str]:
  return record and os.path.join(record, f'{variant}_seed{seed}')


def offline_phase(experiment: Experiment, variant: str,
                  budget: Budget) -> None:
  """None (scratch); DDQN on the online table seeded with the RLDS data
  (seeded); CQL-DQN on the offline table (cql_*)."""
  if variant == 'seeded':
    experiment.push_rlds(ONLINE_TABLE)
    experiment.train(experiment.batches(ONLINE_TABLE), budget.offline_steps)
  elif variant in CONSERVATIVE:
    conservative_offline_phase(experiment, budget)


def conservative_offline_phase(experiment: Experiment,
                               budget: Budget) -> None:
  """CQL-DQN on the offline table alone, filled with the RLDS data."""
  experiment.push_rlds(OFFLINE_TABLE)
  experiment.train(experiment.batches(OFFLINE_TABLE), budget.offline_steps)


def offline_only(args: argparse.Namespace) -> Dict[str, float]:
  budget = budget_from(args)
  experiment = Experiment(args.dataset, args.seed, hyperparameters_from(args),
                          conservative=True)
  try:
    conservative_offline_phase(experiment, budget)
    value = experiment.evaluate(budget.eval_episodes)
  finally:
    experiment.close()
  return {'seed': args.seed, 'offline_steps': budget.offline_steps,
          'offline_return': value}


def random_return(seed: int, episodes: int) -> float:
  env = make_env(seed + 1)
  policy = random_py_policy.RandomPyPolicy(env.time_step_spec(),
                                           env.action_spec(), seed=seed)
  return average_return(env, policy, episodes)


# --- Summary, JSON and plot. --------------------------------------------------

def median_and_range(values: Sequence[float]) -> str:
  return f'{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})'


def steps_to_goal(runs: Sequence[Run]) -> List[float]:
  """Per seed; a run that never reached GOAL counts as infinite."""
  return [math.inf if run.steps_to_goal is None else run.steps_to_goal
          for run in runs]


def steps_label(value: Optional[float], budget: Budget) -> str:
  """'12,000', or '>20,000' for a goal not reached (None or infinite)."""
  if value is None or math.isinf(value):
    return f'>{budget.online_steps:,}'
  return f'{value:,.0f}'


def steps_text(values: Sequence[float], budget: Budget) -> str:
  return (f'{steps_label(statistics.median(values), budget)} '
          f'({steps_label(min(values), budget)} to '
          f'{steps_label(max(values), budget)})')


def summarize(runs_by_variant: Dict[str, List[Run]], budget: Budget,
              random_value: float, data_return: float) -> Dict[str, object]:
  """Prints a table of medians (ranges) over seeds; returns the medians."""
  print(f'\nrandom policy: {random_value:.1f}; RLDS data: mean return '
        f'{data_return:.1f}; goal: average return >= {GOAL:.0f} over '
        f'{budget.eval_episodes} episodes')
  print(f'{"variant":10} {"after offline phase":>20} '
        f'{"env steps to goal":>26} {"lowest online":>20} '
        f'{"mean online":>20} {"last":>20}')
  summary = {}
  for variant, runs in runs_by_variant.items():
    offline = [run.offline_return for run in runs
               if run.offline_return is not None]
    steps = steps_to_goal(runs)
    online = [[value for _, value in run.curve[1:]] for run in runs]
    lowest = [min(values) for values in online]
    mean = [statistics.mean(values) for values in online]
    last = [values[-1] for values in online]
    print(f'{variant:10} {median_and_range(offline) if offline else "-":>20} '
          f'{steps_text(steps, budget):>26} {median_and_range(lowest):>20} '
          f'{median_and_range(mean):>20} {median_and_range(last):>20}')
    median_steps = statistics.median(steps)
    summary[variant] = {
        'median_offline_return': (statistics.median(offline)
                                  if offline else None),
        'median_steps_to_goal': (None if math.isinf(median_steps)
                                 else median_steps),
        'median_lowest_online_return': statistics.median(lowest),
        'median_mean_online_return': statistics.median(mean),
        'median_last_return': statistics.median(last)}
  print('median over seeds (range); "online": the evaluations after step 0; '
        '">N": not reached within the budget')
  return summary


def print_goals(summary: Dict[str, Dict], budget: Budget) -> None:
  """The issue's two goals, when the runs to judge them are there."""
  if 'cql_mixed' not in summary:
    return
  offline = summary['cql_mixed']['median_offline_return']
  print(f'goal 1, CQL offline phase alone >= 150: median {offline:.1f}, '
        f'{"met" if offline >= 150 else "not met"}')
  if 'scratch' not in summary:
    return
  mixed = summary['cql_mixed']['median_steps_to_goal']
  scratch = summary['scratch']['median_steps_to_goal']
  met = mixed is not None and (scratch is None or mixed <= scratch / 2)
  print(f'goal 2, cql_mixed reaches {GOAL:.0f} in at most half the env steps '
        f'of scratch: median {steps_label(mixed, budget)} vs '
        f'{steps_label(scratch, budget)}, {"met" if met else "not met"}')


def as_json(runs_by_variant, summary, budget: Budget, hp: Hyperparameters,
            random_value: float, data_return: float) -> Dict[str, object]:
  return {
      'env': ENV_NAME, 'goal': GOAL, 'random_return': random_value,
      'data_mean_return': data_return,
      'budget': dataclasses.asdict(budget),
      'hyperparameters': dataclasses.asdict(hp),
      'summary': summary,
      'runs': {variant: [dict(dataclasses.asdict(run),
                              steps_to_goal=run.steps_to_goal)
                         for run in runs]
               for variant, runs in runs_by_variant.items()}}


def write_plot(path: str, runs_by_variant, random_value: float,
               data_return: float, budget: Budget) -> None:
  """Mean curve and min-max band of each variant over its seeds."""
  import matplotlib  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  matplotlib.use('Agg')
  from matplotlib import pyplot as plt  # pylint: disable=g-import-not-at-top,import-outside-toplevel

  figure, axes = plt.subplots(figsize=(8, 5))
  for variant, runs in runs_by_variant.items():
    steps = [steps for steps, _ in runs[0].curve]
    values = np.array([[value for _, value in run.curve] for run in runs])
    line, = axes.plot(steps, values.mean(axis=0), marker='o', markersize=3,
                      label=f'{VARIANTS[variant]} (mean)')
    axes.fill_between(steps, values.min(axis=0), values.max(axis=0),
                      color=line.get_color(), alpha=0.15)
  axes.axhline(random_value, color='tab:gray', linestyle=':',
               label=f'random policy ({random_value:.0f})')
  axes.axhline(data_return, color='tab:brown', linestyle='--', linewidth=1,
               label=f'RLDS data, mean return ({data_return:.0f})')
  axes.axhline(GOAL, color='black', linestyle='-.', linewidth=1,
               label=f'goal ({GOAL:.0f})')
  axes.set_xlim(0, budget.online_steps)
  axes.set_ylim(0, MAX_RETURN * 1.05)
  axes.set_xlabel('environment steps collected online (offline phases '
                  'before step 0)')
  axes.set_ylabel(f'average return ({budget.eval_episodes} episodes)')
  seeds = sorted({run.seed for runs in runs_by_variant.values()
                  for run in runs})
  axes.set_title(f'{ENV_NAME} from RLDS via Reverb: mean and range over '
                 f'seeds {seeds}', fontsize='medium')
  axes.legend(loc='upper center', bbox_to_anchor=(0.5, -0.13), ncol=2,
              fontsize='small', frameon=False)
  figure.tight_layout()
  figure.savefig(path, dpi=100)
  plt.close(figure)


def compare(args: argparse.Namespace) -> None:
  budget = budget_from(args)
  hp = hyperparameters_from(args)
  seeds = args.seeds or ([0] if args.quick else [0, 1, 2])
  print(f'budget: {budget}\n{hp}')
  runs_by_variant = {variant: [] for variant in args.variants}
  for seed in seeds:
    for variant in args.variants:
      run = run_variant(variant, seed, args.dataset, budget, hp, args.record)
      runs_by_variant[variant].append(run)
  random_value = random_return(seeds[0], budget.eval_episodes)
  data_return = float(np.mean(rlds_reverb.stats.episode_stats(
      rlds_reverb.load(args.dataset)).returns))
  summary = summarize(runs_by_variant, budget, random_value, data_return)
  print_goals(summary, budget)
  plot = args.plot or (None if args.quick else DEFAULT_PLOT)
  if plot:
    write_plot(plot, runs_by_variant, random_value, data_return, budget)
    print(f'learning curves: {os.path.abspath(plot)}')
  if args.json:
    with open(args.json, 'w') as f:
      json.dump(as_json(runs_by_variant, summary, budget, hp, random_value,
                        data_return), f, indent=1)
    print(f'curves as JSON: {os.path.abspath(args.json)}')


def main(argv=None) -> None:
  args = parse_args(argv)
  with quiet.quieted(enabled=not args.verbose):
    limit_threads()
    if args.offline_only:
      print(json.dumps(offline_only(args)))
    else:
      compare(args)


if __name__ == '__main__':
  main()
