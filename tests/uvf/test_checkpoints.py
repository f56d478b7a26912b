"""uvf.checkpoints: original TF1 policy checkpoints and this port's, restored strictly by name, and TF1 export.

The reference is an independent `tf.compat.v1` graph of the ORIGINAL networks written here from the original
tensorflow/models research/efficient-hrl agents/ddpg_networks.py and agent.py (slim-style `weights` / `biases`, the
original scopes), saved by `tf.compat.v1.train.Saver` as the original's policy checkpoint. Nothing from uvf/ is used
for its math: the port's agents, built from the real gin configuration, must reproduce its outputs after
`restore_policy`.
"""

import os
import sys

import numpy as np
import pytest
import tensorflow as tf

import launcher
from tests.uvf import hiro_fixtures
from uvf import agent as agent_lib
from uvf import build as build_lib
from uvf import checkpoints
from uvf import eval as eval_lib
from uvf import representation
from uvf.environments import create_maze_env

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                'scripts'))
import hiro_checkpoints  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position  (its command line)

CONFIGS = hiro_fixtures.CONFIG.parent
STEP = 300000
O, A, M = 30, 8, 2  # AntMaze observation (29 ant dims + time), action, task-context (x, y) dims
ANT_ACTION_BOUND = 30.0  # Ant actions lie in [-30, 30] (ctrlrange of efficient-hrl environments/assets/ant.xml)
# hiro_orig goal range (efficient-hrl context/configs/hiro_orig.gin): x, y +-10; z +-0.5; quaternion +-1; 8 joints
# alternating +-0.5 / +-0.3.
HIRO_ORIG_GOAL_MAX = np.array([10, 10, 0.5, 1, 1, 1, 1] + [0.5, 0.3] * 4, np.float32)
XY_GOAL_MAX = np.array([10, 10], np.float32)  # hiro_xy / hiro_repr: +-10
BATCH = 64

# setting -> (goal dim G, low level masks x, y (ZERO_OBS), trainable representation, goal bound)
SETTINGS = {
    'hiro_orig': (15, True, False, HIRO_ORIG_GOAL_MAX),
    'hiro_xy': (2, False, False, XY_GOAL_MAX),
    'hiro_repr': (2, False, True, XY_GOAL_MAX),
}

# ----------------------------------------------------------------------------------------------------------------------
# The reference: the original graph, written from the specification (tf.compat.v1, graph mode).


class _Values(object):
  """Random non-trivial initial values: weights N(0, 1/fan_in), biases N(0, 0.1^2) (non-zero, unlike the original's
  initialisers, so that a bias or a layer in the wrong place shows)."""

  def __init__(self, seed):
    self._rng = np.random.RandomState(seed)

  def weights(self, fan_in, units):
    return (self._rng.randn(fan_in, units) / np.sqrt(fan_in)).astype(np.float32)

  def biases(self, units):
    return (0.1 * self._rng.randn(units)).astype(np.float32)


def _fully_connected(x, units, scope, activation, values):
  """slim.fully_connected: variables `<scope>/weights` [fan_in, units] and `<scope>/biases` [units]."""
  with tf.compat.v1.variable_scope(scope):
    fan_in = int(x.shape[-1])
    w = tf.compat.v1.get_variable('weights', initializer=values.weights(fan_in, units))
    b = tf.compat.v1.get_variable('biases', initializer=values.biases(units))
  y = tf.matmul(x, w) + b
  return activation(y) if activation is not None else y


def _stack(x, layers, scope, values):
  """slim.stack(x, fully_connected, layers, scope): layers `<scope>/<scope>_1`, `<scope>/<scope>_2`, ... (ReLU)."""
  with tf.compat.v1.variable_scope(scope):
    for i, units in enumerate(layers, start=1):
      x = _fully_connected(x, units, f'{scope}_{i}', tf.nn.relu, values)
  return x


def _xy_mask(x):
  return x * tf.constant([0.0, 0.0] + [1.0] * (int(x.shape[-1]) - 2))


