"""Actor and critic networks of the DDPG / TD3 agents, under the original TF1 variable names.

The original (`research/efficient-hrl/agents/ddpg_networks.py`) defined `actor_net(states, action_spec, ...)` and
`critic_net(states, actions, ...)` as slim functions that `tf.make_template` turned into variable-sharing templates.
Here each network is a `tf.Module` whose variables are created eagerly at construction, and the gin names
`ddpg_actor_net` / `ddpg_critic_net` are factories that build one: they keep the original hyper-parameters and
defaults, while the data arguments moved from call time to construction (`state_dim`, `action_spec` / `action_dim`,
`scope`) or to `__call__` (`states`, `actions`); `for_critic_loss` is gone (with one reward dimension it changed
nothing). gin binds hyper-parameters only, as the original configs do.

Architecture (with the bindings of the original base_uvf.gin, configs/uvf/configs/base_uvf.gin). Hidden layers: y =
activation(x W + b), W ~ U(+-1/sqrt(fan_in)) (slim's `variance_scaling_initializer(factor=1/3, mode='FAN_IN',
uniform=True)`), b = 0. Output layers: W ~ U(+-0.003), b = 0 (the original's arg_scope replaced only slim's
`weights_initializer`; the biases kept slim's zeros).

* Actor: x = states (* xy_mask if `zero_obs` or `images`) -> hidden layers `states/states_<i>` -> `actions`, tanh,
  rescaled to the action spec: a = (max + min) / 2 + (max - min) / 2 * tanh(.).
* Critic: x = concat(states, actions) (* xy_mask) -> `states/states_<i>` -> concat(., actions) (the action enters a
  second time) -> `joint/joint_<i>` -> linear `q_value` with 1 unit, reshaped to [B].

Variable names are the original ones, `<scope>/states/states_1/weights` and so on, both as the
variables' own names and through `variables_by_tf1_name()`, the map a name-based TF1 checkpoint loader needs.
"""

import collections

import gin
import numpy as np
import tensorflow as tf

# Output layers of both networks: U(-0.003, 0.003) for the weights (the biases start at zero).
FINAL_LAYER_INIT_RANGE = 0.003
# Dtypes of the networks' matrix products: 'float32' (the original) or 'bfloat16' (a speed switch, off by default:
# docs/design/deviations.md).
COMPUTE_DTYPES = ('float32', 'bfloat16')


def hidden_weights(fan_in, fan_out):
  """[fan_in, fan_out] float32 ~ U(+-1/sqrt(fan_in)): slim's variance scaling, factor 1/3, FAN_IN, uniform."""
  limit = np.sqrt(1.0 / fan_in)
  return tf.random.uniform([fan_in, fan_out], -limit, limit, dtype=tf.float32)


def final_weights(shape):
  """float32 `shape` ~ U(+-0.003): the output layers' weights."""
  return tf.random.uniform(shape, -FINAL_LAYER_INIT_RANGE, FINAL_LAYER_INIT_RANGE, dtype=tf.float32)


def _xy_mask(dim):
  """float32 [dim]: 0 for dims 0 and 1 (the x, y position), 1 elsewhere."""
  if dim < 2:
    raise ValueError(f'zero_obs / images masks input dims 0 and 1 (x, y), but the input has only {dim} dims.')
  return tf.constant([0.0, 0.0] + [1.0] * (dim - 2), dtype=tf.float32)


def _check_layers(name, layers):
  """The layer sizes as a tuple of positive ints (None or () for no layers)."""
  layers = tuple(layers or ())
  if not all(isinstance(n, (int, np.integer)) and n > 0 for n in layers):
    raise ValueError(f'{name} must be a sequence of positive layer sizes, got {layers!r}.')
  return layers


def _check_unsupported(normalizer_fn, num_reward_dims=1):
  if normalizer_fn is not None:
    raise ValueError(f'normalizer_fn={normalizer_fn!r} is not supported by this port; HIRO binds None (the default).')
  if num_reward_dims != 1:
    raise ValueError(f'num_reward_dims={num_reward_dims!r} is not supported by this port; HIRO uses 1 (the default).')


