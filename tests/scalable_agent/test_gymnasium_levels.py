"""Gymnasium environments as IMPALA levels (scalable_agent/gymnasium_levels.py): real MiniGrid, BabyAI and ALE
environments; frames against the environment's own observation, rewards against hand-worked episodes, the
unsupported ones against their one-line error, several levels at once, and a short training run with success
rates."""

import glob
import json
import os
import subprocess
import sys
import threading

import gin
import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import environments
from scalable_agent import experiment
from scalable_agent import gymnasium_levels
from scalable_agent import progress as progress_lib
from scalable_agent import settings as settings_lib

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
GO_TO_LOCAL = 'gymnasium/BabyAI-GoToLocal-v0'
EMPTY = 'gymnasium/MiniGrid-Empty-5x5-v0'
RGB_VIEW = 'minigrid.wrappers.RGBImgPartialObsWrapper'
# MiniGrid's actions.
LEFT, RIGHT, FORWARD = 0, 1, 2


@pytest.fixture(autouse=True)
def _clear_gin():
  gin.clear_config()
  yield
  gin.clear_config()


def _make(level, **kwargs):
  kwargs.setdefault('width', 56)
  kwargs.setdefault('height', 56)
  return environments.create_environment(level, seed=kwargs.pop('seed', 1), **kwargs)


def test_babyai_frame_is_the_symbolic_view_scaled_and_the_mission_is_the_instruction():
  env = _make(GO_TO_LOCAL, num_action_repeats=1)
  frame, instruction = env.initial()
  view = env.env.unwrapped.gen_obs()  # the environment's own observation of the current state
  assert instruction == view['mission'] and instruction.startswith('go to ')
  # 7 x 7 cells to 56 x 56 pixels: each cell's (object, colour, state) code repeated over 8 x 8 pixels, unchanged.
  np.testing.assert_array_equal(frame, np.repeat(np.repeat(view['image'], 8, axis=0), 8, axis=1))
  for action in (LEFT, FORWARD, RIGHT):
    _, done, (frame, instruction) = env.step(action)
    if not done:
      view = env.env.unwrapped.gen_obs()
      np.testing.assert_array_equal(frame[::8, ::8], view['image'])
  env.close()


def test_the_instruction_blind_ablation_sees_an_empty_instruction():
  gin.parse_config('GymnasiumEnvironment.use_instruction = False')
  env = _make(GO_TO_LOCAL)
  frame, instruction = env.initial()
  assert instruction == '' and frame.shape == (56, 56, 3)
  assert env.step(FORWARD)[2][1] == ''
  env.close()


def test_a_shrunk_image_is_the_area_average():
  """MiniGrid's view in pixels (56 x 56) to 28 x 28: each agent pixel is the mean of a 2 x 2 block, rounded."""
  gin.parse_config(f"GymnasiumEnvironment.wrappers = ['{RGB_VIEW}']")
  env = _make(GO_TO_LOCAL, width=28, height=28)
  frame, _ = env.initial()
  pixels = env.env.observation(env.env.unwrapped.gen_obs())['image'].astype(np.float64)
  expected = np.floor(pixels.reshape(28, 2, 28, 2, 3).mean(axis=(1, 3)) + 0.5)
  np.testing.assert_array_equal(frame, expected.astype(np.uint8))
  env.close()


def test_an_episode_reward_and_the_reset_that_follows():
  """MiniGrid-Empty-5x5: the agent starts at (1, 1) facing right, the goal is at (3, 3). Forward, forward, turn
  right, forward, forward reaches it in 5 steps: reward 1 - 0.9 x 5 / max_steps (4 x 5 x 5 = 100) = 0.955, done,
  and the next frame is the next episode's first (the agent back at the start)."""
  env = _make(EMPTY, num_action_repeats=1)
  first, instruction = env.initial()
  assert instruction == 'get to the green goal square'
  rewards, dones = [], []
  for action in (FORWARD, FORWARD, RIGHT, FORWARD, FORWARD):
    reward, done, (frame, _) = env.step(action)
    rewards.append(float(reward))
    dones.append(bool(done))
  assert dones == [False] * 4 + [True]
  np.testing.assert_allclose(rewards, [0, 0, 0, 0, 1 - 0.9 * 5 / 100], rtol=1e-6)
  np.testing.assert_array_equal(frame, first)  # Empty-5x5 starts every episode the same way
  env.close()


