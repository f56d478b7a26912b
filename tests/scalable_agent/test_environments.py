"""environments.py: DeepMind Lab against a fake `deepmind_lab`, Atari with real ALE frames, the built-in task, and
FlowEnvironment on a hand-worked episode.

The DMLab wrapper is checked against tests/fakes/deepmind_lab.py (the documented Lab API, recording its calls); those
tests are skipped where the real `deepmind_lab` is installed. Expected values come from the original
(deepmind/scalable_agent environments.py, and experiment.py `create_environment`, L418-439).
"""

import functools
import importlib
import importlib.util
from pathlib import Path
import sys

import numpy as np
import pytest

from scalable_agent import atari
from scalable_agent import builtin
from scalable_agent import environment_specs
from scalable_agent import environments
from scalable_agent.environments import StepOutput
from scalable_agent.environments import StepOutputInfo

FAKE_DMLAB_PATH = Path(__file__).resolve().parents[1] / 'fakes' / 'deepmind_lab.py'


@pytest.fixture
def fake_lab(monkeypatch):
  """The fake `deepmind_lab` module as `deepmind_lab`, unless the real one is importable (then skip)."""
  try:
    real = importlib.import_module('deepmind_lab')
  except ImportError:
    real = None
  if real is not None and not getattr(real, 'IS_FAKE', False):
    pytest.skip('the real deepmind_lab is installed; these tests read the calls recorded by the fake')
  spec = importlib.util.spec_from_file_location('deepmind_lab', FAKE_DMLAB_PATH)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  monkeypatch.setitem(sys.modules, 'deepmind_lab', module)
  return module


def _seeds(seed, n):
  """The first n DMLab reset seeds of an environment seeded `seed` (as the original `PyProcessDmLab._reset`)."""
  random_state = np.random.RandomState(seed)
  return [random_state.randint(0, 2**31 - 1) for _ in range(n)]


# --------------------------------------------------------------------------------------------------------------------
# DeepMind Lab.


def test_default_action_set_is_the_original():
  assert environments.DEFAULT_ACTION_SET == ((0, 0, 0, 1, 0, 0, 0), (0, 0, 0, -1, 0, 0, 0), (0, 0, -1, 0, 0, 0, 0),
                                             (0, 0, 1, 0, 0, 0, 0), (-20, 0, 0, 0, 0, 0, 0), (20, 0, 0, 0, 0, 0, 0),
                                             (-20, 0, 0, 1, 0, 0, 0), (20, 0, 0, 1, 0, 0, 0), (0, 0, 0, 0, 1, 0, 0))


def test_dmlab_constructor_as_the_original_create_environment():
  c = environments.environment_constructor('rooms_watermaze', seed=3)
  assert c.env_type is environments.PyProcessDmLab
  assert c.kwargs == {
      'level': 'contributed/dmlab30/rooms_watermaze',
      'num_action_repeats': 4,
      'seed': 3,
      'config': {
          'width': 96,
          'height': 72,
          'datasetPath': '',
          'logLevel': 'WARN'
      }
  }
  assert c.num_actions == 9 and c.frame_shape == (72, 96, 3)
  # Outside DMLab-30: no prefix. Test mode: hold-out levels and the evaluation mixer seed.
  c = environments.environment_constructor('seekavoid_arena_01', seed=1, is_test=True, width=32, height=24,
                                           dataset_path='/data', num_action_repeats=2)
  assert c.kwargs == {
      'level': 'seekavoid_arena_01',
      'num_action_repeats': 2,
      'seed': 1,
      'config': {
          'width': 32,
          'height': 24,
          'datasetPath': '/data',
          'logLevel': 'WARN',
          'allowHoldOutLevels': 'true',
          'mixerSeed': 0x600D5EED
      }
  }
  assert environments.environment_constructor(
      'rooms_collect_good_objects_test', 1,
      True).kwargs['level'] == ('contributed/dmlab30/rooms_collect_good_objects_test')
  with pytest.raises(ValueError, match='suite, not a level'):
    environments.environment_constructor('dmlab30', 1)
  with pytest.raises(
      ValueError, match='unknown option.*full_action_space.*options of PyProcessDmLab are: '
      'runfiles_path, level_cache, action_set'):
    environments.environment_constructor('rooms_watermaze', 1, full_action_space=True)


