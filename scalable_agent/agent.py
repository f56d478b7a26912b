"""The IMPALA deep agent (deepmind/scalable_agent experiment.py `Agent`), as Sonnet 2 modules with the original
variable names.

Network, per time step (T·B rows at once for the torso and the head; only the core LSTM loops over time):

  frame uint8 [72, 96, 3] / 255 -> 3 stages of (conv 3x3, max-pool 3x3 stride 2 SAME, 2 residual blocks) with 16,
  32, 32 channels -> ReLU -> flatten (9·12·32 = 3456) -> linear 256 -> ReLU;
  concat [conv 256, clip(reward, -1, 1) 1, one_hot(last action) num_actions, instruction 64] = 330
  -> LSTM 256 (state reset to zeros where `done`, before the step) -> policy logits (num_actions), baseline (1);
  action ~ Categorical(logits).

Instruction branch: split on single spaces skipping empty tokens (TF1 `tf.string_split`), 1000 hash buckets
(`tf.strings.to_hash_bucket_fast`), embedding 20, LSTM 64, output at the last token (zeros for an empty instruction).

Every variable exists right after construction and is named as in the original TF1 checkpoints
(`agent/batch_apply/convnet/conv_2d/w`, ..., `agent/lstm_cell/kernel`, `agent/batch_apply_1/baseline/b`; 41
variables, 1,628,010 parameters); `Agent.tf1_variables()` maps these names to the variables. Both LSTMs use the
`tf.contrib.rnn.LSTMBlockCell` layout: one kernel [input + hidden, 4·hidden] with the input rows first and the gate
blocks in the order [i, c, f, o], a bias [4·hidden], and a forget bias of 1.0 added at run time (not stored).
"""

import collections
import contextlib
import math
from typing import Any, Callable, Dict, Iterator, List, Sequence, Tuple

import sonnet as snt
import tensorflow as tf

AgentOutput = collections.namedtuple('AgentOutput', ['action', 'policy_logits', 'baseline'])
# The core LSTM state, in the order of TF1's `LSTMStateTuple`: (c, h), each float32 [B, 256].
LSTMState = collections.namedtuple('LSTMState', ['c', 'h'])

NUM_HASH_BUCKETS = 1000
EMBEDDING_SIZE = 20
INSTRUCTION_LSTM_SIZE = 64
TORSO_SIZE = 256
CORE_LSTM_SIZE = 256
FORGET_BIAS = 1.0
# (channels, residual blocks) per stage of the ResNet torso.
CONV_STAGES = ((16, 2), (32, 2), (32, 2))
DEFAULT_FRAME_SHAPE = (72, 96, 3)


def truncated_normal(fan_in: int) -> Any:
  """Sonnet 1 / Sonnet 2 default for `w`: truncated normal (2 stddev), stddev 1/sqrt(fan_in)."""
  return snt.initializers.TruncatedNormal(stddev=1. / math.sqrt(fan_in))


class _Conv2D(snt.Module):
  """3x3 convolution, stride 1, SAME padding, with bias: `snt.Conv2D(out, 3, stride=1, padding='SAME')`."""

  def __init__(self, input_channels: int, output_channels: int, name: str = 'conv_2d') -> None:
    super().__init__(name=name)
    self.w = tf.Variable(
        truncated_normal(9 * input_channels)([3, 3, input_channels, output_channels], tf.float32), name='w')
    self.b = tf.Variable(tf.zeros([output_channels]), name='b')

  def __call__(self, x: tf.Tensor) -> tf.Tensor:
    """x: float32 [N, H, W, C_in] -> float32 [N, H, W, C_out]."""
    return tf.nn.bias_add(tf.nn.conv2d(x, self.w, strides=1, padding='SAME'), self.b)


class Linear(snt.Module):
  """Affine layer `x·w + b`, initialised as `snt.Linear`."""

  def __init__(self, input_size: int, output_size: int, name: str = 'linear') -> None:
    super().__init__(name=name)
    self.w = tf.Variable(truncated_normal(input_size)([input_size, output_size], tf.float32), name='w')
    self.b = tf.Variable(tf.zeros([output_size]), name='b')

  def __call__(self, x: tf.Tensor) -> tf.Tensor:
    """x: float32 [N, input_size] -> float32 [N, output_size]."""
    return tf.matmul(x, self.w) + self.b


