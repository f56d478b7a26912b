"""Tests of scalable_agent/agent.py against independent references.

The main reference is a re-implementation of the original TF1 graph (deepmind/scalable_agent experiment.py `Agent`,
L104-225) in `tf.compat.v1` graph mode with TF1 ops: `tf.compat.v1.string_split`,
`tf.compat.v1.nn.dynamic_rnn` with the `LSTMBlockCell` kernel (`tf.raw_ops.LSTMBlockCell`, the op behind TF1's
`tf.contrib.rnn.LSTMBlockCell`), `tf.compat.v1.where` row selection for the reset, variables under the original
names, written by `tf.compat.v1.train.Saver`. It does not use our agent code.
"""

import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import agent as agent_lib
from scalable_agent import checkpoints
from scalable_agent.environments import StepOutput
from scalable_agent.environments import StepOutputInfo

NUM_ACTIONS = 9

# The 41 trainable variables of the original (deepmind/scalable_agent experiment.py, TF 1.9, Sonnet 1.23), in
# creation order.
ORIGINAL_VARIABLES = [
    ('agent/batch_apply/convnet/conv_2d/w', [3, 3, 3, 16]),
    ('agent/batch_apply/convnet/conv_2d/b', [16]),
    ('agent/batch_apply/convnet/residual_0_0/conv_2d/w', [3, 3, 16, 16]),
    ('agent/batch_apply/convnet/residual_0_0/conv_2d/b', [16]),
    ('agent/batch_apply/convnet/residual_0_0/conv_2d_1/w', [3, 3, 16, 16]),
    ('agent/batch_apply/convnet/residual_0_0/conv_2d_1/b', [16]),
    ('agent/batch_apply/convnet/residual_0_1/conv_2d/w', [3, 3, 16, 16]),
    ('agent/batch_apply/convnet/residual_0_1/conv_2d/b', [16]),
    ('agent/batch_apply/convnet/residual_0_1/conv_2d_1/w', [3, 3, 16, 16]),
    ('agent/batch_apply/convnet/residual_0_1/conv_2d_1/b', [16]),
    ('agent/batch_apply/convnet/conv_2d_1/w', [3, 3, 16, 32]),
    ('agent/batch_apply/convnet/conv_2d_1/b', [32]),
    ('agent/batch_apply/convnet/residual_1_0/conv_2d/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_1_0/conv_2d/b', [32]),
    ('agent/batch_apply/convnet/residual_1_0/conv_2d_1/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_1_0/conv_2d_1/b', [32]),
    ('agent/batch_apply/convnet/residual_1_1/conv_2d/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_1_1/conv_2d/b', [32]),
    ('agent/batch_apply/convnet/residual_1_1/conv_2d_1/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_1_1/conv_2d_1/b', [32]),
    ('agent/batch_apply/convnet/conv_2d_2/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/conv_2d_2/b', [32]),
    ('agent/batch_apply/convnet/residual_2_0/conv_2d/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_2_0/conv_2d/b', [32]),
    ('agent/batch_apply/convnet/residual_2_0/conv_2d_1/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_2_0/conv_2d_1/b', [32]),
    ('agent/batch_apply/convnet/residual_2_1/conv_2d/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_2_1/conv_2d/b', [32]),
    ('agent/batch_apply/convnet/residual_2_1/conv_2d_1/w', [3, 3, 32, 32]),
    ('agent/batch_apply/convnet/residual_2_1/conv_2d_1/b', [32]),
    ('agent/batch_apply/linear/w', [3456, 256]),
    ('agent/batch_apply/linear/b', [256]),
    ('agent/batch_apply/embed/embeddings', [1000, 20]),
    ('agent/batch_apply/rnn/language_lstm/kernel', [84, 256]),
    ('agent/batch_apply/rnn/language_lstm/bias', [256]),
    ('agent/lstm_cell/kernel', [586, 1024]),
    ('agent/lstm_cell/bias', [1024]),
    ('agent/batch_apply_1/policy_logits/w', [256, 9]),
    ('agent/batch_apply_1/policy_logits/b', [9]),
    ('agent/batch_apply_1/baseline/w', [256, 1]),
    ('agent/batch_apply_1/baseline/b', [1]),
]
ORIGINAL_NUM_PARAMETERS = 1628010

