"""Both levels' training updates against a `tf.compat.v1` graph of the original's (efficient-hrl train.py
`train_uvf` and `sample_best_meta_actions`, agents/ddpg_agent.py `TD3Agent`, agent.py `UvfAgentCore.log_probs` /
`InverseDynamics.sample`, context/rewards_functions.py `negative_distance`; tensorflow/models research/efficient-hrl).

The reference is written here from the specification, in the original's TF1 style: networks as templates of the
slim-style layers of tests/uvf/test_checkpoints.py, the twin critics found by the original's regular-expression scope
prefix (one Adam optimizer and one soft update for both), the delayed actor as the actor loss times
[num_updates % 2 == 0] (a zero-gradient Adam step on the other calls), the target update behind its own
`periodically` counter, the low-level rewards and discounts recomputed from the stored (s, g, s'), the meta batch's
goals relabelled from 10 candidates. One graph-construction order the original allowed is fixed with control
dependencies: both losses on the weights before the call, the counter read before its increment (the port's
documented choice, uvf/agents/td3_update.py `Td3Update`). Nothing from uvf/ is used for its math.

The port's side is the training loop's own path: `HiroTrainer.low_level_inputs` / `meta_level_inputs` on a fixed
batch, then `low_update` / `meta_update`, three calls from one random state (the delayed actor and the target update
each take both branches), with the smoothing noise and the correction's Gaussian draws fixed. Every variable of the
level, every Adam slot and the counters must agree to 1e-5.
"""

import numpy as np
import pytest
import tensorflow as tf

from tests.uvf import hiro_fixtures
from tests.uvf.test_checkpoints import _original_actor
from tests.uvf.test_checkpoints import _original_critic
from tests.uvf.test_checkpoints import HIRO_ORIG_GOAL_MAX

B, O, A, G, M, C = 16, 30, 8, 15, 2, 10  # batch (the trainer's), observation, action, goal, target dims; c
SCALE, GAMMA, META_GAMMA = 2.5, 0.95, 0.9  # all different from the configs' 1, 0.99, 0.99
ACTION_MAX = np.full([A], 30.0, np.float32)
STEPS = 3
# The original's train_uvf.gin: Adam learning rates (critic, actor), TF1's epsilon 1e-8; tau; the huber delta.
LEARNING_RATES = {'nometa': (1e-3, 1e-4), 'meta': (1e-3, 1e-4)}
TAU, PERIOD = 0.005, 2


@pytest.fixture(scope='module', name='trainer')
def _trainer(tmp_path_factory):
  return hiro_fixtures.build_trainer(
      tmp_path_factory.mktemp('tf1'),
      hiro_fixtures.small_bindings(extra=[
          f'train_uvf.reward_scale_factor = {SCALE}', f'train_uvf.gamma = {GAMMA}',
          f'train_uvf.meta_gamma = {META_GAMMA}'
      ]))


# ----------------------------------------------------------------------------------------------------------------------
# Inputs.


def _randomize(agent, rng):
  """Random values for all six networks (targets different from the online networks): weights N(0, 1/fan_in),
  biases N(0, 0.1^2). Returns {TF1 name: array}."""
  values = {}
  for name, variable in agent.variables_by_tf1_name().items():
    if name.endswith('weights'):
      value = rng.normal(0, 1 / np.sqrt(variable.shape[0]), variable.shape)
    else:
      value = rng.normal(0, 0.1, variable.shape)
    variable.assign(value.astype(np.float32))
    values[name] = value.astype(np.float32)
  return values


def _observations(rng, shape):
  obs = rng.normal(size=shape + (O,)).astype(np.float32)
  obs[..., :2] = rng.uniform(-4, 20, size=shape + (2,))  # x, y far from 0: the low level's masking matters
  return obs


