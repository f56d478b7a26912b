"""Tests of scalable_agent.vtrace: every case of the original vtrace_test.py (deepmind/scalable_agent), each against a
NumPy ground truth written here from the paper's definition (Espeholt et al. 2018, Section 4.1, Eq. 1), on every
execution path (XLA, graph, op by op)."""

import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import vtrace

# The original compares with tf.test.TestCase.assertAllClose, i.e. np.allclose(rtol=1e-6, atol=1e-6).
RTOL = ATOL = 1e-6


def _shaped_arange(*shape):
  """float32 0, 1, ..., N - 1 reshaped to `shape`."""
  return np.arange(np.prod(shape), dtype=np.float32).reshape(*shape)


def _log_softmax(logits):
  logits = np.asarray(logits, np.float64)
  shifted = logits - logits.max(axis=-1, keepdims=True)
  return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _action_log_probs(logits, actions):
  """log softmax(logits)[t, b, actions[t, b]] picked with a one-hot mask, as the original test does."""
  mask = actions[..., None] == np.arange(logits.shape[-1])
  return _log_softmax(logits)[mask].reshape(actions.shape)


def _ground_truth(log_rhos, discounts, rewards, values, bootstrap_value, clip_rho_threshold=1.0,
                  clip_pg_rho_threshold=1.0):
  """V-trace by definition (paper eq. 1), a literal O(T^2) double loop in float64:

    v_s = V_s + sum_{t=s}^{T-1} (prod_{i=s}^{t-1} gamma_i c_i) rho-bar_t (r_t + gamma_t V_{t+1} - V_t)

  with V_T = bootstrap_value and c_i = min(1, rho_i); thresholds apply only when truthy (as in the original test).
  Returns (vs, pg_advantages), with pg_advantage_s = rho-bar^pg_s (r_s + gamma_s v_{s+1} - V_s) and v_T = V_T.
  """
  log_rhos, discounts, rewards, values, bootstrap_value = (
      np.asarray(x, np.float64) for x in (log_rhos, discounts, rewards, values, bootstrap_value))
  rhos = np.exp(log_rhos)
  cs = np.minimum(rhos, 1.0)
  clipped_rhos = np.minimum(rhos, clip_rho_threshold) if clip_rho_threshold else rhos
  clipped_pg_rhos = np.minimum(rhos, clip_pg_rho_threshold) if clip_pg_rho_threshold else rhos
  values_t_plus_1 = np.concatenate([values, bootstrap_value[None]], axis=0)
  num_steps = len(discounts)
  vs = []
  for s in range(num_steps):
    v_s = np.copy(np.broadcast_to(values[s], np.broadcast_shapes(values[s].shape, log_rhos[s].shape)))
    for t in range(s, num_steps):
      v_s += (np.prod(discounts[s:t], axis=0) * np.prod(cs[s:t], axis=0) * clipped_rhos[t] *
              (rewards[t] + discounts[t] * values_t_plus_1[t + 1] - values[t]))
    vs.append(v_s)
  vs = np.stack(vs, axis=0)
  vs_t_plus_1 = np.concatenate([vs[1:], np.broadcast_to(bootstrap_value, vs.shape[1:])[None]], axis=0)
  pg_advantages = clipped_pg_rhos * (rewards + discounts * vs_t_plus_1 - values)
  return vs, pg_advantages


def _discounts(seq_len, batch_size):
  """[T, B] with column b equal to 0.9 / (b + 1), float64 as in the original test."""
  return np.array([[0.9 / (b + 1) for b in range(batch_size)] for _ in range(seq_len)])


def _original_vtrace_inputs(batch_size, seq_len=5):
  """The inputs of the original VtraceTest.test_vtrace: rho spans about [0.08, 12.2), across both clips."""
  log_rhos = 5 * (_shaped_arange(seq_len, batch_size) / (batch_size * seq_len) - 0.5)  # [-2.5, 2.5)
  return dict(log_rhos=log_rhos, discounts=_discounts(seq_len, batch_size), rewards=_shaped_arange(seq_len, batch_size),
              values=_shaped_arange(seq_len, batch_size) / batch_size, bootstrap_value=_shaped_arange(batch_size) + 1.0,
              clip_rho_threshold=3.7, clip_pg_rho_threshold=2.2)


