"""The IMPALA learner under `tf.distribute`: MirroredStrategy over two logical CPU devices against the
single-device learner on the same batch, checkpoints across strategies, and the errors.

The logical devices must be configured before TensorFlow initialises its devices, which other tests in this pytest
process have already done; so the TensorFlow checks run once, in a fresh interpreter that runs this file as a script
(`_child`), which saves what it measured to a directory; the tests below read it. Run by hand:
  PYTHONPATH=. python tests/scalable_agent/test_learner_distributed.py /tmp/out
"""

import json
import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf  # Importing TensorFlow does not initialise its devices; the child configures them after.

from scalable_agent import learner as learner_lib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NUM_ACTIONS = 5
UNROLL_LENGTH = 3  # T: the batch carries T + 1 steps.
BATCH_SIZE = 4  # 2 per replica.
FRAME_SHAPE = (24, 32, 3)  # Small frames: the step is fast; the network is the same apart from `linear`'s input.
NUM_ACTION_REPEATS = 4
HPARAMS = dict(entropy_cost=0.01, baseline_cost=.5, discounting=.9, learning_rate=0.1, decay=.99, momentum=0.,
               epsilon=.1, total_environment_frames=1000, num_action_repeats=NUM_ACTION_REPEATS)
CHILD_TIMEOUT_S = 400

# ---------------------------------------------------------------------------------------------------------------------
# The child: run as a script, in a fresh interpreter.


