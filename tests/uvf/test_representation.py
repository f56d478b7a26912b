"""uvf.representation: the learned representation of hiro_repr (Nachum et al. 2019, "Near-Optimal Representation
Learning for Hierarchical Reinforcement Learning"; original: tensorflow/models research/efficient-hrl agent.py).

The loss, its gradients and two Adam steps are checked against a NumPy re-computation written from the description
of the original (agent.py `StatePreprocess.loss`, train.py's repr train op): fixed inputs and pinned indices, float64.
Then a short hiro_repr training run (configs/ant_maze_repr.gin): one trace of the loop, the representation used for
the low-level reward, the 12 names in the policy checkpoint, and an exact restart.
"""

import functools
import os

import gin
import numpy as np
import pytest
import tensorflow as tf

from tests.uvf import hiro_fixtures
from uvf import representation

REPR_CONFIG = hiro_fixtures.CONFIG.parent / 'ant_maze_repr.gin'
KAPPA, TAU, MEMORY = 0.1, 2.0, 1024
# Small networks for the NumPy checks: O = 7 (last dim = time), A = 3, c = 4.
O, A, C, B = 7, 3, 4, 6
PHI_HIDDEN, PSI_HIDDEN = (5, 6), (8, 7)


def _factory(fn, **kwargs):
  """A network factory with explicit hyper-parameters (explicit arguments win over any gin binding)."""
  return representation.network_factory(functools.partial(fn, **kwargs))


def _small_preprocess(seed=0, images=False):
  gin.clear_config()
  sp = representation.StatePreprocess(
      trainable=True, ndims=2, scope='state_preprocess', seed=seed,
      state_preprocess_net=_factory(representation.state_preprocess_net, states_hidden_layers=PHI_HIDDEN,
                                    num_output_dims=2, images=images),
      action_embed_net=_factory(representation.action_embed_net, hidden_layers=PSI_HIDDEN, num_output_dims=2))
  sp.build(O, A, C)
  rng = np.random.RandomState(seed)
  for variable in sp.get_trainable_vars():  # non-zero biases and weights large enough for both Huber branches
    variable.assign(rng.normal(0.0, 0.5, variable.shape).astype(np.float32))
  sp.all_embed.assign(rng.normal(0.0, 1.0, [MEMORY, 2]).astype(np.float32))
  return sp


def _layers(network):
  values = [v.numpy().astype(np.float64) for v in network.ordered_variables()]
  return list(zip(values[::2], values[1::2]))


# ----------------------------------------------------------------------------------------------------------------------
# NumPy reference (float64).


def _mlp(x, layers):
  """Activations [x, h1, ..., out] of ReLU hidden layers and a linear output layer."""
  acts = [x]
  for i, (w, b) in enumerate(layers):
    y = acts[-1] @ w + b
    acts.append(np.maximum(y, 0.0) if i < len(layers) - 1 else y)
  return acts


def _mlp_grads(acts, layers, grad_out):
  """[(dW, db)] of the layers given d loss / d output."""
  grads, g = [], grad_out
  for i in reversed(range(len(layers))):
    if i < len(layers) - 1:
      g = g * (acts[i + 1] > 0)
    grads.append((acts[i].T @ g, g.sum(0)))
    g = g @ layers[i][0].T
  return grads[::-1]


def _huber(x):
  return np.where(np.abs(x) <= KAPPA, 0.5 * x**2, KAPPA * (np.abs(x) - 0.5 * KAPPA)) / KAPPA


def _huber_grad(x):
  return np.where(np.abs(x) <= KAPPA, x / KAPPA, np.sign(x))


def _fn(z):
  return TAU * _huber(z).sum(-1)


def _logsumexp(x, axis):
  m = x.max(axis, keepdims=True)
  return (m + np.log(np.exp(x - m).sum(axis, keepdims=True))).squeeze(axis)