class LSTMBlockCell(snt.Module):
  """LSTM with the weight layout and semantics of TF1 `tf.contrib.rnn.LSTMBlockCell` (no peephole, no cell clip).

  Variables: `kernel` float32 [input_size + hidden_size, 4·hidden_size] (glorot uniform, the TF1 default) with the
  input rows first and the gate column blocks [i, c, f, o]; `bias` float32 [4·hidden_size] (zeros). With
  xh = concat(x, h): [i, ci, f, o] = xh·kernel + bias; c' = σ(i)·tanh(ci) + σ(f + 1)·c; h' = tanh(c')·σ(o).

  The gates are computed with explicit ops (differentiable, usable in `tf.function`); on CPU this measured faster
  than `tf.raw_ops.LSTMBlockCell`, which in TF 2.15 also has no registered gradient. Sequences are run as
  `input_projection` once for all steps (one large matmul) followed by `step` per time step.
  """

  def __init__(self, input_size: int, hidden_size: int, name: str = 'lstm_cell') -> None:
    super().__init__(name=name)
    self.input_size = input_size
    self.hidden_size = hidden_size
    glorot_uniform = snt.initializers.VarianceScaling(1.0, mode='fan_avg', distribution='uniform')
    self.kernel = tf.Variable(glorot_uniform([input_size + hidden_size, 4 * hidden_size], tf.float32), name='kernel')
    self.bias = tf.Variable(tf.zeros([4 * hidden_size]), name='bias')

  def input_projection(self, x: tf.Tensor) -> tf.Tensor:
    """x: float32 [N, input_size] -> float32 [N, 4·hidden_size], the input part of the gates plus the bias."""
    return tf.matmul(x, self.kernel[:self.input_size]) + self.bias

  def recurrent_kernel(self) -> tf.Tensor:
    """The recurrent rows of `kernel`: float32 [hidden_size, 4·hidden_size]. Read it once per sequence."""
    return self.kernel[self.input_size:]

  def step(self, projected_input: tf.Tensor, state: Tuple[tf.Tensor, tf.Tensor],
           recurrent_kernel: tf.Tensor) -> Tuple[tf.Tensor, LSTMState]:
    """One step.

    Args:
      projected_input: float32 [B, 4·hidden], `input_projection(x)`.
      state: (c, h), float32 [B, hidden] each.
      recurrent_kernel: `recurrent_kernel()`.

    Returns:
      (h', LSTMState(c', h')).
    """
    c, h = state
    gates = projected_input + tf.matmul(h, recurrent_kernel)
    i, ci, f, o = tf.split(gates, 4, axis=1)
    c = tf.sigmoid(i) * tf.tanh(ci) + tf.sigmoid(f + FORGET_BIAS) * c
    h = tf.tanh(c) * tf.sigmoid(o)
    return h, LSTMState(c, h)

  def __call__(self, x: tf.Tensor, state: Tuple[tf.Tensor, tf.Tensor]) -> Tuple[tf.Tensor, LSTMState]:
    """x: float32 [B, input_size]; state: (c, h) float32 [B, hidden] -> (h', LSTMState(c', h'))."""
    return self.step(self.input_projection(x), state, self.recurrent_kernel())


class _ResidualBlock(snt.Module):
  """y = x + conv_2d_1(ReLU(conv_2d(ReLU(x)))), in variable scope `residual_<stage>_<block>`."""

  def __init__(self, num_channels: int, name: str) -> None:
    super().__init__(name=name)
    self._conv0 = _Conv2D(num_channels, num_channels, name='conv_2d')
    self._conv1 = _Conv2D(num_channels, num_channels, name='conv_2d_1')

  def __call__(self, x: tf.Tensor) -> tf.Tensor:
    return x + self._conv1(tf.nn.relu(self._conv0(tf.nn.relu(x))))


class ConvNet(snt.Module):
  """The ResNet stages (variable scope `convnet`): [N, H, W, C] float32 -> [N, H/8, W/8, 32] (sizes rounded up)."""

  def __init__(self, input_channels: int) -> None:
    super().__init__(name='convnet')
    self._stages: List[Tuple[_Conv2D, List[_ResidualBlock]]] = []
    channels = input_channels
    for i, (num_channels, num_blocks) in enumerate(CONV_STAGES):
      conv = _Conv2D(channels, num_channels, name='conv_2d' if i == 0 else f'conv_2d_{i}')
      blocks = [_ResidualBlock(num_channels, name=f'residual_{i}_{j}') for j in range(num_blocks)]
      self._stages.append((conv, blocks))
      channels = num_channels

  def __call__(self, x: tf.Tensor) -> tf.Tensor:
    for conv, blocks in self._stages:
      x = conv(x)
      x = tf.nn.max_pool2d(x, ksize=3, strides=2, padding='SAME')
      for block in blocks:
        x = block(x)
    return x


