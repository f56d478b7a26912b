"""Environments for IMPALA: DeepMind Lab, Atari and a built-in grid task behind one step API.

Level names (the `level_name` flag / `experiment.level_name` gin parameter):
  * a DeepMind Lab level, e.g. `explore_goal_locations_small`, or `dmlab30` for the DMLab-30 suite (as the original);
  * `atari/<game>` for an Atari game of the Arcade Learning Environment, `<game>` being an ale-py ROM id such as
    `pong` or `space_invaders` (ale-py ships the ROMs);
  * `builtin/<task>` for a small NumPy task of this package (`BUILTIN_TASKS`), e.g. `builtin/go_to_color`.

Every backend is a class built from picklable arguments (so that it can run in a child process) with
  * `initial()` -> observation;
  * `step(action)` -> (reward float32 [], done bool [], observation), `action` an int index into the backend's
    action set; when `done`, the environment has already been reset and `observation` is the first one of the next
    episode;
  * `close()`;
  * the static `_tensor_specs(method_name, kwargs, constructor_kwargs)` of the original's `PyProcessDmLab` (the output
    specs of a method, from the constructor arguments, without building the environment);
where observation = (frame uint8 [height, width, 3], instruction str). One agent step is `num_action_repeats`
environment frames; rewards are summed over them and not clipped (the learner clips).

`environment_constructor(level_name, seed, is_test, ...)` returns the (class, keyword arguments) pair for a level, as
the original `create_environment` (experiment.py) chose them; `create_environment` builds it in this process.
`FlowEnvironment` adds the per-episode running return and length, giving the `StepOutput`s that actors feed the agent.
Details and the Atari / built-in designs: docs/impala_environments.md.
"""

import collections
import importlib
import inspect

import gin
import numpy as np

from scalable_agent import dmlab30

# One environment step, as the original (reference impala.md section 9.3). The field order is the nest order.
#   reward: float32, the reward of the step (unclipped);
#   info: StepOutputInfo(episode_return float32, episode_step int32), running totals of the current episode;
#   done: bool, True on the first observation of a new episode (and on the initial output);
#   observation: (frame uint8 [height, width, 3], instruction tf.string).
# Batched and time-major versions carry leading [B] or [T, B] dimensions on every field.
StepOutputInfo = collections.namedtuple('StepOutputInfo', ['episode_return', 'episode_step'])
StepOutput = collections.namedtuple('StepOutput', ['reward', 'info', 'done', 'observation'])

ATARI_PREFIX = 'atari/'
BUILTIN_PREFIX = 'builtin/'
DMLAB30_PREFIX = 'contributed/dmlab30/'

DMLAB_INSTALL_HELP = (
    'DeepMind Lab is not on a package registry: build its Python package from source '
    '(github.com/google-deepmind/lab: `bazel build -c opt //python/pip_package:build_pip_package`, then '
    '`./bazel-bin/python/pip_package/build_pip_package /tmp/dmlab_pkg` and '
    '`pip install /tmp/dmlab_pkg/deepmind_lab-*.whl`); README.md, section "DeepMind Lab (optional)", has the steps.')

# The original flags that shape an environment, with the original defaults (experiment.py).
DEFAULT_WIDTH = 96
DEFAULT_HEIGHT = 72
DEFAULT_NUM_ACTION_REPEATS = 4
# DeepMind Lab's `mixerSeed` in test mode (original create_environment): levels differ from the training ones.
TEST_MIXER_SEED = 0x600D5EED

# DeepMind Lab actions: [LOOK_LEFT_RIGHT_PIXELS_PER_FRAME, LOOK_DOWN_UP_PIXELS_PER_FRAME, STRAFE_LEFT_RIGHT,
# MOVE_BACK_FORWARD, FIRE, JUMP, CROUCH]. The original's nine actions, in its order (paper Table D.2).
DEFAULT_ACTION_SET = (
    (0, 0, 0, 1, 0, 0, 0),    # Forward
    (0, 0, 0, -1, 0, 0, 0),   # Backward
    (0, 0, -1, 0, 0, 0, 0),   # Strafe Left
    (0, 0, 1, 0, 0, 0, 0),    # Strafe Right
    (-20, 0, 0, 0, 0, 0, 0),  # Look Left
    (20, 0, 0, 0, 0, 0, 0),   # Look Right
    (-20, 0, 0, 1, 0, 0, 0),  # Look Left + Forward
    (20, 0, 0, 1, 0, 0, 0),   # Look Right + Forward
    (0, 0, 0, 0, 1, 0, 0),    # Fire
)


class MissingDependencyError(ImportError):
  """An optional dependency that a configuration needs is not installed; the message says how to install it."""