def test_dmlab_lab_arguments(fake_lab):
  env = environments.create_environment('rooms_watermaze', seed=3, is_test=True)
  lab, = fake_lab.INSTANCES
  assert lab.level == 'contributed/dmlab30/rooms_watermaze'
  assert lab.observation_names == ['RGB_INTERLEAVED', 'INSTR']
  assert lab.config == {
      'width': '96',
      'height': '72',
      'datasetPath': '',
      'logLevel': 'WARN',
      'allowHoldOutLevels': 'true',
      'mixerSeed': '1611489005'
  }
  assert lab.level_cache is None and lab.renderer == 'software'
  env.close()
  assert lab.closed


def test_dmlab_steps_seeds_actions_and_auto_reset(fake_lab):
  env = environments.create_environment('explore_goal_locations_small', seed=5, width=8, height=6, num_action_repeats=4)
  lab, = fake_lab.INSTANCES
  frame, instruction = env.initial()
  seeds = _seeds(5, 3)
  assert lab.reset_seeds == seeds[:1]
  assert frame.shape == (6, 8, 3) and frame.dtype == np.uint8 and instruction == f'episode {seeds[0]}'
  assert (frame[..., 0] == 0).all()  # First frame of the episode.

  # The fake's episodes last 10 frames: agent steps of 4, 4, then 2 frames (done).
  expected = [(4., False, 4), (40., False, 8), (2., True, 0)]  # (reward, done, frames into the current episode)
  for action, (reward, done, frames) in zip([0, 8, 6], expected):
    r, d, (frame, instruction) = env.step(action)
    assert r.dtype == np.float32 and r.shape == () and r == reward
    assert d.dtype == np.bool_ and d.shape == () and d == done
    assert frame.dtype == np.uint8 and frame.shape == (6, 8, 3) and (frame[..., 0] == frames).all()
  # After done: the observation is the next episode's first, reset with the next seed of the RandomState.
  assert lab.reset_seeds == seeds[:2]
  assert instruction == f'episode {seeds[1]}' and (frame[..., 1] == seeds[1] % 256).all()
  assert (frame[..., 2] == 2).all()  # Second episode.

  steps = [args for name, args in lab.calls if name == 'step']
  assert [args['num_steps'] for args in steps] == [4, 4, 4]
  for action, args in zip([0, 8, 6], steps):
    assert args['action'].dtype == np.intc
    np.testing.assert_array_equal(args['action'], environments.DEFAULT_ACTION_SET[action])
  with pytest.raises(ValueError, match=r'integer index in \[0, 9\)'):
    env.step(9)


def test_dmlab_specs(fake_lab):
  c = environments.environment_constructor('rooms_watermaze', seed=1)
  frame_spec, instruction_spec = c.tensor_specs('initial')
  assert frame_spec.shape.as_list() == [72, 96, 3] and frame_spec.dtype.name == 'uint8'
  assert instruction_spec.shape.as_list() == [] and instruction_spec.dtype.name == 'string'
  reward_spec, done_spec, _ = c.tensor_specs('step')
  assert (reward_spec.dtype.name, done_spec.dtype.name) == ('float32', 'bool')
  # As the original: DMLab's 320 x 240 when the config has no size.
  spec = environments.EnvironmentConstructor(environments.PyProcessDmLab, {'config': {}}).tensor_specs('initial')
  assert spec[0].shape.as_list() == [240, 320, 3]
  frame, instruction = c().initial()
  assert frame.shape == (72, 96, 3) and isinstance(instruction, str)


def test_dmlab_missing_module(monkeypatch):
  monkeypatch.setitem(sys.modules, 'deepmind_lab', None)
  with pytest.raises(environment_specs.MissingDependencyError, match='needs the module deepmind_lab.*bazel build'):
    environments.create_environment('rooms_watermaze', seed=1)