def test_action_repeats_play_the_action_again_and_stop_at_the_episode_end():
  """Five environment steps per agent step on MiniGrid-Empty-5x5 (start (1, 1) facing right, goal (3, 3)): forward
  x 5 moves to (3, 1) and bumps the wall 3 times; right x 5 turns 5 quarters: facing down; forward x 5 reaches the
  goal at its 2nd step, the episode's 12th: reward 1 - 0.9 x 12 / 100, done, and the 3 remaining repeats are not
  played (the new episode is at step 0)."""
  env = _make(EMPTY, num_action_repeats=5)
  env.initial()
  assert env.step(FORWARD)[:2] == (0., False)
  assert env.env.unwrapped.agent_pos == (3, 1)
  assert env.step(RIGHT)[:2] == (0., False)
  assert env.env.unwrapped.agent_dir == 1 and env.env.unwrapped.step_count == 10
  reward, done, _ = env.step(FORWARD)
  assert bool(done) and float(reward) == pytest.approx(1 - 0.9 * 12 / 100)
  assert env.env.unwrapped.step_count == 0 and env.env.unwrapped.agent_pos == (1, 1)
  env.close()


def test_ale_through_gymnasium_gives_its_screens_resized():
  env = _make('gymnasium/ALE/Pong-v5', width=84, height=84)
  frame, instruction = env.initial()
  assert frame.shape == (84, 84, 3) and frame.dtype == np.uint8 and instruction == ''
  reward, done, (frame, _) = env.step(0)
  assert reward.dtype == np.float32 and not done and frame.shape == (84, 84, 3)
  constructor = environments.environment_constructor('gymnasium/ALE/Pong-v5', seed=1, width=84, height=84)
  assert constructor.num_actions == 6 and constructor.frame_shape == (84, 84, 3)
  env.close()


@pytest.mark.parametrize('level, message', [
    ('gymnasium/CartPole-v1', 'gymnasium/CartPole-v1: observation space Box(4,) float32 has no image; supported: '
     'Discrete actions and an image observation'),
    ('gymnasium/Pendulum-v1', 'gymnasium/Pendulum-v1: action space Box(1,) float32 is not Discrete(n); supported:'),
    ('gymnasium/NoSuchEnvironment-v0', "gymnasium/NoSuchEnvironment-v0: Gymnasium cannot make 'NoSuchEnvironment-v0'"),
])
def test_unsupported_environments_get_one_error_saying_what_is_supported(level, message):
  with pytest.raises(gymnasium_levels.UnsupportedEnvironmentError) as error:
    environments.check_level_available(level)
  assert str(error.value).startswith(message) and '\n' not in str(error.value)


@pytest.mark.parametrize(
    'config, words',
    [
        ('configs/impala_builtin.gin', 'observation space Box(4,) float32 has no image'),
        # BabyAI's wrapper (MiniGrid's view in pixels) cannot wrap CartPole.
        ('configs/impala_babyai.gin', 'GymnasiumEnvironment.wrappers: minigrid.wrappers.RGBImgPartialObsWrapper cannot '
         'wrap it'),
    ])
def test_run_train_refuses_an_unsupported_environment_in_one_line(tmp_path, config, words):
  result = subprocess.run([
      sys.executable, 'run_train.py', config, '--level_name=gymnasium/CartPole-v1', '--train_dir',
      str(tmp_path / 'run')
  ], cwd=REPO_ROOT, capture_output=True, text=True, timeout=300, check=False)
  assert result.returncode == 2, result.stderr
  errors = [line for line in result.stderr.splitlines() if 'CartPole' in line]
  assert len(errors) == 1 and words in errors[0], result.stderr
  assert 'supported: Discrete actions and an image observation' in errors[0]
  assert 'Traceback' not in result.stderr
  assert not os.path.exists(tmp_path / 'run' / 'checkpoint')


def test_levels_of_one_run_are_a_comma_separated_list_sharing_one_agent():
  both = f'{GO_TO_LOCAL}, gymnasium/BabyAI-GoToRedBallGrey-v0'
  assert settings_lib.training_levels(both) == [GO_TO_LOCAL, 'gymnasium/BabyAI-GoToRedBallGrey-v0']
  assert settings_lib.test_levels(both) == settings_lib.training_levels(both)
  assert settings_lib.actor_levels(both, 3) == [GO_TO_LOCAL, 'gymnasium/BabyAI-GoToRedBallGrey-v0', GO_TO_LOCAL]
  settings_lib.check_levels(settings_lib.Settings(level_name=both, width=56, height=56))
  with pytest.raises(
      ValueError, match='same number of actions and frame shape; got gymnasium/BabyAI-GoToLocal-v0: '
      '7 actions, frames 56x56x3; gymnasium/ALE/Pong-v5: 6 actions, frames 56x56x3'):
    settings_lib.check_levels(
        settings_lib.Settings(level_name=f'{GO_TO_LOCAL},gymnasium/ALE/Pong-v5', width=56, height=56))
  with pytest.raises(ValueError, match='distinct non-empty names'):
    settings_lib.check_levels(settings_lib.Settings(level_name=f'{GO_TO_LOCAL},{GO_TO_LOCAL}'))


def _scalars(logdir):
  return [(v.tag, e.step, float(tf.make_ndarray(v.tensor)))
          for f in sorted(glob.glob(os.path.join(logdir, 'events.*')))
          for e in tf.compat.v1.train.summary_iterator(f)
          for v in e.summary.value]


