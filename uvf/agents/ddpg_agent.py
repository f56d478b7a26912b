"""TD3 agent of one HIRO level: twin critics, target networks, losses, and the compiled per-level update.

Port of tensorflow/models `research/efficient-hrl/agents/ddpg_agent.py`. `TD3Agent` owns the six networks
(`actor_net`, `critic_net`, `critic_net2` and their `target_` copies) and computes the losses; `uvf/agents/td3_update.py`
performs one training step of a level with them.

`DdpgAgent` (single-critic DDPG) and its gin methods `ddpg_sample_action`, `ddpg_critic_function`,
`ddpg_update_targets` are not used by HIRO and stay placeholders; `TD3Agent` carries what HIRO needs of them.
"""

import collections

import gin
import tensorflow as tf

from uvf.agents import ddpg_networks as networks
from uvf.placeholders import not_built
from uvf.placeholders import placeholder

# Target policy smoothing of TD3 (hard-coded in the original): eps = clip(N(0, 0.2^2), -0.5, 0.5), absolute units.
TARGET_POLICY_NOISE = 0.2
TARGET_POLICY_NOISE_CLIP = 0.5


@gin.configurable
class DdpgAgent(tf.Module):
  """DDPG agent for one level (not used by HIRO, whose levels are `TD3Agent`s; not ported)."""

  def __init__(self, observation_spec, action_spec, actor_net=networks.actor_net, critic_net=networks.critic_net,
               td_errors_loss=tf.compat.v1.losses.huber_loss, dqda_clipping=0., actions_regularizer=0.,
               target_q_clipping=None, residual_phi=0.0, debug_summaries=False):
    del observation_spec, action_spec, actor_net, critic_net, td_errors_loss, dqda_clipping
    del actions_regularizer, target_q_clipping, residual_phi, debug_summaries
    raise NotImplementedError(not_built(f'the RL agent {type(self).__name__}'))


@gin.configurable('ddpg_sample_action')
@placeholder('DdpgAgent.sample_action')
def ddpg_sample_action(self, state, stddev=1.0):
  """DdpgAgent.sample_action: the actor's action plus Gaussian noise of `stddev` (not ported)."""


@gin.configurable('ddpg_critic_function')
@placeholder('DdpgAgent.critic_function')
def ddpg_critic_function(self, critic_values, states, weights=None):
  """DdpgAgent.critic_function: reduces (optionally weighted) critic values to one Q value (not ported)."""


@gin.configurable('ddpg_update_targets')
@placeholder('DdpgAgent.update_targets')
def ddpg_update_targets(self, tau=1.0):
  """DdpgAgent.update_targets: soft update of the target networks with rate `tau` (not ported)."""


def _single_spec(spec, what):
  """The original passed specs as 1-element lists (`observation_spec[0]`); accept that or a bare spec."""
  if isinstance(spec, (list, tuple)):
    if len(spec) != 1:
      raise ValueError(f'{what} must be a spec or a list of exactly one spec, got {len(spec)} specs.')
    spec = spec[0]
  shape = tf.TensorShape(spec.shape)
  if shape.rank != 1 or shape.num_elements() is None:
    raise ValueError(f'{what} must describe a fixed-size vector, got shape {shape}.')
  return spec


