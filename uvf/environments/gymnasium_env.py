"""HIRO's maze environments as Gymnasium environments: `gymnasium.make('hiro/AntMaze-v0')` after `import uvf`.

The simulation is the one HIRO trains on (`maze.Maze`: the rllab ant of efficient-hrl environments/ant.py, gear 1,
torques in [-30, 30], 0.02 s RK4 timestep x 5 frames, the original maze geometry with scaling 8), on the official
`mujoco` bindings, without TensorFlow. What Gymnasium adds is the task, made explicit as in the papers' evaluation
(Nachum et al. 2018, Section 5.1 and Table 1; efficient-hrl context/configs/<maze>.gin):

  observation  float32 [D], the original's (30 for AntMaze / AntPush / AntFall: torso x, y, z, quaternion, 8 joint
               angles, 14 velocities, time t * 0.001); with `goal_conditioned=True` a dict of `observation`,
               `achieved_goal` (the observation at the task's indices) and `desired_goal` (the goal), as
               Gymnasium-Robotics' goal environments, and `compute_reward` (`GoalConditionedHiroMazeEnv`). Only that
               variant has `compute_reward`: Stable-Baselines3 takes any environment with one for a goal environment
               and then requires the dict
  action       float32 [A], the actuators' bounds (ant: 8 torques in [-30, 30])
  goal         the paper's target by default ((0, 16) AntMaze, (0, 19) AntPush, (0, 27, 4.5) AntFall); set it at
               `make(..., goal=...)` or for one episode with `reset(options={'goal': ...})`
  reward       -distance, distance = sqrt(||s'[indices] - goal||^2 + 1e-10) over the goal's coordinates (the
               original's evaluation reward, `task/negative_distance`)
  info         `distance` (length units) and `success` (distance < 5; the papers' success is `success` at the
               episode's last step)
  episodes     never terminate; `gymnasium.make` truncates them at the original's 500 steps
  seeding      `reset(seed=s)` gives the start state `uvf`'s environment gives after `seed(s)`; the same actions
               then give the same observations (tests/uvf/test_gymnasium_env.py checks 500 steps)
  render       render_mode='rgb_array': the whole maze from above (`maze.Maze.render`; OpenGL loads at the first
               frame)

Version history:
  v0: first version (the original HIRO environments; AntMaze, AntPush, AntFall, AntBlock, AntBlockMaze, PointMaze
      and their Ego variants with 8 range-sensor rays).
"""

import inspect
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

import gymnasium
from gymnasium import spaces
import numpy as np
import numpy.typing as npt

from uvf.environments import maze
from uvf.environments import tasks

NAMESPACE = 'hiro'
VERSION = 0
MAX_EPISODE_STEPS = 500  # the original's max_steps_per_episode (efficient-hrl configs/train_uvf.gin)
# The registered environments: those with a task in `tasks.TASKS`, with and without the range sensors.
REGISTERED = tuple(f'{ego}{name}' for ego in ('', 'Ego') for name in tasks.TASKS)


def env_id(env_name: str) -> str:
  """'AntMaze' -> 'hiro/AntMaze-v0'."""
  return f'{NAMESPACE}/{env_name}-v{VERSION}'


def _negative_distance(achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike) -> np.ndarray:
  """float64 [...]: the reward, -sqrt(||achieved - desired||^2 + 1e-10) (length units), of goals [..., G].

  The one computation of the reward, the step's and `compute_reward`'s alike, so that the two agree bit for bit (as
  Stable-Baselines3's `check_env` requires)."""
  difference = np.asarray(achieved_goal, np.float64) - np.asarray(desired_goal, np.float64)
  return -np.sqrt(np.sum(difference * difference, axis=-1) + 1e-10)


def register_envs() -> None:
  """Registers `REGISTERED` with Gymnasium (entry points are strings: nothing is built until `make`). Idempotent."""
  for name in REGISTERED:
    if env_id(name) not in gymnasium.registry:
      gymnasium.register(id=env_id(name), entry_point=f'{__name__}:HiroMazeEnv', max_episode_steps=MAX_EPISODE_STEPS,
                         kwargs={'env_name': name})