# --------------------------------------------------------------------------------------------------------------------
# Atari (real ALE).


def _raw_ale(game, seed):
  """An ALE set up as AtariEnvironment(game, seed=seed) sets up its own, and the number of no-ops it will play."""
  from ale_py import ALEInterface  # pylint: disable=g-import-not-at-top
  from ale_py import LoggerMode  # pylint: disable=g-import-not-at-top
  from ale_py import roms  # pylint: disable=g-import-not-at-top
  random_state = np.random.RandomState(seed)
  ALEInterface.setLoggerMode(LoggerMode.Error)
  ale = ALEInterface()
  ale.setInt('random_seed', int(random_state.randint(0, 2**31 - 1)))
  ale.setFloat('repeat_action_probability', 0.0)
  ale.setInt('frame_skip', 1)
  ale.loadROM(roms.get_rom_path(game))
  return ale, random_state.randint(1, 31)


@functools.lru_cache(maxsize=None)
def _area_weights(source, target):
  """[target, source]: the overlap of each target pixel with each source pixel, over the target pixel's width."""
  w = np.zeros((target, source))
  for i in range(target):
    lo, hi = i * source / target, (i + 1) * source / target
    for j in range(int(np.floor(lo)), min(int(np.ceil(hi)), source)):
      w[i, j] = (min(hi, j + 1) - max(lo, j)) / (hi - lo)
  return w


def _reference_frame(screens, height, width):
  """Max over the screens, area-averaged to [height, width] in float64 from the definition (pixel overlaps)."""
  screen = np.max(np.stack(screens), axis=0).astype(np.float64)
  rows = np.tensordot(_area_weights(screen.shape[0], height), screen, axes=(1, 0))  # [height, W, C]
  return np.tensordot(rows, _area_weights(screen.shape[1], width), axes=(1, 1)).transpose(0, 2, 1)


def test_atari_frames_repeats_noops_and_max_pool():
  """300 agent steps of Pong against a raw ALE driven frame by frame: rewards, frame counts and frames agree."""
  seed, height, width, repeats = 7, 84, 84, 4
  env = environments.create_environment('atari/pong', seed, width=width, height=height, num_action_repeats=repeats)
  ale, num_noops = _raw_ale('pong', seed)
  actions = ale.getMinimalActionSet()
  assert env.num_actions == len(actions) == 6

  frame, instruction = env.initial()
  assert frame.shape == (84, 84, 3) and frame.dtype == np.uint8 and instruction == ''
  for _ in range(num_noops):
    ale.act(actions[0])
  env_ale = env.ale
  assert env_ale.getEpisodeFrameNumber() == ale.getEpisodeFrameNumber() == num_noops
  assert np.abs(frame - _reference_frame([ale.getScreenRGB()], height, width)).max() <= 1

  rng = np.random.RandomState(0)
  rewards, pooled_differs = [], False
  for _ in range(300):
    action = rng.randint(6)
    reward, done, (frame, instruction) = env.step(action)
    expected_reward, screens = 0., []
    for _ in range(repeats):
      expected_reward += ale.act(actions[action])
      screens = (screens + [ale.getScreenRGB()])[-2:]
    assert not done and reward.dtype == np.float32 and reward == expected_reward
    assert env_ale.getEpisodeFrameNumber() == ale.getEpisodeFrameNumber()
    reference = _reference_frame(screens, height, width)
    assert np.abs(frame - reference).max() <= 1
    pooled_differs |= np.abs(_reference_frame(screens[-1:], height, width) - reference).max() > 1
    rewards.append(reward)
  assert pooled_differs  # The max-pool mattered on some step (the ball and paddles move).
  assert -1. in rewards  # A point was lost: rewards are passed through unclipped and summed.