def _observation_specs(height, width, channels=3):
  """TensorSpecs of an observation: (frame uint8 [height, width, channels], instruction string [])."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (only the parent process asks for specs)
  return (tf.TensorSpec([height, width, channels], tf.uint8), tf.TensorSpec([], tf.string))


def _method_specs(method_name, height, width, channels=3):
  """The specs of `initial` (an observation) and `step` ((reward, done, observation)); None for other methods."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  observation_spec = _observation_specs(height, width, channels)
  if method_name == 'initial':
    return observation_spec
  if method_name == 'step':
    return (tf.TensorSpec([], tf.float32), tf.TensorSpec([], tf.bool), observation_spec)
  return None


def _check_action(action, num_actions):
  """Returns `action` as a Python int in [0, num_actions); ValueError otherwise."""
  index = int(action)
  if index != action or not 0 <= index < num_actions:
    raise ValueError(f'action must be an integer index in [0, {num_actions}); got {action!r}.')
  return index


# ---------------------------------------------------------------------------------------------------------------------
# DeepMind Lab.

class PyProcessDmLab:
  """A DeepMind Lab level, as the original `PyProcessDmLab` (reference impala.md section 9.2).

  Observations: frame uint8 [height, width, 3] (DMLab's 'RGB_INTERLEAVED'), instruction str ('INSTR'). One `step` is
  one agent step of `num_action_repeats` DMLab frames (`num_steps`); its reward is DMLab's sum over those frames.
  Every episode starts with `reset(seed=s)`, s drawn from `np.random.RandomState(seed)` uniformly in [0, 2^31 - 1).
  """

  def __init__(self, level, config, num_action_repeats, seed, runfiles_path=None, level_cache=None,
               action_set=DEFAULT_ACTION_SET):
    """Starts the level (the `deepmind_lab` module is imported here: it is optional).

    Args:
      level: DMLab level name, e.g. 'contributed/dmlab30/rooms_watermaze'.
      config: dict of DMLab settings ('width', 'height', 'datasetPath', 'logLevel', ...); values are passed as str.
      num_action_repeats: DMLab frames per agent step.
      seed: seed of the random state that draws the per-episode DMLab seeds.
      runfiles_path: optional DMLab runfiles path (`deepmind_lab.set_runfiles_path`).
      level_cache: optional DMLab level cache object.
      action_set: the DMLab actions (7 ints each) that the action indices of `step` select; the original's nine by
        default.

    Raises:
      MissingDependencyError: `deepmind_lab` cannot be imported.
    """
    try:
      deepmind_lab = importlib.import_module('deepmind_lab')
    except ImportError as e:
      raise MissingDependencyError(f'DeepMind Lab level {level!r} needs the module deepmind_lab ({e}). '
                                   f'{DMLAB_INSTALL_HELP}') from None
    self._num_action_repeats = num_action_repeats
    self._random_state = np.random.RandomState(seed=seed)
    self._action_set = np.array(action_set, dtype=np.intc)
    if runfiles_path:
      deepmind_lab.set_runfiles_path(runfiles_path)
    config = {k: str(v) for k, v in config.items()}
    self._observation_spec = ['RGB_INTERLEAVED', 'INSTR']
    self._env = deepmind_lab.Lab(level=level, observations=self._observation_spec, config=config,
                                 level_cache=level_cache)

  def _reset(self):
    self._env.reset(seed=self._random_state.randint(0, 2 ** 31 - 1))

  def _observation(self):
    d = self._env.observations()
    return tuple(d[k] for k in self._observation_spec)

  def initial(self):
    """Starts an episode. Returns (frame uint8 [height, width, 3], instruction str)."""
    self._reset()
    return self._observation()

  def step(self, action):
    """One agent step: `action_set[action]` for `num_action_repeats` DMLab frames.

    Args:
      action: int index into the action set.

    Returns:
      (reward float32 [], done bool [], observation); when done, the observation is the next episode's first.
    """
    raw_action = self._action_set[_check_action(action, len(self._action_set))]
    reward = self._env.step(raw_action, num_steps=self._num_action_repeats)
    done = np.array(not self._env.is_running())
    if done:
      self._reset()
    observation = self._observation()
    reward = np.array(reward, dtype=np.float32)
    return reward, done, observation

  @property
  def num_actions(self):
    return len(self._action_set)

  def close(self):
    self._env.close()

  @staticmethod
  def _num_actions(constructor_kwargs):
    return len(constructor_kwargs.get('action_set', DEFAULT_ACTION_SET))

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, constructor_kwargs):
    """A nest of `tf.TensorSpec`: the output of `method_name` ('initial' or 'step'), as the original."""
    config = constructor_kwargs['config']
    return _method_specs(method_name, int(config.get('height', 240)), int(config.get('width', 320)))


