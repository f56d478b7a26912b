"""uvf.agent and uvf.representation: HIRO's two levels built from the original gin files, as
tensorflow/models research/efficient-hrl agent.py builds them."""

import numpy as np
import pytest
import tensorflow as tf

import launcher
from tests.uvf import hiro_fixtures
from tests.uvf.test_ddpg_networks import np_actor
from tests.uvf.test_ddpg_networks import np_critic
from tests.uvf.test_ddpg_networks import np_weights
from tests.uvf.test_ddpg_networks import randomize
from uvf import agent as agent_lib
from uvf import representation
from uvf.environments import create_maze_env


def _agents(extra=()):
  launcher.parse_gin([hiro_fixtures.CONFIG], list(extra))
  env = create_maze_env.create_maze_env()
  tf_env = create_maze_env.TFPyEnvironment(env)
  specs = ([tf_env.observation_spec()], [tf_env.action_spec()], tf_env)
  with tf.name_scope('meta_agent'):
    meta = agent_lib.MetaAgent(*specs)
  with tf.name_scope('uvf_agent'):
    low = agent_lib.UvfAgent(*specs)
  return low, meta


def test_hiro_orig_shapes_and_names():
  low, meta = _agents()
  names = low.variables_by_tf1_name()
  assert names['uvf_agent/actor_net/states/states_1/weights'].shape == [45, 300]
  assert names['uvf_agent/critic_net/states/states_1/weights'].shape == [53, 300]
  assert names['uvf_agent/critic_net/joint/joint_1/weights'].shape == [308, 300]
  meta_names = meta.variables_by_tf1_name()
  assert meta_names['meta_agent/actor_net/actions/weights'].shape == [300, 15]
  assert meta_names['meta_agent/critic_net/joint/joint_1/weights'].shape == [315, 300]
  assert low.context_vars[0].name.startswith('uvf_agent/action_context_0')
  assert meta.context_vars[0].name.startswith('meta_agent/action_context_0')
  np.testing.assert_allclose(meta.action_spec.maximum[:3], [10, 10, 0.5])


def test_hiro_xy_shapes():
  _, meta = _agents(['SUBGOAL_DIM = 2', 'CONTEXT_RANGE_MIN = (-10, -10)', 'CONTEXT_RANGE_MAX = (10, 10)'])
  assert meta.variables_by_tf1_name()['meta_agent/actor_net/actions/weights'].shape == [300, 2]


def test_low_level_noise_is_clipped_to_the_action_bounds():
  """uvf_add_noise_fn as collection builds it (clip by default): clip(mu + stddev * z, -30, 30), element by element."""
  low, _ = _agents()
  state = tf.constant(np.random.default_rng(0).normal(size=30), tf.float32)
  mu = low.action(state).numpy()
  noisy = low.add_noise_fn(low.action, stddev=100.0, rng=tf.random.Generator.from_seed(1))
  twin = tf.random.Generator.from_seed(1)  # the same draws, by definition of the noise
  samples = np.stack([noisy(state).numpy() for _ in range(20)])
  unclipped = np.stack([mu + 100.0 * twin.normal([8]).numpy() for _ in range(20)])
  np.testing.assert_allclose(samples, np.clip(unclipped, -30.0, 30.0), rtol=1e-6, atol=1e-5)
  assert np.mean(np.abs(unclipped) > 30) > 0.5 and np.any(np.abs(unclipped) < 30)  # both cases occur


