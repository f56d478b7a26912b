"""The agent networks to choose from, and the IMPALA paper's feed-forward Atari experts.

`make_agent(num_actions, frame_shape)` builds the network that the gin parameter `agent_network.network` names:

  * 'released' (default): the released code's deep agent, `agent.Agent` (ResNet torso, LSTM 256, instruction
    branch; original TF1 variable names), unchanged;
  * 'shallow': `FeedForwardAgent(torso='shallow')`, the paper's small torso without an LSTM;
  * 'deep': `FeedForwardAgent(torso='deep')`, the paper's ResNet torso without an LSTM and without the instruction.

The paper's Atari experts (Espeholt et al. 2018, Appendix G and Table G.1) are feed-forward: no
LSTM, the frame history is a 4-frame stack (`AtariEnvironment.frame_stack`). Network, per step (T·B rows at once):

  frame uint8 [H, W, C] / 255 -> torso -> ReLU -> flatten -> linear 256 -> ReLU -> policy logits (num_actions),
  baseline (1); action ~ Categorical(logits).

  shallow torso: conv 8x8 stride 4, 16 channels, VALID -> ReLU -> conv 4x4 stride 2, 32 channels, VALID
    (84 x 84 -> 20 x 20 x 16 -> 9 x 9 x 32 = 2592 features);
  deep torso: the released agent's 3 ResNet stages (16, 32, 32 channels; `agent.CONV_STAGES`), SAME padding
    (84 x 84 -> 42 -> 21 -> 11: 11 x 11 x 32 = 3872 features).

Sources of the shallow torso's numbers: the paper's Figure 3 (left; "Small architecture, 2 convolutional layers and
1.2 million parameters") draws the two convolutions and the FC 256; the layer sizes are the network of Mnih et al.
2013 that A3C used ("16 filters of size 8 x 8 with stride 4, ... 32 filters of size 4 x 4 with stride 2, ... a fully
connected layer with 256 hidden units", A3C paper section 8), with the paper's stated feed-forward preprocessing "in
the same way as (Mnih et al., 2016)". The padding is settled by the caption's parameter count: the DMLab agent with
this torso (96 x 72 RGB frames, LSTM 256, instruction branch, 9 actions) has 1,230,426 parameters with VALID padding
("1.2 million") and 1,541,722 with SAME; tests/scalable_agent/test_networks.py checks it. Initialisers: Sonnet's
defaults, as the released agent (`agent.truncated_normal`, zero biases).

The feed-forward agents take and return the released agent's core state (`agent.LSTMState`, float32 [B, 256] each)
unchanged, so that actors, unrolls, the learner, Reverb tables and checkpoints carry the same structures for every
network; the state is not used. Frames' `reward` and `instruction` inputs are not used either (the experts see only
the frame stack).
"""

import collections

import gin
import sonnet as snt
import tensorflow as tf

from scalable_agent import agent as agent_lib

NETWORKS = ('released', 'shallow', 'deep')
TORSOS = ('shallow', 'deep')
FEEDFORWARD_SIZE = 256
# The shallow torso: (output channels, kernel size, stride) per convolution, VALID padding.
SHALLOW_CONVS = ((16, 8, 4), (32, 4, 2))


class _Conv(snt.Module):
  """A convolution with bias, VALID padding, initialised as `snt.Conv2D` (truncated normal 1/sqrt(fan_in))."""

  def __init__(self, input_channels, output_channels, kernel, stride, name):
    super().__init__(name=name)
    self._stride = stride
    fan_in = kernel * kernel * input_channels
    self.w = tf.Variable(
        agent_lib.truncated_normal(fan_in)([kernel, kernel, input_channels, output_channels], tf.float32), name='w')
    self.b = tf.Variable(tf.zeros([output_channels]), name='b')

  def __call__(self, x):
    """x: float32 [N, H, W, C_in] -> float32 [N, (H - k) // s + 1, (W - k) // s + 1, C_out]."""
    return tf.nn.bias_add(tf.nn.conv2d(x, self.w, strides=self._stride, padding='VALID'), self.b)


class _ShallowConvNet(snt.Module):
  """conv 8x8/4 (16) -> ReLU -> conv 4x4/2 (32), VALID (variable scope `convnet`)."""

  def __init__(self, input_channels):
    super().__init__(name='convnet')
    self._convs = []
    channels = input_channels
    for i, (output_channels, kernel, stride) in enumerate(SHALLOW_CONVS):
      self._convs.append(_Conv(channels, output_channels, kernel, stride, name='conv_2d' if i == 0 else f'conv_2d_{i}'))
      channels = output_channels

  def __call__(self, x):
    for i, conv in enumerate(self._convs):
      x = conv(tf.nn.relu(x) if i else x)
    return x


def torso_output_shape(torso, frame_shape):
  """(height, width, channels) of a torso's convolution output for frames of `frame_shape` (H, W, C)."""
  height, width, _ = frame_shape
  if torso == 'shallow':
    for _, kernel, stride in SHALLOW_CONVS:
      height, width = (height - kernel) // stride + 1, (width - kernel) // stride + 1
    return height, width, SHALLOW_CONVS[-1][0]
  for _ in agent_lib.CONV_STAGES:
    height, width = (height + 1) // 2, (width + 1) // 2
  return height, width, agent_lib.CONV_STAGES[-1][0]