def _reference(phi, psi, memory, states, next_states, low_actions, low_states, indices):
  """The loss, repr_log_probs, the updated memory and the gradients [(dW, db)] of phi's and psi's layers."""
  time_mask = np.r_[np.ones(O - 1), 0.0]
  s2 = np.array([low_states[b, i + 1] if i < C - 1 else next_states[b] for b, i in enumerate(indices)])
  acts1, acts2 = _mlp(states * time_mask, phi), _mlp(s2 * time_mask, phi)
  psi_in = np.concatenate([low_actions.reshape(len(states), -1), states * time_mask], 1)
  acts_a = _mlp(psi_in, psi)
  e1, e2, a = acts1[-1], acts2[-1], acts_a[-1]
  u = e1 + a
  memory = np.concatenate([memory[len(states):], e2], 0)  # updated before the prior reads it
  close = _fn(u - e2).mean()
  prior = _logsumexp(-_fn(u[:, None, :] - memory[None]), 1) - np.log(MEMORY)
  w = np.exp(-_fn(u[1:] - e2[:-1]) - prior[1:])
  far = w.mean()
  repr_log_probs = (-_fn(u - e2) - prior) / TAU
  huber_inputs = np.concatenate([(u - e2).ravel(), (u[:, None, :] - memory[None]).ravel()])
  n = len(states)
  g_u = TAU * _huber_grad(u - e2) / n
  g_e2 = -TAU * _huber_grad(u - e2) / n
  far_grad = -(w[:, None] * TAU * _huber_grad(u[1:] - e2[:-1])) / (n - 1)
  g_u[1:] += far_grad
  g_e2[:-1] -= far_grad
  phi_grads = [
      (w1 + w2, b1 + b2) for (w1, b1), (w2, b2) in zip(_mlp_grads(acts1, phi, g_u), _mlp_grads(acts2, phi, g_e2))
  ]
  psi_grads = _mlp_grads(acts_a, psi, g_u)
  grads = [g for pair in phi_grads + psi_grads for g in pair]
  return close + far, repr_log_probs, memory, grads, huber_inputs


def _inputs(seed):
  rng = np.random.RandomState(seed)
  low_states = rng.normal(0, 1, [B, C, O])
  next_states = rng.normal(0, 1, [B, O])
  low_actions = rng.uniform(-30, 30, [B, C, A]) / 30
  return low_states[:, 0], next_states, low_actions, low_states


# ----------------------------------------------------------------------------------------------------------------------
# Unit tests.


def test_index_probabilities_and_sampling():
  # Weights 0.99^i, the last one divided by (1 - 0.99). They sum to 1 / (1 - 0.99): P(i) = 0.01 * 0.99^i for
  # i < 9 and P(9) = 0.99^9 = 0.9135 (the whole meta transition).
  expected = np.array([0.01 * 0.99**i for i in range(9)] + [0.99**9])
  np.testing.assert_allclose(representation.index_probabilities(10), expected, rtol=1e-12)
  gin.clear_config()
  sp = representation.StatePreprocess(trainable=True, seed=3,
                                      state_preprocess_net=_factory(representation.state_preprocess_net),
                                      action_embed_net=_factory(representation.action_embed_net, hidden_layers=(4,)))
  sp.build(30, 8, 10)
  n = 200000
  counts = np.bincount(sp.sample_indices(n).numpy(), minlength=10)
  assert counts.shape == (10,)
  assert np.all(np.abs(counts / n - expected) <= 4 * np.sqrt(expected * (1 - expected) / n)), counts / n


def test_phi_and_psi_ignore_the_time_dim():
  sp = _small_preprocess()
  states = np.random.RandomState(1).normal(0, 1, [4, O]).astype(np.float32)
  changed = states.copy()
  changed[:, -1] += 100.0
  phi = sp.state_preprocess_network
  np.testing.assert_array_equal(phi(states).numpy(), phi(changed).numpy())
  np.testing.assert_array_equal(sp(states).numpy(), phi(states).numpy()[:, :2])
  assert sp(states[0]).shape == [2] and sp(np.stack([states] * 3)).shape == [3, 4, 2]
  moved = states.copy()
  moved[:, 0] += 1.0
  assert not np.allclose(phi(states).numpy(), phi(moved).numpy())
  actions = np.ones([4, C * A], np.float32)
  psi = sp.action_embed_network
  np.testing.assert_array_equal(psi(actions, states).numpy(), psi(actions, changed).numpy())
  # images: x, y are masked too.
  sp_img = _small_preprocess(images=True)
  np.testing.assert_array_equal(sp_img(states).numpy(), sp_img(moved).numpy())