def _low_batch(rng):
  """A stored low-level batch [s, a, r, discount, s', g, g']; element 0 reaches its goal (s' = s + g on the first 15
  dims: reward -sqrt(1e-10), context discount 0)."""
  s = _observations(rng, (B,))
  s2 = s + rng.normal(0, 0.5, s.shape).astype(np.float32)
  g = rng.uniform(-HIRO_ORIG_GOAL_MAX, HIRO_ORIG_GOAL_MAX, (B, G)).astype(np.float32)
  s2[0, :G] = s[0, :G] + g[0]
  g2 = rng.uniform(-HIRO_ORIG_GOAL_MAX, HIRO_ORIG_GOAL_MAX, (B, G)).astype(np.float32)
  a = rng.uniform(-30, 30, (B, A)).astype(np.float32)
  return [s, a, rng.normal(size=B).astype(np.float32), np.ones(B, np.float32), s2, g, g2]


def _meta_batch(rng):
  """A stored meta batch [s, g, R, discount, s', low states [c], low actions [c], T, T']; element 0 ends on its
  target (s'[:2] = T: context discount 0)."""
  low_states = _observations(rng, (B, C))
  s, s2 = low_states[:, 0], _observations(rng, (B,))
  g = rng.uniform(-HIRO_ORIG_GOAL_MAX, HIRO_ORIG_GOAL_MAX, (B, G)).astype(np.float32)
  low_actions = rng.uniform(-30, 30, (B, C, A)).astype(np.float32)
  targets, next_targets = (rng.uniform(-4, 20, (B, M)).astype(np.float32) for _ in range(2))
  s2[0, :M] = targets[0]
  rewards = -rng.uniform(0, 20, B).astype(np.float32)
  return [s, g, rewards, np.ones(B, np.float32), s2, low_states, low_actions, targets, next_targets]


# ----------------------------------------------------------------------------------------------------------------------
# The reference: the original's update of one level, tf.compat.v1 graph mode.


class _Named(object):
  """Initial values for test_checkpoints' layers, looked up by the full TF1 name of the layer being built."""

  def __init__(self, arrays):
    self._arrays = arrays

  def _get(self, leaf):
    return self._arrays[tf.compat.v1.get_variable_scope().name + '/' + leaf]

  def weights(self, fan_in, units):
    del fan_in, units
    return self._get('weights')

  def biases(self, units):
    del units
    return self._get('biases')


def _templates(scope, bound_max, zero_obs, values, nets=('actor_net', 'critic_net', 'critic_net2', 'target_actor_net',
                                                         'target_critic_net', 'target_critic_net2')):
  """TD3Agent's networks: `tf.compat.v1.make_template` per network under the agent's variable scope."""
  templates = {}
  with tf.compat.v1.variable_scope(scope):
    for net in nets:
      if 'actor' in net:
        templates[net] = tf.compat.v1.make_template(net, _original_actor, create_scope_now_=True, bound_max=bound_max,
                                                    zero_obs=zero_obs, values=values)
      else:
        templates[net] = tf.compat.v1.make_template(net, _original_critic, create_scope_now_=True, zero_obs=zero_obs,
                                                    values=values)
  return templates


def _negative_distance(states, next_states, goals, relative):
  """negative_distance (L2, epsilon 1e-10 under the root): (-dist, discount dist > 1e-4)."""
  targets = states + goals if relative else goals
  dist = tf.sqrt(tf.reduce_sum(tf.square(next_states - targets), -1) + 1e-10)
  return -dist, tf.cast(dist > 1e-4, tf.float32)


