"""uvf.context.rewards_functions against NumPy re-computations and hand-worked cases."""

import gin
import numpy as np
import pytest
import tensorflow as tf

from uvf.context import rewards_functions as rf

EPS = 1e-10


@pytest.fixture(autouse=True)
def _no_gin_bindings():
  """Other tests leave gin bindings (e.g. every_n_episodes.steps_per_episode); run with the functions' defaults."""
  with gin.unlock_config():
    gin.clear_config()
  yield


def _call(states, next_states, goals, **kwargs):
  states, next_states, goals = (tf.constant(x, tf.float32) for x in (states, next_states, goals))
  rewards, discounts = rf.negative_distance(states, None, tf.zeros(states.shape[0]), next_states, [goals], **kwargs)
  return rewards.numpy(), discounts.numpy()


def test_low_level_reward_is_minus_distance_to_the_relative_goal():
  """hiro_orig's uvf/negative_distance: relative_context=True on the state representations s[:15]."""
  rng = np.random.default_rng(0)
  s, s_next, g = (rng.normal(size=(6, 15)).astype(np.float32) for _ in range(3))
  rewards, discounts = _call(s, s_next, g, relative_context=True)
  expected = -np.sqrt(np.sum((s.astype(np.float64) + g - s_next)**2, -1) + EPS)
  np.testing.assert_allclose(rewards, expected, rtol=1e-6)
  np.testing.assert_array_equal(discounts, np.ones(6))
  assert rewards.dtype == np.float32 and discounts.dtype == np.float32


def test_hand_worked_relative_goal_and_epsilon_inside_the_sqrt():
  s = [[1.0, 2.0], [1.0, 2.0], [0.0, 0.0]]
  g = [[3.0, 4.0], [3.0, 4.0], [0.0, 0.0]]
  s_next = [[1.0, 2.0], [4.0, 6.0], [0.0, 0.0]]  # Did not move (distance 5); reached s + g; stayed at 0 with g = 0.
  rewards, discounts = _call(s, s_next, g, relative_context=True)
  # At the goal the reward is -sqrt(0 + 1e-10) = -1e-5, not 0: epsilon is inside the square root.
  np.testing.assert_allclose(rewards, [-5.0, -1e-5, -1e-5], rtol=1e-5)
  # Discount 0 where the distance (1e-5) is not above termination_epsilon (1e-4), as the original.
  np.testing.assert_array_equal(discounts, [1.0, 0.0, 0.0])
  _, discounts = _call(s, s_next, g, relative_context=True, termination_epsilon=1e-6)
  np.testing.assert_array_equal(discounts, [1.0, 1.0, 1.0])


def test_task_reward_uses_state_indices_and_an_absolute_target():
  """ant_maze's task/negative_distance: state_indices=[0, 1], relative_context=False, 30-d states, 2-d targets."""
  rng = np.random.default_rng(1)
  s, s_next = rng.normal(size=(5, 30)).astype(np.float32), rng.normal(size=(5, 30)).astype(np.float32)
  target = rng.uniform(-4, 20, size=(5, 2)).astype(np.float32)
  rewards, discounts = _call(s, s_next, target, state_indices=[0, 1], relative_context=False, diff=False, offset=0.0)
  expected = -np.sqrt(np.sum((s_next[:, :2].astype(np.float64) - target)**2, -1) + EPS)
  np.testing.assert_allclose(rewards, expected, rtol=1e-6)
  np.testing.assert_array_equal(discounts, np.ones(5))
  # Hand-worked: at (16, 0) + (3, 4) from target (16, 0): reward -5.
  s_next = np.zeros((1, 30), np.float32)
  s_next[0, :3] = [19.0, 4.0, 0.55]
  rewards, _ = _call(np.zeros((1, 30)), s_next, [[16.0, 0.0]], state_indices=[0, 1])
  np.testing.assert_allclose(rewards, [-5.0], rtol=1e-6)