class _Torso(snt.Module):
  """Per-step features (variable scope `batch_apply`, the original's first `snt.BatchApply`)."""

  def __init__(self, num_actions: int, frame_shape: Sequence[int]) -> None:
    super().__init__(name='batch_apply')
    self._num_actions = num_actions
    height, width, channels = frame_shape
    for _ in CONV_STAGES:
      height, width = (height + 1) // 2, (width + 1) // 2
    self._convnet = ConvNet(channels)
    self._linear = Linear(height * width * CONV_STAGES[-1][0], TORSO_SIZE, name='linear')
    self._embed = snt.Embed(NUM_HASH_BUCKETS, EMBEDDING_SIZE, initializer=truncated_normal(NUM_HASH_BUCKETS),
                            name='embed')
    with tf.name_scope('rnn'):  # The scope `tf.nn.dynamic_rnn` gave the language LSTM.
      self._language_lstm = LSTMBlockCell(EMBEDDING_SIZE, INSTRUCTION_LSTM_SIZE, name='language_lstm')

  def instruction(self, instruction: tf.Tensor) -> tf.Tensor:
    """Encodes instructions: tf.string [N] -> float32 [N, 64], the LSTM output at the last token (0 if no token)."""
    tokens = tf.strings.split(instruction, sep=' ')  # Single spaces; tabs are not delimiters (as TF1).
    tokens = tf.ragged.boolean_mask(tokens, tf.strings.length(tokens) > 0)  # TF1 skipped empty tokens.
    lengths = tf.cast(tokens.row_lengths(), tf.int32)
    buckets = tf.strings.to_hash_bucket_fast(tokens.to_tensor(default_value=''), NUM_HASH_BUCKETS)  # [N, L]
    embedded = self._embed(buckets)  # [N, L, 20]
    projected = self._language_lstm.input_projection(tf.reshape(embedded, [-1, EMBEDDING_SIZE]))
    projected = tf.transpose(tf.reshape(projected, [tf.shape(buckets)[0], tf.shape(buckets)[1], -1]), [1, 0, 2])
    projected_ta = tf.TensorArray(tf.float32, size=tf.shape(projected)[0],
                                  element_shape=[None, 4 * INSTRUCTION_LSTM_SIZE]).unstack(projected)
    recurrent_kernel = self._language_lstm.recurrent_kernel()
    zeros = tf.zeros([tf.shape(instruction)[0], INSTRUCTION_LSTM_SIZE])

    def body(t: tf.Tensor, state: LSTMState, last_output: tf.Tensor) -> Tuple[tf.Tensor, LSTMState, tf.Tensor]:
      output, state = self._language_lstm.step(projected_ta.read(t), state, recurrent_kernel)
      # Keep the output at position length - 1: later (padding) positions do not change earlier outputs.
      last_output = tf.where((t < lengths)[:, None], output, last_output)
      return t + 1, state, last_output

    # The batch dimension of the state may be static (an actor's [1, ...] call) while the TensorArray reads are
    # [None, ...]: the invariants keep it unknown inside the loop, whatever the caller's shapes.
    state_shape = tf.TensorShape([None, INSTRUCTION_LSTM_SIZE])
    _, _, last_output = tf.while_loop(
        lambda t, *_: t < projected_ta.size(), body, (tf.constant(0), LSTMState(zeros, zeros), zeros),
        shape_invariants=(tf.TensorShape([]), LSTMState(state_shape, state_shape), state_shape))
    last_output.set_shape(zeros.shape)  # Back to the static shape the loop started with, where it was known.
    return last_output

  def __call__(self, last_action: tf.Tensor, env_output: Any) -> tf.Tensor:
    """last_action int32 [N]; env_output a StepOutput of [N, ...] -> float32 [N, 256 + 1 + num_actions + 64]."""
    reward, _, _, (frame, instruction) = env_output
    frame = tf.cast(frame, tf.float32) / 255.
    conv_out = tf.nn.relu(self._convnet(frame))
    conv_out = tf.reshape(conv_out, [-1, self._linear.w.shape[0]])
    conv_out = tf.nn.relu(self._linear(conv_out))
    instruction_out = self.instruction(instruction)
    clipped_reward = tf.expand_dims(tf.clip_by_value(tf.cast(reward, tf.float32), -1., 1.), -1)
    one_hot_last_action = tf.one_hot(last_action, self._num_actions)
    return tf.concat([conv_out, clipped_reward, one_hot_last_action, instruction_out], axis=1)


