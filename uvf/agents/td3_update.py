"""The compiled per-level TD3 update of HIRO: one training step of one level as `train_uvf` built it.

Port of the train ops of `research/efficient-hrl/agents/ddpg_agent.py` and `train_utils.py` (the critic and actor
train ops and the periodic target update): the critic Adam step on both critics, the delayed actor step and the
periodic soft target update, with its counters in `tf.Variable`s so that it compiles once. The losses are the
agent's (`uvf/agents/ddpg_agent.py`, `TD3Agent`).
"""

import gin
import numpy as np
import tensorflow as tf

from uvf.agents import ddpg_agent  # noqa: F401  (the type of `agent`, docs/design/architecture.md's layers)


def td3_target_tau():
  """The gin-bound `td3_update_targets.tau` in the current gin scope (1.0, the original default, if unbound)."""
  return float(gin.get_bindings('td3_update_targets').get('tau', 1.0))


@gin.configurable(denylist=['agent', 'critic_optimizer', 'actor_optimizer', 'num_updates'])
class Td3Update(tf.Module):
  """One training step of one level, compiled: the original's critic and actor train ops and periodic target update.

  Per call, with n = num_updates before the call:
    1. critic loss (both critics) and actor loss * [n % target_update_period == 0] are computed from the current
       weights, with their gradients (on the delayed calls the actor's gradients are exactly zero and are not
       computed);
    2. critic optimizer step on both critics; actor optimizer step on the actor, on every call (the original's
       quirk: on the other calls the gradient is zero, yet Adam's moments still move the weights), or only when the
       actor loss is on if `skip_delayed_actor_step` (a deviation);
    3. num_updates += 1 (it was the critic's `global_step`);
    4. target counter += 1; if it is a multiple of target_update_period: soft target update with tau (tf_agents'
       `periodically`: targets move on the 2nd, 4th, ... call).
  The original's graph left the order of the actor's read of n and the critic's increment, and of the two train ops,
  unspecified; this is one of the orders it allowed (the counter's value at the start of the call; both losses on
  the weights before the call).

  Counters are int64 `tf.Variable`s and all settings are Python constants fixed at construction, so the step is
  traced once (after the first call, which also creates the optimizers' slots).
  """

  def __init__(self, agent, critic_optimizer, actor_optimizer, target_update_period=2, tau=None, num_updates=None,
               skip_delayed_actor_step=False, jit_compile=False, name='td3_update'):
    """Builds the step.

    Args:
      agent: the level's `ddpg_agent.TD3Agent`.
      critic_optimizer, actor_optimizer: optimizers with `apply_gradients(grads_and_vars)`; HIRO's are the gin-built
        `tf.compat.v1.train.AdamOptimizer`s (epsilon 1e-8; critic lr 1e-3, actor lr 1e-4).
      target_update_period: int >= 1, period of the actor and target updates (HIRO: 2).
      tau: soft target update rate in [0, 1]; None: the gin binding `td3_update_targets.tau` (HIRO: 0.005).
      num_updates: int64 scalar `tf.Variable` counting this level's updates (the original's `num_updates` /
        `num_meta_updates`); None: one is created, named `<name>/num_updates`.
      skip_delayed_actor_step: False (original): the actor optimizer steps on every call, with a zeroed loss on
        the delayed calls. True (deviation): the actor optimizer runs only when the actor loss is on.
      jit_compile: compile the step with XLA.
      name: module name, and the name scope of the counters.

    Raises:
      ValueError: for a bad period, tau or counter.
    """
    super().__init__(name=name)
    if not isinstance(target_update_period, (int, np.integer)) or target_update_period < 1:
      raise ValueError(f'target_update_period must be an int >= 1, got {target_update_period!r}.')
    tau = td3_target_tau() if tau is None else float(tau)
    if not 0.0 <= tau <= 1.0:
      raise ValueError(f'tau must be in [0, 1], got {tau}.')
    self._agent = agent
    self._critic_optimizer = critic_optimizer
    self._actor_optimizer = actor_optimizer
    self._period = int(target_update_period)
    self._tau = tau
    self._skip_delayed_actor_step = bool(skip_delayed_actor_step)
    if num_updates is None:
      num_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name=f'{name}/num_updates')
    if num_updates.dtype != tf.int64 or num_updates.shape.rank != 0:
      raise ValueError(f'num_updates must be an int64 scalar tf.Variable, got {num_updates!r}.')
    self._num_updates = num_updates
    self._target_counter = tf.Variable(0, dtype=tf.int64, trainable=False, name=f'{name}/update_targets/counter')
    self._critic_vars = agent.get_trainable_critic_vars()
    self._actor_vars = agent.get_trainable_actor_vars()
    self._step = tf.function(self._update, jit_compile=bool(jit_compile))

  @property
  def num_updates(self):
    """int64 scalar variable: updates done (the original's `num_updates` / `num_meta_updates`)."""
    return self._num_updates

  @property
  def target_update_counter(self):
    """int64 scalar variable: calls counted by the periodic target update (not in the original's checkpoints
    under a stable name; ignore it when loading one)."""
    return self._target_counter

  @property
  def tau(self):
    return self._tau

  @property
  def step_function(self):
    """The `tf.function` behind `__call__` (e.g. for `experimental_get_tracing_count`)."""
    return self._step

  def __call__(self, states, actions, rewards, discounts, next_states, target_noise=None):
    """One update. Arguments as `TD3Agent.critic_loss` (float32 [B, O], [B, A], [B], [B], [B, O], None or [B, A]).

    Pass `target_noise` (drawn by `agent.target_noise(B)` outside a replica context) to make the update independent
    of the distribution strategy: a generator used inside `strategy.run` draws a per-replica stream.

    Returns:
      dict of float32 []: 'critic_loss', 'actor_loss' (the loss as applied: zero on the delayed calls).
    """
    return self._step(states, actions, rewards, discounts, next_states, target_noise)

  def _update(self, states, actions, rewards, discounts, next_states, target_noise=None):
    """The body of the step, traced by `tf.function` (see the class docstring)."""
    actor_on = tf.equal(self._num_updates % self._period, 0)
    with tf.GradientTape(watch_accessed_variables=False) as critic_tape:
      critic_tape.watch(self._critic_vars)
      critic_loss = self._agent.critic_loss(states, actions, rewards, discounts, next_states, target_noise)
      critic_loss = tf.debugging.check_numerics(critic_loss, 'critic loss is inf or nan')
    critic_grads = critic_tape.gradient(critic_loss, self._critic_vars)

    def actor_loss_and_grads():
      with tf.GradientTape(watch_accessed_variables=False) as actor_tape:
        actor_tape.watch(self._actor_vars)
        loss = tf.debugging.check_numerics(self._agent.actor_loss(states), 'actor loss is inf or nan')
      return [loss] + actor_tape.gradient(loss, self._actor_vars)

    def delayed():
      # The original multiplied the actor loss by 0 on these calls: its gradients are exactly zero, so they need
      # not be computed (the optimizer still steps with them below, as the original's did).
      return [tf.zeros([])] + [tf.zeros_like(v) for v in self._actor_vars]

    actor_loss, *actor_grads = tf.cond(actor_on, actor_loss_and_grads, delayed)
    self._critic_optimizer.apply_gradients(zip(critic_grads, self._critic_vars))
    if self._skip_delayed_actor_step:
      if actor_on:  # autograph: a graph conditional
        self._actor_optimizer.apply_gradients(zip(actor_grads, self._actor_vars))
    else:
      self._actor_optimizer.apply_gradients(zip(actor_grads, self._actor_vars))
    self._num_updates.assign_add(1)
    self._target_counter.assign_add(1)
    if self._target_counter % self._period == 0:  # autograph: a graph conditional
      self._agent.update_targets(self._tau)
    return {'critic_loss': critic_loss, 'actor_loss': actor_loss}
