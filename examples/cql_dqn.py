"""Conservative Q-learning for discrete actions: DQN plus the CQL(H) term.

CQL (Kumar et al., 2020), in its CQL(H) form for a discrete action set, adds
to the TD loss, on every transition (s, a) of the batch,

    alpha * ( logsumexp_a' Q(s, a')  -  Q(s, a) )
              \\_ soft maximum over _/    \\_ the logged action

which pushes down the Q-values of actions the data never took at s and up
the one it took. Offline, that keeps the greedy policy close to the logged
behaviour where the data says little, instead of trusting Q-values that no
target ever corrected. TF-Agents has CQL only for SAC (continuous actions).

`CqlDqnAgent` is TF-Agents' `DdqnAgent` (double-Q targets) with this term
added to its loss; `cql_alpha` is a variable, so a training loop can lower it
(to 0 for plain double DQN) without retracing `train`.
"""

import collections

import tensorflow as tf
from tf_agents.agents import tf_agent
from tf_agents.agents.dqn import dqn_agent
from tf_agents.utils import common

CqlDqnLossInfo = collections.namedtuple(
    'CqlDqnLossInfo', ('td_loss', 'td_error', 'cql_loss'))


def cql_gap(q_values: tf.Tensor, actions: tf.Tensor) -> tf.Tensor:
  """logsumexp_a Q(s, a) - Q(s, a_data) per row; >= 0, 0 only if certain.

  Args:
    q_values: float [B, num_actions].
    actions: int [B], the logged actions.
  """
  taken = tf.gather(q_values, tf.cast(actions, tf.int32), batch_dims=1)
  return tf.reduce_logsumexp(q_values, axis=-1) - taken


class CqlDqnAgent(dqn_agent.DdqnAgent):
  """DdqnAgent whose loss adds cql_alpha * mean(cql_gap) (CQL(H))."""

  def __init__(self, *args, cql_alpha: float = 1.0, **kwargs):
    super().__init__(*args, **kwargs)
    self.cql_alpha = tf.Variable(cql_alpha, dtype=tf.float32,
                                 trainable=False, name='cql_alpha')

  def _loss(self, experience, td_errors_loss_fn=None, gamma=1.0,
            reward_scale_factor=1.0, weights=None, training=False):
    loss_info = super()._loss(
        experience, td_errors_loss_fn=td_errors_loss_fn, gamma=gamma,
        reward_scale_factor=reward_scale_factor, weights=weights,
        training=training)
    time_steps, policy_steps, _ = self._as_transition(experience)
    q_values, _ = self._q_network(time_steps.observation,
                                  step_type=time_steps.step_type,
                                  training=training)
    # Like the TD loss: transitions that start at a last step (an episode
    # boundary in an observer's items) count as zero, each row as 1/B.
    valid = tf.cast(~time_steps.is_last(), tf.float32)
    cql_loss = common.aggregate_losses(
        per_example_loss=valid * cql_gap(q_values, policy_steps.action),
        sample_weight=weights).weighted
    return tf_agent.LossInfo(
        loss_info.loss + self.cql_alpha * cql_loss,
        CqlDqnLossInfo(*loss_info.extra, cql_loss=cql_loss))
