"""HIRO's mazes as Gymnasium environments (uvf/environments/gymnasium_env.py).

References: Gymnasium's own `check_env`; the tf-agents environment HIRO trains on (uvf/environments/maze_env.py,
checked against the original's geometry in test_maze_env.py) for the observations; the papers' targets and the
original's evaluation reward (efficient-hrl context/configs/<maze>.gin: `task/negative_distance`, success = final
distance < 5) worked out by hand.
"""

import math
import os
import subprocess
import sys
import warnings

import gymnasium
from gymnasium import spaces
from gymnasium.utils import env_checker
import numpy as np
import pytest

import uvf  # noqa: F401  (registers the environments)
from uvf.environments import create_maze_env as cme
from uvf.environments import gymnasium_env

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ALL = [
    'AntMaze', 'AntPush', 'AntFall', 'AntBlock', 'AntBlockMaze', 'PointMaze', 'EgoAntMaze', 'EgoAntPush', 'EgoAntFall',
    'EgoAntBlock', 'EgoAntBlockMaze', 'EgoPointMaze'
]
# `check_env`'s generic advice, not a failed check: it prints the first two for Gymnasium's own MuJoCo environments
# too (gymnasium/envs/mujoco/ant_v5.py observes in Box(-inf, inf), as these do) and the third for any action space outside [-1, 1]; the original
# ant's torques are in [-30, 30] (the trained policies act there), so the bounds stay the original's.
ADVICE = ('A Box observation space minimum value is -infinity', 'A Box observation space maximum value is infinity',
          'For Box action spaces, we recommend using a symmetric and normalized space')
# Stable-Baselines3 takes an environment with `compute_reward` for a goal environment (`env_checker._is_goal_env`:
# `hasattr(env.unwrapped, 'compute_reward')`) and then requires a Dict observation with these keys, those of
# Gymnasium-Robotics' multi-goal API.
GOAL_KEYS = {'observation', 'achieved_goal', 'desired_goal'}


def checker_messages(env):
  with warnings.catch_warnings(record=True) as caught:
    warnings.simplefilter('always')
    env_checker.check_env(env)
  return [str(w.message) for w in caught]


def test_every_environment_is_registered_by_importing_uvf():
  registered = sorted(k for k in gymnasium.registry if k.startswith('hiro/'))
  assert registered == sorted(f'hiro/{name}-v0' for name in ALL)
  spec = gymnasium.spec('hiro/AntPush-v0')
  assert spec.max_episode_steps == 500 and spec.kwargs == {'env_name': 'AntPush'}


@pytest.mark.parametrize('name', ALL)
def test_check_env_passes_with_only_its_generic_advice(name):
  env = gymnasium.make(f'hiro/{name}-v0')
  messages = checker_messages(env.unwrapped)
  others = [m for m in messages if not any(a in m for a in ADVICE)]
  assert others == [], others
  env.close()


def test_check_env_with_rendering_and_the_goal_dict():
  for kwargs in ({'render_mode': 'rgb_array', 'width': 64, 'height': 48}, {'goal_conditioned': True}):
    env = gymnasium.make('hiro/AntMaze-v0', **kwargs)
    messages = checker_messages(env.unwrapped)
    assert [m for m in messages if not any(a in m for a in ADVICE)] == []
    env.close()


@pytest.mark.parametrize('name, dim, goal', [('AntMaze', 30, (0, 16)), ('AntPush', 30, (0, 19)),
                                             ('AntFall', 30, (0, 27, 4.5)), ('PointMaze', 7, (0, 8))])
def test_spaces_and_paper_goals(name, dim, goal):
  env = gymnasium.make(f'hiro/{name}-v0')
  assert env.observation_space.shape == (dim,) and env.observation_space.dtype == np.float32
  if name.startswith('Ant'):
    assert env.action_space.shape == (8,) and np.all(env.action_space.low == -30) and np.all(
        env.action_space.high == 30)
  else:  # distance in [-1, 1], turn in [-0.25, 0.25] radians
    np.testing.assert_array_equal(env.action_space.low, [-1, -0.25])
  np.testing.assert_array_equal(env.unwrapped.goal, np.asarray(goal, np.float32))


