"""uvf.context: goal transitions, samplers and the Context's reset / step timeline, against NumPy and by hand."""

import functools

import gin
import numpy as np
import pytest
import tensorflow as tf

import launcher
from uvf.context import context as context_lib
from uvf.context import context_transition_functions as ctf
from uvf.context import rewards_functions as rf
from uvf.context import samplers


@pytest.fixture(autouse=True)
def _no_gin_bindings():
  """Other tests leave gin bindings (e.g. every_n_episodes.steps_per_episode); run with the functions' defaults."""
  with gin.unlock_config():
    gin.clear_config()
  yield


class FakeEnv:
  """Only what Context reads: the observation spec."""

  def __init__(self, obs_dim=30):
    self._spec = tf.TensorSpec([obs_dim], tf.float32)

  def observation_spec(self):
    return self._spec


# Transitions.


def test_relative_transition_hand_worked():
  g = tf.constant([1.0, 2.0, 3.0])
  s, s_next = tf.constant([10.0, 20.0, 30.0, 7.0]), tf.constant([11.0, 18.0, 35.0, 0.0])
  (new,) = ctf.relative_context_transition_fn([g], None, None, k=2, state=s, next_state=s_next)
  np.testing.assert_allclose(new.numpy(), [0.0, 4.0, 3.0])  # g[:2] + s[:2] - s'[:2]; g[2] unchanged.
  (new,) = ctf.relative_context_transition_fn([g], None, None, k=3, state=s, next_state=s_next)
  np.testing.assert_allclose(new.numpy(), [0.0, 4.0, -2.0])
  with pytest.raises(ValueError, match='exactly one context'):
    ctf.relative_context_transition_fn([g, g], None, None, state=s, next_state=s_next)


def test_relative_multi_transition_against_numpy():
  rng = np.random.default_rng(0)
  g, states = rng.normal(size=(4, 5)).astype(np.float32), rng.normal(size=(4, 10, 6)).astype(np.float32)
  (goals,) = ctf.relative_context_multi_transition_fn([tf.constant(g)], None, None, k=3, states=tf.constant(states))
  expected = np.empty((4, 10, 5))
  for b in range(4):
    for i in range(10):
      expected[b, i, :3] = g[b, :3] + states[b, 0, :3] - states[b, i, :3]
      expected[b, i, 3:] = g[b, 3:]
  np.testing.assert_allclose(goals.numpy(), expected, rtol=1e-6, atol=1e-6)
  # The multi transition agrees with stepping the one-step transition along the states.
  step_goal = tf.constant(g[1])
  for i in range(1, 10):
    (step_goal,) = ctf.relative_context_transition_fn([step_goal], None, None, k=3, state=states[1, i - 1],
                                                      next_state=states[1, i])
    np.testing.assert_allclose(step_goal.numpy(), goals.numpy()[1, i], rtol=1e-5, atol=1e-5)


def test_periodic_and_timer_context_fns():
  sampler_fn = lambda: [tf.constant([9.0, 9.0])]  # pylint: disable=unnecessary-lambda-assignment
  context = [tf.constant([1.0, 2.0])]
  assert ctf.periodic_context_fn(context, tf.constant(4), sampler_fn, period=2)[0].numpy().tolist() == [9.0, 9.0]
  assert ctf.periodic_context_fn(context, tf.constant(5), sampler_fn, period=2)[0].numpy().tolist() == [1.0, 2.0]
  timer_sampler = lambda: [tf.constant([9.0]), tf.constant([0.0])]  # pylint: disable=unnecessary-lambda-assignment
  values = ctf.timer_context_fn([tf.constant([1.0]), tf.constant([0.0])], None, timer_sampler, period=3)
  assert [v.numpy().tolist() for v in values] == [[9.0], [3.0]]
  values = ctf.timer_context_fn([tf.constant([1.0]), tf.constant([2.0])], None, timer_sampler, period=3)
  assert [v.numpy().tolist() for v in values] == [[1.0], [1.0]]


# Samplers.


def _spec(dim):
  return tf.TensorSpec([dim], tf.float32)


