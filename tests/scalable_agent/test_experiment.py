"""Tests of the IMPALA experiment: unroll assembly (hand-worked), batching for the learner, levels, summaries, and
an end-to-end run with environment processes (an actor's process killed, checkpoint, resume, test mode)."""

import dataclasses
import glob
import inspect
import json
import os
import time

import gin
import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import actor as actor_lib
from scalable_agent import agent as agent_lib
from scalable_agent import checkpoints
from scalable_agent import dmlab30
from scalable_agent import environments
from scalable_agent import experiment
from scalable_agent import progress as progress_lib
from scalable_agent import settings as settings_lib

NUM_ACTIONS = 3


class _ScriptedEnvironment:
  """Backend whose step k (1, 2, ...) gives reward 10 k + action, frame filled with k, and ends the episode at k = 2.

  The observation after `done` is the next episode's first (frame value k as well), as every backend.
  """

  def __init__(self):
    self.steps = 0
    self.actions = []

  def initial(self):
    return np.zeros([2, 2, 3], np.uint8), 'go'

  def step(self, action):
    self.steps += 1
    self.actions.append(action)
    return (np.float32(10 * self.steps + action), np.bool_(self.steps == 2), (np.full([2, 2, 3], self.steps,
                                                                                      np.uint8), 'go'))


class _CountingPolicy:
  """Call n (1, 2, ...) returns action n % 3, logits [n, 0, 0], baseline -n, state c = c + 1, h = 2 c.

  Records the (last_action, done) it is called with.
  """

  def __init__(self):
    self.calls = 0
    self.inputs = []

  def __call__(self, last_action, env_output, agent_state):
    assert last_action.shape == (1,) and env_output.done.shape == (1,)
    assert env_output.observation[0].shape == (1, 2, 2, 3) and agent_state.c.shape == (1, 4)
    self.calls += 1
    self.inputs.append((int(last_action[0]), bool(env_output.done[0])))
    n = self.calls
    output = agent_lib.AgentOutput(np.array([n % 3], np.int32), np.array([[n, 0, 0]], np.float32),
                                   np.array([-n], np.float32))
    c = agent_state.c + 1
    return output, agent_lib.LSTMState(c, 2 * c)


def _actor(unroll_length=3):
  env, policy = _ScriptedEnvironment(), _CountingPolicy()
  zeros = np.zeros([1, 4], np.float32)
  actor = actor_lib.Actor('level', environments.FlowEnvironment(env), policy, unroll_length,
                          agent_lib.LSTMState(zeros, zeros), actor_lib.initial_agent_output(NUM_ACTIONS))
  return actor, env, policy


def test_unrolls_overlap_by_one_step_and_carry_the_state_at_their_start():
  actor, env, policy = _actor(unroll_length=3)
  first, second = actor.unroll(), actor.unroll()

  # First unroll: step 0 is the initial output (done, reward 0) with the zero agent output and state.
  assert first.level_name == 'level'
  np.testing.assert_array_equal(first.agent_state.c, np.zeros(4))
  np.testing.assert_array_equal(first.agent_outputs.action, [0, 1, 2, 0])  # call n -> n % 3
  np.testing.assert_array_equal(first.agent_outputs.baseline, [0, -1, -2, -3])
  assert first.agent_outputs.policy_logits.shape == (4, NUM_ACTIONS)
  # env_outputs[t] follows agent_outputs[t].action: step k rewards 10 k + action.
  np.testing.assert_array_equal(first.env_outputs.reward, [0, 11, 22, 30])
  np.testing.assert_array_equal(first.env_outputs.done, [True, False, True, False])
  # Running return and length, including the step; on done they hold the finished episode's, then restart.
  np.testing.assert_array_equal(first.env_outputs.info.episode_return, [0, 11, 33, 30])
  np.testing.assert_array_equal(first.env_outputs.info.episode_step, [0, 1, 2, 1])
  np.testing.assert_array_equal(first.env_outputs.observation[0][:, 0, 0, 0], [0, 1, 2, 3])
  assert list(first.env_outputs.observation[1]) == ['go'] * 4
  # The policy saw the previous action and the previous env output.
  assert policy.inputs[:3] == [(0, True), (1, False), (2, True)]
  assert env.actions[:3] == [1, 2, 0]

  # Second unroll: step 0 repeats the first unroll's last step; agent_state is the state after 3 calls.
  np.testing.assert_array_equal(second.agent_state.c, np.full(4, 3.))
  np.testing.assert_array_equal(second.agent_state.h, np.full(4, 6.))
  assert second.agent_outputs.action[0] == first.agent_outputs.action[-1]
  assert second.env_outputs.reward[0] == first.env_outputs.reward[-1]
  np.testing.assert_array_equal(second.agent_outputs.action, [0, 1, 2, 0])  # calls 3..6
  np.testing.assert_array_equal(second.env_outputs.reward, [30, 41, 52, 60])
  np.testing.assert_array_equal(second.env_outputs.info.episode_return, [30, 71, 123, 183])
  assert policy.inputs[3] == (0, False)  # the last action of the first unroll