# Buckets of tf.string_to_hash_bucket_fast(token, 1000) in TF 1.9 (FarmHash Fingerprint64 mod 1000), the hashing of
# the original's instruction encoder (deepmind/scalable_agent experiment.py L118-141).
HASH_BUCKETS = {
    'go': 681,
    'to': 641,
    'the': 354,
    'red': 910,
    'ball': 199,
    'pick': 763,
    'hat': 461,
    'Pick': 242,
    'a': 939,
    '': 263
}

# Unroll inputs for the reference comparison: B = 3 (not 1 or 256), resets mid-unroll, rewards outside [-1, 1].
T, B = 5, 3
INSTRUCTIONS = [
    ['go  to the  red ball', '', 'pick a hat'],
    ['go  to the  red ball', '  go to  ', 'Pick\ta  hat'],  # A tab is not a delimiter: 'Pick\ta' is one token.
    ['', 'a', 'the red ball'],
    ['pick   a   hat ', '', ''],
    ['go', 'red red red red red red red', ''],
]
DONE = [[True, False, False], [False, False, False], [False, True, False], [True, False, True], [False, False, False]]


def make_inputs(seed, t=T, b=B, instructions=None, done=None):
  """Numpy unroll inputs: dict with actions, reward, done, frame, instruction, c0, h0."""
  rng = np.random.default_rng(seed)
  if instructions is None:
    instructions = [['' for _ in range(b)] for _ in range(t)]
  if done is None:
    done = rng.uniform(size=(t, b)) < 0.3
  return dict(actions=rng.integers(0, NUM_ACTIONS,
                                   size=(t, b)).astype(np.int32), reward=rng.choice([-3., -1., -0.5, 0., 0.25, 1., 5.],
                                                                                    size=(t, b)).astype(np.float32),
              done=np.asarray(done, dtype=bool), frame=rng.integers(0, 256, size=(t, b, 72, 96, 3)).astype(np.uint8),
              instruction=np.asarray(instructions, dtype=object), c0=rng.normal(size=(b, 256)).astype(np.float32),
              h0=rng.uniform(-1, 1, size=(b, 256)).astype(np.float32))


def env_outputs_from(inputs):
  t, b = inputs['actions'].shape
  info = StepOutputInfo(tf.zeros([t, b]), tf.zeros([t, b], tf.int32))
  return StepOutput(tf.constant(inputs['reward']), info, tf.constant(inputs['done']),
                    (tf.constant(inputs['frame']), tf.constant(inputs['instruction'].astype(bytes))))


def agent_unroll(agent, inputs, unroll_fn=None):
  unroll_fn = unroll_fn or agent.unroll
  outputs, state = unroll_fn(tf.constant(inputs['actions']), env_outputs_from(inputs),
                             agent_lib.LSTMState(tf.constant(inputs['c0']), tf.constant(inputs['h0'])))
  return tf.nest.map_structure(lambda x: x.numpy(), (outputs, state))


# ----------------------------------------------------------------------------------------------------------------
# The reference: the original graph, rebuilt with TF1 ops.


class _LSTMBlockCellReference:
  """An RNNCell for tf.compat.v1.nn.dynamic_rnn running the LSTMBlockCell kernel on given variables."""

  def __init__(self, kernel, bias, units):
    self._kernel, self._bias, self._units = kernel, bias, units
    self.state_size = (units, units)
    self.output_size = units

  def zero_state(self, batch_size, dtype):
    return (tf.zeros([batch_size, self._units], dtype), tf.zeros([batch_size, self._units], dtype))

  def __call__(self, inputs, state, scope=None):
    return lstm_block_cell_reference(inputs, state, self._kernel, self._bias, self._units)


def lstm_block_cell_reference(x, state, kernel, bias, units):
  c, h = state
  zeros = tf.zeros([units])
  _, c, _, _, _, _, h = tf.raw_ops.LSTMBlockCell(x=x, cs_prev=c, h_prev=h, w=kernel, wci=zeros, wcf=zeros, wco=zeros,
                                                 b=bias, forget_bias=1.0, cell_clip=-1.0, use_peephole=False)
  return h, (c, h)