def test_options_scales_l1_vectorize_diff_bonus_offset_weights():
  rng = np.random.default_rng(2)
  s, s_next, g = (rng.normal(size=(4, 3)).astype(np.float64) for _ in range(3))
  goals = s + g
  sq = (2.0 * s_next - 0.5 * goals)**2 * np.array([1.0, 2.0, 3.0])
  old_sq = (2.0 * s - 0.5 * goals)**2 * np.array([1.0, 2.0, 3.0])
  kwargs = dict(relative_context=True, state_scales=2.0, goal_scales=0.5, weight_vector=[1.0, 2.0, 3.0])
  rewards, _ = _call(s, s_next, g, reward_scales=3.0, offset=0.25, **kwargs)
  np.testing.assert_allclose(rewards, 0.25 - 3.0 * np.sqrt(sq.sum(-1) + EPS), rtol=1e-5)
  rewards, _ = _call(s, s_next, g, norm='L1', **kwargs)
  np.testing.assert_allclose(rewards, -np.sqrt(sq + EPS).sum(-1), rtol=1e-5)
  rewards, discounts = _call(s, s_next, g, vectorize=True, **kwargs)
  np.testing.assert_allclose(rewards, -np.sqrt(sq + EPS), rtol=1e-5)
  assert discounts.shape == (4, 3)
  rewards, _ = _call(s, s_next, g, diff=True, **kwargs)
  np.testing.assert_allclose(rewards, np.sqrt(old_sq.sum(-1) + EPS) - np.sqrt(sq.sum(-1) + EPS), rtol=1e-4, atol=1e-5)
  rewards, _ = _call(s, s_next, g, bonus_epsilon=1e9, **kwargs)  # Every distance is below: bonus 1.
  np.testing.assert_allclose(rewards, 1.0 - np.sqrt(sq.sum(-1) + EPS), rtol=1e-5)


def test_hand_worked_l1_norm_has_epsilon_under_each_square_root():
  """L1: dist = sum_j sqrt(d_j + 1e-10). At the goal each of the 3 dimensions adds sqrt(1e-10) = 1e-5."""
  s = [[1.0, 2.0, 3.0], [0.0, 0.0, 0.0]]
  g = [[1.0, -1.0, 0.5], [3.0, -4.0, 0.0]]
  s_next = [[2.0, 1.0, 3.5], [0.0, 0.0, 0.0]]  # Reached s + g; stayed at 0 with g = (3, -4, 0): 3 + 4 + 0.
  rewards, discounts = _call(s, s_next, g, relative_context=True, norm='L1')
  np.testing.assert_allclose(rewards, [-3e-5, -(7.0 + 1e-5)], rtol=1e-5)
  np.testing.assert_array_equal(discounts, [0.0, 1.0])  # 3e-5 is not above termination_epsilon (1e-4)
  rewards, discounts = _call(s, s_next, g, relative_context=True, norm='L1', vectorize=True)
  np.testing.assert_allclose(rewards, [[-1e-5] * 3, [-3.0, -4.0, -1e-5]], rtol=1e-5)
  np.testing.assert_array_equal(discounts, [[0.0, 0.0, 0.0], [1.0, 1.0, 0.0]])


def test_bad_norm_names_the_valid_ones():
  with pytest.raises(ValueError, match="'L2' and 'L1'"):
    _call([[0.0]], [[0.0]], [[0.0]], norm='L3')


def test_in_tf_function_equals_eager():
  rng = np.random.default_rng(3)
  s, s_next, g = (tf.constant(rng.normal(size=(3, 15)), tf.float32) for _ in range(3))

  def fn(a, b, c):
    return rf.negative_distance(a, None, None, b, [c], relative_context=True)

  eager = fn(s, s_next, g)
  graph = tf.function(fn)(s, s_next, g)
  for x, y in zip(eager, graph):
    np.testing.assert_array_equal(x.numpy(), y.numpy())


def test_plain_rewards():
  rewards, discounts = rf.plain_rewards(None, None, tf.constant([1.5, -2.0]), None, None)
  np.testing.assert_array_equal(rewards.numpy(), [1.5, -2.0])
  np.testing.assert_array_equal(discounts.numpy(), [1.0, 1.0])
