"""scalable_agent.networks: the feed-forward Atari experts' shapes and parameter counts (hand-computed and against the
paper's Figure 3), a NumPy re-computation of the shallow network, and the network selection."""

import gin
import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import agent as agent_lib
from scalable_agent import environments
from scalable_agent import networks


def _count(agent):
  return sum(int(np.prod(v.shape)) for v in agent.tf1_variables().values())


def _shapes(agent):
  return {name: v.shape.as_list() for name, v in agent.tf1_variables().items()}


def test_shallow_expert_layers_on_four_grey_84x84_frames():
  """Pong (6 actions), frames 84 x 84 x 4: 8x8/4 VALID -> 20 x 20 x 16, 4x4/2 VALID -> 9 x 9 x 32 = 2592 -> 256."""
  agent = networks.FeedForwardAgent(6, (84, 84, 4), torso='shallow')
  assert _shapes(agent) == {
      'agent/torso/convnet/conv_2d/w': [8, 8, 4, 16],
      'agent/torso/convnet/conv_2d/b': [16],
      'agent/torso/convnet/conv_2d_1/w': [4, 4, 16, 32],
      'agent/torso/convnet/conv_2d_1/b': [32],
      'agent/torso/linear/w': [2592, 256],
      'agent/torso/linear/b': [256],
      'agent/policy_logits/w': [256, 6],
      'agent/policy_logits/b': [6],
      'agent/baseline/w': [256, 1],
      'agent/baseline/b': [1]
  }
  by_hand = (8 * 8 * 4 * 16 + 16) + (4 * 4 * 16 * 32 + 32) + (9 * 9 * 32 * 256 + 256) + (256 * 6 + 6) + (256 + 1)
  assert _count(agent) == by_hand == 677943


def test_deep_expert_is_the_released_resnet_torso_without_lstm_and_instruction():
  """The deep torso has the released agent's convnet variables (names and shapes) and linear 256 on 11 x 11 x 32
  (84 -> 42 -> 21 -> 11); nothing of the LSTMs, the embedding or the reward / action inputs."""
  agent = networks.FeedForwardAgent(6, (84, 84, 4), torso='deep')
  shapes = _shapes(agent)
  assert shapes['agent/torso/linear/w'] == [3872, 256]
  convs = [(3 * 3 * 4 * 16 + 16)] + [3 * 3 * 16 * 16 + 16] * 4 + [3 * 3 * 16 * 32 + 32] + [3 * 3 * 32 * 32 + 32] * 9
  assert _count(agent) == sum(convs) + (3872 * 256 + 256) + (256 * 6 + 6) + (256 + 1) == 1091031
  released = _shapes(agent_lib.Agent(9))  # The original 72 x 96 x 3 frames.
  deep = _shapes(networks.FeedForwardAgent(9, (72, 96, 3), torso='deep'))
  released_torso = {
      k[len('agent/batch_apply/'):]: v
      for k, v in released.items()
      if k.startswith(('agent/batch_apply/convnet/', 'agent/batch_apply/linear/'))
  }
  deep_torso = {k[len('agent/torso/'):]: v for k, v in deep.items() if k.startswith('agent/torso/')}
  assert deep_torso == released_torso and len(deep_torso) == 32
  assert not any('lstm' in name or 'embed' in name for name in deep)


def test_shallow_torso_in_the_dmlab_agent_has_the_papers_1_2_million_parameters():
  """Figure 3 of the paper: "Small architecture, 2 convolutional layers and 1.2 million parameters" (DMLab: 96 x 72
  RGB, LSTM 256, instruction LSTM, 9 actions) beside the large one's 1.6 million (the released agent: 1,628,010).
  The DMLab agent with the shallow torso = the released agent - its ResNet torso + the shallow torso (heads equal)."""
  released = _count(agent_lib.Agent(9))
  assert released == 1628010
  small = (released - _count(networks.FeedForwardAgent(9, (72, 96, 3), torso='deep')) +
           _count(networks.FeedForwardAgent(9, (72, 96, 3), torso='shallow')))
  assert small == 1230426 and round(small / 1e6, 1) == 1.2
  # With SAME padding the torso would see 9 x 12 x 32 features instead of 7 x 10 x 32: 1.54 million, not 1.2.
  assert round((small + (9 * 12 - 7 * 10) * 32 * 256) / 1e6, 1) == 1.5


