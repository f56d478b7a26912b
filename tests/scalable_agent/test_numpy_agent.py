"""Tests of the actors' NumPy inference (`experiment.actor_inference = 'numpy'`): the same function as the TensorFlow
shallow agent, parameters copied only on refresh, Categorical sampling, one BLAS thread, the settings' checks, and
single-machine training with it."""

import os

import gin
import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import actor as actor_lib
from scalable_agent import agent as agent_lib
from scalable_agent import environments
from scalable_agent import experiment
from scalable_agent import networks
from scalable_agent import numpy_agent
from scalable_agent import settings as settings_lib


def _env_output(frames):
  batch = frames.shape[0]
  return environments.StepOutput(np.zeros([batch], np.float32), None, np.zeros([batch], bool),
                                 (frames, np.array([''] * batch, dtype=object)))


def _agent_with_random_parameters(num_actions=6, frame_shape=(84, 84, 4), seed=0):
  agent = networks.FeedForwardAgent(num_actions, frame_shape)
  generator = np.random.default_rng(seed)
  for variable in agent.tf1_variables().values():  # Non-zero biases too (they start at 0).
    variable.assign(variable + generator.normal(0., .05, variable.shape).astype(np.float32))
  return agent


def _state(batch):
  zeros = np.zeros([batch, agent_lib.CORE_LSTM_SIZE], np.float32)
  return agent_lib.LSTMState(zeros, zeros + 1.)


@pytest.mark.parametrize('frame_shape', [(84, 84, 4), (72, 96, 3)])
def test_forward_pass_equals_the_tensorflow_agent(frame_shape):
  agent = _agent_with_random_parameters(frame_shape=frame_shape)
  policy = numpy_agent.NumpyPolicy(numpy_agent.ParameterCopy(agent), seed=1)
  frames = np.random.default_rng(2).integers(0, 256, (3,) + frame_shape, dtype=np.uint8)
  state = _state(3)
  output, state_after = policy(np.zeros([3], np.int32), _env_output(frames), state)
  expected, _ = agent(tf.zeros([3], tf.int32), _env_output(tf.constant(frames)), state)
  np.testing.assert_allclose(output.policy_logits, expected.policy_logits.numpy(), rtol=1e-5, atol=1e-5)
  np.testing.assert_allclose(output.baseline, expected.baseline.numpy(), rtol=1e-5, atol=1e-5)
  assert output.policy_logits.dtype == np.float32 and output.baseline.shape == (3,)
  assert output.action.dtype == np.int32 and output.action.shape == (3,) and set(output.action) <= set(range(6))
  for s, s_after in zip(state, state_after):  # Carried unchanged, as by the TensorFlow agent.
    np.testing.assert_array_equal(s, s_after)


def test_parameters_change_only_on_refresh():
  agent = _agent_with_random_parameters()
  parameters = numpy_agent.ParameterCopy(agent)
  policy = numpy_agent.NumpyPolicy(parameters, seed=1)
  frames = np.random.default_rng(3).integers(0, 256, (1, 84, 84, 4), dtype=np.uint8)
  before, _ = policy(None, _env_output(frames), _state(1))
  bias = agent.tf1_variables()['agent/baseline/b']
  bias.assign_add([2.5])  # As a learner step would.
  unchanged, _ = policy(None, _env_output(frames), _state(1))
  np.testing.assert_array_equal(unchanged.baseline, before.baseline)
  parameters.refresh()
  after, _ = policy(None, _env_output(frames), _state(1))
  np.testing.assert_allclose(after.baseline, before.baseline + 2.5, rtol=1e-6)


def test_sampling_follows_the_softmax_and_its_seed():
  probabilities = np.array([.1, .2, .7, 0.])
  logits = np.log(np.maximum(probabilities, 1e-300))[None].repeat(200000, axis=0)
  actions = numpy_agent.sample(logits, np.random.default_rng(5))
  counts = np.bincount(actions, minlength=4) / len(actions)
  np.testing.assert_allclose(counts, probabilities, atol=.005)  # 4.5 standard errors at most.
  assert counts[3] == 0 and actions.dtype == np.int32
  again = numpy_agent.sample(logits[:100], np.random.default_rng(5))
  np.testing.assert_array_equal(again, actions[:100])
  assert numpy_agent.sample(np.array([[-1e4, 50., -1e4]], np.float32), np.random.default_rng(0))[0] == 1