# ---------------------------------------------------------------------------------------------------------------------
# Atari (Arcade Learning Environment through ale-py).

def _area_resize_matrix(source_size, target_size):
  """float32 [target_size, source_size]: row i averages the source pixels under target pixel i, by overlap.

  Applied on both axes this is area interpolation (OpenCV's INTER_AREA) for any pair of sizes.
  """
  scale = source_size / target_size
  starts = np.arange(target_size)[:, None] * scale
  pixels = np.arange(source_size)[None, :]
  overlap = np.clip(np.minimum(pixels + 1, starts + scale) - np.maximum(pixels, starts), 0, None)
  return (overlap / scale).astype(np.float32)


# ITU-R BT.601 luma, as the DQN preprocessing (and OpenCV's RGB2GRAY).
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


@gin.configurable('AtariEnvironment', module='scalable_agent',
                  denylist=['game', 'width', 'height', 'num_action_repeats', 'seed'])
class AtariEnvironment:
  """An Atari game with the preprocessing of the IMPALA paper's Atari experiments (docs/impala_environments.md).

  * No sticky actions (`repeat_action_probability` 0), one emulator frame per ALE `act`.
  * One `step` = one agent step = `num_action_repeats` emulator frames with the same action, rewards summed
    (unclipped; fewer frames when the episode ends first); the frame is the pixel-wise max of the step's last two
    emulator frames (against flicker; the one frame of a one-frame step), shrunk to
    [height, width] by area averaging, RGB (3 channels) or, with `grayscale`, luma (1 channel).
  * `frame_stack` = k > 1: the observation is the last k frames along the channel axis, oldest first: uint8
    [height, width, k·c] (c = 1 grey, 3 RGB). At the start of an episode (a new game or, with
    `terminal_on_life_loss`, a lost life) the stack holds its first frame k times.
  * Each game starts with a random number, uniform in [1, noop_max], of no-op emulator frames.
  * `terminal_on_life_loss`: losing a life ends the episode for the agent (`done`) without resetting the game: the
    next episode continues from the current frame. The game is reset when it is over.
  * A game is cut after `max_episode_frames` emulator frames (ALE's `max_num_frames_per_episode`).
  Instruction: '' (empty).

  The settings after `seed` are gin parameters `AtariEnvironment.<name>` (configs/impala_atari.gin sets the paper's);
  `environment_constructor` passes their bound values to the environment's process.
  """

  def __init__(self, game, width=84, height=84, num_action_repeats=4, seed=1, noop_max=30, full_action_space=False,
               terminal_on_life_loss=True, grayscale=False, max_episode_frames=108000, frame_stack=1):
    """Loads the ROM.

    Args:
      game: ale-py ROM id, e.g. 'pong'.
      width, height: frame size in pixels.
      num_action_repeats: emulator frames per agent step (>= 1).
      seed: seeds the no-op starts and ALE's own random generator.
      noop_max: most no-op emulator frames at the start of a game (0: none).
      full_action_space: the 18 actions of the console instead of the game's minimal set.
      terminal_on_life_loss: `done` when a life is lost (training); False: only when the game is over (evaluation).
      grayscale: grey frames (luma, 1 channel) instead of RGB (3 channels).
      max_episode_frames: emulator frames after which a game is cut (0: never).
      frame_stack: frames per observation, stacked along the channel axis (1: no stack).

    Raises:
      ValueError: an unknown game or a bad setting.
    """
    from ale_py import Action, ALEInterface, LoggerMode, roms  # pylint: disable=g-import-not-at-top
    games = roms.get_all_rom_ids()
    if game not in games:
      raise ValueError(f'unknown Atari game {game!r}; ale-py has: {", ".join(games)}.')
    if num_action_repeats < 1 or noop_max < 0 or width < 1 or height < 1 or frame_stack < 1:
      raise ValueError(f'need num_action_repeats >= 1, noop_max >= 0, frame_stack >= 1 and a positive frame size; '
                       f'got num_action_repeats={num_action_repeats}, noop_max={noop_max}, frame_stack={frame_stack}, '
                       f'{width}x{height}.')
    self._num_action_repeats = num_action_repeats
    self._noop_max = noop_max
    self._terminal_on_life_loss = terminal_on_life_loss
    self._grayscale = grayscale
    self._random_state = np.random.RandomState(seed=seed)
    ALEInterface.setLoggerMode(LoggerMode.Error)
    self._ale = ALEInterface()
    self._ale.setInt('random_seed', int(self._random_state.randint(0, 2 ** 31 - 1)))
    self._ale.setFloat('repeat_action_probability', 0.0)
    self._ale.setInt('frame_skip', 1)
    self._ale.setInt('max_num_frames_per_episode', max_episode_frames)
    self._ale.loadROM(roms.get_rom_path(game))
    self._actions = self._ale.getLegalActionSet() if full_action_space else self._ale.getMinimalActionSet()
    screen_height, screen_width = self._ale.getScreenDims()
    self._screens = np.zeros((2, screen_height, screen_width, 3), np.uint8)  # The last two screens; 0 the newest.
    # Preprocessing buffers, allocated once (fresh arrays of this size cost more than the arithmetic).
    channels = 1 if grayscale else 3
    self._pooled = np.zeros((screen_height, screen_width, 3), np.uint8)
    self._float_screen = np.zeros((screen_height, screen_width * channels), np.float32)
    self._resize_rows = _area_resize_matrix(screen_height, height)  # [height, screen_height]
    self._resized_rows = np.zeros((height, screen_width * channels), np.float32)
    self._channels_first = np.zeros((height * channels, screen_width), np.float32)
    self._resize_columns_t = _area_resize_matrix(screen_width, width).T.copy()  # [screen_width, width]
    self._resized = np.zeros((height * channels, width), np.float32)
    self._stack = np.zeros((height, width, channels * frame_stack), np.uint8)  # Oldest frame first.
    self._noop = Action.NOOP
    self._lives = 0

  @property
  def num_actions(self):
    return len(self._actions)

  @property
  def ale(self):
    """The emulator (`ale_py.ALEInterface`), for inspection; None after `close()`."""
    return self._ale

  @property
  def episode_frame_number(self):
    """Emulator frames played in the current game, its no-op start included (ALE's episode frame number)."""
    return self._ale.getEpisodeFrameNumber()

  def _frame(self, newest, num_screens):
    """The agent's frame, a new uint8 [height, width, c], from the screen in slot `newest` (num_screens 1) or the
    max of both slots (2)."""
    if num_screens == 2:
      np.maximum(self._screens[0], self._screens[1], out=self._pooled)
    else:
      self._pooled[:] = self._screens[newest]
    height, width = self._resize_rows.shape[0], self._resize_columns_t.shape[1]
    screen_width = self._resize_columns_t.shape[0]
    if self._grayscale:
      np.matmul(self._pooled, _LUMA, out=self._float_screen)
    else:
      self._float_screen.reshape(self._pooled.shape)[:] = self._pooled
    # Area averaging: rows, then columns (with the channels moved before the columns to make it one product).
    np.matmul(self._resize_rows, self._float_screen, out=self._resized_rows)
    channels = self._resized_rows.shape[1] // screen_width
    self._channels_first.reshape(height, channels, screen_width)[:] = (
        self._resized_rows.reshape(height, screen_width, channels).transpose(0, 2, 1))
    np.matmul(self._channels_first, self._resize_columns_t, out=self._resized)
    np.add(self._resized, 0.5, out=self._resized)  # Round to nearest (values are in [0, 255]).
    return self._resized.reshape(height, channels, width).transpose(0, 2, 1).astype(np.uint8)

  def _observe(self, frame, new_episode):
    """The observation, a new uint8 [height, width, k·c]: `frame` pushed onto the stack (filling it if
    `new_episode`)."""
    channels = frame.shape[2]
    if self._stack.shape[2] == channels:
      return frame
    if new_episode:
      self._stack[:] = np.tile(frame, (1, 1, self._stack.shape[2] // channels))
    else:
      self._stack[:, :, :-channels] = self._stack[:, :, channels:]
      self._stack[:, :, -channels:] = frame
    return self._stack.copy()

  def _reset_game(self):
    """Resets the game and plays the no-op start. Returns the first frame."""
    self._ale.reset_game()
    num_noops = self._random_state.randint(1, self._noop_max + 1) if self._noop_max > 0 else 0
    for _ in range(num_noops):
      self._ale.act(self._noop)
      if self._ale.game_over():
        self._ale.reset_game()
    self._lives = self._ale.lives()
    self._ale.getScreenRGB(self._screens[0])
    return self._observe(self._frame(0, 1), new_episode=True)

  def initial(self):
    """Starts a game. Returns (frame uint8 [height, width, channels], instruction '')."""
    return self._reset_game(), ''

  def step(self, action):
    """One agent step: the action for `num_action_repeats` emulator frames (fewer if the episode ends first).

    Args:
      action: int index into the action set (minimal or full).

    Returns:
      (reward float32 [], done bool [], observation): the reward summed over the frames; when done, the observation
      is the next episode's first (after a game over: a new game with its no-op start; after a lost life with
      `terminal_on_life_loss`: the current frame).
    """
    ale_action = self._actions[_check_action(action, len(self._actions))]
    reward = 0.
    newest = 1
    life_lost = game_over = False
    for repeat in range(self._num_action_repeats):
      reward += self._ale.act(ale_action)
      newest ^= 1  # The two screen slots alternate: the last two frames' screens, whichever frame ends the step.
      self._ale.getScreenRGB(self._screens[newest])
      game_over = self._ale.game_over()
      lives = self._ale.lives()
      life_lost = self._terminal_on_life_loss and lives < self._lives
      self._lives = lives
      if game_over or life_lost:
        break
    done = game_over or life_lost
    if game_over:
      frame = self._reset_game()
    else:
      frame = self._observe(self._frame(newest, min(repeat + 1, 2)), new_episode=life_lost)
    return np.array(reward, dtype=np.float32), np.array(done), (frame, '')

  def close(self):
    self._ale = None

  @staticmethod
  def _num_actions(constructor_kwargs):
    if constructor_kwargs.get('full_action_space', False):
      return 18
    from ale_py import ALEInterface, LoggerMode, roms  # pylint: disable=g-import-not-at-top
    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.loadROM(roms.get_rom_path(constructor_kwargs['game']))
    return len(ale.getMinimalActionSet())

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, constructor_kwargs):
    """A nest of `tf.TensorSpec`: the output of `method_name` ('initial' or 'step')."""
    channels = (1 if constructor_kwargs.get('grayscale', False) else 3) * constructor_kwargs.get('frame_stack', 1)
    return _method_specs(method_name, constructor_kwargs.get('height', 84), constructor_kwargs.get('width', 84),
                         channels)


# ---------------------------------------------------------------------------------------------------------------------
# Built-in task.

# Object colours of the built-in tasks (name -> RGB), in the order of their index; the agent is white.
BUILTIN_COLORS = collections.OrderedDict([
    ('red', (255, 0, 0)), ('green', (0, 255, 0)), ('blue', (0, 0, 255)), ('yellow', (255, 255, 0))])
BUILTIN_AGENT_COLOR = (255, 255, 255)
# Grid moves of the built-in tasks' actions: (row, column) deltas for up, down, left, right.
BUILTIN_MOVES = ((-1, 0), (1, 0), (0, -1), (0, 1))
BUILTIN_ACTION_NAMES = ('up', 'down', 'left', 'right')

BuiltinTask = collections.namedtuple('BuiltinTask', ['grid_size', 'num_objects', 'max_moves'])
# name -> task; docs/impala_environments.md gives each task's random, instruction-blind and optimal returns.
BUILTIN_TASKS = collections.OrderedDict([
    # Reactive: one object; the instruction names its colour but carries no choice. Learnt in minutes on a CPU.
    ('find_object', BuiltinTask(grid_size=5, num_objects=1, max_moves=8)),
    # The instruction matters: two objects, reward +1 for the named one and -1 for the other. Much slower to learn.
    ('go_to_color', BuiltinTask(grid_size=3, num_objects=2, max_moves=10)),
])


def _check_builtin_task(task):
  if task not in BUILTIN_TASKS:
    raise ValueError(f'unknown built-in level {BUILTIN_PREFIX + task!r}. Built-in levels: '
                     f'{", ".join(BUILTIN_PREFIX + name for name in BUILTIN_TASKS)}.')


class BuiltinEnvironment:
  """A tiny grid task drawn in NumPy with an instruction "go to the <colour>" (`BUILTIN_TASKS`).

  An episode: a grid of grid_size x grid_size cells holds the agent (white) and `num_objects` objects of distinct
  colours (from `BUILTIN_COLORS`), all in distinct random cells; the instruction names the colour of one of them,
  e.g. 'go to the red'. Moves (actions up, down, left, right) that would leave the grid leave the agent where it is.
  Entering the named object's cell gives reward +1, another object's cell -1; either ends the episode, and so does
  the `max_moves`-th move without reaching an object (reward 0). Episode returns are in {-1, 0, +1}; an optimal
  policy always gets +1. With two objects (`go_to_color`) a policy that ignores the instruction gets 0 on average;
  with one (`find_object`) the task is reactive. Random and optimal returns: docs/impala_environments.md.

  One `step` is `num_action_repeats` moves with the same action (stopping when the episode ends), so with
  num_action_repeats = 1 one agent step is one move and the frame counters count moves. The frame is the grid scaled
  to [height, width] (nearest cell), black background. Deterministic given `seed`; test mode (`is_test`) draws the
  episodes from another stream of the same distribution (the seed is mixed with DMLab's test `mixerSeed`).
  """

  def __init__(self, task, width=DEFAULT_WIDTH, height=DEFAULT_HEIGHT, num_action_repeats=1, seed=1, is_test=False):
    """Builds the task.

    Args:
      task: a key of `BUILTIN_TASKS`.
      width, height: frame size in pixels, at least the grid size.
      num_action_repeats: moves per agent step (>= 1).
      seed: seed of the episodes (layouts and instructions).
      is_test: draw the episodes from the test stream.

    Raises:
      ValueError: an unknown task or a bad setting.
    """
    _check_builtin_task(task)
    self._task = BUILTIN_TASKS[task]
    size = self._task.grid_size
    if width < size or height < size or num_action_repeats < 1:
      raise ValueError(f'built-in level {task!r} needs width and height >= {size} and num_action_repeats >= 1; got '
                       f'{width}x{height}, num_action_repeats={num_action_repeats}.')
    self._num_action_repeats = num_action_repeats
    self._random_state = np.random.RandomState(seed=(seed ^ TEST_MIXER_SEED) if is_test else seed)
    self._rows = (np.arange(height) * size) // height  # Grid row of each pixel row.
    self._columns = (np.arange(width) * size) // width
    self._palette = np.array([(0, 0, 0), BUILTIN_AGENT_COLOR] + list(BUILTIN_COLORS.values()), dtype=np.uint8)
    self._colour_names = list(BUILTIN_COLORS)
    self._grid = np.zeros((size, size), np.int64)  # Palette index per cell: 0 empty, 1 agent, 2 + c colour c.
    self._agent = None
    self._target = None
    self._moves = 0
    self._instruction = ''

  def _reset(self):
    size, num_objects = self._task.grid_size, self._task.num_objects
    cells = self._random_state.choice(size * size, num_objects + 1, replace=False)
    colours = self._random_state.choice(len(self._colour_names), num_objects, replace=False)
    target = self._random_state.randint(num_objects)
    self._grid[:] = 0
    self._agent = divmod(int(cells[0]), size)
    self._grid[self._agent] = 1
    for cell, colour in zip(cells[1:], colours):
      self._grid[divmod(int(cell), size)] = 2 + colour
    self._target = 2 + colours[target]
    self._instruction = f'go to the {self._colour_names[colours[target]]}'
    self._moves = 0

  def _observation(self):
    return self._palette[self._grid[self._rows[:, None], self._columns[None, :]]], self._instruction

  def _move(self, action):
    """One move. Returns (reward, done)."""
    size = self._task.grid_size
    row = min(max(self._agent[0] + BUILTIN_MOVES[action][0], 0), size - 1)
    column = min(max(self._agent[1] + BUILTIN_MOVES[action][1], 0), size - 1)
    self._moves += 1
    cell = self._grid[row, column]
    if cell >= 2:
      return (1. if cell == self._target else -1.), True
    self._grid[self._agent] = 0
    self._agent = (row, column)
    self._grid[self._agent] = 1
    return 0., self._moves >= self._task.max_moves

  def initial(self):
    """Starts an episode. Returns (frame uint8 [height, width, 3], instruction str)."""
    self._reset()
    return self._observation()

  def step(self, action):
    """One agent step: `num_action_repeats` moves in the direction `action` (0 up, 1 down, 2 left, 3 right).

    Returns:
      (reward float32 [], done bool [], observation); when done, the observation is the next episode's first.
    """
    action = _check_action(action, len(BUILTIN_MOVES))
    reward, done = 0., False
    for _ in range(self._num_action_repeats):
      move_reward, done = self._move(action)
      reward += move_reward
      if done:
        self._reset()
        break
    return np.array(reward, dtype=np.float32), np.array(done), self._observation()

  def optimal_action(self, colour=None):
    """An action of an optimal policy towards the object of `colour` (default: the named one), around the others;
    for tests and baselines."""
    size = self._task.grid_size
    target = self._target if colour is None else 2 + self._colour_names.index(colour)
    goal = tuple(int(i) for i in np.argwhere(self._grid == target)[0])
    # Breadth-first search from the goal over cells that hold no other object.
    distance = np.full((size, size), np.inf)
    distance[goal] = 0
    frontier = [goal]
    while frontier:
      next_frontier = []
      for r, c in frontier:
        for dr, dc in BUILTIN_MOVES:
          cell = (r + dr, c + dc)
          if (0 <= cell[0] < size and 0 <= cell[1] < size and distance[cell] == np.inf and
              (self._grid[cell] <= 1)):
            distance[cell] = distance[r, c] + 1
            next_frontier.append(cell)
      frontier = next_frontier
    best, best_distance = 0, np.inf
    for action, (dr, dc) in enumerate(BUILTIN_MOVES):
      cell = (min(max(self._agent[0] + dr, 0), size - 1), min(max(self._agent[1] + dc, 0), size - 1))
      if distance[cell] < best_distance:
        best, best_distance = action, distance[cell]
    return best

  @property
  def num_actions(self):
    return len(BUILTIN_MOVES)

  @property
  def agent_cell(self):
    """(row, column) of the agent in the grid."""
    return self._agent

  @property
  def object_cells(self):
    """{colour name: (row, column)} of the objects in the grid."""
    return {self._colour_names[index - 2]: (int(row), int(column))
            for (row, column), index in np.ndenumerate(self._grid) if index >= 2}

  @property
  def moves(self):
    """Moves made in the current episode (num_action_repeats per agent step, fewer if it ended)."""
    return self._moves

  def close(self):
    pass

  @staticmethod
  def _num_actions(unused_constructor_kwargs):
    return len(BUILTIN_MOVES)

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, constructor_kwargs):
    """A nest of `tf.TensorSpec`: the output of `method_name` ('initial' or 'step')."""
    return _method_specs(method_name, constructor_kwargs.get('height', DEFAULT_HEIGHT),
                         constructor_kwargs.get('width', DEFAULT_WIDTH))