def _sample_best_meta_actions(states, next_states, goals, low_states, low_actions, normals, low_actor):
  """sample_best_meta_actions with InverseDynamics.sample (the 8 Gaussian draws given as standard normals) and
  UvfAgentCore.log_probs (scored in float64), on the identity StatePreprocess (first 15 dims)."""
  half_range = (HIRO_ORIG_GOAL_MAX - -HIRO_ORIG_GOAL_MAX) / 2
  loc = (next_states - states)[:, :G]
  samples = tf.concat([loc[None] + 0.5 * half_range * normals, loc[None], goals[None]], 0)
  candidates = tf.stop_gradient(tf.clip_by_value(samples, -HIRO_ORIG_GOAL_MAX, HIRO_ORIG_GOAL_MAX))  # [10, B, G]
  k = 10
  tiled_states = tf.tile(low_states, [k, 1, 1])  # [k B, c, O], candidate-major
  tiled_actions = tf.tile(low_actions, [k, 1, 1])
  tiled_reprs = tiled_states[..., :G]
  flat_candidates = tf.reshape(candidates, [-1, G])
  step_goals = flat_candidates[:, None] + tiled_reprs[:, :1] - tiled_reprs  # relative_context_multi_transition_fn
  predicted = low_actor(tf.concat([tf.reshape(tiled_states, [-1, O]), tf.reshape(step_goals, [-1, G])], -1))
  error = tf.square(tf.cast(tiled_actions, tf.float64) - tf.cast(tf.reshape(predicted, [k * B, C, A]), tf.float64))
  log_probs = -error / np.float64(30.0)**2
  fitness = tf.reduce_sum(tf.reshape(log_probs, [k, B, C, A]), [2, 3])
  best = tf.argmax(fitness, 0)
  return tf.gather_nd(candidates, tf.stack([best, tf.range(B, dtype=tf.int64)], -1))