class FeedForwardAgent(snt.Module):
  """A feed-forward IMPALA agent (module docstring), module name `agent`, with the interface of `agent.Agent`.

  Variables (all created by the constructor): `agent/torso/convnet/...` (the shallow `conv_2d`, `conv_2d_1`, or the
  deep torso's names of the released agent), `agent/torso/linear/{w,b}`, `agent/policy_logits/{w,b}`,
  `agent/baseline/{w,b}`.
  """

  def __init__(self, num_actions, frame_shape, torso='shallow'):
    """Args:
      num_actions: size of the action set.
      frame_shape: (height, width, channels) of the uint8 frames, e.g. (84, 84, 4) for 4 stacked grey frames.
      torso: 'shallow' or 'deep'.

    Raises:
      ValueError: an unknown torso, no action, or frames too small for the shallow torso's convolutions.
    """
    super().__init__(name='agent')
    if torso not in TORSOS:
      raise ValueError(f'unknown torso {torso!r}; the choices are {", ".join(TORSOS)}.')
    if num_actions < 1:
      raise ValueError(f'num_actions must be >= 1, got {num_actions}.')
    frame_shape = tuple(frame_shape)
    if len(frame_shape) != 3 or min(frame_shape) < 1:
      raise ValueError(f'frame_shape must be (height, width, channels) of positive sizes, got {frame_shape}.')
    height, width, channels = torso_output_shape(torso, frame_shape)
    if min(height, width) < 1:
      raise ValueError(f'frames of {frame_shape[0]} x {frame_shape[1]} are too small for the {torso} torso: it needs '
                       'at least 20 x 20.')
    self._num_actions = num_actions
    self._frame_shape = frame_shape
    self._torso = torso
    with agent_lib.record_variables() as created:
      with tf.name_scope('torso'):
        if torso == 'shallow':
          self._convnet = _ShallowConvNet(frame_shape[2])
        else:
          self._convnet = agent_lib.ConvNet(frame_shape[2])
        self._linear = agent_lib.Linear(height * width * channels, FEEDFORWARD_SIZE, name='linear')
      self._policy_logits = agent_lib.Linear(FEEDFORWARD_SIZE, num_actions, name='policy_logits')
      self._baseline = agent_lib.Linear(FEEDFORWARD_SIZE, 1, name='baseline')
    self._variables = agent_lib.agent_variable_names(self, created)

  @property
  def num_actions(self):
    return self._num_actions

  @property
  def torso(self):
    """'shallow' or 'deep'."""
    return self._torso

  def tf1_variables(self):
    """OrderedDict name -> tf.Variable of every variable, in creation order (as `agent.Agent.tf1_variables`)."""
    return collections.OrderedDict(self._variables)

  def initial_state(self, batch_size):
    """The (unused) core state: LSTMState(c, h), float32 zeros [batch_size, 256] each, as `agent.Agent`."""
    zeros = tf.zeros([batch_size, agent_lib.CORE_LSTM_SIZE])
    return agent_lib.LSTMState(zeros, zeros)

  def _apply(self, frame):
    """frame uint8 [N, H, W, C] -> AgentOutput(action int32 [N], policy_logits float32 [N, A], baseline [N])."""
    x = tf.cast(frame, tf.float32) / 255.
    x = tf.nn.relu(self._convnet(x))
    x = tf.reshape(x, [-1, self._linear.w.shape[0]])
    x = tf.nn.relu(self._linear(x))
    policy_logits = self._policy_logits(x)
    baseline = tf.squeeze(self._baseline(x), axis=-1)
    action = tf.squeeze(tf.random.categorical(policy_logits, 1, dtype=tf.int32), axis=1)
    return agent_lib.AgentOutput(action, policy_logits, baseline)

  def __call__(self, last_action, env_output, core_state):
    """One step for a batch (actors): as `agent.Agent.__call__`; core_state is returned unchanged."""
    del last_action  # Not an input of the feed-forward experts.
    frame = env_output.observation[0]
    return self._apply(frame), agent_lib.LSTMState(*core_state)

  def unroll(self, actions, env_outputs, core_state):
    """Runs the agent over time-major sequences (learner), as `agent.Agent.unroll`.

    Args:
      actions: int32 [T, B] (not used).
      env_outputs: StepOutput whose observation is (frame uint8 [T, B, H, W, C], instruction); only the frame is used.
      core_state: returned unchanged.

    Returns:
      (AgentOutput(action int32 [T, B], policy_logits float32 [T, B, A], baseline float32 [T, B]), core_state).
    """
    frame = env_outputs.observation[0]
    time_and_batch = tf.shape(actions)[:2]
    outputs = self._apply(tf.reshape(frame, tf.concat([[-1], tf.shape(frame)[2:]], axis=0)))
    outputs = agent_lib.AgentOutput(
        *(tf.reshape(o, tf.concat([time_and_batch, tf.shape(o)[1:]], axis=0)) for o in outputs))
    return outputs, agent_lib.LSTMState(*core_state)


def configured_network():
  """The network `make_agent` builds under the current gin configuration (`agent_network.network`)."""
  return gin.get_bindings('agent_network').get('network', 'released')


@gin.configurable('agent_network', module='scalable_agent', denylist=['num_actions', 'frame_shape'])
def make_agent(num_actions, frame_shape, network='released'):
  """The agent network `network` (module docstring) for an action set and frame shape.

  Args:
    num_actions: size of the action set.
    frame_shape: (height, width, channels) of the frames.
    network: 'released', 'shallow' or 'deep' (gin: `agent_network.network`).

  Returns:
    an `agent.Agent` or a `FeedForwardAgent`.

  Raises:
    ValueError: an unknown network (the message lists the choices).
  """
  if network == 'released':
    return agent_lib.Agent(num_actions, frame_shape)
  if network in TORSOS:
    return FeedForwardAgent(num_actions, frame_shape, torso=network)
  raise ValueError(f'unknown agent_network.network {network!r}; the choices are {", ".join(NETWORKS)}.')
