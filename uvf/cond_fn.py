"""Conditions that decide, at each environment step, when an episode or the environment is reset.

Each is called by the agent as `cond(agent, state, action, transition_type, environment_steps, num_episodes)` and
returns a boolean scalar tensor. `state` is the observation [O] (no batch dimension), `transition_type` the bool
scalar "this time step is the last" (True where the original had RESTARTING), `environment_steps` and `num_episodes`
the integer counters (`environment_steps` already incremented for the current step). `q_too_small` remains a
placeholder (the original cannot run: it uses `tf.float`, which does not exist).
"""

import gin
import tensorflow as tf

from uvf.placeholders import placeholder


def _is_multiple(count, n):
  """count mod n == 0, for an integer tensor `count` and a positive integer `n`."""
  count = tf.convert_to_tensor(count)
  return tf.equal(tf.math.floormod(count, tf.cast(n, count.dtype)), 0)


@gin.configurable
def env_transition(agent, state, action, transition_type, environment_steps, num_episodes):
  """True unless `transition_type` (the time step is the last, the original's RESTARTING) is True."""
  del agent, state, action, environment_steps, num_episodes
  return tf.logical_not(transition_type)


@gin.configurable
def env_restart(agent, state, action, transition_type, environment_steps, num_episodes):
  """True when `transition_type` (the time step is the last, the original's RESTARTING) is True."""
  del agent, state, action, environment_steps, num_episodes
  return tf.identity(transition_type)


@gin.configurable
def every_n_steps(agent, state, action, transition_type, environment_steps, num_episodes, n=150):
  """True when environment_steps mod `n` == 0 (the counter is incremented before the test, so every n-th step).

  HIRO ends an episode with it (`UvfAgent.reset_episode_cond_fn`, n = 500).
  """
  del agent, state, action, transition_type, num_episodes
  return _is_multiple(environment_steps, n)


@gin.configurable
def every_n_episodes(agent, state, action, transition_type, environment_steps, num_episodes, n=2,
                     steps_per_episode=None):
  """True on the last step of an episode (environment_steps mod `steps_per_episode` == 0) when that episode is an
  n-th one ((num_episodes + 1) mod n == 0) or the robot fell (state[2], the torso height, outside [0.2, 1.0]).

  HIRO resets the environment with it (`UvfAgent.reset_env_cond_fn`, n = 1, steps_per_episode = 500). The height
  test is the original's, hard-coded for the ant (MuJoCo length units), applied to any environment.

  Raises:
    ValueError: if `steps_per_episode` is None.
  """
  del agent, action, transition_type
  if steps_per_episode is None:
    raise ValueError('every_n_episodes needs steps_per_episode (bind every_n_episodes.steps_per_episode in gin).')
  fell = tf.logical_or(state[2] < 0.2, state[2] > 1.0)
  nth_episode = _is_multiple(tf.convert_to_tensor(num_episodes) + 1, n)
  return tf.logical_and(tf.logical_or(fell, nth_episode), _is_multiple(environment_steps, steps_per_episode))


@gin.configurable
def failed_reset_after_n_episodes(agent, state, action, transition_type, environment_steps, num_episodes,
                                  steps_per_episode=None, reset_state=None, max_dist=1.0, epsilon=1e-10):
  """True on the last step of an episode when sqrt(||state - reset_state||^2 + epsilon) > `max_dist`.

  Raises:
    ValueError: if `steps_per_episode` or `reset_state` is None.
  """
  del agent, action, transition_type, num_episodes
  if steps_per_episode is None or reset_state is None:
    raise ValueError('failed_reset_after_n_episodes needs steps_per_episode and reset_state (bind them in gin).')
  dist = tf.sqrt(tf.reduce_sum(tf.math.squared_difference(state, tf.cast(reset_state, state.dtype))) + epsilon)
  return tf.logical_and(dist > max_dist, _is_multiple(environment_steps, steps_per_episode))


@gin.configurable
@placeholder('cond_fn.q_too_small')
def q_too_small(agent, state, action, transition_type, environment_steps, num_episodes, q_min=0.5):
  """True when the agent's Q value of (state, action) is below `q_min` (not ported)."""


@gin.configurable
def true_fn(agent, state, action, transition_type, environment_steps, num_episodes):
  """Always True."""
  del agent, state, action, transition_type, environment_steps, num_episodes
  return tf.constant(True)


@gin.configurable
def false_fn(agent, state, action, transition_type, environment_steps, num_episodes):
  """Always False."""
  del agent, state, action, transition_type, environment_steps, num_episodes
  return tf.constant(False)