def _child(out_dir):
  """All TensorFlow checks with two logical CPU devices; writes results.json and arrays.npz under out_dir."""
  cpu = tf.config.list_physical_devices('CPU')[0]
  tf.config.set_logical_device_configuration(cpu, [tf.config.LogicalDeviceConfiguration()] * 2)
  from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import checkpoints  # pylint: disable=g-import-not-at-top
  from scalable_agent import environments  # pylint: disable=g-import-not-at-top
  learner = learner_lib

  results, arrays = {}, {}

  def batch(seed, batch_size=BATCH_SIZE):
    """A learner batch [T + 1, B, ...]: episode ends, rewards beyond [-1, 1], varied instructions (empty too)."""
    rng = np.random.default_rng(seed)
    shape = (UNROLL_LENGTH + 1, batch_size)
    words = np.array(['go', 'to', 'the', 'red', 'ball', '', 'pick  up'])
    instructions = np.array([' '.join(rng.choice(words, rng.integers(0, 4))) for _ in range(np.prod(shape))])
    env_outputs = environments.StepOutput(
        reward=tf.constant(rng.choice([-3., -.5, 0., .7, 2.], shape), tf.float32),
        info=environments.StepOutputInfo(tf.constant(rng.normal(size=shape), tf.float32),
                                         tf.constant(rng.integers(0, 100, shape),
                                                     tf.int32)), done=tf.constant(rng.random(shape) < .3),
        observation=(tf.constant(rng.integers(0, 256, shape + FRAME_SHAPE),
                                 tf.uint8), tf.constant(instructions.reshape(shape))))
    agent_outputs = agent_lib.AgentOutput(
        action=tf.constant(rng.integers(0, NUM_ACTIONS, shape),
                           tf.int32), policy_logits=tf.constant(rng.normal(size=shape + (NUM_ACTIONS,)), tf.float32),
        baseline=tf.constant(rng.normal(size=shape), tf.float32))
    agent_state = agent_lib.LSTMState(
        *(tf.constant(rng.normal(size=(batch_size, 256)) * .5, tf.float32) for _ in range(2)))
    return agent_state, env_outputs, agent_outputs

  def state(agent, learner_):
    """TF1 name -> value of every variable and slot, and each mirrored copy equal to the first (asserted)."""
    values = {}
    for name, variable in checkpoints.tf1_variable_map(agent, learner_.optimizer).items():
      copies = [v.numpy() for v in learner_.strategy.experimental_local_results(variable)]
      assert all(np.array_equal(copies[0], c) for c in copies[1:]), f'mirrored copies of {name} differ'
      values[name] = copies[0]
    return values

  def record(prefix, values):
    for name, value in values.items():
      arrays[f'{prefix}:{name}'] = value

  def metrics_of(metrics):
    return {k: float(v.numpy()) for k, v in metrics.items()}

  def checkpoint_content(prefix):
    reader = tf.train.load_checkpoint(prefix)
    return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}

  tf.random.set_seed(0)
  mirrored = learner.make_strategy('mirrored')
  results['mirrored_devices'] = list(mirrored.extended.worker_devices)
  single_agent = agent_lib.Agent(NUM_ACTIONS, FRAME_SHAPE)
  single = learner.Learner(single_agent, **HPARAMS)
  with mirrored.scope():
    mirrored_agent = agent_lib.Agent(NUM_ACTIONS, FRAME_SHAPE)
    for source, target in zip(single_agent.variables, mirrored_agent.variables):
      target.assign(source)  # Cross-replica context: every copy.
    distributed = learner.Learner(mirrored_agent, **HPARAMS)
  results['num_replicas'] = distributed.num_replicas
  results['variable_types'] = sorted({
      type(v).__name__ for v in list(mirrored_agent.variables) + [distributed.num_environment_frames] +
      [distributed.optimizer.slots_for(v)[0] for v in mirrored_agent.trainable_variables]
  })
  for learner_ in (single, distributed):
    learner_.num_environment_frames.assign(250)  # Mid-decay: the learning rate must follow the counter.
  record('before', state(single_agent, single))

  # One step on the same whole batch.
  results['single_step'] = metrics_of(single.step(*batch(1)))
  results['mirrored_step'] = metrics_of(distributed.step(*batch(1)))
  record('single', state(single_agent, single))
  record('mirrored', state(mirrored_agent, distributed))
  results['counter_copies'] = [
      int(v.numpy()) for v in mirrored.experimental_local_results(distributed.num_environment_frames)
  ]

  # Checkpoints of both after the same step: object-based (our runs) and TF1 name-based (the original's).
  prefixes = {}
  for name, agent, learner_ in (('single', single_agent, single), ('mirrored', mirrored_agent, distributed)):
    manager = checkpoints.make_checkpoint_manager(os.path.join(out_dir, name), agent, learner_.optimizer,
                                                  learner_.num_environment_frames)
    prefixes[name] = manager.save()
    prefixes[name + '_tf1'] = checkpoints.export_tf1_checkpoint(os.path.join(out_dir, name + '_tf1', 'model.ckpt'),
                                                                agent, learner_.optimizer,
                                                                int(learner_.num_environment_frames.numpy()))
  results['checkpoint_names'] = {name: os.path.basename(prefix) for name, prefix in prefixes.items()}
  for name, prefix in prefixes.items():
    for key, value in checkpoint_content(prefix).items():
      if key != '_CHECKPOINTABLE_OBJECT_GRAPH':  # A serialized proto: compared as a whole below.
        arrays[f'ckpt_{name}:{key}'] = value
  results['object_graphs_equal'] = bool(
      checkpoint_content(prefixes['single'])['_CHECKPOINTABLE_OBJECT_GRAPH'] == checkpoint_content(prefixes['mirrored'])
      ['_CHECKPOINTABLE_OBJECT_GRAPH'])

  # Mirrored checkpoint -> a fresh single-device learner, and the single-device one -> a fresh mirrored learner.
  fresh_agent = agent_lib.Agent(NUM_ACTIONS, FRAME_SHAPE)
  fresh = learner.Learner(fresh_agent, **HPARAMS)
  checkpoints.restore_latest(
      checkpoints.make_checkpoint_manager(os.path.join(out_dir, 'mirrored'), fresh_agent, fresh.optimizer,
                                          fresh.num_environment_frames))
  record('mirrored_to_single', state(fresh_agent, fresh))
  results['mirrored_to_single_frames'] = int(fresh.num_environment_frames.numpy())
  with mirrored.scope():
    fresh_mirrored_agent = agent_lib.Agent(NUM_ACTIONS, FRAME_SHAPE)
    fresh_mirrored = learner.Learner(fresh_mirrored_agent, **HPARAMS)
  checkpoints.restore_latest(
      checkpoints.make_checkpoint_manager(os.path.join(out_dir, 'single'), fresh_mirrored_agent,
                                          fresh_mirrored.optimizer, fresh_mirrored.num_environment_frames))
  record('single_to_mirrored', state(fresh_mirrored_agent, fresh_mirrored))
  results['single_to_mirrored_frames'] = int(fresh_mirrored.num_environment_frames.numpy())
  # The TF1 name-based checkpoint of the mirrored run, into a fresh mirrored learner.
  tf1_agent = agent_lib.Agent(NUM_ACTIONS, FRAME_SHAPE)
  tf1_learner = learner.Learner(tf1_agent, **HPARAMS)
  results['tf1_restored_frames'] = checkpoints.restore_tf1_checkpoint(prefixes['mirrored_tf1'], tf1_agent,
                                                                      tf1_learner.optimizer)
  record('mirrored_tf1_to_single', state(tf1_agent, tf1_learner))

  # The run goes on: the single-device learner and the mirrored one restored from its checkpoint, one more step.
  results['single_step_2'] = metrics_of(single.step(*batch(2)))
  results['moved_step_2'] = metrics_of(fresh_mirrored.step(*batch(2)))
  record('single_2', state(single_agent, single))
  record('moved_2', state(fresh_mirrored_agent, fresh_mirrored))

  # Traced once over several steps (new values, same shapes); the frame counter moves once per step.
  for seed in (3, 4):
    distributed.step(*batch(seed))
  results['tracing_count'] = int(distributed.train_step.experimental_get_tracing_count())
  results['frames_after_3_steps'] = int(distributed.num_environment_frames.numpy())

  # Errors.
  def error(fn):
    try:
      fn()
    except Exception as e:  # pylint: disable=broad-except
      return f'{type(e).__name__}: {e}'
    return None

  results['indivisible_error'] = error(lambda: distributed.step(*batch(5, batch_size=3)))
  results['frames_after_indivisible'] = int(distributed.num_environment_frames.numpy())
  results['indivisible_traced_error'] = error(lambda: distributed.train_step(*batch(5, batch_size=3)))

  def learner_in_scope_agent_outside():
    agent = agent_lib.Agent(NUM_ACTIONS, FRAME_SHAPE)
    with mirrored.scope():
      learner.Learner(agent)

  results['agent_outside_scope_error'] = error(learner_in_scope_agent_outside)

  def agent_in_scope_learner_outside():
    with mirrored.scope():
      agent = agent_lib.Agent(NUM_ACTIONS, FRAME_SHAPE)
    learner.Learner(agent)

  results['learner_outside_scope_error'] = error(agent_in_scope_learner_outside)
  results['default_in_scope_error'] = error(lambda: _in_scope(mirrored, lambda: learner.make_strategy('default')))
  results['has_tpu'] = bool(tf.config.list_logical_devices('TPU'))
  results['tpu_error'] = error(lambda: learner.make_strategy('tpu', tpu='local'))  # Last: it touches the context.

  np.savez(os.path.join(out_dir, 'arrays.npz'), **arrays)
  with open(os.path.join(out_dir, 'results.json'), 'w') as f:
    json.dump(results, f, indent=1)


