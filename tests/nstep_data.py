"""n-step transitions written out in numpy, the reference for n-step tests.

    numpy episodes -> expected_transitions(episodes, n, gamma)
      -> [{observation, action, reward, discount, next_observation}]
"""

from tests import rlds_data


def expected_transitions(episodes, n, gamma):
  """Acme's NStepTransitionAdder arithmetic, written out step by step."""
  out = []
  for episode in episodes:
    rewards, discounts = episode['reward'], episode['discount']
    num_transitions = len(rewards) - 1
    terminal = bool(episode['is_terminal'][-1])
    for t in range(num_transitions):
      window = min(n, num_transitions - t)
      n_step_return = float(rewards[t])
      total = float(discounts[t])
      for i in range(1, window):
        total *= gamma
        n_step_return += float(rewards[t + i]) * total
        total *= float(discounts[t + i])
      if terminal and t + window == num_transitions:
        total = 0.0
      out.append({
          'observation': episode['observation'][t],
          'action': episode['action'][t],
          'reward': n_step_return,
          'discount': total,
          'next_observation': episode['observation'][t + window],
      })
  return out


def episodes_with_both_endings(seed):
  lengths = [1, 2, 4, 7, 3, 6]
  return [rlds_data.flat_episode(length, seed * 10 + i, terminal=i % 2 == 0)
          for i, length in enumerate(lengths)]