def test_loss_gradients_and_two_adam_steps_match_numpy():
  sp = _small_preprocess(seed=0)
  optimizer = tf.compat.v1.train.AdamOptimizer(learning_rate=1e-4)
  update = representation.RepresentationUpdate(sp, optimizer)
  variables = sp.get_trainable_vars()
  assert len(variables) == 12
  m = [np.zeros(v.shape) for v in variables]
  v2 = [np.zeros(v.shape) for v in variables]
  indices = np.array([0, 3, 1, 3, 2, 3])  # c - 1 = 3: the meta transition's last state
  for step in (1, 2):
    states, next_states, low_actions, low_states = _inputs(step)
    weights = [v.numpy().astype(np.float64) for v in variables]
    memory = sp.all_embed.numpy().astype(np.float64)
    loss, log_probs, new_memory, grads, huber_inputs = _reference(_layers(sp.state_preprocess_network),
                                                                  _layers(sp.action_embed_network), memory, states,
                                                                  next_states, low_actions, low_states, indices)
    assert (np.abs(huber_inputs) <= KAPPA).any() and (np.abs(huber_inputs) > KAPPA).any()  # both Huber branches
    args = [tf.constant(x, tf.float32) for x in (states, next_states, low_actions, low_states)]
    if step == 1:
      # The loss, its log-probabilities and gradients (then the memory is put back for the update below).
      with tf.GradientTape() as tape:
        tf_loss, tf_log_probs, tf_indices = sp.loss(*args, indices=tf.constant(indices))
      tf_grads = tape.gradient(tf_loss, variables)
      np.testing.assert_allclose(tf_loss.numpy(), loss, rtol=1e-5)
      np.testing.assert_allclose(tf_log_probs.numpy(), log_probs, rtol=1e-4, atol=1e-5)
      np.testing.assert_array_equal(tf_indices.numpy(), indices)
      np.testing.assert_allclose(sp.all_embed.numpy(), new_memory, rtol=1e-5, atol=1e-6)
      for tf_grad, grad in zip(tf_grads, grads):
        np.testing.assert_allclose(tf_grad.numpy(), grad, rtol=1e-4, atol=1e-6)
      sp.all_embed.assign(memory.astype(np.float32))
    result = update(*args, indices=tf.constant(indices))
    np.testing.assert_allclose(result['loss'].numpy(), loss, rtol=1e-5)
    np.testing.assert_allclose(sp.all_embed.numpy(), new_memory, rtol=1e-5, atol=1e-6)
    # TF1 Adam: lr_t = lr sqrt(1 - b2^t) / (1 - b1^t); m, v moments; w -= lr_t m / (sqrt(v) + 1e-8).
    lr_t = 1e-4 * np.sqrt(1 - 0.999**step) / (1 - 0.9**step)
    for i, (variable, w, g) in enumerate(zip(variables, weights, grads)):
      m[i] = 0.9 * m[i] + 0.1 * g
      v2[i] = 0.999 * v2[i] + 0.001 * g * g
      expected = w - lr_t * m[i] / (np.sqrt(v2[i]) + 1e-8)
      # phi's output bias cancels in every difference of embeddings: its exact gradient is 0 and TF's is float32
      # rounding noise (as in the original), which Adam scales up to steps of up to ~lr. Only bound those steps.
      exact_zero = np.abs(m[i]) < 1e-12
      np.testing.assert_allclose(variable.numpy()[~exact_zero], expected[~exact_zero], rtol=0, atol=2e-7)
      assert np.all(np.abs(variable.numpy() - w)[exact_zero] <= 5e-4), i
  beta1_power, beta2_power = hiro_fixtures.adam_beta_powers(optimizer)
  np.testing.assert_allclose([beta1_power.numpy(), beta2_power.numpy()], [0.9**3, 0.999**3], rtol=1e-6)


