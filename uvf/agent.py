"""The two HIRO levels: the goal-conditioned low-level agent (UVF) and the meta agent that sets its goals.

Port of tensorflow/models `research/efficient-hrl/agent.py` (Nachum et al. 2018, Section 3.1). Each level is a
`TD3Agent` whose state is the environment observation concatenated with the level's contexts (`Context`): the low level
sees s ⊕ g (g the relative goal, [G]), the meta level s ⊕ target (the task target, [M]) and its actions are goals (the
low context's `context_as_action_specs`). The agents own their `Context` (`tf_context`) and the episode predicates of
`cond_fn`; collection (`uvf/collect.py`) and training (`uvf/train.py`) call them.

As the original, `UvfAgent` and `MetaAgent` take `*args, **kwargs` and forward them, so gin accepts any parameter the
cores or `TD3Agent` take (`UvfAgent.actor_net`, `.dqda_clipping`, ...). The methods the original registered under their
own gin names are registered the same way: `uvf_add_noise_fn`, `meta_add_noise_fn` (exploration noise) and
`uvf_critic_function`.

Build them as `train_uvf` does: `with tf.name_scope('uvf_agent'): UvfAgent([obs_spec], [action_spec], tf_env)` (the
scope names the variables like the original's, e.g. `uvf_agent/actor_net/states/states_1/weights`).
"""

from typing import Any

import gin
import numpy as np
import tensorflow as tf

from uvf import cond_fn
from uvf.agents import ddpg_agent


def _merge_specs(observation_spec, context_specs):
  """The spec of observation ⊕ contexts: float32 [O + sum C]."""
  size = sum(int(tf.TensorShape(spec.shape).num_elements()) for spec in (observation_spec,) + tuple(context_specs))
  return tf.TensorSpec([size], tf.float32)


def _first(spec):
  if isinstance(spec, (list, tuple)):
    if len(spec) != 1:
      raise ValueError(f'Expected a spec or a list of exactly one spec, got {len(spec)} specs.')
    return spec[0]
  return spec


