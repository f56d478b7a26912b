"""Tests of scalable_agent/checkpoints.py.

TF1 checkpoints are written and read here with `tf.compat.v1` graph-mode variables, `tf.compat.v1.train.Saver` and
`tf.compat.v1.train.RMSPropOptimizer` (which names its slots `V/RMSProp` and `V/RMSProp_1` as TF 1.9 did), not with
our code. The variable names and shapes come from `Agent.tf1_variables()`, which test_agent.py checks against the
original table.
"""

import os

import numpy as np
import pytest
import tensorflow as tf

from rundir import errors
from rundir import formatting
from scalable_agent import agent as agent_lib
from scalable_agent import checkpoints
from scalable_agent import learner as learner_lib

NUM_ACTIONS = 9
v1 = tf.compat.v1


@pytest.fixture(scope='module')
def original_shapes():
  """OrderedDict name -> shape of the 41 agent variables."""
  return {name: v.shape.as_list() for name, v in agent_lib.Agent(NUM_ACTIONS).tf1_variables().items()}


def random_values(shapes, seed):
  rng = np.random.default_rng(seed)
  return {name: rng.normal(scale=0.1, size=shape).astype(np.float32) for name, shape in shapes.items()}


def write_tf1_checkpoint(prefix, values, global_step=12800, rmsprop_step=True):
  """Writes `values` (name -> array) by name with tf.compat.v1.train.Saver, plus `num_environment_frames` unless
  `global_step` is None, plus RMSProp slots after one step of tf.compat.v1.train.RMSPropOptimizer if asked."""
  with tf.Graph().as_default():
    variables = [v1.get_variable(name, initializer=tf.constant(value)) for name, value in values.items()]
    if global_step is not None:
      v1.get_variable('num_environment_frames', initializer=tf.constant(global_step, tf.int64), trainable=False)
    train_op = None
    if rmsprop_step:
      loss = tf.add_n([tf.reduce_sum(tf.sin(3. * v)) for v in variables])
      train_op = v1.train.RMSPropOptimizer(0.01, 0.99, 0.0, 0.1).minimize(loss)
    with v1.Session() as session:
      session.run(v1.global_variables_initializer())
      if train_op is not None:
        session.run(train_op)
      return v1.train.Saver().save(session, prefix, write_meta_graph=False)


def make_optimizer(agent):
  optimizer = learner_lib.RMSProp(0.1, decay=0.99, epsilon=0.1)
  optimizer.create_slots(agent.trainable_variables)
  return optimizer


def snapshot(agent, optimizer=None):
  return {name: v.numpy() for name, v in checkpoints.tf1_variable_map(agent, optimizer).items()}


def test_restore_original_training_checkpoint_with_slots(tmp_path, original_shapes):
  values = random_values(original_shapes, seed=0)
  path = write_tf1_checkpoint(str(tmp_path / 'model.ckpt-12800'), values)
  reader = tf.train.load_checkpoint(path)
  assert len(reader.get_variable_to_shape_map()) == 124

  agent = agent_lib.Agent(NUM_ACTIONS)
  optimizer = make_optimizer(agent)
  assert checkpoints.restore_tf1_checkpoint(path, agent, optimizer) == 12800
  for name, variable in agent.tf1_variables().items():
    np.testing.assert_array_equal(variable.numpy(), reader.get_tensor(name), err_msg=name)
    mean_square, momentum = optimizer.slots_for(variable)
    np.testing.assert_array_equal(mean_square.numpy(), reader.get_tensor(name + '/RMSProp'), err_msg=name)
    np.testing.assert_array_equal(momentum.numpy(), reader.get_tensor(name + '/RMSProp_1'), err_msg=name)
  # The step changed the slots away from their initial values (ms 1, mom 0), so the comparison means something.
  kernel = agent.tf1_variables()['agent/lstm_cell/kernel']
  assert np.abs(optimizer.slots_for(kernel)[0].numpy() - 1).max() > 1e-4
  assert np.abs(optimizer.slots_for(kernel)[1].numpy()).max() > 1e-4
  # A directory with a `checkpoint` state file works too.
  assert checkpoints.restore_tf1_checkpoint(str(tmp_path), agent_lib.Agent(NUM_ACTIONS)) == 12800