def test_random_sampler_per_dimension_and_scalar_ranges_and_seeding():
  sampler = samplers.RandomSampler(context_spec=_spec(2), context_range=((-4, -4), (20, 8)), seed=3)
  contexts, next_contexts = sampler(2000)
  c = contexts.numpy()
  assert c.shape == (2000, 2) and c.dtype == np.float32 and next_contexts is contexts
  assert (c >= [-4, -4]).all() and (c < [20, 8]).all()
  np.testing.assert_allclose(c.mean(0), [8, 2], atol=0.5)  # Uniform: the midpoints.
  np.testing.assert_allclose(c.min(0), [-4, -4], atol=0.1)
  np.testing.assert_allclose(c.max(0), [20, 8], atol=0.1)
  c = samplers.RandomSampler(context_spec=_spec(3), context_range=(-10, 10), seed=3)(500)[0].numpy()
  assert c.shape == (500, 3) and (np.abs(c) <= 10).all() and c.std() > 4
  same = samplers.RandomSampler(context_spec=_spec(2), context_range=((-4, -4), (20, 8)), seed=3)(2000)[0]
  other = samplers.RandomSampler(context_spec=_spec(2), context_range=((-4, -4), (20, 8)), seed=4)(2000)[0]
  np.testing.assert_array_equal(same.numpy(), contexts.numpy())
  assert not np.array_equal(other.numpy(), contexts.numpy())
  with pytest.raises(ValueError, match='does not fit'):
    samplers.RandomSampler(context_spec=_spec(2), context_range=((0, 0, 0), (1, 1, 1)))(1)


def test_constant_and_zero_samplers():
  contexts, _ = samplers.ConstantSampler(value=[16, 0], context_spec=_spec(2))(3)
  np.testing.assert_array_equal(contexts.numpy(), [[16, 0]] * 3)
  contexts, _ = samplers.ZeroSampler(context_spec=_spec(4))(2)
  np.testing.assert_array_equal(contexts.numpy(), np.zeros((2, 4)))
  with pytest.raises(ValueError, match='ConstantSampler.value'):
    samplers.ConstantSampler(context_spec=_spec(2))(1)


def test_direction_sampler_is_relative_to_shuffled_states():
  k, batch = 2, 64
  context_range = ((-1e-3, -1e-3, -5), (1e-3, 1e-3, 5))  # Noise std 0.1 * 1e-3 on the first k dimensions.
  sampler = samplers.DirectionSampler(context_spec=_spec(3), context_range=context_range, k=k, seed=0)
  # Without states: uniform in the range, like RandomSampler.
  c = sampler(100)[0].numpy()
  assert (c >= context_range[0]).all() and (c <= context_range[1]).all()
  rng = np.random.default_rng(0)
  state = tf.constant(rng.normal(size=(batch, 5)) * 10, tf.float32)
  contexts, next_contexts = sampler(batch, state=state, next_state=state + 1.0)
  c, s = contexts.numpy(), state.numpy()
  assert next_contexts.numpy().tolist() == c.tolist()
  targets = c[:, :k] + s[:, :k]  # = a permuted state + small noise.
  nearest = np.argmin(np.abs(targets[:, None, :] - s[None, :, :k]).sum(-1), axis=1)
  assert sorted(nearest.tolist()) == list(range(batch)) and nearest.tolist() != list(range(batch))
  np.testing.assert_allclose(targets, s[nearest, :k], atol=1e-3)
  assert (np.abs(c[:, k:]) <= 5).all() and c[:, k:].std() > 1  # The other dimensions: the uniform sample.


# Context built from the original gin files.


@pytest.fixture(name='contexts')
def fixture_contexts():
  """(low, meta) Contexts of hiro_orig + ant_maze, as train_uvf built them, under their agents' scopes."""
  launcher.register_configurables()
  launcher.parse_gin([
      launcher.resolve_config_path(p) for p in ('configs/base_uvf.gin', 'configs/train_uvf.gin',
                                                'context/configs/hiro_orig.gin', 'context/configs/ant_maze.gin')
  ], [])
  env = FakeEnv(30)
  with tf.name_scope('meta_agent'), gin.config_scope('meta'):
    meta = context_lib.Context(tf_env=env, seed=1)
  with tf.name_scope('uvf_agent'), gin.config_scope('agent'):
    low = context_lib.Context(tf_env=env, seed=2)
  yield low, meta
  with gin.unlock_config():
    gin.clear_config()