def _original_actor(states, bound_max, zero_obs, values):
  """ddpg_actor_net: mask x, y if zero_obs; (300, 300) ReLU under `states`; `actions` tanh, scaled to the bounds."""
  x = tf.cast(states, tf.float32)
  if zero_obs:
    x = _xy_mask(x)
  x = _stack(x, (300, 300), 'states', values)
  tanh = _fully_connected(x, len(bound_max), 'actions', tf.nn.tanh, values)
  minimum, maximum = -bound_max, bound_max
  return (maximum + minimum) / 2.0 + (maximum - minimum) / 2.0 * tanh


def _original_critic(states, actions, zero_obs, values):
  """ddpg_critic_net: concat(s, a), masked if zero_obs; `states` (300,); concat with a again; `joint` (300,); linear
  `q_value`, reshaped to [B]."""
  actions = tf.cast(actions, tf.float32)
  x = tf.concat([tf.cast(states, tf.float32), actions], -1)
  if zero_obs:
    x = _xy_mask(x)
  x = _stack(x, (300,), 'states', values)
  joint = tf.concat([x, actions], 1)
  joint = _stack(joint, (300,), 'joint', values)
  return tf.reshape(_fully_connected(joint, 1, 'q_value', None, values), [-1])


def _zero_time(x):
  return x * tf.constant([1.0] * (int(x.shape[-1]) - 1) + [0.0])


def _original_state_preprocess_net(states, values):
  """state_preprocess_net (hiro_repr): zero the last (time) dim; (100, 100) ReLU under `states`; linear `value` 2."""
  x = _stack(_zero_time(tf.cast(states, tf.float32)), (100, 100), 'states', values)
  return _fully_connected(x, 2, 'value', None, values)


def _original_action_embed_net(actions, states, values):
  """action_embed_net (hiro_repr): concat(actions, states with the time dim zeroed); (400, 300) ReLU under
  `hidden`; linear `value` 2."""
  x = tf.concat([tf.cast(actions, tf.float32), _zero_time(tf.cast(states, tf.float32))], -1)
  return _fully_connected(_stack(x, (400, 300), 'hidden', values), 2, 'value', None, values)


def _random_inputs(rng, goal_dim, goal_max):
  """Random batches: merged low states [obs, goal], low actions, merged meta states [obs, task], meta actions
  (goals), raw observations and flattened 10-step action sequences. Positions x, y far from 0 (masking matters)."""
  obs = rng.randn(BATCH, O).astype(np.float32) * 2.0
  obs[:, :2] = rng.uniform(-4, 20, size=(BATCH, 2))
  goals = rng.uniform(-goal_max, goal_max, size=(BATCH, goal_dim)).astype(np.float32)
  tasks = rng.uniform(-4, 20, size=(BATCH, M)).astype(np.float32)
  return {
      'low_states': np.concatenate([obs, goals], 1),
      'low_actions': rng.uniform(-ANT_ACTION_BOUND, ANT_ACTION_BOUND, size=(BATCH, A)).astype(np.float32),
      'meta_states': np.concatenate([obs, tasks], 1),
      'meta_actions': goals,
      'observations': obs,
      'action_sequences': rng.uniform(-ANT_ACTION_BOUND, ANT_ACTION_BOUND, size=(BATCH, 10 * A)).astype(np.float32),
  }