@gin.configurable
class TD3Agent(DdpgAgent):
  """TD3 agent for one level: actor mu(s), twin critics Q1, Q2, and their target copies.

  Shapes: B = batch size, O = state dim (the merged observation + contexts of the level), A = action dim.
  All tensors are float32. The caller merges observations and contexts and supplies rewards and discounts (with
  gamma already multiplied in).
  """

  ACTOR_NET_SCOPE = 'actor_net'
  CRITIC_NET_SCOPE = 'critic_net'
  CRITIC_NET2_SCOPE = 'critic_net2'
  TARGET_ACTOR_NET_SCOPE = 'target_actor_net'
  TARGET_CRITIC_NET_SCOPE = 'target_critic_net'
  TARGET_CRITIC_NET2_SCOPE = 'target_critic_net2'

  def __init__(self, observation_spec, action_spec, actor_net=networks.actor_net, critic_net=networks.critic_net,
               td_errors_loss=tf.compat.v1.losses.huber_loss, dqda_clipping=0., actions_regularizer=0.,
               target_q_clipping=None, residual_phi=0.0, debug_summaries=False, target_policy_noise=TARGET_POLICY_NOISE,
               target_policy_noise_clip=TARGET_POLICY_NOISE_CLIP, scope=None, seed=None):
    """Builds the six networks (variables created now, targets not yet copied: see `copy_to_targets`).

    Args:
      observation_spec: spec (or 1-element list of specs, as the original) of the merged state, shape [O].
      action_spec: bounded spec (or 1-element list) of the action, shape [A], with `minimum` / `maximum`.
      actor_net: factory `(state_dim, action_spec, scope=...) -> ActorNetwork` (gin `ddpg_actor_net`).
      critic_net: factory `(state_dim, action_dim, scope=...) -> CriticNetwork` (gin `ddpg_critic_net`).
      td_errors_loss: `(labels, predictions) -> scalar` loss on the TD errors; default `tf.losses.huber_loss`
        (HIRO binds delta 1.0), mean over all elements.
      dqda_clipping: if > 0, dQ/da is clipped element-wise to +-dqda_clipping in the actor loss (HIRO: 0).
      actions_regularizer: weight of ||mu(s)||_F (Frobenius norm over the batch) added to the actor loss (HIRO: 0).
      target_q_clipping: None or (low, high) bounds on the TD targets (HIRO: None).
      residual_phi: must be 0 (HIRO's value); the residual-gradient variant is not ported.
      debug_summaries: if True, the critic loss writes scalar summaries of targets, Q values and TD errors (to the
        default summary writer, if any). The original wrote histograms as well.
      target_policy_noise: std of TD3's target smoothing noise, absolute action units (original: 0.2, hard-coded).
      target_policy_noise_clip: the noise is clipped to +-this (original: 0.5, hard-coded). The smoothed target
        action is not clipped to the action bounds, as in the original.
      scope: TF1 variable scope prefix ('uvf_agent' or 'meta_agent' in HIRO). None: the current `tf.name_scope`,
        as the original used the enclosing variable scope.
      seed: int seed of the agent's random generator (target smoothing noise); None: non-deterministic.

    Raises:
      ValueError: for a bad spec, dqda_clipping < 0, residual_phi != 0, a bad target_q_clipping or noise setting.
    """
    if scope is None:
      scope = tf.get_current_name_scope()
    scope = scope.strip('/')
    tf.Module.__init__(self, name=scope.replace('/', '_') or 'td3_agent')
    self._scope = scope
    self._observation_spec = _single_spec(observation_spec, 'observation_spec')
    self._action_spec = _single_spec(action_spec, 'action_spec')
    self._state_dim = int(tf.TensorShape(self._observation_spec.shape)[0])
    self._num_action_dims = int(tf.TensorShape(self._action_spec.shape)[0])
    if dqda_clipping < 0:
      raise ValueError(f'dqda_clipping must be >= 0 (0 disables clipping), got {dqda_clipping}.')
    if residual_phi != 0.0:
      raise ValueError(f'residual_phi={residual_phi} is not supported by this port; HIRO uses 0.0 (the default).')
    if target_q_clipping is not None and (len(target_q_clipping) != 2 or target_q_clipping[0] > target_q_clipping[1]):
      raise ValueError(f'target_q_clipping must be None or (low, high) with low <= high, got {target_q_clipping!r}.')
    if target_policy_noise < 0 or target_policy_noise_clip < 0:
      raise ValueError('target_policy_noise and target_policy_noise_clip must be >= 0, got '
                       f'{target_policy_noise} and {target_policy_noise_clip}.')
    self._td_errors_loss = td_errors_loss
    self._dqda_clipping = float(dqda_clipping)
    self._actions_regularizer = float(actions_regularizer)
    self._target_q_clipping = target_q_clipping
    self._debug_summaries = debug_summaries
    self._target_policy_noise = float(target_policy_noise)
    self._target_policy_noise_clip = float(target_policy_noise_clip)

    def build_actor(net_scope):
      return actor_net(self._state_dim, self._action_spec, scope=self._join(net_scope))

    def build_critic(net_scope):
      return critic_net(self._state_dim, self._num_action_dims, scope=self._join(net_scope))

    # Creation order of the original graph: actor, critic, critic2 on the first calls, then the targets.
    self._actor_net = build_actor(self.ACTOR_NET_SCOPE)
    self._critic_net = build_critic(self.CRITIC_NET_SCOPE)
    self._critic_net2 = build_critic(self.CRITIC_NET2_SCOPE)
    self._target_actor_net = build_actor(self.TARGET_ACTOR_NET_SCOPE)
    self._target_critic_net = build_critic(self.TARGET_CRITIC_NET_SCOPE)
    self._target_critic_net2 = build_critic(self.TARGET_CRITIC_NET2_SCOPE)
    if seed is None:
      self._rng = tf.random.Generator.from_non_deterministic_state()
    else:
      self._rng = tf.random.Generator.from_seed(seed)

  def _join(self, net_scope):
    return f'{self._scope}/{net_scope}' if self._scope else net_scope

  # ------------------------------------------------------------------------------------------------------------------
  # Specs, networks and variables.

  @property
  def observation_spec(self):
    return self._observation_spec

  @property
  def action_spec(self):
    return self._action_spec

  @property
  def scope(self):
    """TF1 variable scope prefix of the agent, e.g. 'uvf_agent' ('' for none)."""
    return self._scope

  @property
  def rng(self):
    """The agent's `tf.random.Generator` (target smoothing noise); checkpoint it for an exact restart."""
    return self._rng

  @property
  def networks(self):
    """OrderedDict {net scope name: network}: actor_net, critic_net, critic_net2, target_actor_net, ...2."""
    return collections.OrderedDict([(self.ACTOR_NET_SCOPE, self._actor_net), (self.CRITIC_NET_SCOPE, self._critic_net),
                                    (self.CRITIC_NET2_SCOPE, self._critic_net2),
                                    (self.TARGET_ACTOR_NET_SCOPE, self._target_actor_net),
                                    (self.TARGET_CRITIC_NET_SCOPE, self._target_critic_net),
                                    (self.TARGET_CRITIC_NET2_SCOPE, self._target_critic_net2)])

  def get_trainable_actor_vars(self):
    """List of the actor's variables (the actor optimizer's var list), in the original order."""
    return self._actor_net.ordered_variables()

  def get_trainable_critic_vars(self):
    """List of both critics' variables, critic_net then critic_net2 (one optimizer trains both, as the original)."""
    return self._critic_net.ordered_variables() + self._critic_net2.ordered_variables()

  def get_actor_vars(self):
    """Same as `get_trainable_actor_vars` (the original's model variables; no non-trainable ones here)."""
    return self.get_trainable_actor_vars()

  def get_target_vars(self):
    """List of the target networks' variables, paired element-wise with actor vars + critic vars."""
    return (self._target_actor_net.ordered_variables() + self._target_critic_net.ordered_variables() +
            self._target_critic_net2.ordered_variables())

  def variables_by_tf1_name(self):
    """OrderedDict {original TF1 variable name: tf.Variable} of all six networks, e.g.
    'uvf_agent/actor_net/states/states_1/weights' -> [O, 300] variable."""
    names = collections.OrderedDict()
    for net in self.networks.values():
      names.update(net.variables_by_tf1_name())
    return names

  # ------------------------------------------------------------------------------------------------------------------
  # Forward passes.

  def _validate(self, tensor, dim, what):
    tensor = tf.convert_to_tensor(tensor)
    if not tensor.shape.is_compatible_with([None, dim]):
      raise ValueError(f'{what} must have shape [batch, {dim}], got {tensor.shape}.')
    if not tensor.dtype.is_floating:
      raise ValueError(f'{what} must be a float tensor, got {tensor.dtype.name}.')
    return tensor

  def _validate_states(self, states, what='states'):
    return self._validate(states, self._state_dim, what)

  def _validate_actions(self, actions, what='actions'):
    return self._validate(actions, self._num_action_dims, what)

  def actor(self, states):
    """mu(s): states float32 [B, O] -> actions float32 [B, A] within the action bounds (differentiable)."""
    return self._actor_net(self._validate_states(states))

  def action(self, state):
    """Deterministic action of one state: float32 [O] -> [A] (no gradient)."""
    state = tf.convert_to_tensor(state)
    return tf.stop_gradient(self.actor(state[None]))[0]

  def critic(self, states, actions):
    """(Q1(s, a), Q2(s, a)): states float32 [B, O], actions float32 [B, A] -> two float32 [B]."""
    states, actions = self._validate_states(states), self._validate_actions(actions)
    return self._critic_net(states, actions), self._critic_net2(states, actions)

  def target_actor(self, states):
    """mu'(s) of the target actor: float32 [B, O] -> [B, A], gradient stopped."""
    return tf.stop_gradient(self._target_actor_net(self._validate_states(states)))

  def target_critics(self, states, actions):
    """(Q1'(s, a), Q2'(s, a)) of the target critics: [B, O], [B, A] -> two float32 [B], gradients stopped."""
    states, actions = self._validate_states(states), self._validate_actions(actions)
    return (tf.stop_gradient(self._target_critic_net(states, actions)),
            tf.stop_gradient(self._target_critic_net2(states, actions)))

  def target_noise(self, batch_size):
    """The target policy smoothing noise eps = clip(N(0, noise^2), +-noise_clip): float32 [batch_size, A], drawn from
    the agent's generator."""
    shape = tf.stack([tf.cast(batch_size, tf.int32), self._num_action_dims])
    noise = self._rng.normal(shape, stddev=self._target_policy_noise, dtype=tf.float32)
    return tf.clip_by_value(noise, -self._target_policy_noise_clip, self._target_policy_noise_clip)

  def target_values(self, next_states, target_noise=None):
    """min(Q1', Q2')(s', mu'(s') + eps): [B, O] -> float32 [B].

    eps: `target_noise` (float32 [B, A]) if given, else drawn by `target_noise(B)`. The smoothed action is not
    clipped to the action bounds (as the original).
    """
    target_actions = self.target_actor(next_states)
    if target_noise is None:
      target_noise = self.target_noise(tf.shape(target_actions)[0])
    q1, q2 = self.target_critics(next_states, target_actions + target_noise)
    return tf.minimum(q1, q2)

  def critic_function(self, critic_values, states):
    """Reduces critic outputs to Q values for the actor loss: float32 [B] -> [B] (identity; hook for subclasses,
    as the original's `critic_function` / `uvf_critic_function`)."""
    del states
    return critic_values

  # ------------------------------------------------------------------------------------------------------------------
  # Losses.

  def critic_loss(self, states, actions, rewards, discounts, next_states, target_noise=None):
    """TD3 critic loss, mean over both critics (the original `DdpgAgent.critic_loss`, which `TD3Agent` inherits).

    y = r + discounts * min(Q1', Q2')(s', mu'(s') + eps), the same target for both critics;
    loss = td_errors_loss([y, y], [Q1(s, a), Q2(s, a)]): with the default Huber loss (delta from gin), the mean over
    the 2 * B elements.

    Args:
      states: float32 [B, O], merged states s.
      actions: float32 [B, A], actions taken (the relabelled goals at the meta level).
      rewards: float32 [B], rewards r (already scaled).
      discounts: float32 [B], gamma times the context discounts (the caller multiplies gamma in; HIRO never uses the
        stored episode discounts).
      next_states: float32 [B, O], merged next states s'.
      target_noise: None (drawn here) or float32 [B, A], the target policy smoothing noise (`target_noise`).

    Returns:
      float32 [] loss.
    """
    states, actions = self._validate_states(states), self._validate_actions(actions)
    next_states = self._validate_states(next_states, 'next_states')
    target_q_values = self.target_values(next_states, target_noise)
    td_targets = target_q_values * discounts + rewards
    if self._target_q_clipping is not None:
      td_targets = tf.clip_by_value(td_targets, self._target_q_clipping[0], self._target_q_clipping[1])
    td_targets = tf.stack([td_targets, td_targets])  # the original's (min, min) tuple, broadcast to [2, B]
    q_values = tf.stack(self.critic(states, actions))  # [2, B]
    if self._debug_summaries:
      _td_error_summaries(target_q_values, q_values, td_targets, td_targets - q_values)
    return self._td_errors_loss(td_targets, q_values)

  def actor_loss(self, states):
    """DDPG actor loss: mean over B x A of (stop_gradient(a + dQ1/da) - a)^2 with a = mu(s).

    Its gradient with respect to the actor's weights is -dQ1/da * da/dtheta / (B * A) (dQ/da clipped to
    +-dqda_clipping if set); plus actions_regularizer * ||a||_F.

    Args:
      states: float32 [B, O], merged states.

    Returns:
      float32 [] loss.
    """
    states = self._validate_states(states)
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      actions = self._actor_net(states)
      tape.watch(actions)
      q_values = self.critic_function(self._critic_net(states, actions), states)
    dqda = tape.gradient(q_values, actions)
    if self._dqda_clipping > 0:
      dqda = tf.clip_by_value(dqda, -self._dqda_clipping, self._dqda_clipping)
    loss = tf.reduce_mean(tf.math.squared_difference(tf.stop_gradient(dqda + actions), actions))
    if self._actions_regularizer:
      loss += self._actions_regularizer * tf.norm(actions)
    return loss

  # ------------------------------------------------------------------------------------------------------------------
  # Target networks.

  @gin.configurable('td3_update_targets')
  def update_targets(self, tau=1.0):
    """Soft update of the target actor and both target critics: w' <- (1 - tau) w' + tau w.

    Args:
      tau: float in [0, 1]. The default 1.0 (the original's) is a hard copy; HIRO's gin binds 0.005 for the
        periodic update. `Td3Update` reads that binding once, at its construction.

    Raises:
      ValueError: if tau is outside [0, 1].
    """
    tau = float(tau)
    if not 0.0 <= tau <= 1.0:
      raise ValueError(f'tau must be in [0, 1], got {tau}.')
    sources = self.get_trainable_actor_vars() + self.get_trainable_critic_vars()
    for source, target in zip(sources, self.get_target_vars()):
      if tau == 1.0:
        target.assign(source)
      else:
        target.assign((1.0 - tau) * target + tau * source)

  def copy_to_targets(self):
    """Hard copy of the actor and critics into their targets (the original's `update_targets(1.0)` at start)."""
    self.update_targets(1.0)


def _td_error_summaries(target_q_values, q_values, td_targets, td_errors):
  """Scalar summaries of the original's `gen_debug_td_error_summaries` (its histograms are left out)."""
  with tf.name_scope('td_errors'):
    for name, value in [('td_targets', td_targets), ('q_values', q_values), ('target_q_values', target_q_values),
                        ('td_errors', td_errors)]:
      for stat, fn in [('mean', tf.reduce_mean), ('max', tf.reduce_max), ('min', tf.reduce_min)]:
        tf.summary.scalar(f'{name}/{stat}', fn(value))
    tf.summary.scalar('td_errors/mean_abs', tf.reduce_mean(tf.abs(td_errors)))