def test_restore_without_optimizer_ignores_the_slots(tmp_path, original_shapes):
  values = random_values(original_shapes, seed=1)
  path = write_tf1_checkpoint(str(tmp_path / 'model.ckpt-800'), values, global_step=800)
  agent = agent_lib.Agent(NUM_ACTIONS)
  assert checkpoints.restore_tf1_checkpoint(path, agent) == 800
  # The slots moved the variables by one RMSProp step; the checkpoint holds the moved values.
  reader = tf.train.load_checkpoint(path)
  for name, variable in agent.tf1_variables().items():
    np.testing.assert_array_equal(variable.numpy(), reader.get_tensor(name), err_msg=name)


def test_restore_lists_missing_unexpected_and_misshaped_names(tmp_path, original_shapes):
  values = random_values(original_shapes, seed=2)
  del values['agent/lstm_cell/bias']
  values['agent/lstm_cell/extra'] = np.zeros([3], np.float32)
  values['agent/batch_apply_1/policy_logits/w'] = np.zeros([256, 10], np.float32)
  path = write_tf1_checkpoint(str(tmp_path / 'model.ckpt-0'), values, global_step=0, rmsprop_step=False)
  agent = agent_lib.Agent(NUM_ACTIONS)
  before = snapshot(agent)
  with pytest.raises(ValueError) as error:
    checkpoints.restore_tf1_checkpoint(path, agent)
  message = str(error.value)
  assert 'missing in the checkpoint (1): agent/lstm_cell/bias' in message
  assert 'unexpected in the checkpoint (1): agent/lstm_cell/extra' in message
  assert 'agent/batch_apply_1/policy_logits/w is float32[256, 10] in the checkpoint, float32[256, 9]' in message
  for name, value in snapshot(agent).items():  # Nothing was assigned.
    np.testing.assert_array_equal(value, before[name], err_msg=name)


def test_restore_with_optimizer_requires_slots_and_global_step(tmp_path, original_shapes):
  values = random_values(original_shapes, seed=3)
  path = write_tf1_checkpoint(str(tmp_path / 'ckpt'), values, global_step=None, rmsprop_step=False)
  agent = agent_lib.Agent(NUM_ACTIONS)
  with pytest.raises(ValueError) as error:
    checkpoints.restore_tf1_checkpoint(path, agent, make_optimizer(agent))
  message = str(error.value)
  assert 'missing in the checkpoint (83)' in message  # 41 x 2 slots + the global step
  assert 'agent/lstm_cell/kernel/RMSProp,' in message and 'agent/lstm_cell/kernel/RMSProp_1' in message
  assert 'num_environment_frames' in message
  assert 'unexpected' not in message