class Dense(tf.Module):
  """One slim `fully_connected` layer: y = activation(x W + b), W `weights` [fan_in, units], b `biases` [units]."""

  def __init__(self, scope, weights, biases, activation):
    super().__init__(name=None)
    with tf.name_scope(scope + '/'):  # trailing '/': an absolute name scope, so the names are exactly the TF1 ones
      self.weights = tf.Variable(weights, name='weights')
      self.biases = tf.Variable(biases, name='biases')
    self._scope = scope
    self._activation = activation
    self.compute_dtype = tf.float32

  def __call__(self, x):
    """x float32 [B, fan_in] -> float32 [B, units]; the product x W in `compute_dtype` (float32: exactly x W + b;
    bfloat16: x and W rounded to bfloat16, the product accumulated and returned in float32, + b in float32)."""
    if self.compute_dtype == tf.float32:
      return self.activate(tf.matmul(x, self.weights) + self.biases)
    product = tf.matmul(tf.cast(x, self.compute_dtype), tf.cast(self.weights, self.compute_dtype))
    return self.activate(tf.cast(product, tf.float32) + self.biases)

  def activate(self, y):
    """The layer's activation of its pre-activations y = x W + b (identity for a linear layer)."""
    return self._activation(y) if self._activation is not None else y

  def named_variables(self):
    return [(self._scope + '/weights', self.weights), (self._scope + '/biases', self.biases)]


def _hidden_stack(scope, stack_name, fan_in, layers, activation):
  """slim.stack(x, fully_connected, layers, scope=stack_name): layers `<stack_name>/<stack_name>_<i>`, i from 1."""
  dense = []
  for i, units in enumerate(layers, start=1):
    dense.append(
        Dense(f'{scope}/{stack_name}/{stack_name}_{i}', hidden_weights(fan_in, units), tf.zeros([units], tf.float32),
              activation))
    fan_in = units
  return dense, fan_in


class _Network(tf.Module):
  """Common part of the actor and the critic: the TF1 name map and a copy of another network's weights."""

  def __init__(self, scope):
    super().__init__(name=scope.replace('/', '_'))
    self._scope = scope
    self._layers = []

  @property
  def scope(self):
    """The TF1 variable scope of the network, e.g. 'uvf_agent/actor_net'."""
    return self._scope

  def variables_by_tf1_name(self):
    """OrderedDict {TF1 variable name (no ':0'): tf.Variable}, in the original's creation order."""
    return collections.OrderedDict(pair for layer in self._layers for pair in layer.named_variables())

  def ordered_variables(self):
    """List of the network's trainable variables in the original's creation (and target-pairing) order."""
    return list(self.variables_by_tf1_name().values())

  @property
  def compute_dtype(self):
    """The dtype of the network's matrix products (variables, biases and activations stay float32)."""
    return self._layers[0].compute_dtype

  @compute_dtype.setter
  def compute_dtype(self, dtype):
    if dtype not in COMPUTE_DTYPES:
      raise ValueError(f'Unknown compute_dtype {dtype!r} (gin ddpg_actor_net / ddpg_critic_net .compute_dtype); '
                       f'valid: {", ".join(repr(d) for d in COMPUTE_DTYPES)}.')
    for layer in self._layers:
      layer.compute_dtype = tf.as_dtype(dtype)


