"""State representation and goal inverse dynamics of HIRO (original: agent.py `StatePreprocess`,
`state_preprocess_net`, `action_embed_net`, `InverseDynamics` in tensorflow/models research/efficient-hrl; Nachum et
al. 2019, "Near-Optimal Representation Learning for Hierarchical Reinforcement Learning").

`StatePreprocess` maps observations to the space the goals live in: the goal transition g + s_repr - s'_repr and the
low-level reward -||s_repr + g - s'_repr|| at collection and training time, and the off-policy correction's
candidates and per-step goals all use s_repr = StatePreprocess(s).

* `trainable=False` (hiro_orig, hiro_xy): the identity followed by the first `ndims` dimensions (s[:15] or s[:2]).
* `trainable=True` (hiro_repr, "Near-Optimal Representation Learning for Hierarchical RL", Nachum et al. 2019):
  s_repr = phi(s)[..., :ndims], phi the network `state_preprocess_net`; phi and the action embedding psi
  (`action_embed_net`) are trained on meta transitions by `loss` (see its docstring), with `RepresentationUpdate`
  (the original's `repr/AdamOptimizer`, lr 1e-4), once per low-level update.

Networks (the original's TF1 names under the enclosing scope `state_preprocess`, as the original's templates named
them; note `state_process_net`):
  phi(s) = value(relu(states_2(relu(states_1(s * m))))): `state_process_net/states/states_<i>`, `.../value`;
  psi(a_0..a_{c-1}, s) = value(relu(hidden_2(relu(hidden_1([a_0, ..., a_{c-1}, s * m]))))):
    `action_embed_net/hidden/hidden_<i>`, `.../value`,
with m zeroing the last observation dim (time, `zero_time=True`) and, if `images`, dims 0 and 1 (x, y). Hidden
layers: W ~ U(+-1/sqrt(fan_in)) (slim's variance scaling, factor 1/3, FAN_IN, uniform), b = 0; `value`: linear,
W ~ U(+-0.003), b = 0 (the original's arg_scope set only the weights initialiser, so slim's zero biases applied).
"""

import collections
from typing import Any

import gin
import numpy as np
import tensorflow as tf

from uvf import off_policy_correction
from uvf.agents import ddpg_networks

# The representation loss (agent.py StatePreprocess.loss): fn(z) = TAU * sum_j huber_kappa(z_j).
TAU = 2.0
HUBER_KAPPA = 0.1
# Rows of the `all_embed` memory of recent next-state embeddings.
MEMORY_SIZE = 1024
# Index i of the c steps of a meta transition is drawn with weight INDEX_DISCOUNT^i, the last one's divided by
# (1 - INDEX_DISCOUNT).
INDEX_DISCOUNT = 0.99


def network_factory(fn):
  """Marks a gin factory that builds a network from input sizes (as opposed to a function of the states)."""
  fn.builds_network = True
  return fn


def _is_network_factory(fn):
  return bool(getattr(fn, 'builds_network', False))


def _check_layers(name, layers):
  layers = tuple(layers or ())
  if not all(isinstance(n, (int, np.integer)) and n > 0 for n in layers):
    raise ValueError(f'{name} must be a sequence of positive layer sizes, got {layers!r}.')
  return layers


def _input_mask(dim, zero_time, images):
  """float32 [dim] multiplier of the state input: 0 at the last dim if zero_time, at dims 0 and 1 if images."""
  mask = np.ones([dim], np.float32)
  if images:
    if dim < 2:
      raise ValueError(f'images masks dims 0 and 1 (x, y), but the input has only {dim} dims.')
    mask[:2] = 0.0
  if zero_time:
    mask[-1] = 0.0
  return tf.constant(mask) if (images or zero_time) else None


def _dense(scope, fan_in, units, activation, final):
  """One slim `fully_connected` layer with the original's initialisers (`ddpg_networks.Dense`): hidden weights
  U(+-1/sqrt(fan_in)), output weights U(+-0.003), biases 0."""
  weights = ddpg_networks.final_weights([fan_in, units]) if final else ddpg_networks.hidden_weights(fan_in, units)
  return ddpg_networks.Dense(scope, weights, tf.zeros([units], tf.float32), activation)