# ---------------------------------------------------------------------------------------------------------------------
# Levels -> environments.

def level_backend(level_name):
  """Returns 'atari', 'builtin' or 'dmlab' for a level name (see the module docstring)."""
  if level_name.startswith(ATARI_PREFIX):
    return 'atari'
  if level_name.startswith(BUILTIN_PREFIX):
    return 'builtin'
  return 'dmlab'


def check_level_available(level_name):
  """Checks, without starting anything, that `level_name` can run on this machine.

  Raises:
    MissingDependencyError: the level needs DeepMind Lab and `deepmind_lab` is not importable.
    ValueError: an Atari level names a game that ale-py does not have, or an unknown built-in level (the message lists
      the valid ones).
  """
  backend = level_backend(level_name)
  if backend == 'atari':
    from ale_py import roms  # pylint: disable=g-import-not-at-top
    game = level_name[len(ATARI_PREFIX):]
    games = roms.get_all_rom_ids()
    if game not in games:
      raise ValueError(f'unknown Atari level {level_name!r}: ale-py has no ROM {game!r}. Atari levels are '
                       f'{ATARI_PREFIX}<game> with <game> one of: {", ".join(games)}.')
    return
  if backend == 'builtin':
    _check_builtin_task(level_name[len(BUILTIN_PREFIX):])
    return
  try:
    importlib.import_module('deepmind_lab')
  except ImportError as e:
    raise MissingDependencyError(
        f'level {level_name!r} runs on DeepMind Lab, but the Python module deepmind_lab cannot be imported '
        f'({e}). {DMLAB_INSTALL_HELP} Atari needs no extra install: configs/impala_atari.gin.') from None