def write_original_checkpoint(prefix, setting='hiro_orig', seed=0):
  """Builds the original policy graph of `setting` (AntMaze shapes) with random values, saves it as the original did
  (`tf.compat.v1.train.Saver`, `<prefix>-<STEP>`), and evaluates it on random inputs.

  Returns:
    (checkpoint path, {name: value} of every saved variable, inputs, {output name: reference output}).
  """
  goal_dim, zero_obs, trainable_repr, goal_max = SETTINGS[setting]
  os.makedirs(os.path.dirname(prefix), exist_ok=True)
  values = _Values(seed)
  inputs = _random_inputs(np.random.RandomState(seed + 1), goal_dim, goal_max)
  outputs = {}
  with tf.Graph().as_default():
    feeds = {k: tf.compat.v1.placeholder(tf.float32, [None, v.shape[1]]) for k, v in inputs.items()}
    levels = (('uvf_agent', 'low', np.full([A], ANT_ACTION_BOUND, np.float32), zero_obs),
              ('meta_agent', 'meta', goal_max, False))  # the meta level never masks (base_uvf.gin: zero_obs False)
    for scope, level, bound_max, mask in levels:
      states, actions = feeds[level + '_states'], feeds[level + '_actions']
      with tf.compat.v1.variable_scope(scope):
        with tf.compat.v1.variable_scope('actor_net'):
          outputs[level + '_actor'] = _original_actor(states, bound_max, mask, values)
        with tf.compat.v1.variable_scope('critic_net'):
          outputs[level + '_q1'] = _original_critic(states, actions, mask, values)
        with tf.compat.v1.variable_scope('critic_net2'):
          outputs[level + '_q2'] = _original_critic(states, actions, mask, values)
    counters = {'global_step': STEP, 'num_episodes': 600, 'num_resets': 601}
    for name, value in counters.items():
      tf.compat.v1.get_variable(name, initializer=np.int64(value), dtype=tf.int64)
    rng = np.random.RandomState(seed + 2)
    tf.compat.v1.Variable(rng.uniform(-goal_max, goal_max).astype(np.float32), name='uvf_agent/action_context_0')
    tf.compat.v1.Variable(rng.uniform(-4, 20, size=[M]).astype(np.float32), name='meta_agent/action_context_0')
    if trainable_repr:
      with tf.compat.v1.variable_scope('state_preprocess'):
        with tf.compat.v1.variable_scope('state_process_net'):
          outputs['repr'] = _original_state_preprocess_net(feeds['observations'], values)
        with tf.compat.v1.variable_scope('action_embed_net'):
          outputs['action_embed'] = _original_action_embed_net(feeds['action_sequences'], feeds['observations'], values)
    saver = tf.compat.v1.train.Saver()
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      outputs = session.run(outputs, {feeds[k]: v for k, v in inputs.items()})
      saved = {v.op.name: session.run(v) for v in tf.compat.v1.global_variables()}
      path = saver.save(session, prefix, global_step=STEP)
  return path, saved, inputs, outputs


def save_tf1(values, prefix):
  """Saves {name: array} with `tf.compat.v1.train.Saver` (keys = the names), independently of uvf.checkpoints."""
  os.makedirs(os.path.dirname(prefix), exist_ok=True)
  with tf.Graph().as_default():
    variables = {name: tf.compat.v1.Variable(value, name=name) for name, value in values.items()}
    saver = tf.compat.v1.train.Saver(var_list=variables)
    with tf.compat.v1.Session() as session:
      session.run(tf.compat.v1.global_variables_initializer())
      return saver.save(session, prefix, write_meta_graph=False)


# ----------------------------------------------------------------------------------------------------------------------
# The port's policy, built from the gin configuration as training and evaluation build it.


class Policy(object):

  def __init__(self, config, bindings=()):
    launcher.parse_gin([config], list(bindings))
    self.meta_agent, self.uvf_agent, self.state_preprocess, _ = build_lib.build_agents(
        create_maze_env.create_maze_env(), agent_lib.UvfAgent, agent_lib.MetaAgent, representation.StatePreprocess,
        representation.InverseDynamics)
    self.counters = [tf.Variable(0, dtype=tf.int64, name=n) for n in ('global_step', 'num_episodes', 'num_resets')]
    self.variables = build_lib.policy_variables_by_tf1_name(self.uvf_agent, self.meta_agent, self.state_preprocess,
                                                            *self.counters)

  def values(self):
    return {name: variable.numpy() for name, variable in self.variables.items()}

  def randomize(self, seed):
    rng = np.random.RandomState(seed)
    for variable in self.variables.values():
      value = rng.randn(*variable.shape) if variable.dtype.is_floating else rng.randint(1, 10**6, variable.shape)
      variable.assign(np.asarray(value).astype(variable.dtype.as_numpy_dtype))


@pytest.fixture(scope='module')
def policy():
  return Policy(CONFIGS / 'ant_maze.gin')


def assert_values_equal(values, variables):
  assert sorted(values) == sorted(variables)
  for name, value in values.items():
    np.testing.assert_array_equal(np.asarray(variables[name]), value, err_msg=name)