def original_updates(level, arrays, batch, smoothing_normals, relabel_normals=None):
  """Runs STEPS updates of the original graph of `level` ('nometa' or 'meta') from the values `arrays` ({TF1 name:
  array}, both agents) on one `batch`.

  Args:
    smoothing_normals: [B, A'] standard normals of the target smoothing noise, clip(0.2 z, +-0.5) (the same each
      call).
    relabel_normals: meta only: [STEPS, 8, B, G] standard normals of the correction's samples, per call.

  Returns:
    {variable op name: value} after the calls: the agent's networks, Adam's slots (`<name>/Adam`, `<name>/Adam_1`),
    `beta1_power` / `beta2_power` of both optimizers, `num_updates` and the target update counter.
  """
  scope = 'uvf_agent' if level == 'nometa' else 'meta_agent'
  values = _Named(arrays)
  with tf.Graph().as_default():
    if level == 'nometa':
      nets = _templates(scope, ACTION_MAX, True, values)
      s, a, r, _, s2, g, g2 = (tf.constant(x) for x in batch)
      rewards, context_discounts = _negative_distance(s[:, :G], s2[:, :G], g, relative=True)
      del r  # the low level never trains on the stored reward (its context reward replaces it)
      discounts = context_discounts * GAMMA
      contexts, next_contexts, actions = g, g2, a
    else:
      nets = _templates(scope, HIRO_ORIG_GOAL_MAX, False, values)
      low_actor = _templates('uvf_agent', ACTION_MAX, True, values, nets=('actor_net',))['actor_net']
      s, g, r, _, s2, low_states, low_actions, contexts, next_contexts = (tf.constant(x) for x in batch)
      normals = tf.compat.v1.placeholder(tf.float32, [8, B, G])
      actions = _sample_best_meta_actions(s, s2, g, low_states, low_actions, normals, low_actor)
      rewards = r * SCALE
      _, context_discounts = _negative_distance(s, s2[:, :M], contexts, relative=False)
      discounts = context_discounts * META_GAMMA
    num_updates = tf.compat.v1.get_variable('num_updates', initializer=np.int64(0), trainable=False)
    states = tf.concat([s, contexts], -1)
    next_states = tf.concat([s2, next_contexts], -1)
    # TD3Agent.critic_loss: targets (min, min) * discounts + rewards broadcast to [2, B]; Huber over both critics.
    target_actions = nets['target_actor_net'](next_states)
    noise = tf.clip_by_value(0.2 * tf.constant(smoothing_normals), -0.5, 0.5)
    values1 = tf.stop_gradient(nets['target_critic_net'](next_states, target_actions + noise))
    values2 = tf.stop_gradient(nets['target_critic_net2'](next_states, target_actions + noise))
    target_q = tf.minimum(values1, values2)
    td_targets = (target_q, target_q) * discounts + rewards
    q_values = (nets['critic_net'](states, actions), nets['critic_net2'](states, actions))
    critic_loss = tf.reduce_mean(tf.compat.v1.losses.huber_loss(td_targets, q_values, delta=1.0))
    # DdpgAgent.actor_loss, delayed.
    mu = nets['actor_net'](states)
    dqda = tf.compat.v1.gradients([nets['critic_net'](states, mu)], [mu])[0]
    actor_loss = tf.compat.v1.losses.mean_squared_error(tf.stop_gradient(dqda + mu), mu)
    actor_loss *= tf.cast(tf.equal(num_updates % PERIOD, 0), tf.float32)
    # The regular-expression scope prefix: 'critic_net' also matches 'critic_net2'.
    critic_vars = tf.compat.v1.trainable_variables(f'{scope}/critic_net')
    actor_vars = tf.compat.v1.trainable_variables(f'{scope}/actor_net')
    assert len(critic_vars) == 12 and len(actor_vars) == 6
    critic_grads = tf.compat.v1.gradients(critic_loss, critic_vars)
    actor_grads = tf.compat.v1.gradients(actor_loss, actor_vars)
    critic_lr, actor_lr = LEARNING_RATES[level]
    critic_opt = tf.compat.v1.train.AdamOptimizer(critic_lr, beta1=0.9, beta2=0.999, epsilon=1e-8)
    actor_opt = tf.compat.v1.train.AdamOptimizer(actor_lr, beta1=0.9, beta2=0.999, epsilon=1e-8)
    with tf.control_dependencies(critic_grads + actor_grads):
      train_ops = [
          critic_opt.apply_gradients(zip(critic_grads, critic_vars), global_step=num_updates),
          actor_opt.apply_gradients(zip(actor_grads, actor_vars))
      ]
    # periodically(update_targets, 2): its own counter; the soft update on every 2nd call, after the train ops.
    counter = tf.compat.v1.get_variable('update_targets/counter', initializer=np.int64(0), trainable=False)

    def soft_update():
      updates = []
      for source_scope, target_scope in (('actor_net', 'target_actor_net'), ('critic_net', 'target_critic_net')):
        sources = tf.compat.v1.trainable_variables(f'{scope}/{source_scope}')
        targets = tf.compat.v1.trainable_variables(f'{scope}/{target_scope}')
        for source, target in zip(sources, targets):
          assert source.op.name.replace(f'/{source_scope}', f'/{target_scope}') == target.op.name
          updates.append(target.assign((1 - TAU) * target + TAU * source))
      return tf.group(*updates)

    with tf.control_dependencies(train_ops):
      count = counter.assign_add(1)
      step = tf.cond(tf.equal(count % PERIOD, 0), soft_update, tf.no_op)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      for i in range(STEPS):
        session.run(step, {normals: relabel_normals[i]} if level == 'meta' else None)
      return {v.op.name: session.run(v) for v in tf.compat.v1.global_variables()}


# ----------------------------------------------------------------------------------------------------------------------
# The comparison.


def _beta_powers(optimizer):
  """{'beta1_power': value, 'beta2_power': value} of a TF1 Adam optimizer (its non-slot variables)."""
  powers = {}
  for variable in optimizer.variables():
    for name in ('beta1_power', 'beta2_power'):
      if variable.name.split('/')[-1].startswith(name):
        powers[name] = variable.numpy()
  return powers


