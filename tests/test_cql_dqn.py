"""examples/cql_dqn.py: the CQL(H) term, and that it is what the agent adds.

The term is checked against NumPy on fixed Q-values; the agent's loss against
a `DdqnAgent` sharing its Q-network (the same loss plus alpha times the
term, boundary rows left out); and training: on data that always takes one
action, the conservative agent's greedy policy takes it everywhere.
"""

import importlib.util
import pathlib

import numpy as np
import pytest
import tensorflow as tf
from tf_agents.agents.dqn import dqn_agent
from tf_agents.networks import q_network
from tf_agents.specs import tensor_spec
from tf_agents.trajectories import time_step as ts
from tf_agents.trajectories import trajectory

EXAMPLES = pathlib.Path(__file__).resolve().parent.parent / 'examples'
_SPEC = importlib.util.spec_from_file_location('cql_dqn',
                                               EXAMPLES / 'cql_dqn.py')
cql_dqn = importlib.util.module_from_spec(_SPEC)
_SPEC.loader.exec_module(cql_dqn)

OBSERVATION_SIZE, NUM_ACTIONS, BATCH = 4, 3, 8
OBSERVATION_SPEC = tf.TensorSpec([OBSERVATION_SIZE], tf.float32)
ACTION_SPEC = tensor_spec.BoundedTensorSpec((), tf.int64, 0, NUM_ACTIONS - 1)
TIME_STEP_SPEC = ts.time_step_spec(OBSERVATION_SPEC)


def numpy_gap(q_values, actions):
  q_values = np.asarray(q_values, np.float64)
  top = q_values.max(axis=-1)
  logsumexp = top + np.log(np.exp(q_values - top[:, None]).sum(axis=-1))
  return logsumexp - q_values[np.arange(len(actions)), actions]


# (Q-values [B, A], logged actions, expected gap per row).
GAPS = {
    'equal_values': ([[0.0, 0.0]], [1], [np.log(2.0)]),
    'logged_action_dominates': ([[10.0, -10.0]], [0], None),
    'logged_action_dominated': ([[10.0, -10.0]], [1], None),
    'three_actions': ([[1.0, 2.0, 3.0], [-1.0, 0.5, 4.0]], [2, 0], None),
}


@pytest.mark.parametrize('q_values,actions,expected', GAPS.values(),
                         ids=GAPS.keys())
def test_cql_gap_is_logsumexp_minus_logged_q(q_values, actions, expected):
  got = cql_dqn.cql_gap(tf.constant(q_values), tf.constant(actions,
                                                           tf.int64))
  want = numpy_gap(q_values, actions) if expected is None else expected
  np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)
  assert np.all(got.numpy() >= 0)


def test_gap_of_a_dominated_logged_action_is_the_difference():
  got = cql_dqn.cql_gap(tf.constant([[10.0, -10.0]]), tf.constant([1]))
  np.testing.assert_allclose(got.numpy(), [20.0], rtol=1e-6)


def make_network(seed=0):
  tf.random.set_seed(seed)
  return q_network.QNetwork(OBSERVATION_SPEC, ACTION_SPEC,
                            fc_layer_params=(16,))


def make_agent(agent_class, network, **kwargs):
  agent = agent_class(
      TIME_STEP_SPEC, ACTION_SPEC, q_network=network,
      optimizer=tf.keras.optimizers.Adam(1e-2), gamma=0.9,
      train_step_counter=tf.Variable(0, dtype=tf.int64), **kwargs)
  agent.initialize()
  return agent


def experience(seed, actions=None, boundary_rows=()):
  """A batch of 2-step trajectories; `boundary_rows` start at a LAST step."""
  rng = np.random.default_rng(seed)
  step_type = np.full((BATCH, 2), ts.StepType.MID, np.int32)
  step_type[list(boundary_rows), 0] = ts.StepType.LAST
  step_type[list(boundary_rows), 1] = ts.StepType.FIRST
  if actions is None:
    actions = rng.integers(0, NUM_ACTIONS, (BATCH, 2))
  return trajectory.Trajectory(
      step_type=tf.constant(step_type),
      observation=tf.constant(
          rng.standard_normal((BATCH, 2, OBSERVATION_SIZE)), tf.float32),
      action=tf.constant(actions, tf.int64), policy_info=(),
      next_step_type=tf.constant(np.roll(step_type, -1, axis=1)),
      reward=tf.constant(rng.standard_normal((BATCH, 2)), tf.float32),
      discount=tf.ones((BATCH, 2), tf.float32))


def expected_term(network, batch):
  """mean over the batch of the gap at the first step, boundaries as 0."""
  q_values, _ = network(batch.observation[:, 0])
  gap = numpy_gap(q_values.numpy(), batch.action[:, 0].numpy())
  valid = batch.step_type[:, 0].numpy() != ts.StepType.LAST
  return float(np.mean(gap * valid))


@pytest.mark.parametrize('alpha', [0.0, 0.5, 2.0])
def test_loss_is_ddqn_loss_plus_alpha_times_the_term(alpha):
  network = make_network()
  conservative = make_agent(cql_dqn.CqlDqnAgent, network, cql_alpha=alpha)
  plain = make_agent(dqn_agent.DdqnAgent, network)
  batch = experience(seed=1, boundary_rows=(2, 5))
  ddqn = plain.loss(batch)
  cql = conservative.loss(batch)
  term = expected_term(network, batch)
  assert term > 0
  np.testing.assert_allclose(cql.extra.cql_loss.numpy(), term, rtol=1e-5)
  np.testing.assert_allclose(cql.loss.numpy(),
                             ddqn.loss.numpy() + alpha * term, rtol=1e-5)
  np.testing.assert_allclose(cql.extra.td_loss.numpy(),
                             ddqn.extra.td_loss.numpy(), rtol=1e-6)


def test_alpha_is_a_variable_train_sees_without_retracing():
  network = make_network()
  agent = make_agent(cql_dqn.CqlDqnAgent, network, cql_alpha=1.0)
  batch = experience(seed=2)
  term = expected_term(network, batch)
  loss_at = {}
  for alpha in (1.0, 0.0):
    agent.cql_alpha.assign(alpha)
    loss_at[alpha] = float(agent.loss(batch).loss)
  np.testing.assert_allclose(loss_at[1.0] - loss_at[0.0], term, rtol=1e-4)


def greedy_actions(network, observations):
  q_values, _ = network(observations)
  return np.argmax(q_values.numpy(), axis=-1)


def test_training_makes_the_greedy_policy_take_the_logged_action():
  """Data that always takes action 2 and is rewarded for nothing: the
  conservative agent ends up preferring action 2 at every state of it."""
  logged = np.full((BATCH, 2), 2)
  batches = [experience(seed, actions=logged) for seed in range(4)]
  network = make_network(seed=3)
  agent = make_agent(cql_dqn.CqlDqnAgent, network, cql_alpha=5.0)
  observations = tf.concat([b.observation[:, 0] for b in batches], axis=0)
  before = greedy_actions(network, observations)
  assert not np.all(before == 2)  # Else the test shows nothing.
  for step in range(150):
    agent.train(batches[step % len(batches)])
  assert np.all(greedy_actions(network, observations) == 2)