class HiroMazeEnv(gymnasium.Env):
  """One of HIRO's mazes with its evaluation task (see the module docstring).

  `HiroMazeEnv(..., goal_conditioned=True)` (and so `gymnasium.make(id, goal_conditioned=True)`) builds a
  `GoalConditionedHiroMazeEnv`, the subclass with `compute_reward`, as `pathlib.Path(...)` builds a `PosixPath`.

  Args:
    env_name: one of `REGISTERED` (e.g. 'AntMaze', 'AntPush', 'AntFall', 'EgoAntMaze').
    goal: float [len(indices)], the target in environment length units; default the task's (`tasks.TASKS`).
    goal_conditioned: observe a dict (`observation`, `achieved_goal`, `desired_goal`) instead of the array.
    render_mode: None or 'rgb_array'.
    width, height: the frame size of `render()`, pixels.
  """
  metadata = {'render_modes': list(maze.RENDER_MODES), 'render_fps': 10}  # one step is 0.1 s (ant)

  def __new__(cls, *args: Any, **kwargs: Any) -> 'HiroMazeEnv':
    """A `GoalConditionedHiroMazeEnv` where `HiroMazeEnv` itself is called with `goal_conditioned=True`."""
    if cls is HiroMazeEnv:
      arguments: Mapping[str, Any]
      try:
        arguments = inspect.signature(HiroMazeEnv.__init__).bind(None, *args, **kwargs).arguments
      except TypeError:
        arguments = {}  # wrong arguments: `__init__` raises the usual TypeError
      if arguments.get('goal_conditioned', False):
        return super().__new__(GoalConditionedHiroMazeEnv)
    return super().__new__(cls)

  def __init__(self, env_name: str = 'AntMaze', goal: Optional[Sequence[float]] = None, goal_conditioned: bool = False,
               render_mode: Optional[str] = None, width: int = 480, height: int = 480) -> None:
    if env_name not in REGISTERED:
      raise ValueError(f'Unknown HIRO environment {env_name!r}; valid names: {", ".join(REGISTERED)}.')
    if render_mode is not None and render_mode not in self.metadata['render_modes']:
      raise ValueError(f'Unknown render_mode {render_mode!r}; valid: None, {", ".join(maze.RENDER_MODES)}.')
    self.env_name = env_name
    self.task = tasks.task_of(env_name)
    self._indices = np.asarray(self.task.indices)
    self._default_goal = self._check_goal(self.task.target if goal is None else goal)
    self.goal = self._default_goal
    self.goal_conditioned = goal_conditioned
    self.render_mode = render_mode
    self.width, self.height = int(width), int(height)
    self.maze = maze.Maze(**tasks.maze_kwargs(env_name))
    # `self.np_random` is the maze's generator of the start states (unseeded until `reset(seed=...)`).
    self._np_random, self._np_random_seed = self.maze.rng, -1

    size = self.maze.observation_size
    observation = spaces.Box(-np.inf, np.inf, (size,), np.float32)
    if goal_conditioned:
      goal_space = spaces.Box(-np.inf, np.inf, (len(self._indices),), np.float32)
      self.observation_space = spaces.Dict({
          'observation': observation,
          'achieved_goal': goal_space,
          'desired_goal': goal_space
      })
    else:
      self.observation_space = observation
    self.action_space = spaces.Box(self.maze.action_low, self.maze.action_high, dtype=np.float32)

  def _check_goal(self, goal: npt.ArrayLike) -> np.ndarray:
    value = np.asarray(goal, dtype=np.float32)
    if value.shape != self._indices.shape or not np.all(np.isfinite(value)):
      raise ValueError(f'{self.env_name}: the goal must be {len(self._indices)} finite numbers (the observation at '
                       f'indices {tuple(self._indices.tolist())}), got {goal!r}.')
    return value

  def _outputs(self, observation: Any) -> Tuple[Any, float, Dict[str, Any]]:
    """(observation as the space says, distance, success)."""
    achieved = observation[self._indices]
    distance = -float(_negative_distance(achieved, self.goal))
    info = {'distance': distance, 'success': distance < tasks.SUCCESS_DISTANCE}
    if self.goal_conditioned:
      observation = {'observation': observation, 'achieved_goal': achieved, 'desired_goal': self.goal.copy()}
    return observation, -distance, info

  def reset(self, *, seed: Optional[int] = None, options: Optional[Dict[str,
                                                                        Any]] = None) -> Tuple[Any, Dict[str, Any]]:
    """Starts an episode. `seed`: re-seeds the start-state noise; `options={'goal': g}`: the goal of this episode
    (later episodes return to the goal given at construction)."""
    super().reset(seed=seed)
    if seed is not None:
      self.maze.seed(seed)
      self._np_random = self.maze.rng
    goal = (options or {}).get('goal')
    self.goal = self._default_goal if goal is None else self._check_goal(goal)
    observation, _, info = self._outputs(self.maze.restart())
    return observation, info

  def step(self, action: npt.ArrayLike) -> Tuple[Any, float, bool, bool, Dict[str, Any]]:
    """One step (0.1 s for the ant): (observation, reward, terminated=False, truncated=False, info)."""
    _, observation = self.maze.advance(np.asarray(action, dtype=np.float32))
    observation, reward, info = self._outputs(observation)
    return observation, reward, False, False, info

  def render(self) -> Optional[np.ndarray]:
    """uint8 [height, width, 3] with render_mode 'rgb_array'; None without a render mode."""
    if self.render_mode is None:
      return None
    return self.maze.render(height=self.height, width=self.width)

  def close(self) -> None:
    self.maze.close()


class GoalConditionedHiroMazeEnv(HiroMazeEnv):
  """`HiroMazeEnv` with `goal_conditioned=True`: Gymnasium-Robotics' goal-environment interface, the dict observation
  (`observation`, `achieved_goal`, `desired_goal`) and `compute_reward`, for hindsight relabelling (e.g.
  Stable-Baselines3's `HerReplayBuffer`). Same arguments as `HiroMazeEnv`; `goal_conditioned` must stay True."""

  def __init__(self, env_name: str = 'AntMaze', goal: Optional[Sequence[float]] = None, goal_conditioned: bool = True,
               render_mode: Optional[str] = None, width: int = 480, height: int = 480) -> None:
    if not goal_conditioned:
      raise ValueError('GoalConditionedHiroMazeEnv observes the goal dict; HiroMazeEnv observes the array.')
    super().__init__(env_name, goal, True, render_mode, width, height)

  def compute_reward(self, achieved_goal: npt.ArrayLike, desired_goal: npt.ArrayLike, info: Any = None) -> np.ndarray:
    """float64 [...]: the step's reward for achieved / desired goals [..., G] (`info`, one per goal, is unused)."""
    del info  # the reward depends on the goals only
    return _negative_distance(achieved_goal, desired_goal)