class _Head(snt.Module):
  """Policy and baseline heads (variable scope `batch_apply_1`, the original's second `snt.BatchApply`)."""

  def __init__(self, num_actions: int) -> None:
    super().__init__(name='batch_apply_1')
    self._policy_logits = Linear(CORE_LSTM_SIZE, num_actions, name='policy_logits')
    self._baseline = Linear(CORE_LSTM_SIZE, 1, name='baseline')

  def __call__(self, core_output: tf.Tensor) -> AgentOutput:
    """core_output float32 [N, 256] -> AgentOutput(action int32 [N] sampled, logits [N, A], baseline [N])."""
    policy_logits = self._policy_logits(core_output)
    baseline = tf.squeeze(self._baseline(core_output), axis=-1)
    action = tf.squeeze(tf.random.categorical(policy_logits, 1, dtype=tf.int32), axis=1)
    return AgentOutput(action, policy_logits, baseline)


@contextlib.contextmanager
def record_variables() -> Iterator[List[tf.Variable]]:
  """`with record_variables() as created:` appends every tf.Variable created inside the block to the list
  `created`, in creation order."""
  created: List[tf.Variable] = []

  def record(next_creator: Callable[..., tf.Variable], **kwargs: Any) -> tf.Variable:
    variable = next_creator(**kwargs)
    created.append(variable)
    return variable

  with tf.variable_creator_scope(record):
    yield created


def agent_variable_names(module: tf.Module, variables: Sequence[tf.Variable]) -> Dict[str, tf.Variable]:
  """OrderedDict 'agent/<name under module's scope>' -> variable, in the given order: the TF1 checkpoint names
  whatever name scope the module was built under ('agent/' or 'outer/agent/').

  Raises:
    ValueError: a variable outside the module's scope.
  """
  scope = module.name_scope.name
  names = collections.OrderedDict()
  for variable in variables:
    name = variable.name[:-2] if variable.name.endswith(':0') else variable.name
    if not name.startswith(scope):
      raise ValueError(f'variable {variable.name} is not under the agent scope {scope!r}.')
    names['agent/' + name[len(scope):]] = variable
  return names


def _merge_time_and_batch(x: tf.Tensor) -> tf.Tensor:
  """[T, B, ...] -> [T·B, ...] (snt.BatchApply)."""
  return tf.reshape(x, tf.concat([[-1], tf.shape(x)[2:]], axis=0))


