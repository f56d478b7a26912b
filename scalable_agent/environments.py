"""Environments for IMPALA: DeepMind Lab, Atari and a built-in grid task behind one step API.

Level names (the `level_name` flag / `experiment.level_name` gin parameter):
  * a DeepMind Lab level, e.g. `explore_goal_locations_small`, or `dmlab30` for the DMLab-30 suite (as the original);
  * `atari/<game>` for an Atari game of the Arcade Learning Environment, `<game>` being an ale-py ROM id such as
    `pong` or `space_invaders` (ale-py ships the ROMs);
  * `builtin/<task>` for a small NumPy task of this package (`builtin.BUILTIN_TASKS`), e.g. `builtin/go_to_color`;
  * `gymnasium/<id>` for any registered Gymnasium environment with discrete actions and an image observation, e.g.
    `gymnasium/BabyAI-GoToLocal-v0` (`gymnasium_levels`).
Several levels trained at once, their actors assigned round robin as DMLab-30's: the names joined by commas
(`settings.training_levels`).

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
This module holds what the original `environments.py` held (DeepMind Lab, `FlowEnvironment`, the level choice); the
Atari, built-in and Gymnasium backends are `atari.py`, `builtin.py` and `gymnasium_levels.py`, what all backends share
`environment_specs.py`.
Details and the Atari / built-in designs: docs/impala/environments.md.
"""

import collections
import importlib
import inspect
from typing import Any

import gin
import numpy as np

from scalable_agent import atari
from scalable_agent import builtin
from scalable_agent import dmlab30
from scalable_agent import environment_specs
from scalable_agent import gymnasium_levels

# One environment step, as the original `StepOutput` (deepmind/scalable_agent environments.py). The field order is
# the nest order.
#   reward: float32, the reward of the step (unclipped);
#   info: StepOutputInfo(episode_return float32, episode_step int32), running totals of the current episode;
#   done: bool, True on the first observation of a new episode (and on the initial output);
#   observation: (frame uint8 [height, width, 3], instruction tf.string).
# Batched and time-major versions carry leading [B] or [T, B] dimensions on every field.
StepOutputInfo = collections.namedtuple('StepOutputInfo', ['episode_return', 'episode_step'])
StepOutput = collections.namedtuple('StepOutput', ['reward', 'info', 'done', 'observation'])

DMLAB30_PREFIX = 'contributed/dmlab30/'

DMLAB_INSTALL_HELP = (
    'DeepMind Lab is not on a package registry: build its Python package from source '
    '(github.com/google-deepmind/lab: `bazel build -c opt //python/pip_package:build_pip_package`, then '
    '`./bazel-bin/python/pip_package/build_pip_package /tmp/dmlab_pkg` and '
    '`pip install /tmp/dmlab_pkg/deepmind_lab-*.whl`); docs/install.md, section "DeepMind Lab", has the steps.')

# DeepMind Lab actions: [LOOK_LEFT_RIGHT_PIXELS_PER_FRAME, LOOK_DOWN_UP_PIXELS_PER_FRAME, STRAFE_LEFT_RIGHT,
# MOVE_BACK_FORWARD, FIRE, JUMP, CROUCH]. The original's nine actions, in its order (paper Table D.2).
DEFAULT_ACTION_SET = (
    (0, 0, 0, 1, 0, 0, 0),  # Forward
    (0, 0, 0, -1, 0, 0, 0),  # Backward
    (0, 0, -1, 0, 0, 0, 0),  # Strafe Left
    (0, 0, 1, 0, 0, 0, 0),  # Strafe Right
    (-20, 0, 0, 0, 0, 0, 0),  # Look Left
    (20, 0, 0, 0, 0, 0, 0),  # Look Right
    (-20, 0, 0, 1, 0, 0, 0),  # Look Left + Forward
    (20, 0, 0, 1, 0, 0, 0),  # Look Right + Forward
    (0, 0, 0, 0, 1, 0, 0),  # Fire
)

# ---------------------------------------------------------------------------------------------------------------------
# DeepMind Lab.


class PyProcessDmLab:
  """A DeepMind Lab level, as the original `PyProcessDmLab` (deepmind/scalable_agent environments.py).

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
      environment_specs.MissingDependencyError: `deepmind_lab` cannot be imported.
    """
    try:
      deepmind_lab = importlib.import_module('deepmind_lab')
    except ImportError as e:
      raise environment_specs.MissingDependencyError(
          f'DeepMind Lab level {level!r} needs the module deepmind_lab ({e}). {DMLAB_INSTALL_HELP}') from None
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
    self._env.reset(seed=self._random_state.randint(0, 2**31 - 1))

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
    raw_action = self._action_set[environment_specs.check_action(action, len(self._action_set))]
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
    return environment_specs.method_specs(method_name, int(config.get('height', 240)), int(config.get('width', 320)))


# ---------------------------------------------------------------------------------------------------------------------
# Levels -> environments.