class ActorNetwork(_Network):
  """Deterministic actor mu(s): [B, state_dim] float32 -> [B, action_dim] float32 within the action bounds."""

  def __init__(self, state_dim, action_spec, scope='actor_net', hidden_layers=(400, 300), activation_fn=tf.nn.relu,
               zero_obs=False, images=False):
    """Creates the variables (eagerly).

    Args:
      state_dim: int, size of the (merged) state vector, e.g. O + G = 45 for the hiro_orig AntMaze low level.
      action_spec: bounded spec with `shape` [A], `minimum` and `maximum` (scalars or [A]; actions in env units).
      scope: TF1 variable scope of the network, e.g. 'uvf_agent/actor_net'.
      hidden_layers: sizes of the ReLU layers `states/states_1`, ... (gin: (300, 300) in HIRO).
      activation_fn: activation of the hidden layers.
      zero_obs, images: if either is set, state dims 0 and 1 (x, y) are multiplied by 0 first (hiro_orig low level).
    """
    super().__init__(scope)
    hidden_layers = _check_layers('hidden_layers', hidden_layers)
    state_dim = int(state_dim)
    action_dim = int(tf.TensorShape(action_spec.shape).num_elements())
    minimum = np.broadcast_to(np.asarray(action_spec.minimum, np.float32), [action_dim])
    maximum = np.broadcast_to(np.asarray(action_spec.maximum, np.float32), [action_dim])
    if not np.all(maximum > minimum):
      raise ValueError(f'action_spec bounds must satisfy maximum > minimum, got {minimum} and {maximum}.')
    self.state_dim, self.action_dim = state_dim, action_dim
    self._mask = _xy_mask(state_dim) if (zero_obs or images) else None
    self._action_means = tf.constant((maximum + minimum) / 2.0, tf.float32)
    self._action_magnitudes = tf.constant((maximum - minimum) / 2.0, tf.float32)
    self._hidden, fan_in = _hidden_stack(scope, 'states', state_dim, hidden_layers, activation_fn)
    self._out = Dense(scope + '/actions', final_weights([fan_in, action_dim]), tf.zeros([action_dim], tf.float32),
                      tf.nn.tanh)
    self._layers = self._hidden + [self._out]

  def __call__(self, states):
    """states: float32 [B, state_dim] -> actions float32 [B, action_dim], mean + half_width * tanh(.)."""
    x = tf.cast(states, tf.float32)
    if self._mask is not None:
      x = x * self._mask
    for layer in self._hidden:
      x = layer(x)
    return self._action_means + self._action_magnitudes * self._out(x)

  def shared_input_actions(self, shared, varying, compute_dtype=tf.float32):
    """mu(shared ⊕ varying[k]) for every k, with the shared rows' part of the first layer computed once.

    The same function as `__call__` on the K x N concatenated rows (the first layer's product split into its shared
    and varying input rows, so it is summed in another order: equal to float32 rounding), for K inputs that share
    their first P dims (HIRO's off-policy correction: K candidate goals for the same stored states).

    Args:
      shared: float [N, P], the first P dims of every row (the states).
      varying: float [K, N, state_dim - P], the rest (the goals).
      compute_dtype: dtype of the matrix products (tf.float32: as `__call__`; tf.bfloat16: products in bfloat16,
        biases, activations and the output in float32).

    Returns:
      float32 [K, N, action_dim].
    """
    f32 = tf.float32
    shared, varying = tf.cast(shared, f32), tf.cast(varying, f32)
    split = shared.shape[-1]
    if self._mask is not None:
      shared, varying = shared * self._mask[:split], varying * self._mask[split:]
    num_k, num_n = tf.shape(varying)[0], tf.shape(varying)[1]
    first, rest = self._layers[0], self._layers[1:]
    units = first.weights.shape[-1]
    matmul = lambda x, w: tf.cast(tf.matmul(tf.cast(x, compute_dtype), tf.cast(w, compute_dtype)), f32)  # pylint: disable=unnecessary-lambda-assignment
    shared_part = matmul(shared, first.weights[:split])  # [N, U]
    varying_part = matmul(tf.reshape(varying, [-1, varying.shape[-1]]), first.weights[split:])  # [K * N, U]
    x = tf.reshape(varying_part, [num_k, num_n, units]) + shared_part[None] + first.biases
    x = tf.reshape(first.activate(x), [-1, units])
    for layer in rest:
      x = layer.activate(tf.nn.bias_add(matmul(x, layer.weights), layer.biases))
    actions = self._action_means + self._action_magnitudes * x
    return tf.reshape(actions, [num_k, num_n, self.action_dim])


class CriticNetwork(_Network):
  """Critic Q(s, a): [B, state_dim], [B, action_dim] float32 -> [B] float32."""

  def __init__(self, state_dim, action_dim, scope='critic_net', states_hidden_layers=(400,), actions_hidden_layers=None,
               joint_hidden_layers=(300,), activation_fn=tf.nn.relu, zero_obs=False, images=False):
    """Creates the variables (eagerly).

    Args:
      state_dim: int, size of the (merged) state vector.
      action_dim: int, size of the action vector.
      scope: TF1 variable scope of the network, e.g. 'uvf_agent/critic_net2'.
      states_hidden_layers: sizes of the layers `states/states_<i>` on concat(states, actions) ((300,) in HIRO).
      actions_hidden_layers: sizes of the layers `actions/actions_<i>` on the actions before they are joined
        (None in HIRO).
      joint_hidden_layers: sizes of the layers `joint/joint_<i>` on concat(states branch, actions branch).
      activation_fn: activation of all hidden layers.
      zero_obs, images: if either is set, dims 0 and 1 (x, y) of concat(states, actions) are multiplied by 0.
    """
    super().__init__(scope)
    states_hidden_layers = _check_layers('states_hidden_layers', states_hidden_layers)
    actions_hidden_layers = _check_layers('actions_hidden_layers', actions_hidden_layers)
    joint_hidden_layers = _check_layers('joint_hidden_layers', joint_hidden_layers)
    self.state_dim, self.action_dim = int(state_dim), int(action_dim)
    input_dim = self.state_dim + self.action_dim
    self._mask = _xy_mask(input_dim) if (zero_obs or images) else None
    self._states, states_out = _hidden_stack(scope, 'states', input_dim, states_hidden_layers, activation_fn)
    self._actions, actions_out = _hidden_stack(scope, 'actions', self.action_dim, actions_hidden_layers, activation_fn)
    self._joint, fan_in = _hidden_stack(scope, 'joint', states_out + actions_out, joint_hidden_layers, activation_fn)
    self._out = Dense(scope + '/q_value', final_weights([fan_in, 1]), tf.zeros([1], tf.float32), None)
    self._layers = self._states + self._actions + self._joint + [self._out]

  def __call__(self, states, actions):
    """states: float32 [B, state_dim]; actions: float32 [B, action_dim] -> q values float32 [B]."""
    actions = tf.cast(actions, tf.float32)
    x = tf.concat([tf.cast(states, tf.float32), actions], -1)
    if self._mask is not None:
      x = x * self._mask
    for layer in self._states:
      x = layer(x)
    a = actions
    for layer in self._actions:
      a = layer(a)
    x = tf.concat([x, a], 1)
    for layer in self._joint:
      x = layer(x)
    return tf.reshape(self._out(x), [-1])


