"""uvf.agent and uvf.representation: HIRO's two levels built from the original gin files (hiro.md 3.1, 3.4, 4.1)."""

import numpy as np
import pytest
import tensorflow as tf

import launcher
from tests.uvf import hiro_fixtures
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
  assert batch.shape == [4, 45]
  np.testing.assert_allclose(low.actions(tf.ones([4, 30]), [tf.tile(tf.range(15.0)[None], [4, 1])]).numpy(),
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