class _EmbeddingNetwork(tf.Module):
  """MLP `<scope>/<stack>/<stack>_<i>` (activation) then the linear `<scope>/value`, on 2-D inputs [N, input_dim]."""

  def __init__(self, scope, stack_name, input_dim, hidden_layers, num_output_dims, activation_fn):
    super().__init__(name=scope.replace('/', '_'))
    if not isinstance(num_output_dims, (int, np.integer)) or num_output_dims < 1:
      raise ValueError(f'num_output_dims must be a positive int, got {num_output_dims!r}.')
    self._scope = scope
    self.input_dim, self.output_dim = int(input_dim), int(num_output_dims)
    layers, fan_in = [], self.input_dim
    for i, units in enumerate(_check_layers('hidden layers', hidden_layers), start=1):
      layers.append(_dense(f'{scope}/{stack_name}/{stack_name}_{i}', fan_in, units, activation_fn, final=False))
      fan_in = units
    layers.append(_dense(f'{scope}/value', fan_in, self.output_dim, None, final=True))
    self._layers = layers

  @property
  def scope(self):
    return self._scope

  def _mlp(self, x):
    for layer in self._layers:
      x = layer(x)
    return x

  def variables_by_tf1_name(self):
    """OrderedDict {TF1 name: variable} in the original's creation order."""
    return collections.OrderedDict(pair for layer in self._layers for pair in layer.named_variables())

  def ordered_variables(self):
    return list(self.variables_by_tf1_name().values())


class StatePreprocessNetwork(_EmbeddingNetwork):
  """phi: states [..., state_dim] (any leading dims) -> float32 [..., num_output_dims]."""

  def __init__(self, state_dim, scope='state_process_net', num_output_dims=2, states_hidden_layers=(100,),
               activation_fn=tf.nn.relu, zero_time=True, images=False):
    super().__init__(scope, 'states', state_dim, states_hidden_layers, num_output_dims, activation_fn)
    self._mask = _input_mask(self.input_dim, zero_time, images)

  def __call__(self, states):
    states = tf.cast(states, tf.float32)
    flat = tf.reshape(states, [-1, self.input_dim])
    if self._mask is not None:
      flat = flat * self._mask
    out = self._mlp(flat)
    return tf.reshape(out, tf.concat([tf.shape(states)[:-1], [self.output_dim]], 0))


class ActionEmbedNetwork(_EmbeddingNetwork):
  """psi: flattened actions [B, action_dim] (and states [B, state_dim]) -> float32 [B, num_output_dims] ([B] if
  num_output_dims == 1, as the original)."""

  def __init__(self, action_dim, state_dim=None, scope='action_embed_net', num_output_dims=2, hidden_layers=(400, 300),
               activation_fn=tf.nn.relu, zero_time=True, images=False):
    action_dim, state_dim = int(action_dim), (None if state_dim is None else int(state_dim))
    super().__init__(scope, 'hidden', action_dim + (state_dim or 0), hidden_layers, num_output_dims, activation_fn)
    self.action_dim, self.state_dim = action_dim, state_dim
    self._mask = None if state_dim is None else _input_mask(self.state_dim, zero_time, images)

  def __call__(self, actions, states=None):
    x = tf.cast(actions, tf.float32)
    if (states is None) != (self.state_dim is None):
      raise ValueError('action_embed_net was built ' + ('without' if self.state_dim is None else 'with') +
                       ' a state input; call it accordingly.')
    if states is not None:
      states = tf.cast(states, tf.float32)
      if self._mask is not None:
        states = states * self._mask
      x = tf.concat([x, states], -1)
    out = self._mlp(x)
    return out[:, 0] if self.output_dim == 1 else out