def test_reset_restarts_from_an_initial_output_and_zero_state():
  actor, _, _ = _actor(unroll_length=2)
  actor.unroll()
  actor.reset(environments.FlowEnvironment(_ScriptedEnvironment()))
  output = actor.unroll()
  np.testing.assert_array_equal(output.agent_state.c, np.zeros(4))
  assert output.env_outputs.done[0] and output.agent_outputs.action[0] == 0 and output.env_outputs.reward[0] == 0


def test_batch_is_time_major_and_episodes_skip_the_overlapping_step():
  actor, _, _ = _actor(unroll_length=3)
  unrolls = [actor.unroll(), actor.unroll()]
  batch = actor_lib.batch_unrolls(unrolls)
  assert batch.env_outputs.reward.shape == (4, 2)
  assert batch.env_outputs.observation[0].shape == (4, 2, 2, 2, 3)
  assert batch.agent_outputs.policy_logits.shape == (4, 2, NUM_ACTIONS)
  assert batch.agent_state.c.shape == (2, 4)
  np.testing.assert_array_equal(batch.env_outputs.reward[:, 1], unrolls[1].env_outputs.reward)
  # Step 0 of the first unroll is done (initial output) but is not an episode end; step 2 ends one of return 33.
  assert actor_lib.finished_episodes(batch) == [('level', 33., 2)]
  tensors = tf.nest.map_structure(tf.convert_to_tensor, batch.env_outputs)
  assert tensors.observation[1].dtype == tf.string


def test_dmlab30_levels_are_assigned_round_robin():
  levels = settings_lib.actor_levels('dmlab30', 33)
  names = list(dmlab30.LEVEL_MAPPING)
  assert levels[:30] == names and levels[30:] == names[:3]
  assert settings_lib.actor_levels('builtin/find_object', 2) == ['builtin/find_object'] * 2
  assert settings_lib.test_levels('dmlab30') == list(dmlab30.LEVEL_MAPPING.values())


def test_dmlab30_training_scores_are_written_once_every_level_has_a_return(tmp_path):
  settings = settings_lib.Settings(level_name='dmlab30')
  summaries = progress_lib.Summaries(str(tmp_path), settings)
  names = list(dmlab30.LEVEL_MAPPING)
  summaries.episodes([(name, 1., 10) for name in names[:-1]], 100)
  summaries.episodes([(names[-1], 1., 10)], 200)
  summaries.close()
  tags = [(v.tag, e.step)
          for f in glob.glob(str(tmp_path / 'events.*'))
          for e in tf.compat.v1.train.summary_iterator(f)
          for v in e.summary.value]
  assert ('dmlab30/training_no_cap', 200) in tags and ('dmlab30/training_cap_100', 200) in tags
  assert ('dmlab30/training_no_cap', 100) not in tags
  assert (names[0] + '/episode_frames', 100) in tags


def test_agent_step_compiles_with_a_static_batch_size():
  """Regression: the agent's loops failed in tf.function with a [1, ...] input (static batch dimension)."""
  agent = agent_lib.Agent(NUM_ACTIONS, (8, 8, 3))
  env_output = environments.StepOutput(tf.zeros([1]), environments.StepOutputInfo(tf.zeros([1]), tf.zeros([1],
                                                                                                          tf.int32)),
                                       tf.constant([True]),
                                       (tf.zeros([1, 8, 8, 3], tf.uint8), tf.constant(['go to the red'])))
  step = tf.function(agent.__call__)
  output, state = step(tf.zeros([1], tf.int32), env_output, agent.initial_state(1))
  eager_output, _ = agent(tf.zeros([1], tf.int32), env_output, agent.initial_state(1))
  assert output.action.shape == (1,) and state.c.shape == (1, 256)
  np.testing.assert_allclose(output.baseline, eager_output.baseline, rtol=1e-5)


def test_settings_are_the_flags_with_their_defaults():
  parameters = inspect.signature(experiment.experiment).parameters
  fields = {f.name: f.default for f in dataclasses.fields(settings_lib.Settings)}
  assert set(fields) == set(parameters) - {'logdir', 'mode'}
  for name, default in fields.items():
    assert parameters[name].default == default, name


def test_train_refuses_a_multi_machine_job():
  # Multi-machine jobs (task >= 0) run through `experiment()` (scalable_agent/distributed.py), not `train()`.
  with pytest.raises(ValueError, match='multi-machine job'):
    experiment.train('/tmp/unused', settings_lib.Settings(task=0, level_name='builtin/find_object'))


