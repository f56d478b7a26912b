"""Reward functions of contexts (issue #5).

Each is called as `reward_fn(states, actions, rewards, next_states, contexts)` and returns `(rewards, discounts)`.
"""

import gin

from uvf.placeholders import placeholder

_ISSUE = 5


@gin.configurable
@placeholder('rewards_functions.potential_rewards', _ISSUE)
def potential_rewards(states, actions, rewards, next_states, contexts, gamma=1.0, reward_fn=None):
  """Potential-based shaping of `reward_fn`: gamma * r(next_states) - r(states) (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.timed_rewards', _ISSUE)
def timed_rewards(states, actions, rewards, next_states, contexts, reward_fn=None, dense=False, timer_index=-1):
  """`reward_fn`, given (unless `dense`) and terminating only when the timer context runs out (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.reset_rewards', _ISSUE)
def reset_rewards(states, actions, rewards, next_states, contexts, reset_index=0, reset_state=None,
                  reset_reward_function=None, include_forward_rewards=True, include_reset_rewards=True):
  """Rewards of a forward / reset agent: the reset reward towards `reset_state`, or the plain reward (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.tanh_similarity', _ISSUE)
def tanh_similarity(states, actions, rewards, next_states, contexts, mse_scale=1.0, state_scales=1.0,
                    goal_scales=1.0, summarize=False):
  """1 - tanh(mse_scale * MSE(next_states, goal)) (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.negative_mse', _ISSUE)
def negative_mse(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0,
                 summarize=False):
  """-MSE(next_states, goal) (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.negative_distance', _ISSUE)
def negative_distance(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0,
                      reward_scales=1.0, weight_index=None, weight_vector=None, summarize=False,
                      termination_epsilon=1e-4, state_indices=None, goal_indices=None, vectorize=False,
                      relative_context=False, diff=False, norm='L2', epsilon=1e-10, bonus_epsilon=0.,
                      offset=0.0):
  """-||next_states - goal|| (goal relative to the state if `relative_context`): HIRO's reward (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.cosine_similarity', _ISSUE)
def cosine_similarity(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0,
                      reward_scales=1.0, normalize_states=True, normalize_goals=True, weight_index=None,
                      weight_vector=None, summarize=False, state_indices=None, goal_indices=None, offset=0.0):
  """Cosine similarity of (next_states - states) and the goal (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.diff_distance', _ISSUE)
def diff_distance(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0,
                  reward_scales=1.0, weight_index=None, weight_vector=None, summarize=False,
                  termination_epsilon=1e-4, state_indices=None, goal_indices=None, norm='L2', epsilon=1e-10):
  """Decrease of the distance to the goal from states to next_states (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.binary_indicator', _ISSUE)
def binary_indicator(states, actions, rewards, next_states, contexts, termination_epsilon=1e-4, offset=0,
                     epsilon=1e-10, state_indices=None, summarize=False):
  """1 when next_states reach the goal (distance within `termination_epsilon`), else 0 (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.plain_rewards', _ISSUE)
def plain_rewards(states, actions, rewards, next_states, contexts):
  """The environment's rewards unchanged (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.ctrl_rewards', _ISSUE)
def ctrl_rewards(states, actions, rewards, next_states, contexts, reward_scales=1.0):
  """Negative control cost -||actions||^2 (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.diff_rewards', _ISSUE)
def diff_rewards(states, actions, rewards, next_states, contexts, state_indices=None, goal_index=0):
  """Vector reward next_states - goal (issue #5)."""


@gin.configurable
@placeholder('rewards_functions.state_rewards', _ISSUE)
def state_rewards(states, actions, rewards, next_states, contexts, weight_index=None, state_indices=None,
                  weight_vector=1.0, offset_vector=0.0, summarize=False):
  """Linear reward weight_vector . (next_states + offset_vector) (issue #5)."""