def test_two_babyai_levels_train_with_success_rates_and_test_mode_reports_them(tmp_path):
  gin.parse_config(['episode_success.above = 0.', "agent_network.network = 'shallow'"])
  levels = f'{EMPTY},gymnasium/BabyAI-GoToRedBallGrey-v0'
  settings = settings_lib.Settings(level_name=levels, num_actors=2, batch_size=2, unroll_length=10, width=28, height=28,
                                   num_action_repeats=1, total_environment_frames=400, test_num_episodes=3,
                                   actor_inference='numpy')
  logdir = str(tmp_path)
  assert experiment.train(logdir, settings) == 400
  tags = {tag for tag, _, _ in _scalars(logdir)}
  for level in settings_lib.training_levels(levels):
    assert {level + '/episode_return', level + '/success_rate'} <= tags, tags
  assert {'levels/mean_return', 'levels/success_rate'} <= tags
  results = experiment.test(logdir, settings)
  for result in results['levels'].values():
    assert result['success_rate'] == np.mean(np.array(result['returns']) > 0)
  assert results['success_rate'] == np.mean([r['success_rate'] for r in results['levels'].values()])
  with open(glob.glob(os.path.join(logdir, 'test_results-400.json'))[0], encoding='utf-8') as f:
    assert json.load(f)['success_rate'] == results['success_rate']


def test_success_rates_in_the_progress_line_and_the_level_means(tmp_path):
  gin.parse_config('episode_success.above = 0.')
  levels = 'gymnasium/A-v0,gymnasium/B-v0'
  summaries = progress_lib.Summaries(str(tmp_path), settings_lib.Settings(level_name=levels))
  summaries.episodes([('gymnasium/A-v0', r, 5) for r in (0., .5, .9, 0.)] + [('gymnasium/B-v0', .2, 5)], 100)
  assert summaries.report() == ('episodes 5 (5 since the start); return (last 4) gymnasium/A-v0 0.35 (success 50%), '
                                '(last 1) gymnasium/B-v0 0.20 (success 100%)')
  # Means over the levels: returns (0.35 + 0.2) / 2, success rates (0.5 + 1) / 2.
  assert summaries.level_means() == pytest.approx({
      'levels/mean_return': 0.275,
      'gymnasium/A-v0/success_rate': .5,
      'gymnasium/B-v0/success_rate': 1.,
      'levels/success_rate': .75
  })
  summaries.close()


def test_multi_machine_actors_run_their_gymnasium_level_with_the_gin_settings():
  """One actor process with two tasks of a two-level run: task i acts on level i (round robin), in MiniGrid's pixel
  view (the gin wrapper travels to the environment processes), with its mission as the instruction."""
  from scalable_agent import distributed  # pylint: disable=g-import-not-at-top  (Reverb)
  from scalable_agent import transport  # pylint: disable=g-import-not-at-top
  gin.parse_config(f"GymnasiumEnvironment.wrappers = ['{RGB_VIEW}']")
  levels = [GO_TO_LOCAL, 'gymnasium/BabyAI-GoToRedBallGrey-v0']
  settings = settings_lib.Settings(level_name=','.join(levels), num_actors=2, batch_size=1, unroll_length=3,
                                   num_action_repeats=1, width=14, height=14, task=0, job_name='actor',
                                   actors_per_process=2)
  agent = settings_lib.make_agent(settings, levels[0])
  unroll_spec = transport.unroll_signature(settings, agent.num_actions, (14, 14, 3))
  server = transport.make_server(unroll_spec, transport.weights_signature(agent), 0, 'test')
  try:
    publisher = transport.WeightsPublisher(server.localhost_client(), agent)
    publisher.publish(0, step=0, block=True)
    settings = settings_lib.Settings(**{**settings.__dict__, 'learner_address': f'localhost:{server.port}'})
    dataset = transport.learner_dataset(f'localhost:{server.port}', unroll_spec, batch_size=1)
    items = []  # read while the actors write (the queue holds one unroll)
    reader = threading.Thread(target=lambda: items.extend(dataset.take(2)), daemon=True)
    reader.start()
    assert distributed.run_actor(settings, max_unrolls=1) == 2
    reader.join(timeout=60)
    unrolls = [item.unroll for item in items]
    by_level = {u.level_name.numpy()[0].decode(): u for u in unrolls}
    assert sorted(by_level) == sorted(levels)
    instructions = {level: u.env_outputs.observation[1].numpy()[0, 0].decode() for level, u in by_level.items()}
    assert instructions['gymnasium/BabyAI-GoToRedBallGrey-v0'] == 'go to the red ball'
    assert instructions[GO_TO_LOCAL].startswith('go to ')
    frames = by_level[GO_TO_LOCAL].env_outputs.observation[0].numpy()
    assert frames.shape == (4, 1, 14, 14, 3) and frames.max() > 20  # pixels, not MiniGrid's codes (at most 10)
    publisher.close()
  finally:
    server.stop()