class EnvironmentConstructor(collections.namedtuple('EnvironmentConstructor', ['env_type', 'kwargs'])):
  """How to build a level's environment: `env_type(**kwargs)`. Picklable, for a child process.

  `num_actions` (the size of the action set, for the agent) and `frame_shape` ((height, width, 3)) are known without
  building the environment; `tensor_specs(method_name)` gives the output specs of `initial` / `step`.
  """

  def __call__(self):
    return self.env_type(**self.kwargs)

  @property
  def num_actions(self):
    return self.env_type._num_actions(self.kwargs)  # pylint: disable=protected-access

  @property
  def frame_shape(self):
    return tuple(self.tensor_specs('initial')[0].shape.as_list())

  def tensor_specs(self, method_name):
    return self.env_type._tensor_specs(method_name, {}, self.kwargs)  # pylint: disable=protected-access


def environment_constructor(level_name, seed, is_test=False, width=DEFAULT_WIDTH, height=DEFAULT_HEIGHT,
                            dataset_path='', num_action_repeats=DEFAULT_NUM_ACTION_REPEATS, **options):
  """The environment of one actor (or of test mode), as the original `create_environment` (experiment.py) chose it.

  DeepMind Lab: levels of DMLab-30 get the prefix 'contributed/dmlab30/'; config width, height, datasetPath
  (`dataset_path`) and logLevel 'WARN'; test mode adds allowHoldOutLevels 'true' and mixerSeed 0x600D5EED.
  Atari: `AtariEnvironment` with the bound gin settings `AtariEnvironment.<name>` (then `options`); test mode plays
  whole games (`terminal_on_life_loss=False`).
  Built-in: `BuiltinEnvironment`; test mode draws its own episodes.

  Args:
    level_name: a level name (module docstring); not 'dmlab30' (the caller picks its levels from
      `dmlab30.LEVEL_MAPPING`).
    seed: the environment's seed (the original: actor i uses i + 1; test mode 1).
    is_test: test-mode settings.
    width, height: frame size in pixels (the original flags, defaults 96 x 72).
    dataset_path: DMLab's datasetPath (psychlab levels).
    num_action_repeats: environment frames per agent step (the original flag, default 4).
    **options: settings of the backend's class beyond these (e.g. Atari's `full_action_space`, `grayscale`).

  Returns:
    An `EnvironmentConstructor`.

  Raises:
    ValueError: 'dmlab30', an unknown built-in level, or an option the backend does not have (the message lists
      them).
  """
  if level_name == 'dmlab30':
    raise ValueError("'dmlab30' is a suite, not a level: give each actor one of dmlab30.LEVEL_MAPPING's training "
                     'levels (test mode: its test levels).')
  backend = level_backend(level_name)
  if backend == 'dmlab':
    if level_name in dmlab30.ALL_LEVELS:
      level_name = DMLAB30_PREFIX + level_name
    config = {'width': width, 'height': height, 'datasetPath': dataset_path, 'logLevel': 'WARN'}
    if is_test:
      config['allowHoldOutLevels'] = 'true'
      config['mixerSeed'] = TEST_MIXER_SEED
    env_type = PyProcessDmLab
    kwargs = dict(level=level_name, config=config, num_action_repeats=num_action_repeats, seed=seed)
  elif backend == 'atari':
    env_type = AtariEnvironment
    kwargs = dict(game=level_name[len(ATARI_PREFIX):], width=width, height=height,
                  num_action_repeats=num_action_repeats, seed=seed)
  else:
    task = level_name[len(BUILTIN_PREFIX):]
    _check_builtin_task(task)
    env_type = BuiltinEnvironment
    kwargs = dict(task=task, width=width, height=height, num_action_repeats=num_action_repeats, seed=seed,
                  is_test=is_test)
  allowed = [name for name in inspect.signature(env_type.__init__).parameters if name not in kwargs and name != 'self']
  unknown = sorted(set(options) - set(allowed))
  if unknown:
    raise ValueError(f'unknown option(s) {", ".join(unknown)} for {backend} level {level_name!r}; the options of '
                     f'{env_type.__name__} are: {", ".join(allowed) or "none"}.')
  if backend == 'atari':
    # The gin settings (`AtariEnvironment.<name>`) travel as arguments: the environment's process has no gin.
    kwargs.update({**gin.get_bindings('AtariEnvironment'), **options})
    if is_test:
      kwargs['terminal_on_life_loss'] = False  # Evaluation plays whole games.
  else:
    kwargs.update(options)
  return EnvironmentConstructor(env_type, kwargs)