def _get(name, shape, stddev=None, glorot=False, bias_stddev=None):
  v1 = tf.compat.v1
  if glorot:
    initializer = v1.glorot_uniform_initializer()
  elif bias_stddev is not None:
    initializer = v1.random_normal_initializer(stddev=bias_stddev)  # Non-zero biases, so that their wiring counts.
  else:
    initializer = v1.truncated_normal_initializer(stddev=stddev)
  return v1.get_variable(name, shape, initializer=initializer)


def _reference_torso(actions, reward, frame, instruction):
  """The original `_torso` on [N] inputs, TF1 graph ops."""
  v1 = tf.compat.v1
  conv_out = tf.cast(frame, tf.float32) / 255
  with v1.variable_scope('convnet'):
    in_ch = 3
    for i, (num_ch, num_blocks) in enumerate([(16, 2), (32, 2), (32, 2)]):
      with v1.variable_scope('conv_2d' if i == 0 else 'conv_2d_%d' % i):
        w = _get('w', [3, 3, in_ch, num_ch], stddev=1 / np.sqrt(9 * in_ch))
        b = _get('b', [num_ch], bias_stddev=0.1)
      conv_out = v1.nn.conv2d(conv_out, w, strides=[1, 1, 1, 1], padding='SAME') + b
      conv_out = v1.nn.max_pool(conv_out, ksize=[1, 3, 3, 1], strides=[1, 2, 2, 1], padding='SAME')
      for j in range(num_blocks):
        with v1.variable_scope('residual_%d_%d' % (i, j)):
          block_input = conv_out
          for scope in ['conv_2d', 'conv_2d_1']:
            with v1.variable_scope(scope):
              w = _get('w', [3, 3, num_ch, num_ch], stddev=1 / np.sqrt(9 * num_ch))
              b = _get('b', [num_ch], bias_stddev=0.1)
            conv_out = v1.nn.conv2d(tf.nn.relu(conv_out), w, strides=[1, 1, 1, 1], padding='SAME') + b
          conv_out += block_input
      in_ch = num_ch
  conv_out = tf.reshape(tf.nn.relu(conv_out), [-1, 9 * 12 * 32])
  with v1.variable_scope('linear'):
    w = _get('w', [3456, 256], stddev=1 / np.sqrt(3456))
    b = _get('b', [256], bias_stddev=0.1)
  conv_out = tf.nn.relu(tf.matmul(conv_out, w) + b)

  # Instruction, as the original `_instruction`.
  splitted = v1.string_split(instruction, delimiter=' ')
  dense = v1.sparse_tensor_to_dense(splitted, default_value='')
  length = tf.reduce_sum(tf.cast(tf.not_equal(dense, ''), tf.int32), axis=1)
  buckets = v1.string_to_hash_bucket_fast(dense, 1000)
  with v1.variable_scope('embed'):
    embeddings = _get('embeddings', [1000, 20], stddev=1.0)  # Large, so that the instruction matters.
  embedding = tf.nn.embedding_lookup(embeddings, buckets)
  padding = tf.cast(tf.equal(tf.shape(embedding)[1], 0), tf.int32)
  embedding = tf.pad(embedding, [[0, 0], [0, padding], [0, 0]])
  with v1.variable_scope('rnn/language_lstm'):
    kernel = _get('kernel', [84, 256], glorot=True)
    bias = _get('bias', [256], bias_stddev=0.5)
  output, _ = v1.nn.dynamic_rnn(_LSTMBlockCellReference(kernel, bias, 64), embedding, length, dtype=tf.float32)
  instruction_out = tf.reverse_sequence(output, length, seq_axis=1)[:, 0]

  clipped_reward = tf.expand_dims(tf.clip_by_value(reward, -1, 1), -1)
  one_hot_last_action = tf.one_hot(actions, NUM_ACTIONS)
  return tf.concat([conv_out, clipped_reward, one_hot_last_action, instruction_out], axis=1)