@gin.configurable(denylist=['state_dim', 'scope'])
@network_factory
def state_preprocess_net(state_dim, scope='state_process_net', num_output_dims=2, states_hidden_layers=(100,),
                         normalizer_fn=None, activation_fn=tf.nn.relu, zero_time=True, images=False):
  """Builds phi, a `StatePreprocessNetwork` (gin `state_preprocess_net`; hiro_repr binds hidden (100, 100) and
  num_output_dims %SUBGOAL_DIM). The original's `states` argument became `state_dim` (the observation size O); the
  hyper-parameters and their defaults are the original's. `normalizer_fn` must be None (HIRO's value)."""
  if normalizer_fn is not None:
    raise ValueError(f'normalizer_fn={normalizer_fn!r} is not supported by this port; HIRO binds None (the default).')
  return StatePreprocessNetwork(state_dim, scope=scope, num_output_dims=num_output_dims,
                                states_hidden_layers=states_hidden_layers, activation_fn=activation_fn,
                                zero_time=zero_time, images=images)


@gin.configurable(denylist=['action_dim', 'state_dim', 'scope'])
@network_factory
def action_embed_net(action_dim, state_dim=None, scope='action_embed_net', num_output_dims=2, hidden_layers=(400, 300),
                     normalizer_fn=None, activation_fn=tf.nn.relu, zero_time=True, images=False):
  """Builds psi, an `ActionEmbedNetwork` (gin `action_embed_net`). The original's `actions` and `states` arguments
  became their sizes: `action_dim` = c * A (the flattened actions of a meta transition) and `state_dim` = O (None:
  no state input). `normalizer_fn` must be None."""
  if normalizer_fn is not None:
    raise ValueError(f'normalizer_fn={normalizer_fn!r} is not supported by this port; HIRO binds None (the default).')
  return ActionEmbedNetwork(action_dim, state_dim=state_dim, scope=scope, num_output_dims=num_output_dims,
                            hidden_layers=hidden_layers, activation_fn=activation_fn, zero_time=zero_time,
                            images=images)


def huber(x, kappa=HUBER_KAPPA):
  """The original's huber: (0.5 x^2 if |x| <= kappa else kappa (|x| - kappa / 2)) / kappa, element-wise."""
  ax = tf.abs(x)
  return tf.where(ax <= kappa, 0.5 * tf.square(x), kappa * (ax - 0.5 * kappa)) / kappa


def index_probabilities(num_steps, discount=INDEX_DISCOUNT):
  """float64 [num_steps]: P(i) proportional to discount^i, the last weight divided by (1 - discount)."""
  weights = discount**np.arange(num_steps, dtype=np.float64)
  weights[-1] /= 1.0 - discount
  return weights / weights.sum()