def test_context_specs_and_variable_names(contexts):
  low, meta = contexts
  assert [v.name for v in low.vars] == ['uvf_agent/action_context_0:0'] and low.t.name == 'uvf_agent/num_timer_steps:0'
  assert [v.name for v in meta.vars] == ['meta_agent/action_context_0:0']
  assert low.vars[0].shape == [15] and meta.vars[0].shape == [2] and low.t.dtype == tf.int32
  spec = low.context_as_action_specs[0]
  np.testing.assert_array_equal(spec.maximum,
                                np.float32([10, 10, 0.5, 1, 1, 1, 1, 0.5, 0.3, 0.5, 0.3, 0.5, 0.3, 0.5, 0.3]))
  np.testing.assert_array_equal(spec.minimum, -spec.maximum)
  np.testing.assert_array_equal(meta.context_as_action_specs[0].minimum, [-4, -4])
  np.testing.assert_array_equal(meta.context_as_action_specs[0].maximum, [20, 20])
  assert low.meta_action_every_n == 10 and meta.modes == ['eval1', 'eval2', 'eval3', 'explore', 'train']
  assert isinstance(meta.samplers('eval2')[0], samplers.ConstantSampler)
  assert isinstance(low.samplers('train')[0], samplers.DirectionSampler)
  with pytest.raises(ValueError, match=r"no sampler for mode 'eval'.*'eval1'"):
    meta.reset('eval')


def _expected_goals(states, meta_actions, c=10, k=15):
  """The goal each action of an episode sees, by the original's timer rules, in NumPy (float64).

  states[j] is the observation before action j (j = 0 ... T), meta_actions[j] the meta action offered after step j.
  """
  goal, t, seen = np.zeros(k), 0, []
  for j in range(len(states) - 1):
    seen.append(goal.copy())  # Action j acts with the current goal.
    if t % c == 0:
      goal = meta_actions[j].astype(np.float64)
    else:
      goal = goal + states[j][:k] - states[j + 1][:k]
    t += 1
  return np.array(seen), goal


def _run_episode(low, meta, states, meta_actions, mode='explore', step_fn=None):
  low.reset(mode, meta_context=meta)
  seen = []
  calls = []
  for j in range(len(states) - 1):
    seen.append(low.vars[0].numpy())
    if step_fn is None:

      def meta_action(j=j):
        calls.append(j)
        return tf.constant(meta_actions[j])

      low.step(mode, meta_context=meta, meta_action=meta_action, state=tf.constant(states[j]),
               next_state=tf.constant(states[j + 1]), state_repr=tf.constant(states[j][:15]),
               next_state_repr=tf.constant(states[j + 1][:15]))
    else:
      step_fn(tf.constant(states[j]), tf.constant(states[j + 1]), tf.constant(meta_actions[j]))
  return np.array(seen), low.vars[0].numpy(), calls


def test_reset_and_step_follow_the_original_timer(contexts):
  low, meta = contexts
  rng = np.random.default_rng(5)
  steps = 25
  states = rng.normal(size=(steps + 1, 30)).astype(np.float32)
  meta_actions = rng.uniform(-1, 1, size=(steps, 15)).astype(np.float32)
  low.vars[0].assign(tf.ones(15))  # Leftovers of a previous episode.
  seen, final, calls = _run_episode(low, meta, states, meta_actions)
  expected_seen, expected_final = _expected_goals(states, meta_actions)
  np.testing.assert_array_equal(seen[0], np.zeros(15))  # The first action of an episode sees g = 0.
  np.testing.assert_allclose(seen, expected_seen, atol=1e-5)
  np.testing.assert_allclose(final, expected_final, atol=1e-5)
  assert calls == [0, 10, 20]  # Goals chosen after steps 1, 11, 21 (timer 0, 10, 20); the callable only then.
  np.testing.assert_array_equal(seen[1], meta_actions[0])
  np.testing.assert_array_equal(seen[11], meta_actions[10])
  assert int(low.t.numpy()) == steps and int(meta.t.numpy()) == steps  # Both timers count the steps.
  target = meta.vars[0].numpy()
  assert (target >= -4).all() and (target <= 20).all() and np.abs(target).sum() > 0  # Sampled at reset.
  meta.reset('eval2')
  np.testing.assert_array_equal(meta.vars[0].numpy(), [16, 16])


