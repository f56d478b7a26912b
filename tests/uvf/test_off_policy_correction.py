"""uvf.off_policy_correction: candidate scoring with fixed candidates against NumPy, sampling, strategies."""

import gin
import numpy as np
import pytest
import tensorflow as tf

from uvf import off_policy_correction as opc

B, C, O, G, A, K = 4, 10, 6, 3, 2, 10
GOAL_MAX = np.array([10.0, 10.0, 0.5], np.float32)
ACTION_MAX = 30.0


@pytest.fixture(autouse=True)
def _no_gin_bindings():
  """Other tests leave gin bindings (e.g. every_n_episodes.steps_per_episode); run with the functions' defaults."""
  with gin.unlock_config():
    gin.clear_config()
  yield


def _linear_actor(seed=0):
  """actor(s, g) = s W + g V, in TF and in NumPy (float64)."""
  rng = np.random.default_rng(seed)
  w, v = rng.normal(size=(O, A)), rng.normal(size=(G, A)) * 3

  def tf_actor(states, goals):
    return tf.matmul(states, tf.constant(w, tf.float32)) + tf.matmul(goals, tf.constant(v, tf.float32))

  return tf_actor, lambda s, g: s.astype(np.float64) @ w + g.astype(np.float64) @ v


def _batch(seed=1):
  rng = np.random.default_rng(seed)
  low_states = rng.normal(size=(B, C, O)).astype(np.float32)
  low_actions = rng.uniform(-30, 30, size=(B, C, A)).astype(np.float32)
  return low_states, low_actions


def _numpy_log_probs(candidates, low_states, low_actions, np_actor):
  """-sum_i sum_j (a_i - mu(s_i, g + s_0[:G] - s_i[:G]))_j^2 / 30^2, loop by loop."""
  out = np.zeros(candidates.shape[:2])
  for k in range(candidates.shape[0]):
    for b in range(candidates.shape[1]):
      for i in range(C):
        goal = candidates[k, b].astype(np.float64) + low_states[b, 0, :G] - low_states[b, i, :G]
        mu = np_actor(low_states[b, i][None], goal[None])[0]
        out[k, b] -= np.sum((low_actions[b, i] - mu)**2) / ACTION_MAX**2
  return out


def test_scoring_of_fixed_candidates_against_numpy():
  tf_actor, np_actor = _linear_actor()
  low_states, low_actions = _batch()
  candidates = np.random.default_rng(2).uniform(-1, 1, size=(K, B, G)).astype(np.float32) * GOAL_MAX
  log_probs = opc.candidate_log_probs(tf.constant(candidates), tf.constant(low_states), tf.constant(low_actions),
                                      tf.constant(low_states[..., :G]), tf_actor, -ACTION_MAX, ACTION_MAX)
  expected = _numpy_log_probs(candidates, low_states, low_actions, np_actor)
  assert log_probs.dtype == tf.float64 and log_probs.shape == (K, B)
  np.testing.assert_allclose(log_probs.numpy(), expected, rtol=1e-5)
  best = opc.best_goals(tf.constant(candidates), log_probs).numpy()
  np.testing.assert_array_equal(best, candidates[np.argmax(expected, 0), np.arange(B)])
  # The relabeler with injected candidates chooses the same goals (identity representation, sliced to G).
  relabeler = opc.GoalRelabeler('sample', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX, seed=0)
  goals = relabeler(low_states[:, 0], low_states[:, -1], candidates[-1], low_states, low_actions, tf_actor,
                    candidates=tf.constant(candidates))
  np.testing.assert_array_equal(goals.numpy(), best)


def test_the_goal_that_reproduces_the_actions_wins():
  """Hand-made: the stored actions are the actor's under the stored goal, so that goal scores 0, the maximum."""
  tf_actor, np_actor = _linear_actor()
  low_states, _ = _batch()
  goals = np.random.default_rng(3).uniform(-0.4, 0.4, size=(B, G)).astype(np.float32)
  step_goals = goals[:, None, :] + low_states[:, :1, :G] - low_states[:, :, :G]
  low_actions = np_actor(low_states.reshape(-1, O), step_goals.reshape(-1, G)).reshape(B, C, A).astype(np.float32)
  relabeler = opc.GoalRelabeler('sample', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX, seed=0)
  new_goals = relabeler(low_states[:, 0], low_states[:, -1] + 5.0, goals, low_states, low_actions, tf_actor)
  np.testing.assert_allclose(new_goals.numpy(), goals, atol=1e-6)


def test_candidates_are_samples_loc_and_goal_clipped():
  rng = np.random.default_rng(4)
  states = rng.normal(size=(B, O)).astype(np.float32)
  next_states = states.copy()
  next_states[:, :G] += [[30.0, -1.0, 0.2]]  # loc = (30, -1, 0.2): its first dimension is out of range.
  goals = np.array([[20.0, 0.0, -3.0]] * B, np.float32)  # Out of range in two dimensions.
  candidates = opc.candidate_goals(tf.constant(states[:, :G]), tf.constant(next_states[:, :G]), tf.constant(goals),
                                   -GOAL_MAX, GOAL_MAX, num_samples=K, rng=tf.random.Generator.from_seed(0)).numpy()
  assert candidates.shape == (K, B, G)
  assert (candidates >= -GOAL_MAX).all() and (candidates <= GOAL_MAX).all()
  np.testing.assert_allclose(candidates[-2], np.clip([[30.0, -1.0, 0.2]] * B, -GOAL_MAX, GOAL_MAX), atol=1e-5)
  np.testing.assert_array_equal(candidates[-1], [[10.0, 0.0, -0.5]] * B)
  # The Gaussian samples: N(loc, (0.5 * half_range)^2), then clipped to the range (at 2 sigma from loc = 0 here):
  # 68.3 % lie within one sigma (0.5 * half_range) of loc, 95.4 % strictly inside the range.
  samples = opc.candidate_goals(tf.zeros([1, G]), tf.zeros([1, G]), tf.zeros([1, G]), -GOAL_MAX, GOAL_MAX,
                                num_samples=8002, rng=tf.random.Generator.from_seed(1)).numpy()[:-2, 0]
  np.testing.assert_allclose(np.mean(np.abs(samples) < 0.5 * GOAL_MAX, 0), [0.683] * 3, atol=0.02)
  np.testing.assert_allclose(np.mean(np.abs(samples) < GOAL_MAX, 0), [0.954] * 3, atol=0.01)
  assert (np.abs(np.median(samples, 0)) < 0.03 * GOAL_MAX).all()
  with pytest.raises(ValueError, match='num_samples'):
    opc.candidate_goals(tf.zeros([1, G]), tf.zeros([1, G]), tf.zeros([1, G]), -1, 1, num_samples=2)