def test_atari_deterministic_given_seed_and_settings():

  def run(seed, **options):
    env = environments.create_environment('atari/breakout', seed, width=42, height=42, **options)
    frames = [env.initial()[0]]
    rng = np.random.RandomState(1)
    out = []
    for _ in range(60):
      reward, done, (frame, _) = env.step(rng.randint(env.num_actions))
      out.append((float(reward), bool(done)))
      frames.append(frame)
    return out, np.stack(frames)

  steps, frames = run(3)
  assert frames.shape == (61, 42, 42, 3)
  steps_again, frames_again = run(3)
  assert steps == steps_again and np.array_equal(frames, frames_again)
  _, other_frames = run(4)  # Another number of no-ops.
  assert not np.array_equal(frames, other_frames)
  _, gray = run(3, grayscale=True)
  assert gray.shape == (61, 42, 42, 1)  # Luma of the RGB frames, one channel (resizing and luma commute).
  luma = frames.astype(np.float64) @ np.array([0.299, 0.587, 0.114])
  assert np.abs(gray[..., 0] - luma).max() <= 1.5


def test_atari_life_loss_ends_training_episodes_only():
  """Breakout, 5 lives: training episodes end at each lost life without a reset; test episodes are whole games."""

  def play(is_test):
    env = environments.create_environment('atari/breakout', 0, is_test, width=42, height=42)
    env.initial()
    ale = env.ale
    rng = np.random.RandomState(0)
    lives_at_done = []
    while len(lives_at_done) < 6:
      lives = ale.lives()
      _, done, _ = env.step(rng.randint(env.num_actions))
      if done:
        lives_at_done.append((lives, ale.lives()))
      if len(lives_at_done) > 0 and is_test:
        break
    return lives_at_done

  assert play(is_test=False) == [(5, 4), (4, 3), (3, 2), (2, 1), (1, 5), (5, 4)]  # (1, 5): game over, new game.
  assert play(is_test=True) == [(1, 5)]
  assert environments.environment_constructor('atari/pong', 1, True).kwargs['terminal_on_life_loss'] is False


def test_atari_sizes_and_errors():
  c = environments.environment_constructor('atari/pong', 1, full_action_space=True)
  assert c.num_actions == 18 and c.frame_shape == (72, 96, 3)  # The original flags' default size.
  assert c().initial()[0].shape == (72, 96, 3)
  with pytest.raises(ValueError, match="unknown Atari game 'pongg'"):
    atari.AtariEnvironment('pongg')
  with pytest.raises(
      ValueError, match='unknown option.*sticky.*options of AtariEnvironment are: noop_max, '
      'full_action_space, terminal_on_life_loss, grayscale, max_episode_frames, '
      'frame_stack'):
    environments.environment_constructor('atari/pong', 1, sticky=True)


def test_atari_noop_starts():
  """Each game starts with n no-op frames, n uniform in [1, noop_max] drawn from RandomState(seed) after ALE's seed
  (Espeholt et al. 2018, Table 4: "up to 30 no-ops"); noop_max = 0 starts at once; a new game draws a new n."""
  counts = []
  for seed in range(6):
    env = environments.create_environment('atari/pong', seed, width=42, height=42)
    env.initial()
    random_state = np.random.RandomState(seed)
    random_state.randint(0, 2**31 - 1)
    assert env.episode_frame_number == random_state.randint(1, 31)
    counts.append(env.episode_frame_number)
  assert min(counts) >= 1 and max(counts) <= 30 and len(set(counts)) >= 4
  env = environments.create_environment('atari/pong', 0, width=42, height=42, noop_max=0)
  env.initial()
  assert env.episode_frame_number == 0
  env = environments.create_environment('atari/breakout', 3, True, width=42, height=42, noop_max=7)
  env.initial()
  random_state = np.random.RandomState(3)
  random_state.randint(0, 2**31 - 1)
  assert env.episode_frame_number == random_state.randint(1, 8)
  rng, done = np.random.RandomState(0), False
  while not done:  # A whole game (test mode), then the next one starts with its no-op start.
    _, done, _ = env.step(rng.randint(env.num_actions))
  assert env.episode_frame_number == random_state.randint(1, 8)