def test_all_embed_is_a_fifo_of_the_chosen_next_state_embeddings():
  sp = _small_preprocess(seed=2)
  memory = sp.all_embed.numpy()
  states, next_states, low_actions, low_states = _inputs(5)
  indices = np.array([3, 0, 2, 3, 1, 3])
  sp.loss(*[tf.constant(x, tf.float32) for x in (states, next_states, low_actions, low_states)],
          indices=tf.constant(indices))
  chosen = np.array([next_states[b] if i == C - 1 else low_states[b, i + 1] for b, i in enumerate(indices)])
  after = sp.all_embed.numpy()
  np.testing.assert_array_equal(after[:MEMORY - B], memory[B:])
  np.testing.assert_allclose(after[MEMORY - B:],
                             sp.state_preprocess_network(chosen.astype(np.float32)).numpy(), rtol=1e-6)
  sp.loss(*[tf.constant(x, tf.float32) for x in (states, next_states, low_actions, low_states)],
          indices=tf.constant(indices))
  np.testing.assert_array_equal(sp.all_embed.numpy()[:MEMORY - 2 * B], memory[2 * B:])


def test_untrainable_and_misconfigured():
  gin.clear_config()
  identity = representation.StatePreprocess(ndims=15)
  assert identity.get_trainable_vars() == [] and identity.variables_by_tf1_name() == {}
  assert identity.all_embed is None and identity.rng is None
  identity.build(30, 8, 10)  # a no-op
  with pytest.raises(ValueError, match='network factories'):
    representation.StatePreprocess(trainable=True)
  with pytest.raises(ValueError, match='trainable = True'):
    representation.StatePreprocess(state_preprocess_net=_factory(representation.state_preprocess_net))
  with pytest.raises(ValueError, match='repr_optimizer'):
    representation.RepresentationUpdate(_small_preprocess(), None)


# ----------------------------------------------------------------------------------------------------------------------
# hiro_repr (configs/ant_maze_repr.gin) in training.

ORIGINAL_REPR_SHAPES = {  # the original's names and shapes, AntMaze: O = 30, A = 8, c = 10, SUBGOAL_DIM = 2
    'state_preprocess/state_process_net/states/states_1/weights': [30, 100],
    'state_preprocess/state_process_net/states/states_1/biases': [100],
    'state_preprocess/state_process_net/states/states_2/weights': [100, 100],
    'state_preprocess/state_process_net/states/states_2/biases': [100],
    'state_preprocess/state_process_net/value/weights': [100, 2],
    'state_preprocess/state_process_net/value/biases': [2],
    'state_preprocess/action_embed_net/hidden/hidden_1/weights': [110, 400],
    'state_preprocess/action_embed_net/hidden/hidden_1/biases': [400],
    'state_preprocess/action_embed_net/hidden/hidden_2/weights': [400, 300],
    'state_preprocess/action_embed_net/hidden/hidden_2/biases': [300],
    'state_preprocess/action_embed_net/value/weights': [300, 2],
    'state_preprocess/action_embed_net/value/biases': [2],
}


def _run(train_dir, episodes):
  original = hiro_fixtures.CONFIG
  hiro_fixtures.CONFIG = REPR_CONFIG
  try:
    return hiro_fixtures.run_training(train_dir, hiro_fixtures.small_bindings(episodes=episodes))
  finally:
    hiro_fixtures.CONFIG = original


def _state(loop):
  t = loop.trainer
  counters = [
      int(v.numpy()) for v in (t.global_step, t.num_episodes, t.num_updates, t.num_meta_updates,
                               t.replay_buffer.num_adds, t.meta_replay_buffer.num_adds)
  ]
  arrays = [v.numpy() for agent in (t.uvf_agent, t.meta_agent) for v in agent.variables_by_tf1_name().values()]
  arrays += [v.numpy() for v in t.state_preprocess.variables_by_tf1_name().values()]
  arrays += [t.state_preprocess.all_embed.numpy(), t.state_preprocess.rng.state.numpy()]
  arrays += [v.numpy() for v in t.repr_update.optimizer.variables()]
  return counters, arrays