def assert_matches_reference(policy, saved, inputs, outputs):
  """Our actors and critics (both levels), counters and contexts against the reference graph."""
  for agent, level in ((policy.uvf_agent, 'low'), (policy.meta_agent, 'meta')):
    states, actions = tf.constant(inputs[level + '_states']), tf.constant(inputs[level + '_actions'])
    np.testing.assert_allclose(agent.actor(states).numpy(), outputs[level + '_actor'], rtol=1e-5, atol=1e-5)
    q1, q2 = agent.critic(states, actions)
    np.testing.assert_allclose(q1.numpy(), outputs[level + '_q1'], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(q2.numpy(), outputs[level + '_q2'], rtol=1e-5, atol=1e-5)
  assert [int(c.numpy()) for c in policy.counters] == [STEP, 600, 601]
  np.testing.assert_array_equal(policy.uvf_agent.context_vars[0].numpy(), saved['uvf_agent/action_context_0'])
  np.testing.assert_array_equal(policy.meta_agent.context_vars[0].numpy(), saved['meta_agent/action_context_0'])
  assert_values_equal(saved, policy.variables)


# ----------------------------------------------------------------------------------------------------------------------
# Tests.


def test_original_hiro_orig_checkpoint_matches_the_original_networks(policy, tmp_path):
  path, saved, inputs, outputs = write_original_checkpoint(str(tmp_path / 'policy' / 'model.ckpt'))
  assert len(saved) == 2 * 3 * 6 + 5  # 3 networks x 6 variables per level, 3 counters, 2 contexts
  # Sanity of the reference: the masking and the bounds are exercised.
  assert np.abs(outputs['low_actor']).max() > 3 and np.abs(outputs['meta_actor'][:, :2]).max() > 1
  assert checkpoints.restore_policy(path, policy.variables) == path
  assert checkpoints.checkpoint_step(path) == STEP
  assert_matches_reference(policy, saved, inputs, outputs)
  np.testing.assert_allclose(policy.meta_agent.action_spec.maximum, HIRO_ORIG_GOAL_MAX)
  # x, y of the low level's input are masked (ZERO_OBS under hiro_orig), not the meta level's.
  shifted = inputs['low_states'].copy()
  shifted[:, :2] += 7.0
  np.testing.assert_array_equal(
      policy.uvf_agent.actor(tf.constant(shifted)).numpy(),
      policy.uvf_agent.actor(tf.constant(inputs['low_states'])).numpy())
  # The directory form (its `checkpoint` state file) restores the same checkpoint.
  assert checkpoints.restore_policy(os.path.dirname(path), policy.variables) == path


def test_strict_mismatches_name_the_problem_and_restore_nothing(policy, tmp_path):
  _, saved, _, _ = write_original_checkpoint(str(tmp_path / 'orig' / 'model.ckpt'))
  policy.randomize(1)
  before = policy.values()
  dropped = 'meta_agent/critic_net2/joint/joint_1/biases'
  added = 'uvf_agent/actor_net/states/states_3/weights'
  reshaped = 'uvf_agent/critic_net/states/states_1/weights'
  cases = {
      'dropped': ({
          k: v for k, v in saved.items() if k != dropped
      }, [dropped, 'missing in the checkpoint (1)']),
      'added': (dict(saved, **{added: np.ones([300, 300], np.float32)}), [added, 'unexpected in the checkpoint (1)']),
      'reshaped': (dict(saved, **{reshaped: np.ones([40, 300], np.float32)}),
                   [reshaped, 'float32[40, 300] in the checkpoint, float32[53, 300] in the model']),
      'retyped': (dict(saved, global_step=np.float32(3)), ['global_step is float32[] in the checkpoint, int64[]']),
  }
  for case, (values, expected) in cases.items():
    path = save_tf1(values, str(tmp_path / case / 'model.ckpt-5'))
    with pytest.raises(checkpoints.CheckpointMismatchError) as error:
      checkpoints.restore_policy(path, policy.variables)
    for text in expected:
      assert text in str(error.value), (case, str(error.value))
    assert isinstance(error.value, ValueError)
    assert_values_equal(before, policy.variables)  # nothing was assigned


def test_full_training_checkpoint_needs_allow_extra(policy, tmp_path):
  path, saved, inputs, outputs = write_original_checkpoint(str(tmp_path / 'orig' / 'model.ckpt'))
  extras = {  # a few of the full training checkpoint's names (<train_dir>/model.ckpt-<step>)
      'uvf_agent/target_actor_net/actions/biases': np.zeros([A], np.float32),
      'uvf_agent/actor_net/actions/biases/Adam': np.zeros([A], np.float32),
      'uvf_agent/actor_net/actions/biases/Adam_1': np.zeros([A], np.float32),
      'nometa/beta1_power': np.float32(0.5), 'meta_2/beta2_power_1': np.float32(0.5),
      'update_targets/counter_1': np.int64(3), 'update_targets/update_targets_1/counter': np.int64(3),
      'meta_agent/num_timer_steps_1': np.int32(0), 'meta/BufferVariable_0': np.zeros([4, O], np.float32),
  }
  full = save_tf1(dict(saved, **extras), str(tmp_path / 'train' / 'model.ckpt-300000'))
  policy.randomize(2)
  with pytest.raises(checkpoints.CheckpointMismatchError, match='full training checkpoint') as error:
    checkpoints.restore_policy(full, policy.variables)
  assert 'update_targets/counter_1' in str(error.value) and 'allow_extra=True' in str(error.value)
  checkpoints.restore_policy(full, policy.variables, allow_extra=True)
  assert_matches_reference(policy, saved, inputs, outputs)
  # A policy name of another configuration is never ignored.
  repr_name = 'state_preprocess/state_process_net/value/biases'
  other = save_tf1(dict(saved, **extras, **{repr_name: np.zeros([2], np.float32)}), str(tmp_path / 'r' / 'm.ckpt-1'))
  with pytest.raises(checkpoints.CheckpointMismatchError, match=repr_name):
    checkpoints.restore_policy(other, policy.variables, allow_extra=True)


def test_checkpoint_of_another_setting_points_to_its_config(policy, tmp_path):
  """The hint describes the checkpoint from its shapes (goal setting, dims, robot); the configurations it names come
  from the caller (`known_configs`: evaluation passes the table of this repository's configs)."""
  path, _, _, _ = write_original_checkpoint(str(tmp_path / 'xy' / 'model.ckpt'), setting='hiro_xy')
  before = policy.values()
  known = {('hiro_xy', 30, 2): ['configs/a.gin', 'configs/b.gin'], ('hiro_orig', 30, 2): ['configs/c.gin']}
  with pytest.raises(checkpoints.CheckpointMismatchError) as error:
    checkpoints.restore_policy(path, policy.variables, known_configs=known)
  message = str(error.value)
  assert 'meta_agent/actor_net/actions/weights is float32[300, 2] in the checkpoint, float32[300, 15]' in message
  assert ('The checkpoint looks like hiro_xy, goal dim SUBGOAL_DIM=2, observation dim 30 (Ant: AntMaze / AntPush / '
          'AntFall), task context dim 2; the model was built as hiro_orig, goal dim SUBGOAL_DIM=15') in message
  assert 'e.g. configs/a.gin or configs/b.gin.' in message and 'configs/c.gin' not in message
  assert len(message) < 3000  # shortened lists
  assert_values_equal(before, policy.variables)
  with pytest.raises(checkpoints.CheckpointMismatchError) as error:
    checkpoints.restore_policy(path, policy.variables)
  assert 'looks like hiro_xy' in str(error.value) and 'configs/' not in str(error.value)
  assert 'evaluate it with the gin configuration it was trained with.' in str(error.value)
  assert eval_lib.CONFIGS_BY_SHAPES[('hiro_xy', 30, 2)] == ['configs/ant_maze_xy.gin']
  repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  for names in eval_lib.CONFIGS_BY_SHAPES.values():
    assert all(os.path.isfile(os.path.join(repo, name)) for name in names), names


def test_port_policy_checkpoint_restores(policy, tmp_path):
  """A policy checkpoint written as TrainingLoop writes it: tf.train.Checkpoint(variables={TF1 name: variable})."""
  policy.randomize(3)
  expected = policy.values()
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(variables=policy.variables), str(tmp_path / 'policy'),
                                       max_to_keep=None, checkpoint_name='model.ckpt')
  path = manager.save(checkpoint_number=1234)
  key = 'variables/uvf_agent.Sactor_net.Sstates.Sstates_1.Sweights/.ATTRIBUTES/VARIABLE_VALUE'
  assert key in tf.train.load_checkpoint(path).get_variable_to_shape_map()
  policy.randomize(4)
  checkpoints.restore_policy(path, policy.variables)
  assert_values_equal(expected, policy.variables)
  assert checkpoints.checkpoint_step(path) == 1234
  fmt, entries = checkpoints.read_policy_entries(path)
  assert fmt == checkpoints.FORMAT_TF2 and sorted(entries) == sorted(expected)
  # Strict in this format too.
  smaller = dict(policy.variables)
  del smaller['num_resets']
  with pytest.raises(checkpoints.CheckpointMismatchError, match=r'unexpected in the checkpoint \(1\): num_resets'):
    checkpoints.restore_policy(path, smaller)