class _ReferenceAtari:
  """The documented preprocessing re-done on a raw ALE, frame by frame (an independent reference):
  a game starts with RandomState(seed) no-ops; a step repeats the action up to 4 frames, stopping at a lost life
  (training) or a game over; the frame is the luma (BT.601) of the max of the step's last two screens, area-averaged
  in float64 (`_reference_frame`); the observation is the last 4 frames, oldest first, refilled with the first frame
  at every episode start."""

  def __init__(self, game, seed, terminal_on_life_loss, size=42, stack=4):
    self.ale, _ = _raw_ale(game, seed)
    self.random_state = np.random.RandomState(seed)
    self.random_state.randint(0, 2**31 - 1)  # ALE's seed, drawn first.
    self.actions = self.ale.getMinimalActionSet()
    self.terminal_on_life_loss, self.size, self.stack_size = terminal_on_life_loss, size, stack
    self.frames = []

  def grey(self, screens):
    rgb = _reference_frame(screens, self.size, self.size)
    return rgb @ np.array([0.299, 0.587, 0.114])

  def _start_episode(self, frame):
    self.frames = [frame] * self.stack_size

  def new_game(self):
    from ale_py import Action  # pylint: disable=g-import-not-at-top
    self.ale.reset_game()
    for _ in range(self.random_state.randint(1, 31)):
      self.ale.act(Action.NOOP)
    self.lives = self.ale.lives()
    self._start_episode(self.grey([self.ale.getScreenRGB()]))
    return np.stack(self.frames, axis=-1)

  def step(self, action):
    reward, screens, life_lost = 0., [], False
    for _ in range(4):
      reward += self.ale.act(self.actions[action])
      screens.append(self.ale.getScreenRGB())
      life_lost = self.terminal_on_life_loss and self.ale.lives() < self.lives
      self.lives = self.ale.lives()
      if life_lost or self.ale.game_over():
        break
    if self.ale.game_over():
      return reward, True, self.new_game()
    frame = self.grey(screens[-2:])
    if life_lost:
      self._start_episode(frame)
    else:
      self.frames = self.frames[1:] + [frame]
    return reward, life_lost, np.stack(self.frames, axis=-1)


@pytest.mark.parametrize('game, is_test, num_steps', [('pong', False, 150), ('breakout', False, 400),
                                                      ('breakout', True, 400)])
def test_atari_grey_frame_stack_against_the_emulator_frame_by_frame(game, is_test, num_steps):
  """Grey 4-frame stacks, max-pool, rewards and episode ends against `_ReferenceAtari` on the same emulator: Pong,
  and Breakout through lost lives (training: each ends an episode and refills the stack; test mode: whole games)."""
  env = environments.create_environment(f'atari/{game}', 5, is_test, width=42, height=42, grayscale=True, frame_stack=4)
  reference = _ReferenceAtari(game, 5, terminal_on_life_loss=not is_test)
  observation, _ = env.initial()
  expected = reference.new_game()
  assert observation.shape == (42, 42, 4) and observation.dtype == np.uint8
  assert np.abs(observation - expected).max() <= 1
  assert (observation == observation[..., :1]).all()  # The first observation: its frame 4 times.
  rng = np.random.RandomState(0)
  dones, lives_lost, games_over, pooled_differs = 0, 0, 0, False
  for _ in range(num_steps):
    action = rng.randint(env.num_actions)
    lives = reference.ale.lives()
    reward, done, (observation, _) = env.step(action)
    expected_reward, expected_done, expected = reference.step(action)
    assert reward == expected_reward and done == expected_done
    assert np.abs(observation - expected).max() <= 1
    if not done:
      pooled_differs |= np.abs(reference.grey(reference.ale.getScreenRGB()[None]) - expected[..., -1]).max() > 1
    dones += done
    lives_lost += reference.ale.lives() != lives  # A lost life, or a game over and a new game.
    games_over += reference.ale.lives() > lives
  assert pooled_differs or game == 'breakout'  # Pong's ball and paddles move between frames: the max-pool mattered.
  if game == 'breakout':
    assert games_over >= 1  # Past a game over: a new game with its own no-op start.
    assert dones == (games_over if is_test else lives_lost) and lives_lost >= 5 * games_over


# --------------------------------------------------------------------------------------------------------------------
# Built-in task.