def test_meta_actions_regularizer():
  """MetaAgent.actions_reg: TD3's actor loss mean(dQ1/da^2) plus actions_reg x mean_b sum_{j >= k} |mu(s)_b[j]|,
  against NumPy (dQ1/da by central differences of the NumPy critic)."""
  _, meta = _agents(['MetaAgent.actions_reg = 0.2', 'MetaAgent.k = 2'])
  rng = np.random.default_rng(2)
  for name in ('actor_net', 'critic_net'):
    randomize(meta.networks[name], rng)
  states = np.concatenate(
      [rng.uniform(-4, 20, (8, 2)), rng.normal(size=(8, 28)),
       rng.uniform(-4, 20, (8, 2))], 1).astype(np.float32)
  goal_max = meta.action_spec.maximum
  actor, critic = np_weights(meta.networks['actor_net']), np_weights(meta.networks['critic_net'])
  mu = np_actor(actor, states, -goal_max, goal_max, 2, False)
  dqda = np.zeros_like(mu)
  for j in range(mu.shape[1]):
    step = np.zeros_like(mu)
    step[:, j] = 1e-6
    dqda[:, j] = (np_critic(critic, states, mu + step, False) - np_critic(critic, states, mu - step, False)) / 2e-6
  regulariser = 0.2 * np.mean(np.sum(np.abs(mu[:, 2:]), 1))
  assert regulariser > 0.1 * np.mean(dqda**2)
  np.testing.assert_allclose(meta.actor_loss(tf.constant(states)).numpy(), np.mean(dqda**2) + regulariser, rtol=1e-3)


def test_noise_is_gaussian_and_clipped():
  low, meta = _agents()
  rng = tf.random.Generator.from_seed(0)
  state = tf.zeros([30])
  noisy = low.add_noise_fn(low.action, rng=rng)
  samples = np.stack([noisy(state).numpy() for _ in range(300)])
  mean = low.action(state).numpy()
  np.testing.assert_allclose((samples - mean).std(), 1.0, atol=0.1)  # uvf_add_noise_fn.stddev = 1.0
  meta_noisy = meta.add_noise_fn(lambda s, c: tf.fill([15], 100.0), rng=rng)  # far outside the goal range
  np.testing.assert_allclose(meta_noisy(state, None).numpy(), meta.action_spec.maximum)


def test_merged_states_and_actions():
  low, _ = _agents()
  low.context_vars[0].assign(tf.range(15, dtype=tf.float32))
  merged = low.merged_state(tf.ones([30]))
  np.testing.assert_allclose(merged.numpy(), np.r_[np.ones(30), np.arange(15)])
  batch = low.merged_states(tf.ones([4, 30]))
  np.testing.assert_array_equal(batch.numpy(), np.concatenate([np.ones([4, 30]), np.tile(np.arange(15), [4, 1])], 1))
  rng = np.random.default_rng(1)
  states, goals = rng.normal(size=(4, 30)).astype(np.float32), rng.normal(size=(4, 15)).astype(np.float32)
  merged = low.merged_states(tf.constant(states), [tf.constant(goals)]).numpy()
  np.testing.assert_array_equal(merged[:, :30], states)  # columns 0-29: the observation, 30-44: the goal
  np.testing.assert_array_equal(merged[:, 30:], goals)
  unmerged_states, (unmerged_goals,) = low.unmerged_states(tf.constant(merged))
  np.testing.assert_array_equal(unmerged_states.numpy(), states)
  np.testing.assert_array_equal(unmerged_goals.numpy(), goals)
  np.testing.assert_allclose(
      low.actions(tf.ones([4, 30]), [tf.tile(tf.range(15.0)[None], [4, 1])]).numpy(),
      low.actor(batch).numpy(), rtol=1e-6)


def test_state_preprocess():
  preprocess = representation.StatePreprocess(ndims=15)
  states = np.arange(60, dtype=np.float32).reshape(2, 30)
  np.testing.assert_array_equal(preprocess(tf.constant(states)).numpy(), states[:, :15])
  np.testing.assert_array_equal(preprocess(tf.constant(states[0])).numpy(), states[0, :15])
  assert preprocess.get_trainable_vars() == []
  # The trainable one (hiro_repr) needs the network factories: tests/uvf/test_representation.py.
  with pytest.raises(ValueError, match='network factories'):
    representation.StatePreprocess(trainable=True)