def level_backend(level_name):
  """Returns 'atari', 'builtin', 'gymnasium' or 'dmlab' for a level name (see the module docstring)."""
  if level_name.startswith(atari.LEVEL_PREFIX):
    return 'atari'
  if level_name.startswith(builtin.LEVEL_PREFIX):
    return 'builtin'
  if level_name.startswith(gymnasium_levels.LEVEL_PREFIX):
    return 'gymnasium'
  return 'dmlab'


GYMNASIUM_MODULE_HELP = {
    'minigrid': 'pip install minigrid==3.2.0 (in requirements.txt)',
    'ale_py': 'pip install ale-py==0.12.1 (in requirements.txt)'
}


def check_level_available(level_name):
  """Checks, without starting anything, that `level_name` can run on this machine.

  Raises:
    environment_specs.MissingDependencyError: the level needs DeepMind Lab and `deepmind_lab` is not importable.
    ValueError: an Atari level names a game that ale-py does not have, or an unknown built-in level (the message lists
      the valid ones), or a Gymnasium level that does not exist or that this backend cannot run
      (`gymnasium_levels.UnsupportedEnvironmentError`).
  """
  backend = level_backend(level_name)
  if backend == 'gymnasium':
    constructor = environment_constructor(level_name, seed=1)
    try:
      gymnasium_levels.GymnasiumEnvironment.spaces(constructor.kwargs)  # makes the environment, checks its spaces
    except ImportError as e:
      raise environment_specs.MissingDependencyError(
          f'level {level_name!r} needs the module {e.name} ({e}): '
          f'{GYMNASIUM_MODULE_HELP.get(e.name or "", "install the package that registers this environment")}.'
      ) from None
    return
  if backend == 'atari':
    from ale_py import roms  # pylint: disable=g-import-not-at-top
    game = level_name[len(atari.LEVEL_PREFIX):]
    games = roms.get_all_rom_ids()
    if game not in games:
      raise ValueError(f'unknown Atari level {level_name!r}: ale-py has no ROM {game!r}. Atari levels are '
                       f'{atari.LEVEL_PREFIX}<game> with <game> one of: {", ".join(games)}.')
    return
  if backend == 'builtin':
    builtin.check_task(level_name[len(builtin.LEVEL_PREFIX):])
    return
  try:
    importlib.import_module('deepmind_lab')
  except ImportError as e:
    raise environment_specs.MissingDependencyError(
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


def environment_constructor(level_name, seed, is_test=False, width=environment_specs.DEFAULT_WIDTH,
                            height=environment_specs.DEFAULT_HEIGHT, dataset_path='',
                            num_action_repeats=environment_specs.DEFAULT_NUM_ACTION_REPEATS, **options):
  """The environment of one actor (or of test mode), as the original `create_environment` (experiment.py) chose it.

  DeepMind Lab: levels of DMLab-30 get the prefix 'contributed/dmlab30/'; config width, height, datasetPath
  (`dataset_path`) and logLevel 'WARN'; test mode adds allowHoldOutLevels 'true' and mixerSeed 0x600D5EED.
  Atari: `AtariEnvironment` with the bound gin settings `AtariEnvironment.<name>` (then `options`); test mode plays
  whole games (`terminal_on_life_loss=False`).
  Built-in: `BuiltinEnvironment`; test mode draws its own episodes.
  Gymnasium: `GymnasiumEnvironment` with the bound gin settings `GymnasiumEnvironment.<name>` (then `options`); test
  mode draws its own episodes.

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
      config['mixerSeed'] = environment_specs.TEST_MIXER_SEED
    env_type: Any = PyProcessDmLab  # the environment class
    kwargs = dict(level=level_name, config=config, num_action_repeats=num_action_repeats, seed=seed)
  elif backend == 'atari':
    env_type = atari.AtariEnvironment
    kwargs = dict(game=level_name[len(atari.LEVEL_PREFIX):], width=width, height=height,
                  num_action_repeats=num_action_repeats, seed=seed)
  elif backend == 'gymnasium':
    env_type = gymnasium_levels.GymnasiumEnvironment
    kwargs = dict(env_id=level_name[len(gymnasium_levels.LEVEL_PREFIX):], width=width, height=height,
                  num_action_repeats=num_action_repeats, seed=seed, is_test=is_test)
  else:
    task = level_name[len(builtin.LEVEL_PREFIX):]
    builtin.check_task(task)
    env_type = builtin.BuiltinEnvironment
    kwargs = dict(task=task, width=width, height=height, num_action_repeats=num_action_repeats, seed=seed,
                  is_test=is_test)
  allowed = [name for name in inspect.signature(env_type.__init__).parameters if name not in kwargs and name != 'self']
  unknown = sorted(set(options) - set(allowed))
  if unknown:
    raise ValueError(f'unknown option(s) {", ".join(unknown)} for {backend} level {level_name!r}; the options of '
                     f'{env_type.__name__} are: {", ".join(allowed) or "none"}.')
  if backend in ('atari', 'gymnasium'):
    # The gin settings (`AtariEnvironment.<name>`, ...) travel as arguments: the environment's process has no gin.
    kwargs.update({**gin.get_bindings(env_type.__name__), **options})
    if is_test and backend == 'atari':
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