@pytest.mark.parametrize('name', ['AntMaze', 'AntPush', 'AntFall'])
def test_same_observations_as_the_training_environment_for_500_steps(name):
  reference = cme.create_maze_env(name)
  env = gymnasium.make(f'hiro/{name}-v0')
  actions = np.random.default_rng(7).uniform(-30, 30, (500, 8)).astype(np.float32)
  for seed in (11, 12):
    reference.seed(seed)
    expected = reference.reset().observation
    observation, _ = env.reset(seed=seed)
    np.testing.assert_array_equal(observation, expected)
    for t, action in enumerate(actions):
      expected = reference.step(action).observation
      observation, reward, terminated, truncated, _ = env.step(action)
      np.testing.assert_array_equal(observation, expected, err_msg=f'{name}, seed {seed}, step {t + 1}')
      assert not terminated and truncated == (t == 499)


def test_unseeded_resets_continue_the_seeded_sequence():
  env = gymnasium.make('hiro/AntMaze-v0')
  first, _ = env.reset(seed=5)
  second, _ = env.reset()
  reference = cme.create_maze_env('AntMaze')
  reference.seed(5)
  np.testing.assert_array_equal(reference.reset().observation, first)
  np.testing.assert_array_equal(reference.reset().observation, second)
  assert not np.array_equal(first, second)


def test_reward_distance_and_success_worked_by_hand():
  env = gymnasium.make('hiro/AntMaze-v0').unwrapped
  observation, info = env.reset(seed=0)
  x, y = float(observation[0]), float(observation[1])
  assert info['distance'] == pytest.approx(math.hypot(x - 0, y - 16), abs=1e-6) and not info['success']
  # The ant put 3 units from the goal: success (distance < 5) after the next step, reward = -distance.
  env.maze.wrapped_env.set_xy((0.0, 13.0))
  observation, reward, _, _, info = env.step(np.zeros(8, np.float32))
  distance = math.hypot(float(observation[0]), float(observation[1]) - 16)
  assert 2.5 < distance < 3.5 and info['success']
  assert reward == pytest.approx(-distance, abs=1e-6) and info['distance'] == pytest.approx(distance, abs=1e-6)


def test_antfall_compares_height_and_antblock_the_block():
  fall = gymnasium.make('hiro/AntFall-v0').unwrapped
  observation, info = fall.reset(seed=0)
  # The ant starts on the platform, z = 0.75 + 4 (maze height 0.5 x scaling 8) plus the reset noise (+-0.1).
  assert 4.6 < observation[2] < 4.9
  assert info['distance'] == pytest.approx(
      math.sqrt(observation[0]**2 + (observation[1] - 27)**2 + (observation[2] - 4.5)**2), abs=1e-5)
  block = gymnasium.make('hiro/AntBlock-v0').unwrapped
  observation, info = block.reset(seed=0)
  name = block.maze.movable_blocks[0][0]
  block_xy = block.maze.wrapped_env.get_body_com(name)[:2]
  np.testing.assert_allclose(observation[3:5], block_xy, atol=1e-6)
  assert info['distance'] == pytest.approx(math.hypot(block_xy[0] - 0, block_xy[1] - 16), abs=1e-5)


def test_goal_at_make_and_for_one_episode():
  env = gymnasium.make('hiro/AntMaze-v0', goal=(16, 0)).unwrapped
  observation, info = env.reset(seed=0)
  assert info['distance'] == pytest.approx(math.hypot(observation[0] - 16, observation[1]), abs=1e-5)
  observation, info = env.reset(options={'goal': [16, 16]})
  assert info['distance'] == pytest.approx(math.hypot(observation[0] - 16, observation[1] - 16), abs=1e-5)
  env.reset()
  np.testing.assert_array_equal(env.goal, [16, 0])
  with pytest.raises(ValueError, match=r'AntMaze: the goal must be 2 finite numbers'):
    env.reset(options={'goal': [0, 27, 4.5]})
  with pytest.raises(ValueError, match=r"Unknown HIRO environment 'AntMase'.*AntMaze"):
    gymnasium_env.HiroMazeEnv('AntMase')