def _numpy_conv_valid(x, w, b, stride):
  """x [N, H, W, C], w [k, k, C, O] -> [N, (H - k) // s + 1, (W - k) // s + 1, O], by explicit windows."""
  k = w.shape[0]
  rows, columns = (x.shape[1] - k) // stride + 1, (x.shape[2] - k) // stride + 1
  out = np.zeros((x.shape[0], rows, columns, w.shape[3]))
  for i in range(rows):
    for j in range(columns):
      window = x[:, i * stride:i * stride + k, j * stride:j * stride + k, :]
      out[:, i, j, :] = np.tensordot(window, w, axes=([1, 2, 3], [0, 1, 2]))
  return out + b


def _env_outputs(frames):
  """A StepOutput around frames [T, B, H, W, C] (the other fields are not inputs of the experts)."""
  shape = frames.shape[:2]
  return environments.StepOutput(reward=tf.fill(shape, 5.),
                                 info=environments.StepOutputInfo(tf.zeros(shape), tf.zeros(shape, tf.int32)),
                                 done=tf.zeros(shape,
                                               tf.bool), observation=(tf.constant(frames), tf.fill(shape, 'ignored')))


def test_shallow_expert_matches_numpy_and_unroll_matches_steps():
  rng = np.random.default_rng(0)
  agent = networks.FeedForwardAgent(4, (36, 36, 4), torso='shallow')
  v = {name: var.numpy().astype(np.float64) for name, var in agent.tf1_variables().items()}
  frames = rng.integers(0, 256, (3, 2, 36, 36, 4)).astype(np.uint8)  # T = 3, B = 2.
  state = agent_lib.LSTMState(tf.constant(rng.normal(size=(2, 256)), tf.float32), tf.ones([2, 256]))
  outputs, state_after = agent.unroll(tf.zeros([3, 2], tf.int32), _env_outputs(frames), state)

  x = frames.reshape(6, 36, 36, 4).astype(np.float64) / 255.
  x = np.maximum(_numpy_conv_valid(x, v['agent/torso/convnet/conv_2d/w'], v['agent/torso/convnet/conv_2d/b'], 4), 0)
  x = np.maximum(_numpy_conv_valid(x, v['agent/torso/convnet/conv_2d_1/w'], v['agent/torso/convnet/conv_2d_1/b'], 2),
                 0)  # [6, 3, 3, 32]
  x = np.maximum(x.reshape(6, -1) @ v['agent/torso/linear/w'] + v['agent/torso/linear/b'], 0)  # Flatten H, W, C.
  logits = x @ v['agent/policy_logits/w'] + v['agent/policy_logits/b']
  baseline = (x @ v['agent/baseline/w'] + v['agent/baseline/b'])[:, 0]
  np.testing.assert_allclose(outputs.policy_logits.numpy().reshape(6, 4), logits, rtol=1e-4, atol=1e-5)
  np.testing.assert_allclose(outputs.baseline.numpy().reshape(6), baseline, rtol=1e-4, atol=1e-5)
  assert outputs.action.shape == (3, 2) and outputs.action.dtype == tf.int32
  assert set(outputs.action.numpy().ravel()) <= set(range(4))
  for s, s_after in zip(state, state_after):  # Carried unchanged: the experts have no memory.
    np.testing.assert_array_equal(s.numpy(), s_after.numpy())

  step = tf.function(agent)  # One step for a batch (actors), compiled, equals the unroll's step t.
  for t in range(3):
    step_output, _ = step(tf.zeros([2], tf.int32), tf.nest.map_structure(lambda x, t=t: x[t], _env_outputs(frames)),
                          state)
    np.testing.assert_allclose(step_output.policy_logits.numpy(),
                               outputs.policy_logits.numpy()[t], rtol=1e-5, atol=1e-6)


def test_network_selection_and_errors():
  gin.clear_config()
  assert isinstance(networks.make_agent(9, (72, 96, 3)), agent_lib.Agent)  # Default: the released agent.
  assert len(networks.make_agent(9, (72, 96, 3)).tf1_variables()) == 41
  with gin.unlock_config():
    gin.bind_parameter('agent_network.network', 'deep')
  try:
    agent = networks.make_agent(6, (84, 84, 4))
    assert isinstance(agent, networks.FeedForwardAgent) and _count(agent) == 1091031
  finally:
    gin.clear_config()
  with pytest.raises(ValueError, match="unknown agent_network.network 'lstm'; the choices are released, shallow, deep"):
    networks.make_agent(6, (84, 84, 4), network='lstm')
  with pytest.raises(ValueError, match='too small for the shallow torso'):
    networks.FeedForwardAgent(6, (16, 16, 4))
  with pytest.raises(ValueError, match="unknown torso 'big'"):
    networks.FeedForwardAgent(6, (84, 84, 4), torso='big')
