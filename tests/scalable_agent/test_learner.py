"""Tests of scalable_agent.learner against NumPy re-computations and hand-worked values (original:
deepmind/scalable_agent experiment.py L312-415; Espeholt et al. 2018, Section 4.2)."""

import inspect

import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import agent as agent_lib
from scalable_agent import environments
from scalable_agent import experiment
from scalable_agent import learner as learner_lib
from scalable_agent import networks

NUM_ACTIONS = 5
UNROLL_LENGTH = 3  # T: the batch carries T + 1 steps.
BATCH_SIZE = 2


def _batch(seed):
  """A learner batch with T + 1 = 4 steps and B = 2: episode ends, rewards beyond [-1, 1], varied instructions."""
  rng = np.random.default_rng(seed)
  steps = UNROLL_LENGTH + 1
  shape = (steps, BATCH_SIZE)
  instructions = np.array([['go to the red ball', ''], ['pick  up', 'hello'], ['a b a', 'go'], ['red', 'the ball']])
  env_outputs = environments.StepOutput(
      reward=tf.constant(rng.choice([-3., -0.5, 0., 0.7, 2.], size=shape), tf.float32),
      info=environments.StepOutputInfo(tf.constant(rng.normal(size=shape), tf.float32),
                                       tf.constant(rng.integers(0, 100, shape),
                                                   tf.int32)), done=tf.constant([[True, False], [False, True],
                                                                                 [False, False], [True, False]]),
      observation=(tf.constant(rng.integers(0, 256, shape + (72, 96, 3)), tf.uint8), tf.constant(instructions)))
  agent_outputs = agent_lib.AgentOutput(action=tf.constant(rng.integers(0, NUM_ACTIONS, shape), tf.int32),
                                        policy_logits=tf.constant(rng.normal(size=shape + (NUM_ACTIONS,)), tf.float32),
                                        baseline=tf.constant(rng.normal(size=shape), tf.float32))
  agent_state = agent_lib.LSTMState(
      *(tf.constant(rng.normal(size=(BATCH_SIZE, 256)) * .5, tf.float32) for _ in range(2)))
  return agent_state, env_outputs, agent_outputs