def reference_checkpoint_and_outputs(checkpoint_prefix, input_sets, global_step=12800, seed=1):
  """Builds the original graph with random weights, writes an original-style training checkpoint, runs inputs.

  The checkpoint has the 41 variables, their RMSProp slots after one step of `tf.compat.v1.train.RMSPropOptimizer`
  (on a synthetic loss: LSTMBlockCell has no gradient in TF2) and `num_environment_frames`: 124 entries.

  Returns:
    (checkpoint path, [(logits [T, B, A], baseline [T, B], c [B, 256], h [B, 256]) per input set]).
  """
  v1 = tf.compat.v1
  t, b = input_sets[0]['actions'].shape
  with tf.Graph().as_default():
    v1.set_random_seed(seed)
    ph = dict(actions=v1.placeholder(tf.int32, [t, b]), reward=v1.placeholder(tf.float32, [t, b]),
              done=v1.placeholder(tf.bool, [t, b]), frame=v1.placeholder(tf.uint8, [t, b, 72, 96, 3]),
              instruction=v1.placeholder(tf.string,
                                         [t, b]), c0=v1.placeholder(tf.float32,
                                                                    [b, 256]), h0=v1.placeholder(tf.float32, [b, 256]))
    with v1.variable_scope('agent'):
      with v1.variable_scope('batch_apply'):  # snt.BatchApply(self._torso)
        merge = lambda x: tf.reshape(x, tf.concat([[t * b], tf.shape(x)[2:]], 0))
        torso = _reference_torso(merge(ph['actions']), merge(ph['reward']), merge(ph['frame']),
                                 merge(ph['instruction']))
        torso = tf.reshape(torso, [t, b, 330])
      with v1.variable_scope('lstm_cell'):
        kernel = _get('kernel', [586, 1024], glorot=True)
        bias = _get('bias', [1024], bias_stddev=0.5)
      zeros = tf.zeros([b, 256])
      state = (ph['c0'], ph['h0'])
      core_outputs = []
      for input_, d in zip(tf.unstack(torso), tf.unstack(ph['done'])):
        state = tuple(v1.where(d, z, s) for z, s in zip((zeros, zeros), state))  # TF1 rank-1 row selection.
        output, state = lstm_block_cell_reference(input_, state, kernel, bias, 256)
        core_outputs.append(output)
      core_output = tf.reshape(tf.stack(core_outputs), [t * b, 256])
      with v1.variable_scope('batch_apply_1'):  # snt.BatchApply(self._head)
        with v1.variable_scope('policy_logits'):
          w, bb = _get('w', [256, NUM_ACTIONS], stddev=1 / 16.), _get('b', [NUM_ACTIONS], bias_stddev=0.1)
        logits = tf.reshape(tf.matmul(core_output, w) + bb, [t, b, NUM_ACTIONS])
        with v1.variable_scope('baseline'):
          w, bb = _get('w', [256, 1], stddev=1 / 16.), _get('b', [1], bias_stddev=0.1)
        baseline = tf.reshape(tf.squeeze(tf.matmul(core_output, w) + bb, -1), [t, b])
    frames = v1.get_variable('num_environment_frames', initializer=tf.constant(global_step, tf.int64), trainable=False,
                             collections=[v1.GraphKeys.GLOBAL_VARIABLES, v1.GraphKeys.GLOBAL_STEP])
    del frames
    trainable = v1.trainable_variables()
    assert len(trainable) == 41
    synthetic_loss = tf.add_n([tf.reduce_sum(tf.sin(v)) for v in trainable])
    train_op = v1.train.RMSPropOptimizer(1e-3, 0.99, 0.0, 0.1).minimize(synthetic_loss)
    saver = v1.train.Saver()
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      session.run(train_op)
      results = []
      for inputs in input_sets:
        feed = {ph[k]: (v.astype(bytes) if k == 'instruction' else v) for k, v in inputs.items()}
        results.append(session.run((logits, baseline, state[0], state[1]), feed))
      path = saver.save(session, checkpoint_prefix, write_meta_graph=False)
  return path, results


# ----------------------------------------------------------------------------------------------------------------


@pytest.fixture(scope='module')
def agent():
  return agent_lib.Agent(NUM_ACTIONS)


def test_variables_are_the_original_names_shapes_and_order(agent):
  variables = agent.tf1_variables()
  assert [(name, v.shape.as_list()) for name, v in variables.items()] == ORIGINAL_VARIABLES
  assert len(variables) == 41
  assert sum(int(np.prod(v.shape)) for v in variables.values()) == ORIGINAL_NUM_PARAMETERS
  assert {v.ref() for v in agent.trainable_variables} == {v.ref() for v in variables.values()}
  assert all(v.dtype == tf.float32 for v in variables.values())
  # The variable names themselves (module name scopes) are the original names.
  assert [v.name for v in variables.values()] == [name + ':0' for name, _ in ORIGINAL_VARIABLES]