def test_export_loads_in_a_tf1_graph_and_round_trips(policy, tmp_path):
  original, saved, _, _ = write_original_checkpoint(str(tmp_path / 'orig' / 'model.ckpt'))
  checkpoints.restore_policy(original, policy.variables)
  exported = checkpoints.export_tf1_policy(policy.variables, str(tmp_path / 'out' / f'model.ckpt-{STEP}'))
  assert exported == str(tmp_path / 'out' / f'model.ckpt-{STEP}')
  assert tf.train.latest_checkpoint(str(tmp_path / 'out')) == exported
  # The same keys, dtypes and values as the original Saver wrote.
  reader, original_reader = tf.train.load_checkpoint(exported), tf.train.load_checkpoint(original)
  assert reader.get_variable_to_dtype_map() == original_reader.get_variable_to_dtype_map()
  for name in saved:
    np.testing.assert_array_equal(reader.get_tensor(name), original_reader.get_tensor(name), err_msg=name)
  # A graph with the original variable names restores it with a plain tf.compat.v1 Saver.
  with tf.Graph().as_default():
    variables = [
        tf.compat.v1.get_variable(name, shape=value.shape, dtype=tf.as_dtype(value.dtype),
                                  initializer=tf.compat.v1.zeros_initializer()) for name, value in saved.items()
    ]
    with tf.compat.v1.Session() as session:
      tf.compat.v1.train.Saver().restore(session, exported)
      restored = dict(zip(saved, session.run(variables)))
  for name, value in saved.items():
    np.testing.assert_array_equal(restored[name], value, err_msg=name)
  # Round trip: port's TF2 policy checkpoint -> export -> restore.
  policy.randomize(5)
  expected = policy.values()
  tf2_path = tf.train.Checkpoint(variables=policy.variables).write(str(tmp_path / 'tf2' / 'model.ckpt-77'))
  exported = checkpoints.export_tf1_policy(policy.variables, str(tmp_path / 'out2' / 'model.ckpt-77'))
  policy.randomize(6)
  checkpoints.restore_policy(exported, policy.variables)
  assert_values_equal(expected, policy.variables)
  policy.randomize(7)
  checkpoints.restore_policy(tf2_path, policy.variables)
  assert_values_equal(expected, policy.variables)


