"""TD3 agent and its compiled update against NumPy re-computations (original: tensorflow/models
research/efficient-hrl agents/ddpg_agent.py)."""

import functools

import gin
import numpy as np
import pytest
import tensorflow as tf

from tests.uvf.test_ddpg_networks import clean_gin  # noqa: F401  pylint: disable=unused-import (a fixture)
from tests.uvf.test_ddpg_networks import np_actor
from tests.uvf.test_ddpg_networks import np_weights
from tests.uvf.test_ddpg_networks import randomize
from tests.uvf.test_ddpg_networks import Spec
from uvf.agents import ddpg_agent
from uvf.agents import ddpg_networks
from uvf.agents import td3_update

O, A, B = 6, 3, 5
BOUND = 0.5  # action bounds +-0.5: the smoothed target actions often leave them
ADAM = dict(beta1=0.9, beta2=0.999, epsilon=1e-8)


def make_agent(seed=0, **kwargs):
  """A small TD3 agent with random (non-trivial) weights, targets different from the online networks."""
  agent = ddpg_agent.TD3Agent([Spec([O])], [Spec([A], -BOUND, BOUND)],
                              actor_net=functools.partial(ddpg_networks.actor_net, hidden_layers=(8, 8), zero_obs=True),
                              critic_net=functools.partial(ddpg_networks.critic_net, states_hidden_layers=(8,),
                                                           joint_hidden_layers=(7,),
                                                           zero_obs=True), scope='uvf_agent', seed=seed, **kwargs)
  rng = np.random.default_rng(seed)
  for net in agent.networks.values():
    randomize(net, rng)
  return agent


def make_batch(seed=0):
  rng = np.random.default_rng(seed + 100)
  return [rng.normal(size=s).astype(np.float32) for s in [(B, O), (B, A), (B,), (B,), (B, O)]]


def np_critic_with_hidden(w, states, actions):
  """The critic by definition (zero_obs on), returning (q [B], joint hidden output [B, H])."""
  x = np.concatenate([states, actions], 1).astype(np.float64)
  x = x * np.r_[0.0, 0.0, np.ones(x.shape[1] - 2)]
  x = np.maximum(x @ w['states/states_1/weights'] + w['states/states_1/biases'], 0)
  h = np.maximum(np.concatenate([x, actions], 1) @ w['joint/joint_1/weights'] + w['joint/joint_1/biases'], 0)
  return (h @ w['q_value/weights'] + w['q_value/biases'])[:, 0], h


def np_q(net, states, actions):
  return np_critic_with_hidden(np_weights(net), states, actions)[0]


def np_mu(net, states):
  return np_actor(np_weights(net), states, -BOUND, BOUND, 2, True)


def huber(e):
  return np.where(np.abs(e) <= 1.0, 0.5 * e**2, np.abs(e) - 0.5)


def np_targets(agent, rewards, discounts, next_states, noise, reclip=False):
  nets = agent.networks
  target_actions = np_mu(nets['target_actor_net'], next_states) + noise
  if reclip:
    target_actions = np.clip(target_actions, -BOUND, BOUND)
  q1 = np_q(nets['target_critic_net'], next_states, target_actions)
  q2 = np_q(nets['target_critic_net2'], next_states, target_actions)
  return rewards + discounts * np.minimum(q1, q2)


def np_adam(grads, lr, beta1=0.9, beta2=0.999, epsilon=1e-8):
  """TF1 AdamOptimizer ('epsilon hat' form): the sum of the steps for the gradient sequence `grads`."""
  m = v = 0.0
  delta = 0.0
  for t, g in enumerate(grads, start=1):
    m = beta1 * m + (1 - beta1) * g
    v = beta2 * v + (1 - beta2) * g**2
    delta = delta - lr * np.sqrt(1 - beta2**t) / (1 - beta1**t) * m / (np.sqrt(v) + epsilon)
  return delta


def np_dqda(agent, states):
  """dQ1/da at a = mu(s), by central differences of the NumPy critic (float64)."""
  actions = np_mu(agent.networks['actor_net'], states)
  dqda = np.zeros_like(actions)
  for j in range(A):
    step = np.zeros_like(actions)
    step[:, j] = 1e-6
    critic = agent.networks['critic_net']
    dqda[:, j] = (np_q(critic, states, actions + step) - np_q(critic, states, actions - step)) / 2e-6
  return dqda