@pytest.mark.slow
def test_training_survives_a_killed_actor_checkpoints_resumes_and_tests(tmp_path):
  gin.clear_config()  # The released agent (another test's gin bindings, e.g. a parsed config, would change it).
  logdir = str(tmp_path)
  settings = settings_lib.Settings(level_name='builtin/find_object', num_actors=2, batch_size=2, unroll_length=5,
                                   num_action_repeats=1, width=12, height=12, total_environment_frames=200,
                                   test_num_episodes=3)
  kill = {}

  def hook(actor_threads, metrics):
    # Kill actor 0's environment process once, then give the actor time to notice and restart it, a few seconds per
    # learner step. The hook must return between waits: an actor blocked on a full queue (the learner is in this
    # hook) only finds its process dead at its next environment step, after the learner has taken a batch.
    frames = int(metrics['num_environment_frames'])
    if not kill and frames >= 40:
      kill['victim'] = actor_threads[0]
      kill['frames'] = frames
      os.kill(kill['victim'].process.pid, 9)
    elif kill and 'restarted_at' not in kill:
      deadline = time.monotonic() + 5
      while kill['victim'].num_restarts == 0 and time.monotonic() < deadline:
        time.sleep(.05)
      if kill['victim'].num_restarts:
        kill['restarted_at'] = frames

  assert experiment.train(logdir, settings, step_hook=hook) == 200
  # The actor restarted its process once, and the learner went on taking frames after that.
  assert kill['victim'].num_restarts == 1 and kill['frames'] < kill.get('restarted_at', 200) < 200, kill
  assert os.path.exists(os.path.join(logdir, 'model.ckpt-200.index'))
  tags = {
      v.tag
      for f in glob.glob(os.path.join(logdir, 'events.*'))
      for e in tf.compat.v1.train.summary_iterator(f)
      for v in e.summary.value
  }
  assert {'builtin/find_object/episode_return', 'builtin/find_object/episode_frames', 'learning_rate',
          'total_loss'} <= tags

  # A second run resumes from the checkpoint: the frame counter continues.
  resumed = experiment.train(logdir, settings_lib.Settings(**{**settings.__dict__, 'total_environment_frames': 300}))
  assert resumed == 300
  assert os.path.exists(os.path.join(logdir, 'model.ckpt-300.index'))

  results = experiment.test(logdir, settings)
  with open(os.path.join(logdir, 'test_results-300.json')) as f:
    assert json.load(f) == results
  assert results['num_environment_frames'] == 300
  returns = results['levels']['builtin/find_object']['returns']
  assert len(returns) == 3 and results['mean_return'] == pytest.approx(np.mean(returns))

  # A rerun on the same checkpoint writes a new file beside the first one, which stays as it was.
  with open(os.path.join(logdir, 'test_results-300.json'), 'rb') as f:
    first = f.read()
  again = experiment.test(logdir, settings)
  with open(os.path.join(logdir, 'test_results-300.1.json')) as f:
    assert json.load(f) == again
  with open(os.path.join(logdir, 'test_results-300.json'), 'rb') as f:
    assert f.read() == first


@pytest.mark.slow
def test_a_checkpoint_kept_every_n_frames_outlives_the_rotation_and_is_tested(tmp_path):
  gin.clear_config()
  logdir = str(tmp_path)
  # 10 frames per learner step (2 unrolls of 5 steps, 1 frame each), a checkpoint after every step.
  settings = settings_lib.Settings(level_name='builtin/find_object', num_actors=2, batch_size=2, unroll_length=5,
                                   num_action_repeats=1, width=12, height=12, total_environment_frames=100,
                                   test_num_episodes=2, checkpoint_interval_s=0, checkpoint_keep_every_frames=30)
  assert experiment.train(logdir, settings) == 100
  newest = sorted(int(name.split('-')[1].split('.')[0]) for name in os.listdir(logdir) if name.endswith('.index'))
  assert newest == [60, 70, 80, 90, 100]  # the manager keeps the 5 newest ...
  kept = checkpoints.kept_checkpoints(logdir)  # ... and the first at or past 0, 30, 60 and 90 frames stay
  assert kept == [(f, os.path.join(logdir, 'kept', str(f), f'model.ckpt-{f}')) for f in (0, 30, 60, 90)]
  # Resumed with a longer budget: the next multiple (120) is kept, 100 (the multiple of 90's) is not.
  longer = settings_lib.Settings(**{**settings.__dict__, 'total_environment_frames': 130})
  assert experiment.train(logdir, longer) == 130
  assert [f for f, _ in checkpoints.kept_checkpoints(logdir)] == [0, 30, 60, 90, 120]
  results = experiment.test(os.path.join(logdir, 'kept', '30'), settings)
  assert results['num_environment_frames'] == 30 and len(results['levels']['builtin/find_object']['returns']) == 2
  assert os.path.exists(os.path.join(logdir, 'kept', '30', 'test_results-30.json'))


def test_keeping_no_checkpoints_is_the_default():
  settings = settings_lib.Settings()
  assert settings.checkpoint_keep_every_frames == 0
  with pytest.raises(ValueError, match='checkpoint_keep_every_frames must be >= 0'):
    settings_lib.check_settings(settings_lib.Settings(level_name='builtin/find_object',
                                                      checkpoint_keep_every_frames=-1))


def test_test_mode_without_a_checkpoint_says_so(tmp_path):
  with pytest.raises(FileNotFoundError, match='needs a checkpoint'):
    experiment.test(str(tmp_path), settings_lib.Settings(level_name='builtin/find_object', width=12, height=12))