@gin.configurable('ddpg_critic_net', denylist=['state_dim', 'action_dim', 'scope'])
def critic_net(state_dim, action_dim, scope='critic_net', num_reward_dims=1, states_hidden_layers=(400,),
               actions_hidden_layers=None, joint_hidden_layers=(300,), weight_decay=0.0001, normalizer_fn=None,
               activation_fn=tf.nn.relu, zero_obs=False, images=False, compute_dtype='float32'):
  """Builds a `CriticNetwork` (gin `ddpg_critic_net`; the agent calls it once per critic and target critic).

  Args:
    state_dim, action_dim, scope: see `CriticNetwork` (passed by the agent, not gin parameters).
    num_reward_dims: must be 1 (the only value HIRO uses).
    states_hidden_layers, actions_hidden_layers, joint_hidden_layers, activation_fn, zero_obs, images: see
      `CriticNetwork`; defaults are the original function's ((400,), None, (300,)); HIRO's gin sets (300,), None,
      (300,).
    weight_decay: accepted and unused. The original attached an L2 regulariser whose losses went into a collection
      that its train ops never read, so it had no effect either (HIRO binds 0.0).
    normalizer_fn: must be None (the only value HIRO uses).
    compute_dtype: 'float32' (the original) or 'bfloat16' (new, a speed switch: the matrix products in bfloat16,
      docs/design/deviations.md).

  Returns:
    A `CriticNetwork` with its variables created.
  """
  del weight_decay  # no effect in the original either (see the docstring)
  _check_unsupported(normalizer_fn, num_reward_dims)
  network = CriticNetwork(state_dim, action_dim, scope=scope, states_hidden_layers=states_hidden_layers,
                          actions_hidden_layers=actions_hidden_layers, joint_hidden_layers=joint_hidden_layers,
                          activation_fn=activation_fn, zero_obs=zero_obs, images=images)
  network.compute_dtype = compute_dtype
  return network


@gin.configurable('ddpg_actor_net', denylist=['state_dim', 'action_spec', 'scope'])
def actor_net(state_dim, action_spec, scope='actor_net', hidden_layers=(400, 300), normalizer_fn=None,
              activation_fn=tf.nn.relu, zero_obs=False, images=False, compute_dtype='float32'):
  """Builds an `ActorNetwork` (gin `ddpg_actor_net`; the agent calls it for the actor and the target actor).

  Args:
    state_dim, action_spec, scope: see `ActorNetwork` (passed by the agent, not gin parameters).
    hidden_layers, activation_fn, zero_obs, images: see `ActorNetwork`; the default (400, 300) is the original
      function's, HIRO's gin sets (300, 300).
    normalizer_fn: must be None (the only value HIRO uses).
    compute_dtype: 'float32' (the original) or 'bfloat16' (new, a speed switch: the matrix products in bfloat16,
      docs/design/deviations.md).

  Returns:
    An `ActorNetwork` with its variables created.
  """
  _check_unsupported(normalizer_fn)
  network = ActorNetwork(state_dim, action_spec, scope=scope, hidden_layers=hidden_layers, activation_fn=activation_fn,
                         zero_obs=zero_obs, images=images)
  network.compute_dtype = compute_dtype
  return network