def test_initialisers_follow_the_original_defaults(agent):
  variables = agent.tf1_variables()
  for name, v in variables.items():
    value = v.numpy()
    if name.endswith('/b') or name.endswith('/bias'):
      np.testing.assert_array_equal(value, 0., err_msg=name)
    elif name.endswith('/kernel'):  # glorot uniform
      # Up to 1 ulp above the limit: the sampler computes minval + (maxval - minval) * u in float32.
      limit = np.sqrt(6. / (value.shape[0] + value.shape[1]))
      assert np.abs(value).max() <= limit * (1 + 1e-6) and np.abs(value).max() > 0.95 * limit, name
    else:  # truncated normal, stddev 1/sqrt(fan_in) (1/sqrt(vocab size) for the embedding), cut at 2 stddev
      fan_in = 1000 if name.endswith('embeddings') else int(np.prod(value.shape[:-1]))
      stddev = 1. / np.sqrt(fan_in)
      assert np.abs(value).max() <= 2 * stddev + 1e-7, name
      if value.size > 5000:
        assert abs(value.std() / stddev - 0.88) < 0.03, name  # std of a normal truncated at 2 sigma: 0.8796


def test_hash_buckets_of_the_reference_table():
  tokens = list(HASH_BUCKETS)
  buckets = tf.strings.to_hash_bucket_fast(tokens, agent_lib.NUM_HASH_BUCKETS).numpy()
  assert dict(zip(tokens, buckets.tolist())) == HASH_BUCKETS


@pytest.mark.slow
def test_unroll_reproduces_the_tf1_reference_network(tmp_path):
  with_instructions = make_inputs(seed=0, instructions=INSTRUCTIONS, done=DONE)
  all_empty = dict(with_instructions, instruction=np.full((T, B), '', dtype=object))  # Token dimension 0: padded.
  path, expected = reference_checkpoint_and_outputs(str(tmp_path / 'model.ckpt-12800'), [with_instructions, all_empty])
  assert len(tf.train.list_variables(path)) == 124

  agent = agent_lib.Agent(NUM_ACTIONS)
  assert checkpoints.restore_tf1_checkpoint(path, agent) == 12800
  unroll_fn = tf.function(agent.unroll)
  for inputs, (logits, baseline, c, h) in zip([with_instructions, all_empty], expected):
    for fn in (agent.unroll, unroll_fn):
      outputs, state = agent_unroll(agent, inputs, fn)
      np.testing.assert_allclose(outputs.policy_logits, logits, atol=1e-5, rtol=1e-5)
      np.testing.assert_allclose(outputs.baseline, baseline, atol=1e-5, rtol=1e-5)
      np.testing.assert_allclose(state.c, c, atol=1e-5, rtol=1e-5)
      np.testing.assert_allclose(state.h, h, atol=1e-5, rtol=1e-5)
      assert outputs.action.dtype == np.int32 and outputs.action.shape == (T, B)
      assert ((outputs.action >= 0) & (outputs.action < NUM_ACTIONS)).all()
  # The comparison is sensitive to the instruction branch and to the initial state.
  assert np.abs(expected[0][0] - expected[1][0]).max() > 1e-2
  zero_state = dict(with_instructions, c0=0 * with_instructions['c0'], h0=0 * with_instructions['h0'])
  assert np.abs(agent_unroll(agent, zero_state)[0].policy_logits[1, 1:] - expected[0][0][1, 1:]).max() > 1e-3