def _episodes(env, policy, num_episodes):
  """Returns (returns, lengths) of `num_episodes` episodes; policy(env, observation) -> action."""
  observation = env.initial()
  returns, lengths, total, length = [], [], 0., 0
  while len(returns) < num_episodes:
    reward, done, observation = env.step(policy(env, observation))
    total, length = total + float(reward), length + 1
    if done:
      returns.append(total)
      lengths.append(length)
      total, length = 0., 0
  return np.array(returns), np.array(lengths)


def test_builtin_observation():
  env = environments.create_environment('builtin/go_to_color', seed=1)
  frame, instruction = env.initial()
  assert frame.shape == (72, 96, 3) and frame.dtype == np.uint8
  colour = instruction.split()[-1]
  assert instruction == f'go to the {colour}' and colour in builtin.BUILTIN_COLORS
  pixels = {tuple(p) for p in frame.reshape(-1, 3)}
  assert builtin.BUILTIN_COLORS[colour] in pixels and builtin.BUILTIN_AGENT_COLOR in pixels
  assert len(pixels) == 4  # Background, agent, two objects.
  assert (frame[:24, :32] == frame[0, 0]).all()  # Cell (0, 0) of the 3 x 3 grid is 24 x 32 pixels.
  c = environments.environment_constructor('builtin/go_to_color', 1, width=9, height=6)
  assert c.num_actions == 4 and c.frame_shape == (6, 9, 3) and c().initial()[0].shape == (6, 9, 3)


def test_builtin_deterministic_given_seed():

  def run(seed, is_test=False):
    env = environments.create_environment('builtin/go_to_color', seed, is_test, width=12, height=12,
                                          num_action_repeats=1)
    observations = [env.initial()]
    rng = np.random.RandomState(0)
    steps = []
    for _ in range(50):
      reward, done, observation = env.step(rng.randint(4))
      steps.append((float(reward), bool(done), observation[1], observation[0].tobytes()))
    return observations[0][0].tobytes(), steps

  assert run(1) == run(1)
  assert run(1) != run(2)
  assert run(1) != run(1, is_test=True)


def test_builtin_returns_optimal_random_and_action_repeats():
  env = environments.create_environment('builtin/go_to_color', seed=1, width=3, height=3, num_action_repeats=1)
  returns, lengths = _episodes(env, lambda e, _: e.optimal_action(), 300)
  assert (returns == 1.).all() and lengths.max() <= 4  # 3 x 3: at most 4 moves (around the other object).
  rng = np.random.RandomState(0)
  returns, _ = _episodes(env, lambda e, _: rng.randint(4), 2000)
  assert set(np.unique(returns)) == {-1., 0., 1.}
  assert abs(returns.mean()) < 0.06  # Symmetric: 0 in expectation.
  # find_object (5 x 5, one object, 8 moves): random about 0.17 (docs/impala/environments.md), optimal 1.
  env = environments.create_environment('builtin/find_object', seed=1, width=5, height=5, num_action_repeats=1)
  returns, lengths = _episodes(env, lambda e, _: e.optimal_action(), 300)
  assert (returns == 1.).all() and lengths.max() <= 8
  returns, _ = _episodes(env, lambda e, _: rng.randint(4), 2000)
  assert set(np.unique(returns)) == {0., 1.} and 0.13 < returns.mean() < 0.21
  # Two moves per agent step (down, down), in an episode whose agent has no object in the two cells below it.
  for seed in range(100):
    env = builtin.BuiltinEnvironment('find_object', width=5, height=5, seed=seed, num_action_repeats=2)
    env.initial()
    row, column = env.agent_cell
    if row <= 2 and all(cell not in env.object_cells.values() for cell in ((row + 1, column), (row + 2, column))):
      break
  else:
    raise AssertionError('no seed in 0 .. 99 has two free cells below the agent')
  reward, done, _ = env.step(1)
  assert (reward, done) == (0., False) and env.agent_cell == (row + 2, column) and env.moves == 2