def create_environment(level_name, seed, is_test=False, **flag_values):
  """Builds the environment of `environment_constructor(level_name, seed, is_test, **flag_values)` in this process.

  The experiment runs environments in child processes instead: it passes the `EnvironmentConstructor`'s
  `env_type` and `kwargs` to `py_process`, then wraps the proxy in a `FlowEnvironment`.
  """
  return environment_constructor(level_name, seed, is_test, **flag_values)()


# ---------------------------------------------------------------------------------------------------------------------
# Episode bookkeeping.

class FlowEnvironment:
  """Adds the running episode return and length to an environment's steps (the original's `FlowEnvironment`).

  The original threaded a "flow" int64 through TF ops to order the steps; plain Python calls are ordered already, so
  the state here is only the running `StepOutputInfo`.
  """

  def __init__(self, env):
    """env: an object with `initial()` -> observation and `step(action)` -> (reward, done, observation), where after
    `done` the observation is the next episode's first (any backend above, or its process proxy)."""
    self._env = env

  def initial(self):
    """Returns (StepOutput, state): reward 0, info (0, 0), done True (the agent starts from a reset), the first
    observation; state = StepOutputInfo(float32 0, int32 0), to pass to the next `step`."""
    info = StepOutputInfo(np.float32(0.), np.int32(0))
    return StepOutput(np.float32(0.), info, np.bool_(True), self._env.initial()), info

  def step(self, action, state):
    """One agent step.

    Args:
      action: the action for the environment's `step`.
      state: the state returned by the previous `initial` / `step`.

    Returns:
      (StepOutput, state). The output's info is the running (episode_return, episode_step) including this step, so
      on `done` it holds the finished episode's return and length (agent steps); the next state is zeros then.
    """
    reward, done, observation = self._env.step(action)
    reward, done = np.float32(reward), np.bool_(done)
    info = StepOutputInfo(np.float32(state.episode_return + reward), np.int32(state.episode_step + 1))
    next_state = StepOutputInfo(np.float32(0.), np.int32(0)) if done else info
    return StepOutput(reward, info, done, observation), next_state

  def close(self):
    self._env.close()