@gin.configurable
class UvfAgentCore(object):
  """Goal-conditioned (UVF) agent core: states merged with contexts, over the TD3 base agent (`BASE_AGENT_CLASS`).

  Args:
    observation_spec: the environment's observation spec [O] (or a 1-element list, as the original).
    action_spec: the environment's bounded action spec [A] (or a 1-element list).
    tf_env: the environment wrapper (`create_maze_env.TFPyEnvironment`); the contexts read its observation spec.
    tf_context: the `Context` class (gin `agent/Context`), called as `tf_context(tf_env=tf_env)`.
    step_cond_fn, reset_episode_cond_fn, reset_env_cond_fn: the `cond_fn` predicates: count the step / end the
      episode (HIRO: `every_n_steps`, n = 500) / reset the environment (HIRO: `every_n_episodes`).
    metrics: kept from the original (unused).
    **base_agent_kwargs: `TD3Agent` arguments (actor_net, critic_net, td_errors_loss, dqda_clipping, ...).
  """

  BASE_AGENT_CLASS: Any = ddpg_agent.TD3Agent
  # Of the base agent, which a subclass of this mixin also derives from (`UvfAgent`, `MetaAgent`).
  actor: Any
  action_spec: Any

  def __init__(self, observation_spec, action_spec, tf_env, tf_context, step_cond_fn=cond_fn.env_transition,
               reset_episode_cond_fn=cond_fn.env_restart, reset_env_cond_fn=cond_fn.false_fn, metrics=None,
               **base_agent_kwargs):
    self._step_cond_fn = step_cond_fn
    self._reset_episode_cond_fn = reset_episode_cond_fn
    self._reset_env_cond_fn = reset_env_cond_fn
    self.metrics = metrics
    self._init_context(tf_env, tf_context)
    self._meta_agent = None
    self.env_observation_spec = _first(observation_spec)
    merged = _merge_specs(self.env_observation_spec, self.context_specs)
    self.BASE_AGENT_CLASS.__init__(self, observation_spec=merged, action_spec=action_spec, **base_agent_kwargs)

  def _init_context(self, tf_env, tf_context):
    if tf_context is None:
      raise ValueError(f'{type(self).__name__} needs tf_context (gin: {type(self).__name__}.tf_context = %CONTEXT).')
    self.tf_context = tf_context(tf_env=tf_env)
    self.compute_rewards = self.tf_context.compute_rewards
    self.sample_contexts = self.tf_context.sample_contexts
    self.gamma_index = self.tf_context.gamma_index
    self.context_specs = self.tf_context.context_specs
    self.context_as_action_specs = self.tf_context.context_as_action_specs

  def set_meta_agent(self, agent=None):
    self._meta_agent = agent

  @property
  def meta_agent(self):
    return self._meta_agent

  @property
  def context_vars(self):
    """Tuple of the current context variables ([C] each)."""
    return self.tf_context.vars

  def merged_states(self, states, contexts=None):
    """states [B, O] ⊕ contexts (list of [B, C]; None: the current context variables, tiled) -> float32 [B, O+C]."""
    states = tf.cast(states, tf.float32)
    if contexts is None:
      contexts = [tf.tile(var[None], [tf.shape(states)[0], 1]) for var in self.context_vars]
    return tf.concat([states] + [tf.cast(c, tf.float32) for c in contexts], -1)

  def merged_state(self, state, context=None):
    """state [O] ⊕ contexts (list of [C]; None: the current context variables) -> float32 [O+C]."""
    context = list(self.context_vars) if context is None else list(context)
    return tf.concat([tf.cast(state, tf.float32)] + [tf.cast(c, tf.float32) for c in context], -1)

  def action(self, state, context=None):
    """The deterministic action of one state under `context` (default: the current context): [O] -> [A]."""
    return self.BASE_AGENT_CLASS.action(self, self.merged_state(state, context))

  def actions(self, states, contexts=None):
    """mu(s ⊕ contexts) for a batch: [B, O] (+ list of [B, C]) -> [B, A] (differentiable)."""
    return self.actor(self.merged_states(states, contexts))

  @gin.configurable('uvf_add_noise_fn')
  def add_noise_fn(self, action_fn, stddev=1.0, debug=False, clip=True, global_step=None, rng=None):
    """`action_fn` with additive Gaussian noise N(0, stddev^2), clipped to the action spec.

    Args:
      action_fn: fn(state [O], context=None) -> action [A].
      stddev: noise standard deviation in action units (HIRO: 1.0 for the low level, META_EXPLORE_NOISE for the
        meta level).
      debug: print the actions before and after the noise (`tf.print`).
      clip: clip the noisy action to the action spec's bounds.
      global_step: None (HIRO), or a counter: stddev decays as max(0.8^(step / 1e6), 0.5) (the original's option).
      rng: the `tf.random.Generator` to draw from (new; default the global generator).

    Returns:
      fn(state, context=None) -> noisy action [A].
    """
    spec = self.action_spec
    minimum = tf.constant(np.asarray(spec.minimum, np.float32))
    maximum = tf.constant(np.asarray(spec.maximum, np.float32))

    def noisy_action_fn(state, context=None):
      action = action_fn(state, context)
      scale = tf.constant(stddev, tf.float32)
      if global_step is not None:
        decay = tf.pow(0.8, tf.cast(global_step, tf.float32) / 1e6)
        scale = scale * tf.maximum(decay, 0.5)
      generator = rng if rng is not None else tf.random.get_global_generator()
      noisy = action + scale * generator.normal(tf.shape(action), dtype=action.dtype)
      if debug:
        tf.print('[add_noise_fn] pre-noise action', action, 'post-noise action', noisy)
      if clip:
        noisy = tf.clip_by_value(noisy, minimum, maximum)
      return noisy

    return noisy_action_fn

  @gin.configurable('uvf_critic_function')
  def critic_function(self, critic_vals, states, critic_fn=None):
    """Q values from the critic outputs: critic_vals float32 [B] (HIRO: identity; `critic_fn` optional, called as
    critic_fn(critic_vals, env_states [B, O], contexts list of [B, C]))."""
    if critic_fn is not None:
      env_states, contexts = self.unmerged_states(states)
      critic_vals = critic_fn(critic_vals, env_states, contexts)
    critic_vals.shape.assert_has_rank(1)
    return critic_vals

  def unmerged_states(self, merged_states):
    """[B, O + sum C] -> (states [B, O], list of contexts [B, C])."""
    num_state_dims = int(tf.TensorShape(self.env_observation_spec.shape)[0])
    states = merged_states[:, :num_state_dims]
    contexts, i = [], num_state_dims
    for spec in self.context_specs:
      size = int(tf.TensorShape(spec.shape)[0])
      contexts.append(merged_states[:, i:i + size])
      i += size
    return states, contexts

  def step_cond_fn(self, *args):
    return self._step_cond_fn(self, *args)

  def reset_episode_cond_fn(self, *args):
    return self._reset_episode_cond_fn(self, *args)

  def reset_env_cond_fn(self, *args):
    return self._reset_env_cond_fn(self, *args)