def test_export_is_readable_by_tf1_saver_and_restores(tmp_path):
  agent = agent_lib.Agent(NUM_ACTIONS)
  optimizer = make_optimizer(agent)
  rng = np.random.default_rng(4)
  for variable in agent.tf1_variables().values():
    for slot in optimizer.slots_for(variable):
      slot.assign(rng.uniform(size=slot.shape).astype(np.float32))
  expected = snapshot(agent, optimizer)

  path = checkpoints.export_tf1_checkpoint(str(tmp_path / 'model.ckpt'), agent, optimizer, global_step=800)
  assert path == str(tmp_path / 'model.ckpt-800')
  assert tf.train.latest_checkpoint(str(tmp_path)) == path
  names = {name for name, _ in tf.train.list_variables(path)}
  assert names == set(expected) | {'num_environment_frames'} and len(names) == 124

  # The original's restore: a graph with variables of these names and a default Saver.
  with tf.Graph().as_default():
    graph_variables = {
        name: v1.get_variable(name, shape=value.shape, dtype=tf.float32) for name, value in expected.items()
    }
    frames = v1.get_variable('num_environment_frames', shape=[], dtype=tf.int64, trainable=False)
    with v1.Session() as session:
      v1.train.Saver().restore(session, path)
      restored, restored_frames = session.run((graph_variables, frames))
  assert restored_frames == 800
  for name, value in expected.items():
    np.testing.assert_array_equal(restored[name], value, err_msg=name)

  # And back into a fresh agent and optimizer.
  other = agent_lib.Agent(NUM_ACTIONS)
  other_optimizer = make_optimizer(other)
  assert checkpoints.restore_tf1_checkpoint(path, other, other_optimizer) == 800
  for name, value in snapshot(other, other_optimizer).items():
    np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_tf2_checkpoint_round_trip(tmp_path):
  agent = agent_lib.Agent(NUM_ACTIONS)
  optimizer = make_optimizer(agent)
  frames = tf.Variable(1600, dtype=tf.int64, trainable=False)
  manager = checkpoints.make_checkpoint_manager(str(tmp_path), agent, optimizer, frames, max_to_keep=2)
  assert checkpoints.restore_latest(manager) is None

  for variable in agent.tf1_variables().values():
    optimizer.slots_for(variable)[0].assign_add(tf.ones_like(variable))
  expected = snapshot(agent, optimizer)
  path = manager.save()
  assert os.path.basename(path) == 'model.ckpt-1600'

  for variable in checkpoints.tf1_variable_map(agent, optimizer).values():
    variable.assign(tf.zeros_like(variable))
  frames.assign(0)
  assert checkpoints.restore_latest(manager) == path
  assert int(frames.numpy()) == 1600
  for name, value in snapshot(agent, optimizer).items():
    np.testing.assert_array_equal(value, expected[name], err_msg=name)

  # A fresh process: new objects, same directory.
  other = agent_lib.Agent(NUM_ACTIONS)
  other_optimizer = make_optimizer(other)
  other_frames = tf.Variable(0, dtype=tf.int64, trainable=False)
  other_manager = checkpoints.make_checkpoint_manager(str(tmp_path), other, other_optimizer, other_frames)
  assert checkpoints.restore_latest(other_manager) == path
  assert int(other_frames.numpy()) == 1600
  for name, value in snapshot(other, other_optimizer).items():
    np.testing.assert_array_equal(value, expected[name], err_msg=name)


def test_make_checkpoint_rejects_an_untrackable_optimizer():
  with pytest.raises(ValueError, match='not trackable'):
    checkpoints.make_checkpoint(agent_lib.Agent(NUM_ACTIONS), optimizer=object())


def test_a_failed_save_removes_what_it_left_and_names_the_intact_checkpoint(tmp_path, monkeypatch):
  agent = agent_lib.Agent(NUM_ACTIONS)
  frames = tf.Variable(10, dtype=tf.int64, trainable=False)
  manager = checkpoints.make_checkpoint_manager(str(tmp_path), agent, num_environment_frames=frames)
  intact = checkpoints.save(manager)
  size = sum(
      os.path.getsize(os.path.join(tmp_path, name))
      for name in os.listdir(tmp_path)
      if name.startswith('model.ckpt-10.'))
  frames.assign(20)

  def full_disk(*args, **kwargs):
    os.makedirs(tmp_path / 'model.ckpt-20_temp')  # what TensorFlow leaves when a write fails
    raise tf.errors.ResourceExhaustedError(None, None, 'model.ckpt-20_temp/part-00000; No space left on device')

  monkeypatch.setattr(tf.train.CheckpointManager, 'save', full_disk)
  with pytest.raises(errors.RunDirectoryError) as info:
    checkpoints.save(manager)
  assert info.value.exit_code == errors.EXIT_RUN_DIR
  assert str(info.value).startswith(f'writing a checkpoint into {tmp_path} failed: the disk is full. It needs about '
                                    f'{formatting.format_bytes(size)}; ')
  assert str(info.value).endswith(f'The previous checkpoint {intact} is intact: free some space and run the same '
                                  'command to resume from it.')
  assert sorted(os.listdir(tmp_path)) == ['checkpoint', 'model.ckpt-10.data-00000-of-00001', 'model.ckpt-10.index']
