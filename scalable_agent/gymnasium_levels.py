"""Gymnasium backend of the IMPALA environments: any registered Gymnasium environment with discrete actions and an
image observation as a level, `gymnasium/<id>` (e.g. `gymnasium/BabyAI-GoToLocal-v0`, `gymnasium/ALE/Pong-v5`,
`gymnasium/MiniGrid-Empty-8x8-v0`; docs/impala/environments.md, "Any Gymnasium environment").

Supported: an action space `Discrete(n)` (`start` 0), and an observation that is
  * an image: a uint8 `Box` of shape [H, W, C] or [H, W] (one channel), or
  * a `Dict` with an image entry (`image_key`; by default 'image', else its only uint8 image `Box`) and, optionally, a
    text entry that becomes the instruction (`instruction_key`; by default 'mission' (MiniGrid's and BabyAI's
    instruction), else its only `Text` entry); without one the instruction is ''.
Anything else gets `UnsupportedEnvironmentError`, whose one line says what is supported.
"""

import importlib
from typing import Any, Dict, Optional, Sequence, Tuple

import gin
import numpy as np

from scalable_agent import environment_specs

LEVEL_PREFIX = 'gymnasium/'

# Modules that register environments with Gymnasium, imported before `gymnasium.make` for ids with these prefixes
# (a 'module:id' id, Gymnasium's own form, imports any other).
REGISTERING_MODULES = (('BabyAI-', 'minigrid'), ('MiniGrid-', 'minigrid'), ('ALE/', 'ale_py'))

SUPPORTED = ('supported: Discrete actions and an image observation (a uint8 Box of shape H x W x C or H x W, or a Dict '
             'with such an image entry and optionally a text entry, the instruction)')


class UnsupportedEnvironmentError(ValueError):
  """A Gymnasium environment this backend cannot run (its spaces), or an id Gymnasium does not know."""


def _import_registering_module(env_id):
  """Imports the module that registers `env_id` (`REGISTERING_MODULES`; importing it registers its ids)."""
  for prefix, module in REGISTERING_MODULES:
    if env_id.startswith(prefix):
      importlib.import_module(module)


def _wrapper_class(path):
  """The class of a 'module.Class' path."""
  module, _, name = path.rpartition('.')
  try:
    return getattr(importlib.import_module(module), name)
  except (ImportError, AttributeError, ValueError) as e:
    raise UnsupportedEnvironmentError(f'unknown wrapper {path!r} ({e}); give a "module.Class" path, e.g. '
                                      "'minigrid.wrappers.RGBImgPartialObsWrapper'.") from None


def make(env_id, make_kwargs=None, wrappers=()):
  """`gymnasium.make(env_id, **make_kwargs)` wrapped in `wrappers` (in order).

  Args:
    env_id: a registered id, or 'module:id'.
    make_kwargs: dict of keyword arguments of `gymnasium.make` (the environment's own, `max_episode_steps`, ...).
    wrappers: 'module.Class' paths, or ('module.Class', {keyword arguments}) pairs.

  Raises:
    UnsupportedEnvironmentError: an unknown id or wrapper.
  """
  import gymnasium  # pylint: disable=g-import-not-at-top
  _import_registering_module(env_id)
  try:
    env = gymnasium.make(env_id, **dict(make_kwargs or {}))
  except gymnasium.error.Error as e:
    raise UnsupportedEnvironmentError(f'{LEVEL_PREFIX}{env_id}: Gymnasium cannot make {env_id!r} ({e}); {SUPPORTED}, '
                                      'any registered id (or "module:id").') from None
  except TypeError as e:  # a keyword argument the environment does not take
    raise UnsupportedEnvironmentError(f'{LEVEL_PREFIX}{env_id}: GymnasiumEnvironment.make_kwargs {make_kwargs}: '
                                      f'{e}.') from None
  for wrapper in wrappers:
    path, kwargs = (wrapper, {}) if isinstance(wrapper, str) else wrapper
    wrapper_class = _wrapper_class(path)
    try:
      env = wrapper_class(env, **dict(kwargs))
    except (AttributeError, KeyError, TypeError, ValueError) as e:
      env.close()
      raise UnsupportedEnvironmentError(
          f'{LEVEL_PREFIX}{env_id}: GymnasiumEnvironment.wrappers: {path} cannot wrap it ({type(e).__name__}: {e}); '
          f'{SUPPORTED}.') from None
  return env


def _describe(space):
  """A short description of a space: 'Box(4,) float32', 'Discrete(7)', 'Dict(image, mission)'."""
  import gymnasium  # pylint: disable=g-import-not-at-top
  if isinstance(space, gymnasium.spaces.Box):
    return f'Box{tuple(space.shape)} {space.dtype}'
  if isinstance(space, gymnasium.spaces.Dict):
    return f'Dict({", ".join(space.spaces)})'
  return str(space)


def _is_image_space(space):
  import gymnasium  # pylint: disable=g-import-not-at-top
  return (isinstance(space, gymnasium.spaces.Box) and space.dtype == np.uint8 and len(space.shape) in (2, 3) and
          min(space.shape) >= 1)


