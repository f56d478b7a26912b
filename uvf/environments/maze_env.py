"""The maze world as a tf-agents `PyEnvironment`, for HIRO's training and evaluation (original: efficient-hrl
environments/maze_env.py, which the original wrapped in tf-agents' `GymWrapper`).

The world itself (construction, observation, seeding, sensors, rendering) is `maze.Maze`, which needs no TensorFlow;
this class adds the tf-agents specs and time steps. The environment never ends an episode (discount 1, step type MID
after the first); HIRO's training loop cuts episodes at 500 steps.
"""

import numpy as np
from tf_agents.environments import py_environment
from tf_agents.specs import array_spec
from tf_agents.trajectories import time_step as ts

from uvf.environments import maze


class MazeEnv(maze.Maze, py_environment.PyEnvironment):
  """`maze.Maze` as a tf-agents `PyEnvironment`; subclasses set `MODEL_CLASS` (`AntMazeEnv`, `PointMazeEnv`).

  Specs: observation float32 [D], unbounded like the gym Box(-inf, inf) the original wrapped (tf-agents stores
  infinite bounds as the float32 extremes); action float32 [A], bounds = the robot actuators' ctrlrange (a scalar
  bound when all actuators share it). Rewards are float32 scalars (the robot's own reward, which HIRO ignores).
  """

  def __init__(self, *args, **kwargs):
    """Builds the maze: the arguments of `maze.Maze` (maze_id, maze_size_scaling, n_bins, seed, ...)."""
    py_environment.PyEnvironment.__init__(self, handle_auto_reset=False)
    maze.Maze.__init__(self, *args, **kwargs)
    self._observation_spec = array_spec.BoundedArraySpec((self.observation_size,), np.float32, minimum=-np.inf,
                                                         maximum=np.inf, name='observation')
    low, high = self.action_low, self.action_high
    if np.all(low == low[0]) and np.all(high == high[0]):
      low, high = low[0], high[0]
    self._action_spec = array_spec.BoundedArraySpec((len(self.action_low),), np.float32, minimum=low, maximum=high,
                                                    name='action')
    # Constant parts of every non-first time step (never mutated).
    self._mid = np.asarray(ts.StepType.MID, dtype=np.int32)
    self._discount = np.asarray(1.0, dtype=np.float32)

  def observation_spec(self):
    """BoundedArraySpec float32 [D]."""
    return self._observation_spec

  def action_spec(self):
    """BoundedArraySpec float32 [A]."""
    return self._action_spec

  def _reset(self):
    return ts.restart(self.restart())

  def _step(self, action):
    reward, observation = self.advance(action)
    return ts.TimeStep(self._mid, np.asarray(reward, dtype=np.float32), self._discount, observation)