def test_command_line_export(policy, tmp_path, capsys):
  policy.randomize(8)
  expected = policy.values()
  manager = tf.train.CheckpointManager(tf.train.Checkpoint(variables=policy.variables), str(tmp_path / 'policy'),
                                       max_to_keep=None, checkpoint_name='model.ckpt')
  source = manager.save(checkpoint_number=500)
  out = str(tmp_path / 'tf1' / 'model.ckpt-500')
  assert hiro_checkpoints.main(['export', source, out]) == 0  # no config: copies the entries as they are
  values = {name: tf.train.load_checkpoint(out).get_tensor(name) for name in expected}
  for name, value in expected.items():
    np.testing.assert_array_equal(values[name], value, err_msg=name)
  assert sorted(tf.train.load_checkpoint(out).get_variable_to_shape_map()) == sorted(expected)
  assert hiro_checkpoints.main(['export', str(tmp_path / 'nothing'), out]) == 2
  # With the run's config: checked strictly against the policy that config builds.
  checked = str(tmp_path / 'tf1_checked' / 'model.ckpt-500')
  assert hiro_checkpoints.main(['export', source, checked, '--config', 'configs/ant_maze.gin']) == 0
  for name, value in expected.items():
    np.testing.assert_array_equal(tf.train.load_checkpoint(checked).get_tensor(name), value, err_msg=name)
  assert hiro_checkpoints.main(['export', source, checked, '--config', 'configs/ant_maze_xy.gin']) == 2
  assert 'does not match' in capsys.readouterr().err