def _log_softmax(logits):
  logits = np.asarray(logits, np.float64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _pick(array, actions):
  return np.take_along_axis(array, actions[..., None], axis=-1)[..., 0]


def _numpy_vtrace(log_rhos, discounts, rewards, values, bootstrap_value):
  """V-trace with the default clips (rho-bar = c-bar = pg rho-bar = 1), backward recursion in float64."""
  rhos = np.exp(log_rhos)
  clipped = np.minimum(rhos, 1.)
  next_values = np.concatenate([values[1:], bootstrap_value[None]])
  deltas = clipped * (rewards + discounts * next_values - values)
  vs_minus_v = np.zeros_like(values)
  acc = np.zeros_like(bootstrap_value)
  for t in reversed(range(len(values))):
    acc = deltas[t] + discounts[t] * clipped[t] * acc
    vs_minus_v[t] = acc
  vs = vs_minus_v + values
  pg_advantages = clipped * (rewards + discounts * np.concatenate([vs[1:], bootstrap_value[None]]) - values)
  return vs, pg_advantages


def _numpy_losses(learner_logits, learner_baselines, batch, discounting, entropy_cost, baseline_cost):
  """The original's losses re-computed in NumPy from the learner's own unroll outputs over all T + 1 steps.

  Returns (total, pg, baseline, entropy, vs, pg_advantages, learner actions [T, B]).
  """
  _, env_outputs, agent_outputs = batch
  actions = agent_outputs.action.numpy()[1:]
  behaviour_logits = agent_outputs.policy_logits.numpy()[1:]
  rewards = np.clip(env_outputs.reward.numpy()[1:], -1, 1)
  discounts = (1. - env_outputs.done.numpy()[1:]) * discounting
  logits, values, bootstrap_value = learner_logits[:-1], learner_baselines[:-1], learner_baselines[-1]
  log_policy = _log_softmax(logits)
  log_rhos = _pick(log_policy, actions) - _pick(_log_softmax(behaviour_logits), actions)
  vs, pg_advantages = _numpy_vtrace(log_rhos, discounts, rewards, values.astype(np.float64), bootstrap_value)
  pg_loss = np.sum(-_pick(log_policy, actions) * pg_advantages)
  baseline_loss = .5 * np.sum((vs - values)**2)
  entropy_loss = np.sum(np.exp(log_policy) * log_policy)
  total = pg_loss + baseline_cost * baseline_loss + entropy_cost * entropy_loss
  return total, pg_loss, baseline_loss, entropy_loss, vs, pg_advantages, actions


def _dense(gradient, variable):
  """A gradient as a dense NumPy array, with the rows an IndexedSlices gradient touches (all rows if dense)."""
  if isinstance(gradient, tf.IndexedSlices):
    dense = np.zeros(variable.shape, np.float64)
    np.add.at(dense, gradient.indices.numpy(), gradient.values.numpy())
    touched = np.zeros(variable.shape[0], bool)
    touched[gradient.indices.numpy()] = True
    return dense, touched
  return gradient.numpy().astype(np.float64), np.ones(variable.shape[0] if variable.shape.rank else 1, bool)


def test_one_step_matches_numpy_loss_and_rmsprop_update():
  tf.random.set_seed(0)
  agent = agent_lib.Agent(NUM_ACTIONS)
  hparams = dict(entropy_cost=0.01, baseline_cost=.5, discounting=.9, learning_rate=0.1, decay=.99, momentum=0.,
                 epsilon=.1, total_environment_frames=1000, num_action_repeats=4)
  learner = learner_lib.Learner(agent, **hparams)
  learner.num_environment_frames.assign(250)
  batch = _batch(seed=1)
  agent_state, env_outputs, agent_outputs = batch
  variables = agent.trainable_variables
  before = [v.numpy() for v in variables]

  # The learner's unroll, and the gradient of the loss written again here (log-softmax, NumPy V-trace targets).
  with tf.GradientTape() as tape:
    learner_outputs, _ = agent.unroll(agent_outputs.action, env_outputs, agent_state)
    logits, baselines = learner_outputs.policy_logits, learner_outputs.baseline
    total, pg, baseline, entropy, vs, pg_advantages, actions = _numpy_losses(logits.numpy(), baselines.numpy(), batch,
                                                                             hparams['discounting'],
                                                                             hparams['entropy_cost'],
                                                                             hparams['baseline_cost'])
    log_policy = tf.nn.log_softmax(logits[:-1])
    tf_loss = (tf.reduce_sum(-tf.gather(log_policy, actions, batch_dims=2) * pg_advantages.astype(np.float32)) +
               hparams['baseline_cost'] * .5 * tf.reduce_sum(tf.square(vs.astype(np.float32) - baselines[:-1])) +
               hparams['entropy_cost'] * tf.reduce_sum(tf.exp(log_policy) * log_policy))
  np.testing.assert_allclose(tf_loss.numpy(), total, rtol=1e-5)
  gradients = tape.gradient(tf_loss, variables)

  metrics = learner.step(*batch)

  np.testing.assert_allclose(metrics['total_loss'], total, rtol=1e-5)
  np.testing.assert_allclose(metrics['pg_loss'], pg, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(metrics['baseline_loss'], baseline, rtol=1e-5)
  np.testing.assert_allclose(metrics['entropy_loss'], entropy, rtol=1e-5)
  learning_rate = 0.1 * (1 - 250 / 1000)
  np.testing.assert_allclose(metrics['learning_rate'], learning_rate, rtol=1e-6)
  assert metrics['num_environment_frames'] == 250 + BATCH_SIZE * UNROLL_LENGTH * 4

  # TF1 RMSProp from ms = 1, mom = 0: ms = 1 + (g^2 - 1)(1 - decay); var -= lr g / sqrt(ms + eps). Rows that an
  # IndexedSlices gradient does not touch keep their variable and slots (TF1's sparse update).
  assert len(variables) == 41 and all(g is not None for g in gradients)
  num_sparse = 0
  for variable, old, gradient in zip(variables, before, gradients):
    grad, touched = _dense(gradient, variable)
    num_sparse += isinstance(gradient, tf.IndexedSlices)
    ms = 1. + (grad**2 - 1.) * (1 - hparams['decay'])
    mom = learning_rate * grad / np.sqrt(ms + hparams['epsilon'])
    mask = touched.reshape((-1,) + (1,) * (grad.ndim - 1)) if grad.ndim else touched[0]
    expected_ms = np.where(mask, ms, 1.)
    expected_mom = np.where(mask, mom, 0.)
    ms_slot, mom_slot = learner.optimizer.slots_for(variable)
    scale = np.abs(expected_mom).max() + 1e-12
    np.testing.assert_allclose(mom_slot.numpy(), expected_mom, rtol=1e-4, atol=1e-5 * scale, err_msg=variable.name)
    # var -= mom, in float32 (a difference of two float32 variables would drown the small steps in rounding).
    np.testing.assert_allclose(variable.numpy(),
                               old.astype(np.float32) - mom_slot.numpy(), rtol=1e-7, atol=0, err_msg=variable.name)
    np.testing.assert_allclose(ms_slot.numpy(), expected_ms, rtol=1e-5, atol=1e-7, err_msg=variable.name)
  assert num_sparse == 1  # The instruction embedding gets TF1's sparse update.


def test_global_norm_gradient_clipping_matches_numpy():
  """learner.gradient_clipping = c scales the gradients by c / max(c, n), n their global norm computed here in NumPy
  (sqrt of the sum of all squared entries). With RMSProp decay 1 the mean square stays 1, so the first update's
  momentum slot is lr g / sqrt(1 + epsilon): it gives back the (clipped) gradient g of each variable."""
  batch = _batch(seed=2)
  learning_rate, epsilon = 0.01, 0.1

  def one_step(gradient_clipping):
    tf.random.set_seed(7)  # The same initial agent in every call (the shallow expert: quick to trace).
    agent = networks.FeedForwardAgent(NUM_ACTIONS, (72, 96, 3))
    initial = [v.numpy() for v in agent.trainable_variables]
    learner = learner_lib.Learner(agent, learning_rate=learning_rate, decay=1., momentum=0., epsilon=epsilon,
                                  total_environment_frames=1000, gradient_clipping=gradient_clipping)
    metrics = {k: v.numpy() for k, v in learner.step(*batch).items()}
    gradients = [
        learner.optimizer.slots_for(v)[1].numpy().astype(np.float64) * np.sqrt(1. + epsilon) / learning_rate
        for v in agent.trainable_variables
    ]
    return metrics, gradients, initial

  metrics, gradients, initial = one_step(0.)  # Off (the original): no clipping and no gradient_norm metric.
  assert 'gradient_norm' not in metrics
  norm = np.sqrt(sum(np.sum(g**2) for g in gradients))
  assert norm > 0

  for clip, scale in ((10. * norm, 1.), (norm / 4., .25)):
    clipped_metrics, clipped, clipped_initial = one_step(clip)
    for a, b in zip(initial, clipped_initial):
      np.testing.assert_array_equal(a, b)
    np.testing.assert_allclose(clipped_metrics['gradient_norm'], norm, rtol=1e-4)  # The norm before clipping.
    for g, g_clipped in zip(gradients, clipped):
      np.testing.assert_allclose(g_clipped, scale * g, rtol=1e-4, atol=1e-6 * norm)
    np.testing.assert_allclose(np.sqrt(sum(np.sum(g**2) for g in clipped)), min(clip, norm), rtol=1e-4)
    np.testing.assert_allclose(clipped_metrics['total_loss'], metrics['total_loss'], rtol=1e-6)

  with pytest.raises(ValueError, match=r'gradient_clipping must be >= 0 \(0: off\), got -1.0'):
    learner_lib.Learner(agent_lib.Agent(NUM_ACTIONS), gradient_clipping=-1.)


def test_train_step_is_traced_once():
  agent = agent_lib.Agent(NUM_ACTIONS)
  learner = learner_lib.Learner(agent)
  for seed in range(3):
    metrics = learner.step(*_batch(seed))
    assert np.isfinite(metrics['total_loss'].numpy())
  assert learner.train_step.experimental_get_tracing_count() == 1
  assert learner.num_environment_frames.numpy() == 3 * BATCH_SIZE * UNROLL_LENGTH * 4


@pytest.mark.parametrize('frames, expected', [(0, 0.00048), (250, 0.00036), (500, 0.00024), (1000, 0.), (1500, 0.)])
def test_learning_rate_decays_linearly_to_zero(frames, expected):
  """lr(f) = 0.00048 (1 - min(f, 1000) / 1000), worked by hand."""
  np.testing.assert_allclose(learner_lib.linear_decay_learning_rate(0.00048, tf.constant(frames, tf.int64), 1000),
                             expected, rtol=1e-6, atol=1e-12)


def test_learner_learning_rate_follows_the_frame_counter():
  learner = learner_lib.Learner(agent_lib.Agent(NUM_ACTIONS))  # defaults: 0.00048 over 1e9 frames
  np.testing.assert_allclose(learner.learning_rate(), 0.00048, rtol=1e-6)
  learner.num_environment_frames.assign(int(2.5e8))
  np.testing.assert_allclose(learner.learning_rate(), 0.00036, rtol=1e-6)
  learner.num_environment_frames.assign(int(2e9))
  assert learner.learning_rate().numpy() == 0.


def test_reward_clipping_abs_one():
  rewards = [[-3., -1., -.5, 0.], [.5, 1., 3., 100.]]
  np.testing.assert_allclose(learner_lib.clip_rewards(rewards, 'abs_one'), [[-1., -1., -.5, 0.], [.5, 1., 1., 1.]])


def test_reward_clipping_soft_asymmetric():
  """5 tanh(r / 5) for r >= 0, 1.5 tanh(r / 5) for r < 0 (the code, not the paper's caption)."""
  rewards = [[5., -5., 10.], [-10., 1., -1.], [0., 0., 0.]]
  expected = [[3.8079708, -1.1423912, 4.8201379], [-1.4460414, 0.9868766, -0.2960630], [0., 0., 0.]]
  np.testing.assert_allclose(learner_lib.clip_rewards(rewards, 'soft_asymmetric'), expected, rtol=1e-6, atol=1e-7)


def test_unknown_reward_clipping():
  with pytest.raises(ValueError, match='abs_one, soft_asymmetric'):
    learner_lib.clip_rewards([1.], 'abs_two')
  with pytest.raises(ValueError, match='abs_one, soft_asymmetric'):
    learner_lib.Learner(agent_lib.Agent(NUM_ACTIONS), reward_clipping='clip')


def test_rmsprop_single_step_reference_value():
  """var = 1, g = 1, lr = 0.1, decay = 0.99, eps = 0.1: ms = 1, var = 1 - 0.1 / sqrt(1.1) = 0.90465 (TF1)."""
  variable = tf.Variable([1.], name='v')
  optimizer = learner_lib.RMSProp(0.1, decay=0.99, momentum=0., epsilon=0.1)
  optimizer.create_slots([variable])
  ms, mom = optimizer.slots_for(variable)
  assert ms.name == 'v/RMSProp:0' and mom.name == 'v/RMSProp_1:0'
  assert ms.numpy()[0] == 1. and mom.numpy()[0] == 0.
  optimizer.apply_gradients([(tf.constant([1.]), variable)])
  np.testing.assert_allclose(variable.numpy(), [0.90465], atol=1e-5)
  np.testing.assert_allclose(ms.numpy(), [1.], rtol=1e-7)
  np.testing.assert_allclose(mom.numpy(), [0.0953463], rtol=1e-6)


def test_rmsprop_momentum_and_sparse_rows():
  """Two steps with momentum 0.5, and an IndexedSlices gradient with a duplicate index and an untouched row."""
  variable = tf.Variable([2.])
  optimizer = learner_lib.RMSProp(lambda: tf.constant(0.1), decay=0.9, momentum=0.5, epsilon=0.1)
  optimizer.create_slots([variable])
  for _ in range(2):
    optimizer.apply_gradients([(tf.constant([2.]), variable)])
  # Step 1: ms = 1 + (4 - 1) 0.1 = 1.3; mom = 0.1 * 2 / sqrt(1.4) = 0.1690309; var = 1.8309691.
  # Step 2: ms = 1.3 + (4 - 1.3) 0.1 = 1.57; mom = 0.5 * 0.1690309 + 0.2 / sqrt(1.67) = 0.2392801; var = 1.5916891.
  np.testing.assert_allclose(variable.numpy(), [1.5916891], rtol=1e-6)
  np.testing.assert_allclose(optimizer.slots_for(variable)[0].numpy(), [1.57], rtol=1e-6)

  table = tf.Variable(tf.ones([3, 2]))
  optimizer = learner_lib.RMSProp(0.1, decay=0.99, momentum=0., epsilon=0.1)
  optimizer.create_slots([table])
  optimizer.apply_gradients([(tf.IndexedSlices(tf.constant([[.5, .5], [1., 1.], [.5, .5]]), tf.constant([0, 2, 0]),
                                               tf.constant([3, 2])), table)])
  np.testing.assert_allclose(table.numpy(), [[0.90465] * 2, [1., 1.], [0.90465] * 2], atol=1e-5)
  np.testing.assert_allclose(optimizer.slots_for(table)[0].numpy(), np.ones([3, 2]))  # row 1 untouched: ms stays 1


def test_optimizer_without_slots_names_the_variable():
  optimizer = learner_lib.RMSProp(0.1)
  with pytest.raises(KeyError, match='no slots for w'):
    optimizer.apply_gradients([(tf.constant([1.]), tf.Variable([1.], name='w'))])


def test_defaults_are_the_original_flags():
  """The learner's hyper-parameters have the names and defaults of the original flags (experiment.experiment)."""
  flags = inspect.signature(experiment.experiment).parameters
  learner_parameters = inspect.signature(learner_lib.Learner.__init__).parameters
  # gradient_clipping is not an original flag (the paper's Atari setting, gin learner.gradient_clipping): off.
  names = [n for n in learner_parameters if n not in ('self', 'agent', 'name', 'gradient_clipping')]
  assert set(names) <= set(flags)
  for name in names:
    assert learner_parameters[name].default == flags[name].default, name
  assert learner_parameters['gradient_clipping'].default == 0.