@gin.configurable()
class StatePreprocess(tf.Module):
  """The state representation in goal space: s_repr = net(s)[..., :ndims].

  Args:
    trainable: False (hiro_orig, hiro_xy): `state_preprocess_net` is a function of the states applied as given
      (default the identity) and nothing is trained. True (hiro_repr): `state_preprocess_net` and `action_embed_net`
      are the network factories (gin `@state_preprocess_net`, `@action_embed_net`); `build` creates the networks.
    state_preprocess_net, action_embed_net: see `trainable`.
    ndims: None (all dims) or the number of leading dims kept (gin: %SUBGOAL_DIM).
  New args:
    scope: the TF1 scope of the variables; None: the enclosing `tf.name_scope` ('state_preprocess' in
      `build.build_agents`), as the original used the enclosing variable scope.
    seed: None (non-deterministic) or an int seeding the loss's index sampling.

  Build with `build(state_dim, action_dim, num_steps)` before use when trainable (`build.build_agents` does).
  """

  STATE_PREPROCESS_NET_SCOPE = 'state_process_net'
  ACTION_EMBED_NET_SCOPE = 'action_embed_net'

  def __init__(self, trainable=False, state_preprocess_net=lambda states: states,
               action_embed_net=lambda actions, *args, **kwargs: actions, ndims=None, scope=None, seed=None):
    super().__init__(name='state_preprocess')
    self.trainable = bool(trainable)
    if scope is None:
      scope = tf.get_current_name_scope()
    self._scope = scope.strip('/')
    self._ndims = ndims
    factories = (_is_network_factory(state_preprocess_net), _is_network_factory(action_embed_net))
    if self.trainable and not all(factories):
      raise ValueError('StatePreprocess.trainable = True needs the network factories: StatePreprocess.'
                       'state_preprocess_net = @state_preprocess_net and .action_embed_net = @action_embed_net '
                       '(context/configs/hiro_repr.gin).')
    if not self.trainable and factories[0]:
      raise ValueError('StatePreprocess.state_preprocess_net = @state_preprocess_net needs '
                       'StatePreprocess.trainable = True (an untrained network is not supported).')
    self._state_preprocess_net = state_preprocess_net
    self._action_embed_net = action_embed_net
    self._phi: Any = None
    self._psi: Any = None
    self._all_embed: Any = None
    self._num_steps: Any = None
    self._rng: Any = None
    self._seed = seed

  @property
  def ndims(self):
    return self._ndims

  @property
  def built(self):
    """True when the representation can be used (always when not trainable)."""
    return not self.trainable or self._phi is not None

  def build(self, state_dim, action_dim, num_steps):
    """Creates the networks, the `all_embed` memory and the sampling generator (trainable only; else a no-op).

    Args:
      state_dim: O, the observation size.
      action_dim: A, the low-level action size.
      num_steps: c, the low-level steps per meta transition (the low Context's meta_action_every_n).
    """
    if not self.trainable or self._phi is not None:
      return
    if not num_steps or num_steps < 1:
      raise ValueError(f'StatePreprocess.build needs num_steps = c >= 1 (agent/Context.meta_action_every_n), got '
                       f'{num_steps!r}.')
    join = lambda net: f'{self._scope}/{net}' if self._scope else net  # pylint: disable=unnecessary-lambda-assignment
    with tf.init_scope():
      self._phi = self._state_preprocess_net(int(state_dim), scope=join(self.STATE_PREPROCESS_NET_SCOPE))
      self._psi = self._action_embed_net(
          int(num_steps) * int(action_dim), state_dim=int(state_dim), scope=join(self.ACTION_EMBED_NET_SCOPE))
      if self._psi.output_dim != self._phi.output_dim:
        raise ValueError(f'action_embed_net.num_output_dims ({self._psi.output_dim}) must equal '
                         f'state_preprocess_net.num_output_dims ({self._phi.output_dim}).')
      with tf.name_scope(''):  # the original's tf.get_variable('all_embed') in the root scope
        self._all_embed = tf.Variable(tf.zeros([MEMORY_SIZE, self._phi.output_dim], tf.float32), name='all_embed')
      self._rng = (tf.random.Generator.from_non_deterministic_state()
                   if self._seed is None else tf.random.Generator.from_seed(self._seed))
    self._num_steps = int(num_steps)
    self._state_dim, self._action_dim = int(state_dim), int(action_dim)

  def _check_built(self):
    if not self.built:
      raise ValueError('The trainable StatePreprocess is not built: call build(state_dim, action_dim, num_steps) '
                       '(build.build_agents does).')

  @property
  def state_preprocess_network(self):
    """phi (`StatePreprocessNetwork`), or None when not trainable."""
    return self._phi

  @property
  def action_embed_network(self):
    """psi (`ActionEmbedNetwork`), or None when not trainable."""
    return self._psi

  @property
  def all_embed(self):
    """float32 [1024, embed dim] variable: the memory of recent next-state embeddings (None when not trainable)."""
    return self._all_embed

  @property
  def rng(self):
    """The `tf.random.Generator` of the loss's index sampling (None when not trainable)."""
    return self._rng

  @property
  def num_steps(self):
    return self._num_steps

  def __call__(self, states):
    """states float32 [..., O] (one state or any batch) -> representations [..., ndims] (same units)."""
    if self.trainable:
      self._check_built()
      embedded = self._phi(states)
    else:
      embedded = self._state_preprocess_net(states)
    if self._ndims is not None:
      embedded = embedded[..., :self._ndims]
    return embedded

  def sample_indices(self, batch_size):
    """int64 [batch_size] indices into the c steps of meta transitions, i ~ `index_probabilities(c)` (inverse CDF
    of one uniform draw each from `rng`)."""
    self._check_built()
    cdf = tf.constant(np.cumsum(index_probabilities(self._num_steps)), tf.float32)
    u = self._rng.uniform([batch_size], dtype=tf.float32)
    indices = tf.searchsorted(cdf, u, side='right', out_type=tf.int64)
    return tf.minimum(indices, self._num_steps - 1)

  def loss(self, states, next_states, low_actions, low_states, indices=None):
    """The representation loss of a meta batch (original argument order), updating `all_embed`.

    With c steps per meta transition and i_b the sampled index of element b:
      s'_b = low_states[b, i_b + 1] if i_b < c - 1 else next_states[b]; e1 = phi(s), e2 = phi(s'),
      a = psi(flatten(low_actions), s), u = e1 + a, fn(z) = 2 sum_j huber_0.1(z_j);
      all_embed <- concat(all_embed[B:], e2)  (first: the prior below sees this batch's e2);
      close = mean_b fn(u_b - e2_b);
      prior_b = logsumexp_j(-fn(u_b - all_embed_j)) - log 1024;
      far = mean_{b >= 1} exp(-fn(u_b - e2_{b-1}) - stop_gradient(prior_b));
      loss = close + far; repr_log_probs = stop_gradient(-fn(u - e2) - prior) / 2.
    Gradients reach phi (through e1 and e2) and psi, never `all_embed`.

    Args:
      states: [B, O] first states s_t of the meta transitions.
      next_states: [B, O] last states s_{t+c}.
      low_actions: [B, c, A] the c low-level actions.
      low_states: [B, c, O] the c low-level states (low_states[:, 0] is s_t).
      indices: None (sampled with `sample_indices`) or int [B] indices in [0, c) (tests).

    Returns:
      (loss float32 [], repr_log_probs float32 [B], indices int64 [B]).
    """
    self._check_built()
    if not self.trainable:
      raise ValueError('StatePreprocess.loss needs trainable = True.')
    states = tf.cast(states, tf.float32)
    next_states = tf.cast(next_states, tf.float32)
    low_states = tf.cast(low_states, tf.float32)
    low_actions = tf.cast(low_actions, tf.float32)
    d = int(low_states.shape[1])
    static_batch = states.shape[0]
    if static_batch is not None and static_batch > MEMORY_SIZE:
      raise ValueError(f'The representation loss needs a batch of at most {MEMORY_SIZE} (the all_embed rows), got '
                       f'{static_batch}.')
    batch_size = tf.shape(states)[0]
    if indices is None:
      indices = self.sample_indices(batch_size)
    indices = tf.cast(indices, tf.int64)
    following = tf.gather(low_states, (indices + 1) % d, batch_dims=1)
    next_states = tf.where((indices < d - 1)[:, None], following, next_states)

    embed1 = self._phi(states)
    embed2 = self._phi(next_states)
    action_embed = self._psi(tf.reshape(low_actions, [-1, d * int(low_actions.shape[-1])]), states=states)
    if action_embed.shape.rank == 1:
      action_embed = action_embed[:, None]
    predicted = embed1 + action_embed

    def fn(z):
      return TAU * tf.reduce_sum(huber(z), -1)

    memory = self._all_embed
    memory.assign(tf.concat([memory[batch_size:], tf.stop_gradient(embed2)], 0))
    memory = tf.stop_gradient(memory.read_value())
    close = tf.reduce_mean(fn(predicted - embed2))
    prior_log_probs = (tf.reduce_logsumexp(-fn(predicted[:, None, :] - memory[None, :, :]), axis=-1) -
                       np.log(float(MEMORY_SIZE)).astype(np.float32))
    far = tf.reduce_mean(tf.exp(-fn(predicted[1:] - embed2[:-1]) - tf.stop_gradient(prior_log_probs[1:])))
    repr_log_probs = tf.stop_gradient(-fn(predicted - embed2) - prior_log_probs) / TAU
    return close + far, repr_log_probs, indices

  def get_trainable_vars(self):
    """The representation's trainable variables (phi's then psi's, the original's order); [] when not trainable.
    `all_embed` is not among them (the original created it trainable but never optimised it)."""
    if self._phi is None:
      return []
    return self._phi.ordered_variables() + self._psi.ordered_variables()

  def variables_by_tf1_name(self):
    """{original TF1 name: variable} of the representation (the original's 12 `state_preprocess/...` variables
    with hiro_repr; empty when not trainable). `all_embed` is a training variable (full checkpoint only)."""
    names = collections.OrderedDict()
    if self._phi is not None:
      names.update(self._phi.variables_by_tf1_name())
      names.update(self._psi.variables_by_tf1_name())
    return names