def observation_keys(env_id, observation_space, image_key=None, instruction_key=None):
  """Where the frame and the instruction are in an observation: (image key, instruction key), either None for the
  observation itself (an image `Box`) or no instruction.

  Raises:
    UnsupportedEnvironmentError: no image (the message says what is supported).
  """
  import gymnasium  # pylint: disable=g-import-not-at-top
  if _is_image_space(observation_space) and image_key is None and instruction_key is None:
    return None, None
  if not isinstance(observation_space, gymnasium.spaces.Dict):
    raise UnsupportedEnvironmentError(f'{LEVEL_PREFIX}{env_id}: observation space {_describe(observation_space)} has '
                                      f'no image; {SUPPORTED}.')
  spaces = observation_space.spaces
  if image_key is None:
    images = [key for key, space in spaces.items() if _is_image_space(space)]
    image_key = 'image' if 'image' in images else images[0] if len(images) == 1 else None
  if image_key not in spaces or not _is_image_space(spaces[image_key]):
    raise UnsupportedEnvironmentError(
        f'{LEVEL_PREFIX}{env_id}: observation entries {", ".join(spaces)} have no image entry '
        f'(GymnasiumEnvironment.image_key names one); {SUPPORTED}.')
  if instruction_key is None:
    texts = [key for key, space in spaces.items() if isinstance(space, gymnasium.spaces.Text)]
    instruction_key = 'mission' if 'mission' in spaces else texts[0] if len(texts) == 1 else None
  elif instruction_key not in spaces:
    raise UnsupportedEnvironmentError(f'{LEVEL_PREFIX}{env_id}: no observation entry {instruction_key!r} for the '
                                      f'instruction; entries: {", ".join(spaces)}.')
  return image_key, instruction_key


def check_spaces(env_id, env, image_key=None, instruction_key=None):
  """(num_actions, image shape [H, W, C], image key, instruction key) of a made environment.

  Raises:
    UnsupportedEnvironmentError: actions not `Discrete` from 0, or no image.
  """
  import gymnasium  # pylint: disable=g-import-not-at-top
  actions = env.action_space
  discrete: Any = actions if isinstance(actions, gymnasium.spaces.Discrete) else None  # (numpy scalars: Any)
  if discrete is None or int(discrete.start) != 0:
    raise UnsupportedEnvironmentError(f'{LEVEL_PREFIX}{env_id}: action space {_describe(actions)} is not '
                                      f'Discrete(n); {SUPPORTED}.')
  image_key, instruction_key = observation_keys(env_id, env.observation_space, image_key, instruction_key)
  space = env.observation_space if image_key is None else env.observation_space.spaces[image_key]
  shape = tuple(space.shape) if len(space.shape) == 3 else tuple(space.shape) + (1,)
  return int(discrete.n), shape, image_key, instruction_key


def _nearest_indices(source_size, target_size):
  """int [target_size]: the source pixel under the centre of each target pixel."""
  return np.minimum(((np.arange(target_size) + 0.5) * source_size / target_size).astype(np.int64), source_size - 1)


class _Resize:
  """Resizes uint8 [h, w, c] frames to [height, width, c]: area averaging (as `atari`'s) when a side shrinks,
  else nearest pixel, which keeps symbolic images (MiniGrid's object / colour / state codes) exact."""

  def __init__(self, source_shape, height, width):
    source_height, source_width, _ = source_shape
    self._identity = (source_height, source_width) == (height, width)
    self._nearest = height >= source_height and width >= source_width
    if self._nearest:
      self._rows, self._columns = _nearest_indices(source_height, height), _nearest_indices(source_width, width)
    else:
      self._row_matrix = environment_specs.area_resize_matrix(source_height, height)  # [height, h]
      self._column_matrix = environment_specs.area_resize_matrix(source_width, width)  # [width, w]

  def __call__(self, frame):
    if self._identity:
      return np.array(frame, np.uint8)
    if self._nearest:
      return frame[self._rows][:, self._columns]
    rows = np.tensordot(self._row_matrix, frame.astype(np.float32), axes=(1, 0))  # [height, w, c]
    resized = np.tensordot(rows, self._column_matrix, axes=(1, 1))  # [height, c, width]
    return (resized.transpose(0, 2, 1) + 0.5).astype(np.uint8)


@gin.configurable('GymnasiumEnvironment', module='scalable_agent',
                  denylist=['env_id', 'width', 'height', 'num_action_repeats', 'seed', 'is_test'])