def test_unroll_eager_equals_tf_function_and_traces_once(agent):
  unroll_fn = tf.function(agent.unroll)
  first = make_inputs(seed=1, t=4, b=2, instructions=[['go to', ''], ['a  b', 'c'], ['', ''], ['x', 'y z']])
  eager = agent_unroll(agent, first)
  graph = agent_unroll(agent, first, unroll_fn)
  np.testing.assert_allclose(graph[0].policy_logits, eager[0].policy_logits, atol=1e-5)
  np.testing.assert_allclose(graph[0].baseline, eager[0].baseline, atol=1e-5)
  for a, b in zip(graph[1], eager[1]):
    np.testing.assert_allclose(a, b, atol=1e-5)
  for seed in (2, 3, 4):  # Same shapes, other values (other instruction lengths too).
    agent_unroll(agent,
                 make_inputs(seed=seed, t=4, b=2, instructions=[['a b c d e f', ''], ['', ''], ['', ''], ['', 'x']]),
                 unroll_fn)
  assert unroll_fn.experimental_get_tracing_count() == 1


def test_unroll_keeps_static_shapes(agent):
  spec = StepOutput(tf.TensorSpec([6, 4], tf.float32),
                    StepOutputInfo(tf.TensorSpec([6, 4], tf.float32), tf.TensorSpec([6, 4], tf.int32)),
                    tf.TensorSpec([6, 4], tf.bool),
                    (tf.TensorSpec([6, 4, 72, 96, 3], tf.uint8), tf.TensorSpec([6, 4], tf.string)))
  state_spec = agent_lib.LSTMState(tf.TensorSpec([4, 256], tf.float32), tf.TensorSpec([4, 256], tf.float32))
  concrete = tf.function(agent.unroll).get_concrete_function(tf.TensorSpec([6, 4], tf.int32), spec, state_spec)
  outputs, state = concrete.structured_outputs
  assert outputs.action.shape.as_list() == [6, 4]
  assert outputs.policy_logits.shape.as_list() == [6, 4, NUM_ACTIONS]
  assert outputs.baseline.shape.as_list() == [6, 4]
  assert state.c.shape.as_list() == [4, 256] and state.h.shape.as_list() == [4, 256]


def test_one_step_calls_equal_the_unroll(agent):
  inputs = make_inputs(seed=5, t=3, b=2, instructions=[['go', 'red  ball'], ['', 'hat'], ['a', '']],
                       done=[[False, True], [True, False], [False, False]])
  (outputs, final_state) = agent_unroll(agent, inputs)
  env_outputs = env_outputs_from(inputs)
  state = agent_lib.LSTMState(tf.constant(inputs['c0']), tf.constant(inputs['h0']))
  for t in range(3):
    step_output, state = agent(tf.constant(inputs['actions'][t]),
                               tf.nest.map_structure(lambda x, t=t: x[t], env_outputs), state)
    assert step_output.action.shape == (2,) and step_output.policy_logits.shape == (2, NUM_ACTIONS)
    np.testing.assert_allclose(step_output.policy_logits, outputs.policy_logits[t], atol=1e-5)
    np.testing.assert_allclose(step_output.baseline, outputs.baseline[t], atol=1e-5)
  np.testing.assert_allclose(state.c, final_state.c, atol=1e-5)
  np.testing.assert_allclose(state.h, final_state.h, atol=1e-5)


def test_initial_state_and_reset(agent):
  state = agent.initial_state(3)
  assert isinstance(state, agent_lib.LSTMState)
  assert state.c.shape == (3, 256) and state.h.shape == (3, 256) and state.c.dtype == tf.float32
  np.testing.assert_array_equal(state.c, 0.)
  # done at t = 0 for every row: the given state is ignored.
  inputs = make_inputs(seed=6, t=2, b=3, done=[[True] * 3, [False] * 3])
  zero = dict(inputs, c0=np.zeros_like(inputs['c0']), h0=np.zeros_like(inputs['h0']))
  np.testing.assert_allclose(
      agent_unroll(agent, inputs)[0].policy_logits,
      agent_unroll(agent, zero)[0].policy_logits, atol=1e-6)