class RepresentationUpdate(tf.Module):
  """One training step of the representation: the original's `repr_train_op` (slim `create_train_op` of
  `StatePreprocess.loss` with the repr optimizer on `get_trainable_vars()`, a check-numerics on the loss, no gradient
  clipping, no global step).

  Args:
    state_preprocess: a built trainable `StatePreprocess`.
    optimizer: the repr optimizer (gin `@repr/AdamOptimizer()`: TF1 Adam, lr 1e-4, epsilon 1e-8).
    name: module name.
  """

  def __init__(self, state_preprocess, optimizer, name='repr_update'):
    super().__init__(name=name)
    if not state_preprocess.trainable or not state_preprocess.built:
      raise ValueError('RepresentationUpdate needs a built, trainable StatePreprocess.')
    if optimizer is None:
      raise ValueError('The trainable representation needs train_uvf.repr_optimizer (configs/uvf/configs/'
                       'train_uvf.gin binds @repr/AdamOptimizer()).')
    self._state_preprocess = state_preprocess
    self._optimizer = optimizer
    self._vars = state_preprocess.get_trainable_vars()
    self._step = tf.function(self._update)

  @property
  def optimizer(self):
    return self._optimizer

  @property
  def step_function(self):
    """The `tf.function` behind `__call__`."""
    return self._step

  def __call__(self, states, next_states, low_actions, low_states, indices=None):
    """One update on a meta batch (arguments of `StatePreprocess.loss`). Returns {'loss': float32 []}."""
    if indices is None:
      return self._step(states, next_states, low_actions, low_states)
    return self._step(states, next_states, low_actions, low_states, indices)

  def _update(self, states, next_states, low_actions, low_states, indices=None):
    with tf.GradientTape(watch_accessed_variables=False) as tape:
      tape.watch(self._vars)
      loss, _, _ = self._state_preprocess.loss(states, next_states, low_actions, low_states, indices=indices)
      loss = tf.debugging.check_numerics(loss, 'representation loss is inf or nan')
    grads = tape.gradient(loss, self._vars)
    self._optimizer.apply_gradients(zip(grads, self._vars))
    return {'loss': loss}