def np_actor_bias_grad(agent, states):
  """d actor_loss / d actor_net/actions/biases = -2/(B A) sum_b dqda[b] * half_width * (1 - tanh(z_b)^2)."""
  w = np_weights(agent.networks['actor_net'])
  x = states.astype(np.float64) * np.r_[0.0, 0.0, np.ones(O - 2)]
  for i in (1, 2):
    x = np.maximum(x @ w[f'states/states_{i}/weights'] + w[f'states/states_{i}/biases'], 0)
  tanh = np.tanh(x @ w['actions/weights'] + w['actions/biases'])
  return -2.0 / (B * A) * np.sum(np_dqda(agent, states) * BOUND * (1 - tanh**2), 0)


def variable(agent, name):
  return agent.variables_by_tf1_name()['uvf_agent/' + name]


def test_critic_loss_without_noise():
  agent = make_agent(target_policy_noise=0.0)
  s, a, r, d, s2 = make_batch()
  y = np_targets(agent, r, d, s2, noise=0.0)
  q = np.stack([np_q(agent.networks['critic_net'], s, a), np_q(agent.networks['critic_net2'], s, a)])
  expected = huber(q - y).mean()  # one target for both critics, mean over the 2 x B elements
  np.testing.assert_allclose(agent.critic_loss(s, a, r, d, s2).numpy(), expected, rtol=1e-5)
  q1, q2 = agent.critic(s, a)
  np.testing.assert_allclose(np.stack([q1, q2]), q, rtol=1e-5, atol=1e-6)


def test_critic_loss_with_clipped_smoothing_noise_not_reclipped_to_bounds():
  agent = make_agent(seed=3, target_policy_noise=1.0)  # std 1: the +-0.5 clip bites
  s, a, r, d, s2 = make_batch(1)
  noise = tf.random.Generator.from_seed(3).normal([B, A], stddev=1.0).numpy()  # the agent's first draw
  assert np.any(np.abs(noise) > 0.5)
  clipped = np.clip(noise, -0.5, 0.5)
  q = np.stack([np_q(agent.networks['critic_net'], s, a), np_q(agent.networks['critic_net2'], s, a)])
  expected = huber(q - np_targets(agent, r, d, s2, clipped)).mean()
  reclipped = huber(q - np_targets(agent, r, d, s2, clipped, reclip=True)).mean()
  assert abs(expected - reclipped) > 1e-3  # the test can tell the two apart
  np.testing.assert_allclose(agent.critic_loss(s, a, r, d, s2).numpy(), expected, rtol=1e-5)


def test_original_noise_constants():
  assert (ddpg_agent.TARGET_POLICY_NOISE, ddpg_agent.TARGET_POLICY_NOISE_CLIP) == (0.2, 0.5)


def test_actor_loss_and_its_gradient():
  agent = make_agent(seed=4)
  s = make_batch(4)[0]
  with tf.GradientTape() as tape:
    loss = agent.actor_loss(s)
  bias = variable(agent, 'actor_net/actions/biases')
  grad = tape.gradient(loss, bias).numpy()
  np.testing.assert_allclose(loss.numpy(), np.mean(np_dqda(agent, s)**2), rtol=1e-3)
  np.testing.assert_allclose(grad, np_actor_bias_grad(agent, s), rtol=1e-3, atol=1e-7)
  critic_vars = agent.get_trainable_critic_vars()
  with tf.GradientTape() as tape:
    loss = agent.actor_loss(s)
  assert all(g is None for g in tape.gradient(loss, critic_vars))  # the actor loss never trains the critics


def test_one_adam_update_of_the_critic():
  agent = make_agent(seed=5, target_policy_noise=0.0)
  agent.copy_to_targets()
  s, a, r, d, s2 = make_batch(5)
  w = np_weights(agent.networks['critic_net'])
  q, h = np_critic_with_hidden(w, s, a)
  dq = np.clip(q - np_targets(agent, r, d, s2, 0.0), -1, 1) / (2 * B)  # Huber' / (2 B)
  update = td3_update.Td3Update(agent, tf.compat.v1.train.AdamOptimizer(1e-3, **ADAM),
                                tf.compat.v1.train.AdamOptimizer(1e-4, **ADAM), tau=0.005)
  update(s, a, r, d, s2)
  np.testing.assert_allclose(
      variable(agent, 'critic_net/q_value/biases').numpy() - w['q_value/biases'], np_adam([dq.sum()], 1e-3), rtol=1e-4,
      atol=1e-9)
  np.testing.assert_allclose(
      variable(agent, 'critic_net/q_value/weights').numpy()[:, 0] - w['q_value/weights'][:, 0],
      np_adam([h.T @ dq], 1e-3), rtol=1e-4, atol=1e-9)
  assert update.num_updates.numpy() == 1