def _in_scope(strategy, fn):
  with strategy.scope():
    return fn()


# ---------------------------------------------------------------------------------------------------------------------
# The tests.


@pytest.fixture(scope='module')
def child(tmp_path_factory):
  """Runs `_child` once in a fresh interpreter; returns (results dict, arrays dict)."""
  out_dir = str(tmp_path_factory.mktemp('learner_distributed'))
  env = dict(os.environ, PYTHONPATH=REPO_ROOT + os.pathsep + os.environ.get('PYTHONPATH', ''), TF_CPP_MIN_LOG_LEVEL='2',
             CUDA_VISIBLE_DEVICES='')  # Two logical CPUs, whatever the machine has.
  process = subprocess.run([sys.executable, os.path.abspath(__file__), out_dir], cwd=REPO_ROOT, env=env,
                           capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
  if process.returncode:
    pytest.fail(f'the child process failed (exit {process.returncode}):\n{process.stdout[-3000:]}\n'
                f'{process.stderr[-6000:]}')
  with open(os.path.join(out_dir, 'results.json')) as f:
    results = json.load(f)
  with np.load(os.path.join(out_dir, 'arrays.npz')) as arrays:
    return results, dict(arrays)


def _state(arrays, prefix):
  return {key.split(':', 1)[1]: value for key, value in arrays.items() if key.startswith(prefix + ':')}


@pytest.mark.slow
def test_mirrored_runs_on_two_logical_cpus_with_mirrored_variables(child):
  results, _ = child
  assert results['num_replicas'] == 2
  assert [d.rsplit('/', 1)[1] for d in results['mirrored_devices']] == ['device:CPU:0', 'device:CPU:1']
  assert results['variable_types'] == ['MirroredVariable']  # agent, RMSProp slots and frame counter


def test_mirrored_step_equals_the_single_device_step(child):
  """Same batch, same weights: losses (summed over the replicas), learning rate, weights and slots to 1e-5."""
  results, arrays = child
  single, mirrored = results['single_step'], results['mirrored_step']
  assert single.keys() == mirrored.keys()
  for key in ('total_loss', 'pg_loss', 'baseline_loss', 'entropy_loss'):
    np.testing.assert_allclose(mirrored[key], single[key], rtol=1e-5, atol=1e-5, err_msg=key)
  assert mirrored['learning_rate'] == single['learning_rate'] == pytest.approx(0.1 * (1 - 250 / 1000))
  before, after_single, after_mirrored = (_state(arrays, p) for p in ('before', 'single', 'mirrored'))
  assert len(after_single) == len(after_mirrored) == 3 * 41
  num_moved = 0
  for name, value in after_single.items():
    np.testing.assert_allclose(after_mirrored[name], value, rtol=0, atol=1e-5, err_msg=name)
    if name.endswith('/RMSProp_1'):  # The momentum slot is the step itself: lr g / sqrt(ms + eps).
      scale = np.abs(value).max()
      np.testing.assert_allclose(after_mirrored[name], value, rtol=0, atol=1e-4 * scale + 1e-9, err_msg=name)
      num_moved += scale > 0
  assert num_moved == 41  # Every variable got a (non-zero) update.
  # A MEAN all-reduce (or a gradient of only one shard) would change the step by far more than the tolerance.
  step = after_single['agent/batch_apply_1/baseline/w'] - before['agent/batch_apply_1/baseline/w']
  assert np.abs(step).max() > 1e-3


def test_frame_counter_advances_once_per_step_by_the_whole_batch(child):
  results, _ = child
  frames = BATCH_SIZE * UNROLL_LENGTH * NUM_ACTION_REPEATS
  assert results['single_step']['num_environment_frames'] == 250 + frames
  assert results['mirrored_step']['num_environment_frames'] == 250 + frames
  assert results['counter_copies'] == [250 + frames] * 2
  assert results['frames_after_3_steps'] == 250 + 3 * frames


def test_step_is_traced_once(child):
  results, _ = child
  assert results['tracing_count'] == 1


def test_checkpoints_have_the_same_content_under_both_strategies(child):
  """Same names, shapes and dtypes, values to 1e-5 after the same step; the same object graph."""
  results, arrays = child
  assert results['checkpoint_names']['single'] == results['checkpoint_names']['mirrored'] == 'model.ckpt-298'
  assert results['object_graphs_equal']
  for kind in ('', '_tf1'):
    single, mirrored = _state(arrays, 'ckpt_single' + kind), _state(arrays, 'ckpt_mirrored' + kind)
    assert sorted(single) == sorted(mirrored)
    assert len(single) == (3 * 41 + 2 if kind == '' else 3 * 41 + 1)  # + counter (+ save counter, object-based)
    for name, value in single.items():
      assert mirrored[name].dtype == value.dtype and mirrored[name].shape == value.shape, name
      np.testing.assert_allclose(mirrored[name], value, rtol=0, atol=1e-5, err_msg=name)


def test_restore_across_strategies(child):
  """Mirrored checkpoint -> single-device learner, and back: every value exactly, and the run continues."""
  results, arrays = child
  mirrored, single = _state(arrays, 'mirrored'), _state(arrays, 'single')
  for restored, saved in ((_state(arrays, 'mirrored_to_single'), mirrored),
                          (_state(arrays, 'mirrored_tf1_to_single'), mirrored), (_state(arrays,
                                                                                        'single_to_mirrored'), single)):
    assert sorted(restored) == sorted(saved)
    for name, value in saved.items():
      np.testing.assert_array_equal(restored[name], value, err_msg=name)
  frames = 250 + BATCH_SIZE * UNROLL_LENGTH * NUM_ACTION_REPEATS
  assert results['mirrored_to_single_frames'] == results['single_to_mirrored_frames'] == frames
  assert results['tf1_restored_frames'] == frames
  # The single-device run, moved onto two replicas after step 1, takes the same step 2.
  for key, value in results['single_step_2'].items():
    np.testing.assert_allclose(results['moved_step_2'][key], value, rtol=1e-5, atol=1e-5, err_msg=key)
  moved = _state(arrays, 'moved_2')
  for name, value in _state(arrays, 'single_2').items():
    np.testing.assert_allclose(moved[name], value, rtol=0, atol=1e-5, err_msg=name)


def test_indivisible_batch_is_an_error(child):
  results, _ = child
  message = 'the batch size 3 is not divisible by the 2 replicas of the MirroredStrategy'
  assert results['indivisible_error'].startswith('ValueError: ' + message)  # `step`, before anything runs
  assert results['indivisible_traced_error'].startswith('ValueError')  # `train_step` itself, when it traces
  assert message in results['indivisible_traced_error']
  assert results['frames_after_indivisible'] == results['frames_after_3_steps']  # Nothing was trained.


def test_agent_and_learner_must_share_the_strategy_scope(child):
  results, _ = child
  assert results['agent_outside_scope_error'].startswith('ValueError: 41 agent variables')
  assert 'same `with strategy.scope():`' in results['agent_outside_scope_error']
  assert results['learner_outside_scope_error'].startswith('ValueError: the agent\'s variables are distributed')
  assert results['default_in_scope_error'].startswith('ValueError: make_strategy("default") inside')


def test_tpu_strategy_without_a_tpu_is_a_clear_error(child):
  results, _ = child
  if results['has_tpu']:
    pytest.skip('this machine has a TPU')
  assert results['tpu_error'].startswith('RuntimeError: no TPU reachable for the tpu strategy')


def test_unknown_strategy():
  with pytest.raises(ValueError, match="unknown strategy 'horovod'; the choices are default, mirrored, tpu"):
    learner_lib.make_strategy('horovod')
  with pytest.raises(ValueError, match='devices are only for the mirrored strategy'):
    learner_lib.make_strategy('default', devices=['/cpu:0'])


def test_default_strategy():
  strategy = learner_lib.make_strategy('default')
  assert strategy is tf.distribute.get_strategy() and not tf.distribute.has_strategy()
  assert strategy.num_replicas_in_sync == 1


if __name__ == '__main__':
  if len(sys.argv) != 2:
    sys.exit(f'usage: {sys.argv[0]} OUT_DIR')
  _child(sys.argv[1])