@gin.configurable
class MetaAgentCore(UvfAgentCore):
  """Meta agent core: its actions are the goals of the low level (the spec of `sub_context`'s goals).

  Args: as `UvfAgentCore`, plus
    sub_context: the low level's `Context` class (gin `%CONTEXT`); an instance is built for its specs only, as the
      original did.
    actions_reg: weight of mean_b sum_{j >= k} |a_b[j]| added to the actor loss (HIRO: 0).
    k: the goal dimensions exempt from `actions_reg` (gin: %SUBGOAL_DIM).
  """

  def __init__(self, observation_spec, action_spec, tf_env, tf_context, sub_context,
               step_cond_fn=cond_fn.env_transition, reset_episode_cond_fn=cond_fn.env_restart,
               reset_env_cond_fn=cond_fn.false_fn, metrics=None, actions_reg=0., k=2, **base_agent_kwargs):
    del action_spec  # The meta level acts in the goal space.
    self._step_cond_fn = step_cond_fn
    self._reset_episode_cond_fn = reset_episode_cond_fn
    self._reset_env_cond_fn = reset_env_cond_fn
    self.metrics = metrics
    self._actions_reg = float(actions_reg)
    self._k = int(k)
    self._init_context(tf_env, tf_context)
    if sub_context is None:
      raise ValueError('MetaAgent needs sub_context (gin: MetaAgent.sub_context = %CONTEXT).')
    self.sub_context = sub_context(tf_env=tf_env)
    self.sub_context_as_action_specs = self.sub_context.context_as_action_specs
    if len(self.sub_context_as_action_specs) != 1:
      raise ValueError('The meta agent acts with exactly one low-level context (the goal); the low Context has '
                       f'{len(self.sub_context_as_action_specs)}.')
    self._meta_agent = None
    self.env_observation_spec = _first(observation_spec)
    merged = _merge_specs(self.env_observation_spec, self.context_specs)
    self.BASE_AGENT_CLASS.__init__(self, observation_spec=merged, action_spec=self.sub_context_as_action_specs,
                                   **base_agent_kwargs)

  @gin.configurable('meta_add_noise_fn')
  def add_noise_fn(self, action_fn, stddev=1.0, debug=False, global_step=None, rng=None):
    """`action_fn` with Gaussian noise N(0, stddev^2) on the goals, clipped to the goal range (see
    `UvfAgentCore.add_noise_fn`; HIRO: stddev = META_EXPLORE_NOISE)."""
    return UvfAgentCore.add_noise_fn.__wrapped__(self, action_fn, stddev=stddev, debug=debug, clip=True,
                                                 global_step=global_step, rng=rng)

  def actor_loss(self, states):
    """TD3's actor loss plus actions_reg * mean_b sum_{j >= k} |mu(s)_b[j]| (the regulariser is 0 in HIRO)."""
    loss = self.BASE_AGENT_CLASS.actor_loss(self, states)
    if self._actions_reg:
      actions = self.actor(states)
      loss += self._actions_reg * tf.reduce_mean(tf.reduce_sum(tf.abs(actions[:, self._k:]), -1), 0)
    return loss


@gin.configurable
class UvfAgent(UvfAgentCore, ddpg_agent.TD3Agent):
  """HIRO's low-level agent: UvfAgentCore over TD3."""

  ACTION_TYPE = 'continuous'

  def __init__(self, *args, **kwargs):
    UvfAgentCore.__init__(self, *args, **kwargs)


@gin.configurable
class MetaAgent(MetaAgentCore, ddpg_agent.TD3Agent):
  """HIRO's high-level agent: MetaAgentCore over TD3."""

  ACTION_TYPE = 'continuous'

  def __init__(self, *args, **kwargs):
    MetaAgentCore.__init__(self, *args, **kwargs)


# The gin names the original registered for these methods, reachable as module attributes as before.
uvf_add_noise_fn = UvfAgentCore.add_noise_fn
uvf_critic_function = UvfAgentCore.critic_function
meta_add_noise_fn = MetaAgentCore.add_noise_fn