def test_none_and_fun_strategies():
  tf_actor, _ = _linear_actor()
  low_states, low_actions = _batch()
  goals = np.full((B, G), 0.25, np.float32)
  keep = opc.GoalRelabeler('None', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX)
  np.testing.assert_array_equal(
      keep(low_states[:, 0], low_states[:, -1], goals, low_states, low_actions, tf_actor).numpy(), goals)
  states = np.zeros((2000, O), np.float32)
  next_states = np.zeros((2000, O), np.float32)
  next_states[:, :G] = [50.0, 0.0, 0.0]  # loc far outside the range: 'FuN' does not clip.
  fun = opc.GoalRelabeler('FuN', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX, seed=3)
  new = fun(states, next_states, np.zeros((2000, G), np.float32), None, None, tf_actor).numpy()
  np.testing.assert_allclose(new.mean(0), [50.0, 0.0, 0.0], atol=0.1)
  np.testing.assert_allclose(new.std(0), 0.1 * GOAL_MAX, rtol=0.1)
  again = opc.GoalRelabeler('FuN', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX, seed=3)
  np.testing.assert_array_equal(
      again(states, next_states, np.zeros((2000, G), np.float32), None, None, tf_actor).numpy(), new)


def test_unknown_strategy_lists_the_valid_ones():
  with pytest.raises(ValueError, match="'None', 'FuN', 'sample'"):
    opc.GoalRelabeler('best', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX)


def test_state_repr_fn_is_used_for_loc_and_the_step_goals():
  """With a representation phi(s) = 2 s[1:] the relabeler samples its candidates around loc = phi(s')[:G] -
  phi(s)[:G] and scores the step goals g + phi(s_0)[:G] - phi(s_i)[:G]: its choice against NumPy from the same
  standard normals (the relabeler's first draw from its seeded generator)."""
  tf_actor, np_actor = _linear_actor()
  low_states, low_actions = _batch()
  rng = np.random.default_rng(5)
  states, next_states = low_states[:, 0], rng.normal(0, 3, size=(B, O)).astype(np.float32)
  goals = rng.uniform(-1, 1, size=(B, G)).astype(np.float32) * GOAL_MAX
  relabeler = opc.GoalRelabeler('sample', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX,
                                state_repr_fn=lambda s: 2.0 * s[:, 1:], seed=0)
  chosen = relabeler(states, next_states, goals, low_states, low_actions, tf_actor).numpy()
  normals = tf.random.Generator.from_seed(0).normal([K - 2, B, G]).numpy()
  loc = 2.0 * (next_states[:, 1:1 + G] - states[:, 1:1 + G]).astype(np.float64)
  candidates = np.clip(np.concatenate([loc + 0.5 * GOAL_MAX * normals, loc[None], goals[None]]), -GOAL_MAX, GOAL_MAX)
  reprs = 2.0 * low_states[..., 1:1 + G].astype(np.float64)
  scores = np.zeros((K, B))
  for k in range(K):
    for b in range(B):
      for i in range(C):
        mu = np_actor(low_states[b, i][None], (candidates[k, b] + reprs[b, 0] - reprs[b, i])[None])[0]
        scores[k, b] -= np.sum((low_actions[b, i] - mu)**2) / ACTION_MAX**2
  np.testing.assert_allclose(chosen, candidates[np.argmax(scores, 0), np.arange(B)], rtol=1e-5, atol=1e-5)
  # The raw states would give other candidates and other choices: the test tells them apart.
  raw_loc = (next_states[:, :G] - states[:, :G]).astype(np.float64)
  assert np.abs(raw_loc - loc).max() > 1.0


def test_tf_function_equals_eager_and_traces_once():
  tf_actor, _ = _linear_actor()
  eager = opc.GoalRelabeler('sample', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX, seed=7)
  graph = opc.GoalRelabeler('sample', -GOAL_MAX, GOAL_MAX, -ACTION_MAX, ACTION_MAX, seed=7)
  traces = []

  @tf.function
  def relabel(states, next_states, goals, low_states, low_actions):
    traces.append(1)
    return graph(states, next_states, goals, low_states, low_actions, tf_actor)

  for seed in range(3):
    low_states, low_actions = _batch(seed)
    goals = np.random.default_rng(seed).uniform(-1, 1, size=(B, G)).astype(np.float32)
    args = (low_states[:, 0], low_states[:, -1] + 1.0, goals, low_states, low_actions)
    expected = eager(*args, tf_actor).numpy()
    np.testing.assert_array_equal(relabel(*(tf.constant(a) for a in args)).numpy(), expected)
  assert len(traces) == 1