@pytest.mark.parametrize('skip', [False, True])
def test_delayed_actor_still_steps_through_adam(skip):
  agent = make_agent(seed=6)
  agent.copy_to_targets()
  batch = make_batch(6)
  bias = variable(agent, 'actor_net/actions/biases')
  before = bias.numpy().astype(np.float64)
  grad = np_actor_bias_grad(agent, batch[0])  # from the weights before the call, as the update computes it
  update = td3_update.Td3Update(agent, tf.compat.v1.train.AdamOptimizer(1e-3, **ADAM),
                                tf.compat.v1.train.AdamOptimizer(1e-3, **ADAM), tau=0.005, skip_delayed_actor_step=skip)
  first = update(*batch)  # num_updates 0: the actor loss is on
  after_first = bias.numpy().astype(np.float64)
  np.testing.assert_allclose(after_first - before, np_adam([grad], 1e-3), rtol=1e-3)
  second = update(*batch)  # num_updates 1: the actor loss is multiplied by 0
  assert first['actor_loss'].numpy() > 0 and second['actor_loss'].numpy() == 0.0
  moved = bias.numpy() - after_first
  if skip:
    np.testing.assert_array_equal(moved, 0.0)
  else:  # zero gradient, but Adam's moments from the first step still move the weights
    expected = np_adam([grad, 0.0 * grad], 1e-3) - np_adam([grad], 1e-3)
    assert np.all(np.abs(expected) > 1e-4)
    np.testing.assert_allclose(moved, expected, rtol=1e-3)


@pytest.mark.usefixtures('clean_gin')
def test_targets_move_on_the_second_and_fourth_call_with_the_gin_tau():
  gin.parse_config('td3_update_targets.tau = 0.25')
  agent = make_agent(seed=7)
  agent.copy_to_targets()
  update = td3_update.Td3Update(agent, tf.compat.v1.train.AdamOptimizer(1e-2), tf.compat.v1.train.AdamOptimizer(1e-2))
  assert update.tau == 0.25
  sources = agent.get_trainable_actor_vars() + agent.get_trainable_critic_vars()
  targets = agent.get_target_vars()
  for call in range(1, 5):
    old = [t.numpy() for t in targets]
    update(*make_batch(call))
    for source, target, previous in zip(sources, targets, old):
      if call % 2:
        np.testing.assert_array_equal(target.numpy(), previous)
      else:
        np.testing.assert_allclose(target.numpy(), 0.75 * previous + 0.25 * source.numpy(), rtol=1e-6, atol=1e-7)
  assert update.num_updates.numpy() == 4 and update.target_update_counter.numpy() == 4


def test_hard_copy_pairs_each_network_with_its_target():
  agent = make_agent(seed=8)
  agent.copy_to_targets()
  names = agent.variables_by_tf1_name()
  for net in ['actor_net', 'critic_net', 'critic_net2']:
    for name, value in names.items():
      if name.startswith(f'uvf_agent/{net}/'):
        np.testing.assert_array_equal(names[name.replace(f'/{net}/', f'/target_{net}/')].numpy(), value.numpy())


def test_update_traces_once():
  agent = make_agent(seed=9)
  update = td3_update.Td3Update(agent, tf.compat.v1.train.AdamOptimizer(1e-3), tf.compat.v1.train.AdamOptimizer(1e-4),
                                tau=0.005)
  update(*make_batch(0))  # creates the Adam slots: may trace twice
  traces = update.step_function.experimental_get_tracing_count()
  for seed in range(1, 6):  # both actor phases and both target phases
    update(*[tf.constant(x) for x in make_batch(seed)])
  assert update.step_function.experimental_get_tracing_count() == traces
  assert update.num_updates.numpy() == 6


def test_eager_function_and_xla_updates_agree():
  # Without smoothing noise: XLA draws another stream than the CPU kernels from the same generator state.
  results = []
  for mode in ['eager', 'function', 'xla']:
    agent = make_agent(seed=10, target_policy_noise=0.0)
    agent.copy_to_targets()
    update = td3_update.Td3Update(agent, tf.compat.v1.train.AdamOptimizer(1e-3), tf.compat.v1.train.AdamOptimizer(1e-3),
                                  tau=0.1, jit_compile=(mode == 'xla'))
    step = update.step_function.python_function if mode == 'eager' else update
    losses = [step(*make_batch(seed)) for seed in range(3)]
    results.append(
        ([float(l['critic_loss']) for l in losses], [v.numpy() for v in agent.variables_by_tf1_name().values()]))
  for losses, weights in results[1:]:
    np.testing.assert_allclose(losses, results[0][0], rtol=1e-4)
    for ours, reference in zip(weights, results[0][1]):
      np.testing.assert_allclose(ours, reference, rtol=1e-4, atol=1e-5)