@pytest.fixture(scope='module', name='repr_run')
def _repr_run(tmp_path_factory):
  """150 steps of hiro_repr AntMaze: 50 initial, then 100 iterations (3 episodes of 50 steps)."""
  train_dir = tmp_path_factory.mktemp('repr_run')
  loop = _run(train_dir, episodes=1)
  return train_dir, loop, _state(loop)


def test_hiro_repr_variables_and_policy_checkpoint(repr_run):
  train_dir, loop, _ = repr_run
  t = loop.trainer
  sp = t.state_preprocess
  assert {name: v.shape.as_list() for name, v in sp.variables_by_tf1_name().items()} == ORIGINAL_REPR_SHAPES
  assert list(sp.variables_by_tf1_name().values()) == sp.get_trainable_vars()
  assert sp.all_embed.shape == [1024, 2] and sp.all_embed.name == 'all_embed:0'
  assert np.count_nonzero(sp.all_embed.numpy().any(1)) == 1024  # 100 updates x batch 16 filled it
  assert t.meta_agent.variables_by_tf1_name()['meta_agent/actor_net/actions/weights'].shape == [300, 2]
  assert t.uvf_agent.variables_by_tf1_name()['uvf_agent/actor_net/states/states_1/weights'].shape == [32, 300]
  # One representation step per low-level update: 100 Adam steps (beta1_power = 0.9^101).
  beta1_power, _ = hiro_fixtures.adam_beta_powers(t.repr_update.optimizer)
  np.testing.assert_allclose(beta1_power.numpy(), 0.9**101, rtol=1e-5)
  policy = tf.train.latest_checkpoint(os.path.join(train_dir, 'policy'))
  keys = set(tf.train.load_checkpoint(policy).get_variable_to_shape_map())
  for name in ORIGINAL_REPR_SHAPES:
    assert 'variables/' + name.replace('/', '.S') + '/.ATTRIBUTES/VARIABLE_VALUE' in keys, name
  assert not any('all_embed' in key for key in keys)
  tags = set()
  for path in tf.io.gfile.glob(os.path.join(train_dir, 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      tags.update(value.tag for value in event.summary.value)
  assert 'repr/loss' in tags


def test_hiro_repr_traces_once_and_uses_phi(repr_run):
  _, loop, _ = repr_run
  t = loop.trainer
  assert t.run_steps.experimental_get_tracing_count() == 1
  assert t.collect_steps.experimental_get_tracing_count() == 1
  assert t.repr_update.step_function.experimental_get_tracing_count() == 1
  assert t.relabeler.state_repr_fn is t.state_preprocess
  # The low-level reward is -||phi(s) + g - phi(s')|| on the learned representation.
  captured = {}
  original = t.low_update

  def record(states, actions, rewards, discounts, next_states, *args):
    del actions, discounts, args
    captured.update(states=states.numpy(), rewards=rewards.numpy(), next_states=next_states.numpy())
    return {'critic_loss': tf.zeros([]), 'actor_loss': tf.zeros([])}

  t.low_update, repr_update, t.repr_update = record, t.repr_update, None  # (the repr step would move phi after)
  try:
    t.low_level_update()
  finally:
    t.low_update, t.repr_update = original, repr_update
  s, g, s2 = captured['states'][:, :30], captured['states'][:, 30:], captured['next_states'][:, :30]
  phi = lambda x: t.state_preprocess.state_preprocess_network(x).numpy().astype(np.float64)  # noqa: E731
  expected = -np.sqrt(np.sum((phi(s) + g - phi(s2))**2, 1) + 1e-10)
  np.testing.assert_allclose(captured['rewards'], expected, rtol=1e-5, atol=1e-6)


@pytest.mark.slow
def test_hiro_repr_restart_resumes_exactly(repr_run, tmp_path):
  train_dir, _, _ = repr_run
  continued = _state(_run(train_dir, episodes=2))
  fresh = _state(_run(tmp_path, episodes=2))
  assert continued[0] == fresh[0] == [200, 4, 150, 16, 200, 20]
  for x, y in zip(continued[1], fresh[1]):
    np.testing.assert_array_equal(x, y)