def test_gradients_reach_every_variable_in_tf_function(agent):

  @tf.function
  def grads(actions, env_outputs):
    with tf.GradientTape() as tape:
      outputs, state = agent.unroll(actions, env_outputs, agent.initial_state(2))
      loss = tf.reduce_sum(outputs.policy_logits**2) + tf.reduce_sum(outputs.baseline) + tf.reduce_sum(state.c)
    return tape.gradient(loss, list(agent.tf1_variables().values()))

  inputs = make_inputs(seed=7, t=3, b=2, instructions=[['go to', 'a'], ['b', ''], ['', 'the red ball']])
  for name, grad in zip(agent.tf1_variables(), grads(inputs['actions'], env_outputs_from(inputs))):
    assert grad is not None, name
    grad = tf.convert_to_tensor(grad).numpy()
    assert np.isfinite(grad).all() and np.abs(grad).max() > 0, name
  # Only empty instructions (the DMLab levels without language): no token step runs; gradients stay defined.
  inputs = make_inputs(seed=8, t=3, b=2)
  for name, grad in zip(agent.tf1_variables(), grads(inputs['actions'], env_outputs_from(inputs))):
    assert grad is not None, name
    assert np.isfinite(tf.convert_to_tensor(grad).numpy()).all(), name


def test_lstm_block_cell_matches_the_raw_op():
  cell = agent_lib.LSTMBlockCell(5, 4, name='cell')
  cell.bias.assign(tf.random.normal([16]))
  x = tf.random.normal([3, 5])
  state = (tf.random.normal([3, 4]), tf.random.normal([3, 4]))
  h, new_state = cell(x, state)
  ref_h, (ref_c, _) = lstm_block_cell_reference(x, state, cell.kernel, cell.bias, 4)
  np.testing.assert_allclose(h, ref_h, atol=1e-6)
  np.testing.assert_allclose(new_state.c, ref_c, atol=1e-6)
  np.testing.assert_allclose(new_state.h, ref_h, atol=1e-6)


def test_constructor_rejects_bad_arguments():
  with pytest.raises(ValueError, match='num_actions'):
    agent_lib.Agent(0)
  with pytest.raises(ValueError, match='frame_shape'):
    agent_lib.Agent(9, frame_shape=(72, 96))


def test_other_frame_shape_sets_the_linear_input_size():
  small = agent_lib.Agent(4, frame_shape=(84, 84, 1))
  assert small.tf1_variables()['agent/batch_apply/linear/w'].shape == (11 * 11 * 32, 256)
  inputs = make_inputs(seed=8, t=2, b=2)
  inputs['frame'] = np.random.default_rng(8).integers(0, 256, size=(2, 2, 84, 84, 1)).astype(np.uint8)
  inputs['actions'] %= 4
  outputs, _ = agent_unroll(small, inputs)
  assert outputs.policy_logits.shape == (2, 2, 4)


def test_numpy_policy_steps_as_the_agent_for_any_batch_size(agent):
  # actor.numpy_policy packs its inputs and outputs one array per dtype across the tf.function boundary; what it
  # returns must be the agent's own step (called here with tensors), unpacked to the same structure, for batch sizes
  # 1 and 3 through one compiled function.
  from scalable_agent import actor as actor_lib  # pylint: disable=g-import-not-at-top
  policy = actor_lib.numpy_policy(agent)
  for b, seed in ((1, 11), (3, 12), (1, 13)):
    inputs = make_inputs(seed=seed, t=1, b=b, instructions=[['go to the red ball', '', 'hat'][:b]])
    env_output = tf.nest.map_structure(lambda x: x.numpy()[0], env_outputs_from(inputs))
    env_output = env_output._replace(observation=(env_output.observation[0], inputs['instruction'][0]))
    state = agent_lib.LSTMState(inputs['c0'], inputs['h0'])
    output, new_state = policy(inputs['actions'][0], env_output, state)
    expected, expected_state = agent(tf.constant(inputs['actions'][0]), tf.nest.map_structure(tf.constant, env_output),
                                     agent_lib.LSTMState(tf.constant(inputs['c0']), tf.constant(inputs['h0'])))
    assert isinstance(output, agent_lib.AgentOutput) and isinstance(new_state, agent_lib.LSTMState)
    assert output.action.shape == (b,) and output.action.dtype == np.int32
    assert output.policy_logits.shape == (b, NUM_ACTIONS) and output.baseline.shape == (b,)
    np.testing.assert_allclose(output.policy_logits, expected.policy_logits, atol=1e-5)
    np.testing.assert_allclose(output.baseline, expected.baseline, atol=1e-5)
    np.testing.assert_allclose(new_state.c, expected_state[0], atol=1e-5)
    np.testing.assert_allclose(new_state.h, expected_state[1], atol=1e-5)
    assert ((0 <= output.action) & (output.action < NUM_ACTIONS)).all()