def test_paths_that_are_not_checkpoints(tmp_path, policy):
  with pytest.raises(checkpoints.NotACheckpointError, match='does not exist'):
    checkpoints.restore_policy(str(tmp_path / 'model.ckpt-1'), policy.variables)
  with pytest.raises(checkpoints.NotACheckpointError, match='directory without a `checkpoint` state file'):
    checkpoints.checkpoint_step(str(tmp_path))
  (tmp_path / 'bad.index').write_bytes(b'not a checkpoint')
  with pytest.raises(checkpoints.NotACheckpointError, match='not a readable TensorFlow checkpoint'):
    checkpoints.restore_policy(str(tmp_path / 'bad'), policy.variables)
  assert issubclass(checkpoints.NotACheckpointError, ValueError)


def test_checkpoint_step(tmp_path):
  numbered = save_tf1({'global_step': np.int64(5)}, str(tmp_path / 'a' / 'model.ckpt-123'))
  assert checkpoints.checkpoint_step(numbered) == 123
  assert checkpoints.checkpoint_step(numbered + '.index') == 123
  unnumbered = save_tf1({'global_step': np.int64(42)}, str(tmp_path / 'b' / 'model.ckpt'))
  assert checkpoints.checkpoint_step(unnumbered) == 42
  nothing = save_tf1({'x': np.float32(1)}, str(tmp_path / 'c' / 'model.ckpt'))
  with pytest.raises(ValueError, match='has no step'):
    checkpoints.checkpoint_step(nothing)


def test_key_escaping():
  for name in ('uvf_agent/actor_net/states/states_1/weights', 'a.b/c..d/.S', 'global_step'):
    key = checkpoints.escape_tf2_key(name)
    assert checkpoints.unescape_tf2_key(key) == name
  assert checkpoints.escape_tf2_key('a/b.c') == 'variables/a.Sb..c/.ATTRIBUTES/VARIABLE_VALUE'
  assert checkpoints.unescape_tf2_key('save_counter/.ATTRIBUTES/VARIABLE_VALUE') is None


def test_original_hiro_repr_checkpoint_matches_the_original_networks(tmp_path):
  """hiro_repr (configs/ant_maze_repr.gin): G = 2, no x, y masking, and the 12 `state_preprocess/...` variables.

  Needs the trainable representation (`StatePreprocess(trainable=True)`): its `variables_by_tf1_name()`
  must return the original's 12 names, `state_preprocess(observations)` must be the original
  state_preprocess_net (the first `ndims` = 2 outputs) and `state_preprocess.action_embed_network(actions, states)`
  the original action_embed_net.
  """
  policy = Policy(CONFIGS / 'ant_maze_repr.gin')
  path, saved, inputs, outputs = write_original_checkpoint(str(tmp_path / 'policy' / 'model.ckpt'), 'hiro_repr', 3)
  repr_names = sorted(n for n in saved if n.startswith('state_preprocess/'))
  assert len(repr_names) == 12
  assert sorted(policy.state_preprocess.variables_by_tf1_name()) == repr_names
  checkpoints.restore_policy(path, policy.variables)
  assert_matches_reference(policy, saved, inputs, outputs)
  observations = tf.constant(inputs['observations'])
  np.testing.assert_allclose(policy.state_preprocess(observations).numpy(), outputs['repr'], rtol=1e-5, atol=1e-5)
  # psi, the action embedding of [flattened c x A actions, observation with the time dim zeroed].
  np.testing.assert_allclose(
      policy.state_preprocess.action_embed_network(tf.constant(inputs['action_sequences']), observations).numpy(),
      outputs['action_embed'], rtol=1e-5, atol=1e-5)
  # A hiro_repr checkpoint given to the hiro_orig model points to configs/ant_maze_repr.gin (evaluation's table).
  orig = Policy(CONFIGS / 'ant_maze.gin')
  with pytest.raises(
      checkpoints.CheckpointMismatchError, match=r'looks like hiro_repr, .*e\.g\. '
      r'configs/ant_maze_repr\.gin or configs/ant_push_repr\.gin \(hiro_repr: StatePreprocess'):
    checkpoints.restore_policy(path, orig.variables, known_configs=eval_lib.CONFIGS_BY_SHAPES)