def _assert_state_matches(reference, agent, update, critic_optimizer, actor_optimizer):
  for name, variable in agent.variables_by_tf1_name().items():
    np.testing.assert_allclose(variable.numpy(), reference[name], rtol=1e-5, atol=1e-5, err_msg=name)
  for optimizer, variables in ((critic_optimizer, agent.get_trainable_critic_vars()),
                               (actor_optimizer, agent.get_trainable_actor_vars())):
    names = {id(v): n for n, v in agent.variables_by_tf1_name().items()}
    for variable in variables:
      name = names[id(variable)]
      for slot, suffix in (('m', 'Adam'), ('v', 'Adam_1')):
        ours, theirs = optimizer.get_slot(variable, slot).numpy(), reference[f'{name}/{suffix}']
        # Relative to the slot's scale (second moments are ~1e-8): every element to 1e-5 of the largest.
        np.testing.assert_allclose(ours, theirs, rtol=1e-5, atol=1e-5 * np.abs(theirs).max(), err_msg=f'{name} {slot}')
    powers = _beta_powers(optimizer)
    np.testing.assert_allclose(powers['beta1_power'], 0.9**(STEPS + 1), rtol=1e-6)
    np.testing.assert_allclose(powers['beta2_power'], 0.999**(STEPS + 1), rtol=1e-6)
  beta_names = [n for n in reference if 'beta1_power' in n]
  assert len(beta_names) == 2  # one per optimizer, both at beta1^(STEPS + 1)
  for name in beta_names:
    np.testing.assert_allclose(reference[name], 0.9**(STEPS + 1), rtol=1e-6)
  assert int(update.num_updates.numpy()) == int(reference['num_updates']) == STEPS
  assert int(update.target_update_counter.numpy()) == int(reference['update_targets/counter']) == STEPS


def _moved(reference, before, names):
  return {n: float(np.abs(reference[n] - before[n]).max()) for n in names}


def test_low_level_update_matches_the_original_graph(trainer):
  t = trainer
  rng = np.random.default_rng(0)
  arrays = _randomize(t.uvf_agent, rng)
  batch = _low_batch(rng)
  smoothing = (3.0 * rng.normal(size=(B, A))).astype(np.float32)  # 0.2 * 3 sigma: the +-0.5 clip bites
  reference = original_updates('nometa', arrays, batch, smoothing)
  # The reference moved everything the update writes: the actor on calls 1 and 3 (2: Adam's zero-gradient step),
  # both critics, and the targets once (call 2).
  moved = _moved(reference, arrays, arrays)
  assert all(v > 1e-7 for v in moved.values()), [n for n, v in moved.items() if v <= 1e-7]
  for _ in range(STEPS):
    inputs = list(t.low_level_inputs([tf.constant(x) for x in batch]))
    inputs[-1] = tf.constant(np.clip(0.2 * smoothing, -0.5, 0.5))
    t.low_update(*inputs)
  _assert_state_matches(reference, t.uvf_agent, t.low_update, t.optimizers['critic'], t.optimizers['actor'])


def test_meta_update_with_relabelled_goals_matches_the_original_graph(trainer):
  t = trainer
  rng = np.random.default_rng(1)
  arrays = _randomize(t.meta_agent, rng)
  arrays.update(_randomize(t.uvf_agent, rng))  # the low actor scores the candidates
  batch = _meta_batch(rng)
  smoothing = (3.0 * rng.normal(size=(B, G))).astype(np.float32)
  relabel_normals = []
  for _ in range(STEPS):
    generator = t.relabeler.rng
    relabel_normals.append(
        tf.random.Generator.from_state(generator.state.numpy(), generator.algorithm).normal([8, B, G]).numpy())
    inputs = list(t.meta_level_inputs([tf.constant(x) for x in batch]))
    inputs[-1] = tf.constant(np.clip(0.2 * smoothing, -0.5, 0.5))
    t.meta_update(*inputs)
  reference = original_updates('meta', arrays, batch, smoothing, np.stack(relabel_normals))
  meta_names = [n for n in arrays if n.startswith('meta_agent/')]
  moved = _moved(reference, arrays, meta_names)
  assert all(v > 1e-7 for v in moved.values()), [n for n, v in moved.items() if v <= 1e-7]
  _assert_state_matches(reference, t.meta_agent, t.meta_update, t.optimizers['meta_critic'], t.optimizers['meta_actor'])