@gin.configurable()
class InverseDynamics(object):
  """Samples candidate goals around next_state - state for the goal relabelling, within the goal spec `spec`.

  The original's training called it on state representations (`StatePreprocess` outputs), so with hiro_repr the
  candidates live in the learned space (`off_policy_correction.GoalRelabeler` does the same with its
  `state_repr_fn`).

  Args:
    spec: the bounded spec of the goals (the meta agent's action spec, [G]).
  """

  def __init__(self, spec):
    self._spec = spec

  def sample(self, states, next_states, num_samples, orig_goals, sc=0.5, rng=None):
    """Candidate goals (see `off_policy_correction.candidate_goals`).

    Args:
      states, next_states: [B, D >= G] state representations at the start and end of the meta transitions.
      num_samples: K; 1: one unclipped Gaussian sample [B, G]; K >= 3: [K, B, G] (K - 2 samples, loc, orig_goals),
        clipped to the spec.
      orig_goals: [B, G] stored goals.
      sc: the Gaussian's standard deviation in units of the spec's half range.
      rng: the `tf.random.Generator` to use (default the global one).
    """
    return off_policy_correction.candidate_goals(states, next_states, orig_goals, np.asarray(self._spec.minimum),
                                                 np.asarray(self._spec.maximum), num_samples=num_samples, scale=sc,
                                                 rng=rng)