@pytest.mark.parametrize('batch_size', [1, 2])
def test_log_probs_from_logits_and_actions(batch_size):
  seq_len, num_actions = 7, 3
  policy_logits = _shaped_arange(seq_len, batch_size, num_actions) + 10
  actions = np.random.default_rng(batch_size).integers(0, num_actions, size=(seq_len, batch_size), dtype=np.int32)
  log_probs = vtrace.log_probs_from_logits_and_actions(policy_logits, actions)
  assert log_probs.shape == (seq_len, batch_size) and log_probs.dtype == tf.float32
  np.testing.assert_allclose(log_probs, _action_log_probs(policy_logits, actions), rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize('execution_mode', vtrace.EXECUTION_MODES)
@pytest.mark.parametrize('batch_size', [1, 5])
def test_vtrace(batch_size, execution_mode):
  inputs = _original_vtrace_inputs(batch_size)
  output = vtrace.from_importance_weights(execution_mode=execution_mode, **inputs)
  assert isinstance(output, vtrace.VTraceReturns)
  expected_vs, expected_pg_advantages = _ground_truth(**inputs)
  np.testing.assert_allclose(output.vs, expected_vs, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(output.pg_advantages, expected_pg_advantages, rtol=RTOL, atol=ATOL)


def test_vtrace_with_episode_ends_and_default_clips():
  """Random inputs with discount 0 (episode ends) and rho on both sides of the default clips 1.0 / 1.0."""
  rng = np.random.default_rng(0)
  seq_len, batch_size = 7, 3
  inputs = {
      k: v.astype(np.float32)
      for k, v in dict(log_rhos=rng.uniform(-2.5, 2.5, (seq_len, batch_size)), discounts=rng.choice([0.0, 0.99], (
          seq_len, batch_size)), rewards=rng.normal(size=(seq_len, batch_size)), values=rng.normal(
              size=(seq_len, batch_size)), bootstrap_value=rng.normal(size=batch_size)).items()
  }
  output = vtrace.from_importance_weights(**inputs)
  expected_vs, expected_pg_advantages = _ground_truth(**inputs)
  np.testing.assert_allclose(output.vs, expected_vs, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(output.pg_advantages, expected_pg_advantages, rtol=1e-5, atol=1e-5)


def _unknown_shape_from_logits(execution_mode, clip_rho_threshold, clip_pg_rho_threshold):
  """from_logits in a tf.function whose inputs have unknown shapes (the original used placeholders)."""

  @tf.function(input_signature=[
      tf.TensorSpec([None, None, None], tf.float32),  # behaviour_policy_logits [T, B, NUM_ACTIONS]
      tf.TensorSpec([None, None, None], tf.float32),  # target_policy_logits [T, B, NUM_ACTIONS]
      tf.TensorSpec([None, None], tf.int32),  # actions
      tf.TensorSpec([None, None], tf.float32),  # discounts
      tf.TensorSpec([None, None], tf.float32),  # rewards
      tf.TensorSpec([None, None], tf.float32),  # values
      tf.TensorSpec([None], tf.float32)
  ])  # bootstrap_value [B]
  def run(behaviour_policy_logits, target_policy_logits, actions, discounts, rewards, values, bootstrap_value):
    return vtrace.from_logits(behaviour_policy_logits, target_policy_logits, actions, discounts, rewards, values,
                              bootstrap_value, clip_rho_threshold=clip_rho_threshold,
                              clip_pg_rho_threshold=clip_pg_rho_threshold, execution_mode=execution_mode)

  return run


def _check_from_logits(output, behaviour_policy_logits, target_policy_logits, actions, discounts, rewards, values,
                       bootstrap_value, clip_rho_threshold, clip_pg_rho_threshold):
  assert isinstance(output, vtrace.VTraceFromLogitsReturns)
  behaviour_log_probs = _action_log_probs(behaviour_policy_logits, actions)
  target_log_probs = _action_log_probs(target_policy_logits, actions)
  log_rhos = target_log_probs - behaviour_log_probs
  expected_vs, expected_pg_advantages = _ground_truth(log_rhos, discounts, rewards, values, bootstrap_value,
                                                      clip_rho_threshold, clip_pg_rho_threshold)
  np.testing.assert_allclose(output.vs, expected_vs, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(output.pg_advantages, expected_pg_advantages, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(output.behaviour_action_log_probs, behaviour_log_probs, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(output.target_action_log_probs, target_log_probs, rtol=RTOL, atol=ATOL)
  np.testing.assert_allclose(output.log_rhos, log_rhos, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize('execution_mode', vtrace.EXECUTION_MODES)
@pytest.mark.parametrize('batch_size', [1, 2])
def test_vtrace_from_logits(batch_size, execution_mode):
  """The original case: unknown shapes, no clipping, identical policies (log_rhos = 0), actions in {0, 1}."""
  seq_len, num_actions = 5, 3
  inputs = dict(
      behaviour_policy_logits=_shaped_arange(seq_len, batch_size, num_actions),
      target_policy_logits=_shaped_arange(seq_len, batch_size, num_actions),
      # The original draws from [0, num_actions - 1), i.e. actions 0 and 1 only; kept as it is.
      actions=np.random.default_rng(batch_size).integers(0, num_actions - 1, size=(seq_len, batch_size),
                                                         dtype=np.int32),
      discounts=_discounts(seq_len, batch_size).astype(np.float32),
      rewards=_shaped_arange(seq_len, batch_size),
      values=_shaped_arange(seq_len, batch_size) / batch_size,
      bootstrap_value=_shaped_arange(batch_size) + 1.0)
  output = _unknown_shape_from_logits(execution_mode, None, None)(**inputs)
  _check_from_logits(output, clip_rho_threshold=None, clip_pg_rho_threshold=None, **inputs)


@pytest.mark.parametrize('execution_mode', vtrace.EXECUTION_MODES)
@pytest.mark.parametrize('batch_size', [1, 2])
def test_vtrace_from_logits_different_policies(batch_size, execution_mode):
  """Not in the original: behaviour != target, all actions, default clips, eager call."""
  rng = np.random.default_rng(batch_size)
  seq_len, num_actions = 6, 4
  inputs = dict(behaviour_policy_logits=rng.normal(size=(seq_len, batch_size, num_actions)).astype(np.float32) * 2,
                target_policy_logits=rng.normal(size=(seq_len, batch_size, num_actions)).astype(np.float32) * 2,
                actions=rng.integers(0, num_actions, size=(seq_len, batch_size), dtype=np.int32),
                discounts=rng.choice([0.0, 0.99], size=(seq_len, batch_size)).astype(np.float32),
                rewards=rng.normal(size=(seq_len, batch_size)).astype(np.float32),
                values=rng.normal(size=(seq_len, batch_size)).astype(np.float32),
                bootstrap_value=rng.normal(size=batch_size).astype(np.float32))
  output = vtrace.from_logits(execution_mode=execution_mode, **inputs)
  _check_from_logits(output, clip_rho_threshold=1.0, clip_pg_rho_threshold=1.0, **inputs)


_HIGHER_RANK_SIGNATURE = dict(log_rhos=tf.TensorSpec([None, None, 1],
                                                     tf.float32), discounts=tf.TensorSpec([None, None, 1], tf.float32),
                              rewards=tf.TensorSpec([None, None, 42],
                                                    tf.float32), values=tf.TensorSpec([None, None, 42], tf.float32),
                              bootstrap_value=tf.TensorSpec([None, 42], tf.float32))


@pytest.mark.parametrize('execution_mode', vtrace.EXECUTION_MODES)
def test_higher_rank_inputs_for_importance_weights(execution_mode):
  """[T, B, 1] weights and discounts broadcast against [T, B, 42] rewards and values; the static last dim is kept."""
  run = tf.function(lambda **kwargs: vtrace.from_importance_weights(execution_mode=execution_mode, **kwargs))
  concrete = run.get_concrete_function(**_HIGHER_RANK_SIGNATURE)
  assert concrete.structured_outputs.vs.shape.as_list()[-1] == 42
  assert concrete.structured_outputs.pg_advantages.shape.as_list()[-1] == 42

  rng = np.random.default_rng(0)
  seq_len, batch_size = 4, 2
  inputs = dict(log_rhos=rng.uniform(-2, 2, (seq_len, batch_size, 1)), discounts=np.full(
      (seq_len, batch_size, 1), .9), rewards=rng.normal(size=(seq_len, batch_size, 42)),
                values=rng.normal(size=(seq_len, batch_size, 42)), bootstrap_value=rng.normal(size=(batch_size, 42)))
  inputs = {k: tf.constant(v, tf.float32) for k, v in inputs.items()}
  output = run(**inputs)
  expected_vs, expected_pg_advantages = _ground_truth(**{k: v.numpy() for k, v in inputs.items()})
  np.testing.assert_allclose(output.vs, expected_vs, rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(output.pg_advantages, expected_pg_advantages, rtol=1e-5, atol=1e-5)


def test_inconsistent_rank_inputs_for_importance_weights():
  """bootstrap_value of rank 1 where the [T, B, 1] weights require rank 2: ValueError at trace time and eagerly."""
  signature = dict(_HIGHER_RANK_SIGNATURE, bootstrap_value=tf.TensorSpec([None], tf.float32))
  run = tf.function(vtrace.from_importance_weights)
  with pytest.raises(ValueError, match='must have rank 2'):
    run.get_concrete_function(**signature)
  with pytest.raises(ValueError, match='must have rank 2'):
    vtrace.from_importance_weights(np.zeros((3, 2, 1)), np.zeros((3, 2, 1)), np.zeros((3, 2, 42)), np.zeros((3, 2, 42)),
                                   np.zeros(2))


def test_from_logits_rank_checks():
  with pytest.raises(ValueError, match='must have rank 3'):
    vtrace.from_logits(np.zeros((3, 2)), np.zeros((3, 2, 4)), np.zeros((3, 2), np.int32), np.zeros((3, 2)),
                       np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(2))
  with pytest.raises(ValueError, match='must have rank 1'):
    vtrace.from_logits(np.zeros((3, 2, 4)), np.zeros((3, 2, 4)), np.zeros((3, 2), np.int32), np.zeros((3, 2)),
                       np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((2, 1)))
  with pytest.raises(ValueError, match='must have rank 0'):
    vtrace.from_importance_weights(np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros((3, 2)), np.zeros(2),
                                   clip_rho_threshold=[1.0])


def test_unknown_execution_mode():
  with pytest.raises(ValueError, match="'jit', 'function', 'eager'"):
    vtrace.from_importance_weights(**_original_vtrace_inputs(2), execution_mode='xla')


def test_execution_modes_agree():
  """Eager (op by op) == tf.function == XLA, and a caller's jit_compile=True function, on the same inputs."""
  rng = np.random.default_rng(3)
  seq_len, batch_size, num_actions = 20, 4, 9
  inputs = dict(behaviour_policy_logits=rng.normal(size=(seq_len, batch_size, num_actions)),
                target_policy_logits=rng.normal(size=(seq_len, batch_size, num_actions)),
                actions=rng.integers(0, num_actions, size=(seq_len, batch_size)).astype(np.int32),
                discounts=rng.choice([0.0, 0.99],
                                     size=(seq_len, batch_size)), rewards=rng.normal(size=(seq_len, batch_size)),
                values=rng.normal(size=(seq_len, batch_size)), bootstrap_value=rng.normal(size=batch_size))
  inputs = {k: tf.constant(v, tf.int32 if k == 'actions' else tf.float32) for k, v in inputs.items()}
  eager = vtrace.from_logits(execution_mode='eager', **inputs)
  outputs = [vtrace.from_logits(execution_mode=mode, **inputs) for mode in ('function', 'jit')]
  outputs.append(tf.function(lambda kw: vtrace.from_logits(execution_mode='eager', **kw), jit_compile=True)(inputs))
  for output in outputs:
    for field in vtrace.VTraceFromLogitsReturns._fields:
      np.testing.assert_allclose(getattr(output, field), getattr(eager, field), rtol=1e-5, atol=1e-5, err_msg=field)


@pytest.mark.parametrize('execution_mode', vtrace.EXECUTION_MODES)
def test_no_gradient_through_vs_and_pg_advantages(execution_mode):
  """vs and pg_advantages are stop-gradient'ed; the log-probs of the target policy are not."""
  rng = np.random.default_rng(1)
  seq_len, batch_size, num_actions = 5, 2, 3
  target_policy_logits = tf.Variable(rng.normal(size=(seq_len, batch_size, num_actions)), dtype=tf.float32)
  values = tf.Variable(rng.normal(size=(seq_len, batch_size)), dtype=tf.float32)
  bootstrap_value = tf.Variable(rng.normal(size=batch_size), dtype=tf.float32)
  rewards = tf.Variable(rng.normal(size=(seq_len, batch_size)), dtype=tf.float32)
  with tf.GradientTape(persistent=True) as tape:
    output = vtrace.from_logits(rng.normal(size=(seq_len, batch_size, num_actions)), target_policy_logits,
                                rng.integers(0, num_actions, size=(seq_len, batch_size)).astype(np.int32),
                                np.full((seq_len, batch_size), 0.9), rewards, values, bootstrap_value,
                                execution_mode=execution_mode)
    vs_sum = tf.reduce_sum(output.vs)
    pg_advantages_sum = tf.reduce_sum(output.pg_advantages)
    target_log_probs_sum = tf.reduce_sum(output.target_action_log_probs)
  sources = [target_policy_logits, values, bootstrap_value, rewards]
  assert tape.gradient(vs_sum, sources) == [None] * 4
  assert tape.gradient(pg_advantages_sum, sources) == [None] * 4
  assert tape.gradient(target_log_probs_sum, target_policy_logits) is not None