class GymnasiumEnvironment:
  """A Gymnasium environment as an IMPALA level (module docstring).

  * `make_kwargs` go to `gymnasium.make`, then `wrappers` wrap the environment, in order (e.g.
    'minigrid.wrappers.RGBImgPartialObsWrapper': MiniGrid's view drawn in pixels).
  * One `step` = `num_action_repeats` environment steps with the same action, rewards summed (unclipped; fewer
    when the episode ends first). An episode ends (`done`) when Gymnasium's episode ends, terminated or truncated;
    the environment is reset then and the observation is the next episode's first.
  * Seeds: the first `reset` gets a seed drawn from `np.random.RandomState(seed)` (test mode, `is_test`: from another
    stream), later resets continue the environment's own random generator (Gymnasium's contract), so episodes are
    reproducible given `seed`.
  * The frame is the image resized to [height, width] (`_Resize`), channels as the environment's (1 for an H x W
    image). The instruction is the text entry, '' without one or with `use_instruction=False` (the ablation that
    hides the instruction from the agent).
  The settings after `is_test` are gin parameters `GymnasiumEnvironment.<name>`.
  """

  def __init__(self, env_id, width=environment_specs.DEFAULT_WIDTH, height=environment_specs.DEFAULT_HEIGHT,
               num_action_repeats=1, seed=1, is_test=False, make_kwargs: Optional[Dict[str, Any]] = None,
               wrappers: Sequence[Any] = (), image_key=None, instruction_key=None, use_instruction=True):
    """Makes the environment and checks its spaces.

    Args:
      env_id: a Gymnasium id (or 'module:id').
      width, height: the agent's frame size in pixels.
      num_action_repeats: environment steps per agent step (>= 1).
      seed: seeds the episodes.
      is_test: test mode: episodes from another random stream.
      make_kwargs: keyword arguments of `gymnasium.make`.
      wrappers: 'module.Class' paths (or (path, kwargs) pairs) of wrappers, applied in order.
      image_key, instruction_key: the observation entries of the frame and the instruction, for a `Dict`
        observation (default: module docstring).
      use_instruction: False gives '' as the instruction (the instruction-blind ablation).

    Raises:
      UnsupportedEnvironmentError: an unknown id, or spaces this backend cannot run.
      ValueError: a bad setting.
    """
    if num_action_repeats < 1 or width < 1 or height < 1:
      raise ValueError(f'need num_action_repeats >= 1 and a positive frame size; got num_action_repeats='
                       f'{num_action_repeats}, {width}x{height}.')
    self._env = make(env_id, make_kwargs, wrappers)
    self.num_actions, image_shape, self._image_key, self._instruction_key = check_spaces(
        env_id, self._env, image_key, instruction_key)
    self._use_instruction = use_instruction
    self._num_action_repeats = num_action_repeats
    self._resize = _Resize(image_shape, height, width)
    self._channels = image_shape[2]
    self._first_seed = int(np.random.RandomState([seed, int(is_test)]).randint(0, 2**31 - 1))
    self._seeded = False

  @property
  def env(self):
    """The Gymnasium environment (wrapped), for inspection."""
    return self._env

  def _observation(self, observation):
    image = observation if self._image_key is None else observation[self._image_key]
    image = np.asarray(image, np.uint8).reshape(image.shape[:2] + (self._channels,))
    instruction = ''
    if self._use_instruction and self._instruction_key is not None:
      instruction = str(observation[self._instruction_key])
    return self._resize(image), instruction

  def _reset(self):
    observation, _ = self._env.reset(seed=None if self._seeded else self._first_seed)
    self._seeded = True
    return self._observation(observation)

  def initial(self):
    """Starts an episode. Returns (frame uint8 [height, width, channels], instruction str)."""
    return self._reset()

  def step(self, action):
    """One agent step: the action for `num_action_repeats` environment steps (fewer if the episode ends first).

    Args:
      action: int in [0, num_actions).

    Returns:
      (reward float32 [], done bool [], observation); when done, the observation is the next episode's first.
    """
    action = environment_specs.check_action(action, self.num_actions)
    reward = 0.
    done = False
    for _ in range(self._num_action_repeats):
      observation, step_reward, terminated, truncated, _ = self._env.step(action)
      reward += float(step_reward)
      done = bool(terminated or truncated)
      if done:
        break
    frame = self._reset() if done else self._observation(observation)
    return np.array(reward, dtype=np.float32), np.array(done), frame

  def close(self):
    self._env.close()

  @staticmethod
  def spaces(constructor_kwargs) -> Tuple[int, Tuple[int, int, int]]:
    """(num_actions, image shape [H, W, C]) of the environment these constructor arguments make (it is made and
    closed); `UnsupportedEnvironmentError` as the constructor."""
    env = make(constructor_kwargs['env_id'], constructor_kwargs.get('make_kwargs'),
               constructor_kwargs.get('wrappers', ()))
    try:
      num_actions, image_shape, _, _ = check_spaces(constructor_kwargs['env_id'], env,
                                                    constructor_kwargs.get('image_key'),
                                                    constructor_kwargs.get('instruction_key'))
    finally:
      env.close()
    return num_actions, image_shape

  @staticmethod
  def _num_actions(constructor_kwargs):
    return GymnasiumEnvironment.spaces(constructor_kwargs)[0]

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, constructor_kwargs):
    """A nest of `tf.TensorSpec`: the output of `method_name` ('initial' or 'step')."""
    channels = GymnasiumEnvironment.spaces(constructor_kwargs)[1][2]
    return environment_specs.method_specs(method_name, constructor_kwargs.get('height',
                                                                              environment_specs.DEFAULT_HEIGHT),
                                          constructor_kwargs.get('width', environment_specs.DEFAULT_WIDTH), channels)