def test_builtin_wrong_object_and_timeout():
  env = builtin.BuiltinEnvironment('go_to_color', width=3, height=3, seed=0)
  # Head for the object the instruction does not name, around the named one: reward -1 when it is entered.
  _, instruction = env.initial()
  (other,) = set(env.object_cells) - {instruction.split()[-1]}
  while True:
    reward, done, _ = env.step(env.optimal_action(other))
    if done:
      break
  assert reward == -1.
  # Bumping into the wall for max_moves (10) moves ends the episode with reward 0: an episode whose agent starts in
  # the top row, moving up.
  for seed in range(100):
    env = builtin.BuiltinEnvironment('go_to_color', width=3, height=3, seed=seed)
    env.initial()
    if env.agent_cell[0] == 0:
      break
  else:
    raise AssertionError('no seed in 0 .. 99 starts the agent in the top row')
  start = env.agent_cell
  results, cells = [], []
  for _ in range(10):
    reward, done, _ = env.step(0)
    results.append((float(reward), bool(done)))
    cells.append(env.agent_cell)
  assert results == [(0., False)] * 9 + [(0., True)] and cells[:9] == [start] * 9  # Against the wall all along.


def test_builtin_levels():
  assert environments.level_backend('builtin/go_to_color') == 'builtin'
  assert environments.level_backend('atari/pong') == 'atari'
  assert environments.level_backend('rooms_watermaze') == 'dmlab'
  environments.check_level_available('builtin/go_to_color')
  with pytest.raises(
      ValueError, match="unknown built-in level 'builtin/nope'. Built-in levels: builtin/find_object, "
      'builtin/go_to_color'):
    environments.check_level_available('builtin/nope')
  with pytest.raises(ValueError, match='unknown built-in level'):
    environments.environment_constructor('builtin/nope', 1)
  with pytest.raises(ValueError, match='width and height >= 5'):
    environments.create_environment('builtin/find_object', 1, width=4, height=4)


# --------------------------------------------------------------------------------------------------------------------
# FlowEnvironment.


class _ScriptedEnv:
  """Observations 'o0', 'o1', ...; step i returns the i-th (reward, done)."""

  def __init__(self, script):
    self._script = list(script)
    self._t = 0

  def initial(self):
    return 'o0'

  def step(self, action):
    del action
    reward, done = self._script[self._t]
    self._t += 1
    return np.array(reward, np.float32), np.array(done), f'o{self._t}'


def test_flow_environment_by_hand():
  flow = environments.FlowEnvironment(_ScriptedEnv([(1., False), (2., False), (3., True), (5., False), (0., True)]))
  output, state = flow.initial()
  assert output == StepOutput(0., StepOutputInfo(0., 0), True, 'o0')
  assert state == StepOutputInfo(0., 0)
  expected = [  # reward, (episode_return, episode_step), done, observation; the info includes the done step.
      StepOutput(1., StepOutputInfo(1., 1), False, 'o1'),
      StepOutput(2., StepOutputInfo(3., 2), False, 'o2'),
      StepOutput(3., StepOutputInfo(6., 3), True, 'o3'),
      StepOutput(5., StepOutputInfo(5., 1), False, 'o4'),  # Counting restarts after done.
      StepOutput(0., StepOutputInfo(5., 2), True, 'o5'),
  ]
  for want in expected:
    output, state = flow.step(0, state)
    assert output == want
    assert state == (StepOutputInfo(0., 0) if want.done else want.info)
    assert (output.reward.dtype, output.info.episode_return.dtype, output.info.episode_step.dtype,
            output.done.dtype) == (np.float32, np.float32, np.int32, np.bool_)


def test_flow_environment_on_dmlab(fake_lab):
  """Fake episodes of 10 frames at 4 repeats: 3 agent steps; return = frames moving forward."""
  flow = environments.FlowEnvironment(environments.create_environment('rooms_watermaze', 1, width=4, height=3))
  output, state = flow.initial()
  for _ in range(3):
    output, state = flow.step(0, state)
  assert output.done and output.info == (10., 3) and state == (0., 0)
  flow.close()
  assert fake_lab.INSTANCES[0].closed