class Agent(snt.RNNCore):
  """The IMPALA agent (`deepmind/scalable_agent` experiment.py `Agent`), module name `agent`.

  Construct it outside `tf.function`; all 41 variables are created by the constructor.
  """

  def __init__(self, num_actions: int, frame_shape: Sequence[int] = DEFAULT_FRAME_SHAPE) -> None:
    """Args:
      num_actions: size of the action set (9 for DMLab's default action set).
      frame_shape: (height, width, channels) of the uint8 frames; sets the input size of `linear` (3456 for the
        default 72x96x3).
    """
    super().__init__(name='agent')
    if num_actions < 1:
      raise ValueError(f'num_actions must be >= 1, got {num_actions}.')
    if len(frame_shape) != 3 or min(frame_shape) < 1:
      raise ValueError(f'frame_shape must be (height, width, channels) of positive sizes, got {frame_shape}.')
    self._num_actions = num_actions
    # Creation order of the original: convnet, linear, embed, language_lstm, lstm_cell, policy_logits, baseline.
    with record_variables() as created:
      self._torso = _Torso(num_actions, tuple(frame_shape))
      self._core = LSTMBlockCell(self._torso_output_size(), CORE_LSTM_SIZE, name='lstm_cell')
      self._head = _Head(num_actions)
    self._tf1_variables = agent_variable_names(self, created)

  def _torso_output_size(self) -> int:
    return TORSO_SIZE + 1 + self._num_actions + INSTRUCTION_LSTM_SIZE

  @property
  def num_actions(self) -> int:
    return self._num_actions

  def tf1_variables(self) -> Dict[str, tf.Variable]:
    """Returns an OrderedDict original TF1 checkpoint name -> tf.Variable, all 41, in the original creation order."""
    return collections.OrderedDict(self._tf1_variables)

  def initial_state(self, batch_size: Any) -> LSTMState:
    """The zero core state: LSTMState(c, h), float32 [batch_size, 256] each."""
    zeros = tf.zeros([batch_size, CORE_LSTM_SIZE])
    return LSTMState(zeros, zeros)

  def __call__(self, last_action: tf.Tensor, env_output: Any,
               core_state: Tuple[tf.Tensor, tf.Tensor]) -> Tuple[AgentOutput, Tuple[tf.Tensor, tf.Tensor]]:
    """One step for a batch (actors).

    Args:
      last_action: int32 [B], the previous action.
      env_output: a StepOutput of [B, ...] tensors (see `unroll`).
      core_state: (c, h), float32 [B, 256] each.

    Returns:
      (AgentOutput(action int32 [B], policy_logits float32 [B, A], baseline float32 [B]), LSTMState).
    """
    actions, env_outputs = tf.nest.map_structure(lambda t: tf.expand_dims(t, 0), (last_action, env_output))
    outputs, core_state = self.unroll(actions, env_outputs, core_state)
    return tf.nest.map_structure(lambda t: tf.squeeze(t, 0), outputs), core_state

  def unroll(self, actions: tf.Tensor, env_outputs: Any,
             core_state: Tuple[tf.Tensor, tf.Tensor]) -> Tuple[AgentOutput, Tuple[tf.Tensor, tf.Tensor]]:
    """Runs the agent over time-major sequences (learner).

    Args:
      actions: int32 [T, B], the action taken before each step (the last action input).
      env_outputs: StepOutput(reward float32 [T, B], info (any), done bool [T, B],
        observation=(frame uint8 [T, B, H, W, C], instruction tf.string [T, B])). Where done[t, b] the core state of
        row b is reset to zeros before step t.
      core_state: (c, h), float32 [B, 256] each, the state before step 0.

    Returns:
      (AgentOutput(action int32 [T, B], policy_logits float32 [T, B, A], baseline float32 [T, B]),
       LSTMState(c, h) after the last step).
    """
    reward, _, done, (frame, instruction) = env_outputs
    time_and_batch = tf.shape(actions)[:2]
    torso_inputs = (actions, (reward, (), done, (frame, instruction)))  # `info` is not an input of the network.
    torso_out = self._torso(*tf.nest.map_structure(_merge_time_and_batch, torso_inputs))  # [T·B, 330]

    # The core: input projections of all steps at once, then a loop over time for the recurrent part.
    projected = tf.reshape(self._core.input_projection(torso_out),
                           tf.concat([time_and_batch, [4 * CORE_LSTM_SIZE]], axis=0))
    num_steps = time_and_batch[0]
    projected_ta = tf.TensorArray(tf.float32, size=num_steps, element_shape=[None, 4 * CORE_LSTM_SIZE])
    projected_ta = projected_ta.unstack(projected)
    done_ta = tf.TensorArray(tf.bool, size=num_steps, element_shape=[None]).unstack(done)
    outputs_ta = tf.TensorArray(tf.float32, size=num_steps, element_shape=[None, CORE_LSTM_SIZE])
    recurrent_kernel = self._core.recurrent_kernel()

    def body(t: tf.Tensor, state: LSTMState, outputs_ta: tf.TensorArray) -> Tuple[tf.Tensor, LSTMState, tf.TensorArray]:
      # Where the episode ended, the state is reset before the step. `done` is [B, 1]: TF2's tf.where broadcasts,
      # a [B] condition against [B, 256] would select columns.
      reset = done_ta.read(t)[:, None]
      state = LSTMState(*(tf.where(reset, tf.zeros_like(s), s) for s in state))
      output, state = self._core.step(projected_ta.read(t), state, recurrent_kernel)
      return t + 1, state, outputs_ta.write(t, output)

    core_state = LSTMState(*(tf.convert_to_tensor(s, tf.float32) for s in core_state))
    initial_shapes = [s.shape for s in core_state]
    # Batch dimension unknown inside the loop (see `_Torso.instruction`): a static [1, 256] state is allowed with
    # inputs whose batch dimension is not static, and the reverse.
    state_shape = tf.TensorShape([None, CORE_LSTM_SIZE])
    _, core_state, outputs_ta = tf.while_loop(
        lambda t, *_: t < num_steps, body, (tf.constant(0), core_state, outputs_ta),
        shape_invariants=(tf.TensorShape([]), LSTMState(state_shape, state_shape),
                          tf.TensorShape(None)))  # The TensorArray (its flow), left unconstrained.
    for s, shape in zip(core_state, initial_shapes):
      s.set_shape(shape)  # The static shape of the state given, where it was known.
    core_outputs = tf.reshape(outputs_ta.stack(), [-1, CORE_LSTM_SIZE])
    outputs = self._head(core_outputs)
    outputs = AgentOutput(*(tf.reshape(o, tf.concat([time_and_batch, tf.shape(o)[1:]], axis=0)) for o in outputs))
    return outputs, core_state