def test_blas_runs_on_one_thread_inside_and_as_before_after():
  functions = numpy_agent.openblas_thread_functions()
  assert functions is not None, 'NumPy from the pinned wheels uses OpenBLAS'
  get, set_ = functions
  set_(2)
  with numpy_agent.single_threaded_blas():
    assert get() == 1
  assert get() == 2


def test_other_networks_and_values_are_refused_with_the_fix():
  with pytest.raises(ValueError, match="agent_network.network = 'shallow'"):
    numpy_agent.ParameterCopy(networks.FeedForwardAgent(6, (84, 84, 4), torso='deep'))
  with pytest.raises(ValueError, match="actor_inference must be one of batched, numpy; got 'tf'"):
    settings_lib.check_settings(settings_lib.Settings(actor_inference='tf'))
  gin.clear_config()
  with pytest.raises(ValueError, match="agent_network.network is 'released'. Set agent_network.network = 'shallow'"):
    settings_lib.check_settings(settings_lib.Settings(actor_inference='numpy'))
  with gin.unlock_config():
    gin.bind_parameter('agent_network.network', 'shallow')
  try:
    settings_lib.check_settings(settings_lib.Settings(actor_inference='numpy'))
  finally:
    gin.clear_config()


def test_actor_policies_one_per_actor_refreshed_after_each_learner_step():
  agent = _agent_with_random_parameters()
  get, set_ = numpy_agent.openblas_thread_functions()
  set_(2)
  settings = settings_lib.Settings(num_actors=3, seed=4, actor_inference='numpy')
  policies, after_step, close = actor_lib.actor_policies(settings, agent)
  try:
    assert len(policies) == 3 and len({id(p) for p in policies}) == 3 and get() == 1
    frames = np.random.default_rng(3).integers(0, 256, (1, 84, 84, 4), dtype=np.uint8)
    before, _ = policies[0](None, _env_output(frames), _state(1))
    agent.tf1_variables()['agent/baseline/b'].assign_add([1.])
    after_step()
    after, _ = policies[2](None, _env_output(frames), _state(1))
    np.testing.assert_allclose(after.baseline, before.baseline + 1., rtol=1e-6)
  finally:
    close()
  assert get() == 2
  # Actor i's generator is seeded with (seed, i): the same settings draw the same actions, other actors others.
  frames = np.random.default_rng(4).integers(0, 256, (200, 84, 84, 4), dtype=np.uint8)
  again, _, close_again = actor_lib.actor_policies(settings, agent)
  close_again()
  fresh, _, close_fresh = actor_lib.actor_policies(settings, agent)
  close_fresh()
  first, second, other = (p(None, _env_output(frames), _state(200))[0].action for p in (again[1], fresh[1], fresh[2]))
  np.testing.assert_array_equal(first, second)
  assert (first != other).any()
  batched, _, close_batched = actor_lib.actor_policies(settings_lib.Settings(num_actors=2), agent)
  close_batched()
  assert batched[0] is batched[1]  # 'batched': one dynamic-batching function for all actors.


def test_single_machine_training_with_numpy_actors(tmp_path):
  gin.clear_config()
  with gin.unlock_config():
    gin.bind_parameter('agent_network.network', 'shallow')
  get, set_ = numpy_agent.openblas_thread_functions()
  set_(2)
  threads = []
  settings = settings_lib.Settings(level_name='builtin/find_object', num_actors=2, batch_size=2, unroll_length=5,
                                   num_action_repeats=1, width=24, height=24, total_environment_frames=100,
                                   actor_inference='numpy')
  try:
    assert experiment.train(str(tmp_path), settings, step_hook=lambda *_: threads.append(get())) == 100
  finally:
    gin.clear_config()
  assert threads and set(threads) == {1}
  assert get() == 2  # Restored at the end.
  assert os.path.exists(os.path.join(tmp_path, 'model.ckpt-100.index'))