def test_bad_arguments_raise_value_error():
  with pytest.raises(ValueError, match='dqda_clipping'):
    make_agent(dqda_clipping=-1.0)
  with pytest.raises(ValueError, match='residual_phi'):
    make_agent(residual_phi=0.5)
  with pytest.raises(ValueError, match='exactly one spec'):
    ddpg_agent.TD3Agent([Spec([O]), Spec([O])], [Spec([A], -1.0, 1.0)])
  agent = make_agent()
  with pytest.raises(ValueError, match=r'states must have shape \[batch, 6\]'):
    agent.actor(np.zeros([2, 5], np.float32))
  with pytest.raises(ValueError, match='tau must be in'):
    agent.update_targets(1.5)
  with pytest.raises(ValueError, match='target_update_period'):
    td3_update.Td3Update(agent, None, None, target_update_period=0, tau=0.1)


def test_target_q_clipping_clips_the_td_targets():
  agent = make_agent(seed=12, target_policy_noise=0.0)
  s, a, r, d, s2 = make_batch(12)
  y = np_targets(agent, r, d, s2, noise=0.0)
  low, high = np.quantile(y, [0.3, 0.7])  # both bounds bite
  clipped = make_agent(seed=12, target_policy_noise=0.0, target_q_clipping=(low, high))
  q = np.stack([np_q(agent.networks['critic_net'], s, a), np_q(agent.networks['critic_net2'], s, a)])
  expected = huber(q - np.clip(y, low, high)).mean()
  assert abs(expected - huber(q - y).mean()) > 1e-3
  np.testing.assert_allclose(clipped.critic_loss(s, a, r, d, s2).numpy(), expected, rtol=1e-5)


def test_dqda_clipping_clips_the_actor_gradient():
  agent = make_agent(seed=13)
  s = make_batch(13)[0]
  dqda = np_dqda(agent, s)
  clip = float(np.quantile(np.abs(dqda), 0.5))  # half of the elements are clipped
  clipped = make_agent(seed=13, dqda_clipping=clip)
  np.testing.assert_allclose(clipped.actor_loss(s).numpy(), np.mean(np.clip(dqda, -clip, clip)**2), rtol=1e-3)
  assert abs(np.mean(np.clip(dqda, -clip, clip)**2) - np.mean(dqda**2)) > 0.1 * np.mean(dqda**2)


def test_actions_regularizer_adds_the_norm_of_the_actions():
  agent = make_agent(seed=14, actions_regularizer=0.3)
  s = make_batch(14)[0]
  mu = np_mu(agent.networks['actor_net'], s)
  expected = np.mean(np_dqda(agent, s)**2) + 0.3 * np.sqrt(np.sum(mu**2))  # Frobenius norm over the batch
  np.testing.assert_allclose(agent.actor_loss(s).numpy(), expected, rtol=1e-3)


def _scalars(logdir):
  """{tag: value} of the scalar summaries in the event files under `logdir` (read back with TF1's iterator)."""
  values = {}
  for path in tf.io.gfile.glob(str(logdir / 'events.out.tfevents.*')):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        values[value.tag] = float(tf.make_ndarray(value.tensor)) if value.HasField('tensor') else value.simple_value
  return values


def test_debug_summaries_write_scalars_and_keep_the_loss(tmp_path):
  batch = make_batch(11)
  plain = make_agent(seed=11, target_policy_noise=0.0).critic_loss(*batch)
  agent = make_agent(seed=11, target_policy_noise=0.0, debug_summaries=True)
  writer = tf.summary.create_file_writer(str(tmp_path))
  with writer.as_default(step=0):
    loss = agent.critic_loss(*batch)
  writer.close()
  assert loss.numpy() == plain.numpy()
  s, a, r, d, s2 = batch
  nets = agent.networks
  target_q = np.minimum(np_q(nets['target_critic_net'], s2, np_mu(nets['target_actor_net'], s2)),
                        np_q(nets['target_critic_net2'], s2, np_mu(nets['target_actor_net'], s2)))
  y = r + d * target_q
  q = np.stack([np_q(nets['critic_net'], s, a), np_q(nets['critic_net2'], s, a)])
  expected = {'target_q_values': target_q, 'q_values': q, 'td_targets': y, 'td_errors': y - q}
  scalars = _scalars(tmp_path)
  for name, value in expected.items():
    for stat, fn in (('mean', np.mean), ('max', np.max), ('min', np.min)):
      np.testing.assert_allclose(scalars[f'td_errors/{name}/{stat}'], fn(value), rtol=1e-4, atol=1e-5,
                                 err_msg=f'{name}/{stat}')
  np.testing.assert_allclose(scalars['td_errors/td_errors/mean_abs'], np.mean(np.abs(y - q)), rtol=1e-4)
  assert len(scalars) == 13
