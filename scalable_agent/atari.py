"""Atari backend of the IMPALA environments: a game of the Arcade Learning Environment (ale-py) with the
preprocessing of the IMPALA paper's Atari experiments (level names `atari/<game>`; docs/impala/environments.md)."""

import gin
import numpy as np

from scalable_agent import environment_specs

LEVEL_PREFIX = 'atari/'


def _rom_path(roms, game):
  """The ROM file of `game` (ale-py's `roms.get_rom_path`), which must be one of `roms.get_all_rom_ids()`."""
  path = roms.get_rom_path(game)
  if path is None:
    raise ValueError(f'unknown Atari game {game!r}; ale-py has: {", ".join(roms.get_all_rom_ids())}.')
  return path


# ITU-R BT.601 luma, as the DQN preprocessing (and OpenCV's RGB2GRAY).
_LUMA = np.array([0.299, 0.587, 0.114], dtype=np.float32)


@gin.configurable('AtariEnvironment', module='scalable_agent',
                  denylist=['game', 'width', 'height', 'num_action_repeats', 'seed'])
class AtariEnvironment:
  """An Atari game with the preprocessing of the IMPALA paper's Atari experiments (docs/impala/environments.md).

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
    from ale_py import Action  # pylint: disable=g-import-not-at-top
    from ale_py import ALEInterface  # pylint: disable=g-import-not-at-top
    from ale_py import LoggerMode  # pylint: disable=g-import-not-at-top
    from ale_py import roms  # pylint: disable=g-import-not-at-top
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
    self._ale.setInt('random_seed', int(self._random_state.randint(0, 2**31 - 1)))
    self._ale.setFloat('repeat_action_probability', 0.0)
    self._ale.setInt('frame_skip', 1)
    self._ale.setInt('max_num_frames_per_episode', max_episode_frames)
    self._ale.loadROM(_rom_path(roms, game))
    self._actions = self._ale.getLegalActionSet() if full_action_space else self._ale.getMinimalActionSet()
    screen_height, screen_width = self._ale.getScreenDims()
    self._screens = np.zeros((2, screen_height, screen_width, 3), np.uint8)  # The last two screens; 0 the newest.
    # Preprocessing buffers, allocated once (fresh arrays of this size cost more than the arithmetic).
    channels = 1 if grayscale else 3
    self._pooled = np.zeros((screen_height, screen_width, 3), np.uint8)
    self._float_screen = np.zeros((screen_height, screen_width * channels), np.float32)
    self._resize_rows = environment_specs.area_resize_matrix(screen_height, height)  # [height, screen_height]
    self._resized_rows = np.zeros((height, screen_width * channels), np.float32)
    self._channels_first = np.zeros((height * channels, screen_width), np.float32)
    self._resize_columns_t = environment_specs.area_resize_matrix(screen_width, width).T.copy()  # [screen_width, width]
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
    self._channels_first.reshape(height, channels,
                                 screen_width)[:] = (self._resized_rows.reshape(height, screen_width,
                                                                                channels).transpose(0, 2, 1))
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
    ale_action = self._actions[environment_specs.check_action(action, len(self._actions))]
    reward = 0.
    newest = 1
    life_lost = game_over = False
    for repeat in range(self._num_action_repeats):  # noqa: B007  (`repeat` is read after the loop)
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
    self._ale = None  # type: ignore[assignment]  # closed: `ale` is None after it, as documented

  @staticmethod
  def _num_actions(constructor_kwargs):
    if constructor_kwargs.get('full_action_space', False):
      return 18
    from ale_py import ALEInterface  # pylint: disable=g-import-not-at-top
    from ale_py import LoggerMode  # pylint: disable=g-import-not-at-top
    from ale_py import roms  # pylint: disable=g-import-not-at-top
    ALEInterface.setLoggerMode(LoggerMode.Error)
    ale = ALEInterface()
    ale.loadROM(_rom_path(roms, constructor_kwargs['game']))
    return len(ale.getMinimalActionSet())

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, constructor_kwargs):
    """A nest of `tf.TensorSpec`: the output of `method_name` ('initial' or 'step')."""
    channels = (1 if constructor_kwargs.get('grayscale', False) else 3) * constructor_kwargs.get('frame_stack', 1)
    return environment_specs.method_specs(method_name, constructor_kwargs.get('height', 84),
                                          constructor_kwargs.get('width', 84), channels)