def test_step_in_tf_function_equals_eager_and_traces_once(contexts):
  low, meta = contexts
  rng = np.random.default_rng(6)
  states = rng.normal(size=(24, 30)).astype(np.float32)
  meta_actions = rng.uniform(-1, 1, size=(23, 15)).astype(np.float32)
  eager_seen, eager_final, _ = _run_episode(low, meta, states, meta_actions)
  traces = []

  @tf.function
  def step(state, next_state, meta_action):
    traces.append(1)
    low.step('explore', meta_context=meta, meta_action=meta_action, state=state, next_state=next_state,
             state_repr=state[:15], next_state_repr=next_state[:15])

  graph_seen, graph_final, _ = _run_episode(low, meta, states, meta_actions, step_fn=step)
  np.testing.assert_array_equal(graph_seen, eager_seen)
  np.testing.assert_array_equal(graph_final, eager_final)
  assert len(traces) == 1
  reset = tf.function(lambda: low.reset('explore', meta_context=meta))
  for _ in range(3):
    reset()
  assert int(low.t.numpy()) == 0 and not low.vars[0].numpy().any()


def test_compute_rewards_with_the_config_reward_fns(contexts):
  low, meta = contexts
  rng = np.random.default_rng(7)
  s, s_next = rng.normal(size=(4, 30)).astype(np.float32), rng.normal(size=(4, 30)).astype(np.float32)
  g, target = rng.normal(size=(4, 15)).astype(np.float32), rng.normal(size=(4, 2)).astype(np.float32)
  zeros = tf.zeros(4)
  rewards, discounts = low.compute_rewards(s[:, :15], None, zeros, s_next[:, :15], [tf.constant(g)])
  np.testing.assert_allclose(rewards.numpy(), -np.sqrt(((s[:, :15] + g - s_next[:, :15])**2).sum(-1) + 1e-10),
                             rtol=1e-6)
  np.testing.assert_array_equal(discounts.numpy(), np.ones(4))
  rewards, _ = meta.compute_rewards(s, None, zeros, s_next, tf.constant(target))
  np.testing.assert_allclose(rewards.numpy(), -np.sqrt(((s_next[:, :2] - target)**2).sum(-1) + 1e-10), rtol=1e-6)


def test_reward_weights_sum_rewards_and_multiply_discounts():
  context = context_lib.Context(FakeEnv(3), context_shapes=[3], reward_fn=[rf.negative_distance, rf.plain_rewards],
                                reward_weights=[2.0, 0.5])
  s = tf.zeros([1, 3])
  rewards, discounts = context.compute_rewards(s, None, tf.constant([4.0]), s, [tf.constant([[3.0, 4.0, 0.0]])])
  np.testing.assert_allclose(rewards.numpy(), [2.0 * -5.0 + 0.5 * 4.0], rtol=1e-6)
  np.testing.assert_array_equal(discounts.numpy(), [1.0])


def test_context_state_checkpoints_and_restores(tmp_path):
  sampler = functools.partial(samplers.RandomSampler, context_range=((-4, -4), (20, 20)))
  meta = context_lib.Context(FakeEnv(30), context_ranges=[((-4, -4), (20, 20))], context_shapes=[2],
                             samplers={'train': [sampler]}, seed=0)
  path = tf.train.Checkpoint(context=meta).save(str(tmp_path / 'ckpt'))
  meta.reset('train')
  first = meta.vars[0].numpy()
  tf.train.Checkpoint(context=meta).restore(path)
  assert not meta.vars[0].numpy().any()
  meta.reset('train')
  np.testing.assert_array_equal(meta.vars[0].numpy(), first)  # The samplers' random state was restored too.