def test_goal_dict_and_compute_reward():
  env = gymnasium.make('hiro/AntFall-v0', goal_conditioned=True).unwrapped
  observation, _ = env.reset(seed=1)
  np.testing.assert_array_equal(observation['achieved_goal'], observation['observation'][:3])
  np.testing.assert_array_equal(observation['desired_goal'], np.float32([0, 27, 4.5]))
  observation, reward, _, _, _ = env.step(np.ones(8, np.float32))
  assert env.compute_reward(observation['achieved_goal'], observation['desired_goal'], {}) == pytest.approx(reward)
  batch = env.compute_reward(np.zeros((4, 3)), np.tile([3.0, 4.0, 0.0], (4, 1)), {})
  np.testing.assert_allclose(batch, -5.0, atol=1e-9)


@pytest.mark.parametrize('name', ALL)
def test_only_the_goal_dict_variant_is_a_goal_environment(name):
  rng = np.random.default_rng(3)
  for goal_conditioned in (False, True):
    env = gymnasium.make(f'hiro/{name}-v0', goal_conditioned=goal_conditioned)
    unwrapped = env.unwrapped
    assert isinstance(unwrapped, gymnasium_env.HiroMazeEnv)
    assert hasattr(unwrapped, 'compute_reward') == goal_conditioned and not hasattr(env, 'compute_reward')
    if hasattr(unwrapped, 'compute_reward'):  # SB3's rule
      assert isinstance(env.observation_space, spaces.Dict) and set(env.observation_space.spaces) == GOAL_KEYS
    else:
      assert isinstance(env.observation_space, spaces.Box)
    if not goal_conditioned:
      env.close()
      continue
    env.reset(seed=0)
    action = rng.uniform(env.action_space.low, env.action_space.high).astype(np.float32)
    observation, reward, _, _, info = env.step(action)
    achieved, desired = observation['achieved_goal'], observation['desired_goal']
    # Exactly the step's reward: SB3's `check_env` compares with ==.
    assert unwrapped.compute_reward(achieved, desired, info) == reward
    # HER's call: goals [2, 3, G] (the episode's goal first, then others), one info per goal -> float64 [2, 3].
    goals = (desired + rng.normal(0, 4, (2, 3, len(desired)))).astype(np.float32)
    goals[0, 0] = desired
    achieved_goals = np.broadcast_to(achieved, goals.shape)
    batch = unwrapped.compute_reward(achieved_goals, goals, np.full((2, 3), info))
    assert batch.shape == (2, 3) and batch.dtype == np.float64 and batch[0, 0] == reward
    rows = [[unwrapped.compute_reward(a, g, info) for a, g in zip(aa, gg)] for aa, gg in zip(achieved_goals, goals)]
    np.testing.assert_array_equal(batch, rows)
    difference = achieved_goals.astype(np.float64) - goals.astype(np.float64)
    np.testing.assert_allclose(batch, -np.sqrt((difference**2).sum(axis=-1) + 1e-10), rtol=1e-12)
    env.close()


def test_the_constructor_picks_the_goal_environment_class():
  for args, kwargs in ((('PointMaze', None, True), {}), (('PointMaze',), {'goal_conditioned': True})):
    env = gymnasium_env.HiroMazeEnv(*args, **kwargs)
    assert type(env) is gymnasium_env.GoalConditionedHiroMazeEnv and isinstance(env.observation_space, spaces.Dict)
  env = gymnasium_env.HiroMazeEnv('PointMaze', goal_conditioned=False)
  assert type(env) is gymnasium_env.HiroMazeEnv and not hasattr(env, 'compute_reward')
  with pytest.raises(ValueError, match='GoalConditionedHiroMazeEnv observes the goal dict'):
    gymnasium_env.GoalConditionedHiroMazeEnv('PointMaze', goal_conditioned=False)


def test_render_frame():
  env = gymnasium.make('hiro/AntPush-v0', render_mode='rgb_array', width=96, height=64)
  env.reset(seed=0)
  frame = env.render()
  assert frame.shape == (64, 96, 3) and frame.dtype == np.uint8 and frame.std() > 0
  env.close()


def test_import_uvf_then_make_needs_no_tensorflow():
  code = (
      "import sys, gymnasium, uvf; env = gymnasium.make('hiro/AntFall-v0'); env.reset(seed=0); "
      "env.step(env.action_space.sample()); print(sorted(m for m in ('tensorflow', 'tf_agents') if m in sys.modules))")
  out = subprocess.run([sys.executable, '-c', code], cwd=REPO, capture_output=True, text=True, timeout=300, env={
      **os.environ, 'PYTHONPATH': REPO
  }, check=True)
  assert out.stdout.strip().splitlines()[-1] == '[]'
