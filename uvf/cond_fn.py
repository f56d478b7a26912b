"""Conditions that decide, at each environment step, when an episode or the environment is reset (issue #5).

Each is called by the agent as `cond(agent, state, action, transition_type, environment_steps, num_episodes)` and
returns a boolean tensor.
"""

import gin

from uvf.placeholders import placeholder

_ISSUE = 5


@gin.configurable
@placeholder('cond_fn.env_transition', _ISSUE)
def env_transition(agent, state, action, transition_type, environment_steps, num_episodes):
  """True unless the transition is a restart (issue #5)."""


@gin.configurable
@placeholder('cond_fn.env_restart', _ISSUE)
def env_restart(agent, state, action, transition_type, environment_steps, num_episodes):
  """True when the transition is a restart (issue #5)."""


@gin.configurable
@placeholder('cond_fn.every_n_steps', _ISSUE)
def every_n_steps(agent, state, action, transition_type, environment_steps, num_episodes, n=150):
  """True every `n` environment steps (issue #5)."""


@gin.configurable
@placeholder('cond_fn.every_n_episodes', _ISSUE)
def every_n_episodes(agent, state, action, transition_type, environment_steps, num_episodes, n=2,
                     steps_per_episode=None):
  """True on the last step of every `n`-th episode, and of any episode where the ant fell (issue #5)."""


@gin.configurable
@placeholder('cond_fn.failed_reset_after_n_episodes', _ISSUE)
def failed_reset_after_n_episodes(agent, state, action, transition_type, environment_steps, num_episodes,
                                  steps_per_episode=None, reset_state=None, max_dist=1.0, epsilon=1e-10):
  """True on an episode's last step if the state is over `max_dist` from `reset_state` (issue #5)."""


@gin.configurable
@placeholder('cond_fn.q_too_small', _ISSUE)
def q_too_small(agent, state, action, transition_type, environment_steps, num_episodes, q_min=0.5):
  """True when the agent's Q value of (state, action) is below `q_min` (issue #5)."""


@gin.configurable
@placeholder('cond_fn.true_fn', _ISSUE)
def true_fn(agent, state, action, transition_type, environment_steps, num_episodes):
  """Always True (issue #5)."""


@gin.configurable
@placeholder('cond_fn.false_fn', _ISSUE)
def false_fn(agent, state, action, transition_type, environment_steps, num_episodes):
  """Always False (issue #5)."""
