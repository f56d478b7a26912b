"""Builds HIRO's MuJoCo maze environments by name (original: efficient-hrl environments/create_maze_env.py).

Names: `tasks.ENV_NAMES` (e.g. 'AntMaze', 'AntPush', 'AntFall', 'AntBlock', 'AntBlockMaze', 'PointMaze', 'EgoAntMaze').

The original wrapped the gym environment in tf-agents' `GymWrapper`; here the environments are tf-agents
`PyEnvironment`s themselves, with the same specs (float32 observation with bounds -inf..inf, float32 action with the
actuators' bounds). `TFPyEnvironment` below is the TF wrapper HIRO's training loop uses.
"""

import gin
import tensorflow as tf
from tf_agents.environments import batched_py_environment
from tf_agents.environments import py_environment
from tf_agents.environments import tf_py_environment

from uvf.environments import ant
from uvf.environments import ant_maze_env
from uvf.environments import point
from uvf.environments import point_maze_env
from uvf.environments import tasks

# Robot simulation class -> the tf-agents environment class.
_ENV_CLASSES = {
    ant.AntEnv: ant_maze_env.AntMazeEnv,
    point.PointEnv: point_maze_env.PointMazeEnv,
}


def _parse(env_name):
  """(environment class, keyword arguments) for `env_name`; ValueError lists the valid names."""
  try:
    kwargs = tasks.maze_kwargs(env_name)
  except ValueError as e:
    raise ValueError(f'{e} (set create_maze_env.env_name).') from None
  return _ENV_CLASSES[kwargs.pop('robot_class')], kwargs


@gin.configurable
def create_maze_env(env_name=None, top_down_view=False):
  """The environment `env_name`, reset once, as a tf-agents `PyEnvironment` (a `maze_env.MazeEnv`).

  Args:
    env_name: one of `tasks.ENV_NAMES`, e.g. 'AntMaze', 'AntPush', 'AntFall', 'AntBlock', 'AntBlockMaze', 'PointMaze'.
    top_down_view: append the 5 x 5 x 3 top-down view to the observation (the `*_img` configurations).

  Returns:
    The environment, already reset, with unseeded reset noise (call `env.seed(s)` and `env.reset()` for a seeded
    trajectory). Observation float32 [D] (30 for AntMaze / AntPush / AntFall, 33 for AntBlock / AntBlockMaze, 7 for
    PointMaze; +24 with 'Ego'; +75 with the top-down view), action float32 [8] in [-30, 30] for the ant.
  """
  cls, kwargs = _parse(env_name)
  env = cls(top_down_view=top_down_view, **kwargs)
  env.reset()
  return env


class TFPyEnvironment(tf_py_environment.TFPyEnvironment):
  """The TF wrapper of a maze environment with the interface HIRO's training loop uses (batch size 1)."""

  def __init__(self, environment, *args, **kwargs):
    # tf-agents batches a single environment with a one-thread pool, which only adds a thread hop per step and a
    # `Pool.__del__` error at interpreter exit; batch it here without one.
    if isinstance(environment, py_environment.PyEnvironment) and not environment.batched:
      environment = batched_py_environment.BatchedPyEnvironment([environment], multithreading=False)
    super().__init__(environment, *args, **kwargs)

  def start_collect(self):
    """Does nothing (kept from the original's interface)."""

  def current_obs(self):
    """float32 [D] tensor, the current time step's observation without the batch dimension."""
    time_step = self.current_time_step()
    return time_step.observation[0]

  def step(self, actions):
    """Steps with `actions` (float32 [A] tensor, no batch dimension).

    Returns:
      (is_last, reward, discount): bool, float32 and float32 scalar tensors of the new time step.
    """
    actions = tf.expand_dims(actions, 0)
    next_step = super().step(actions)
    return next_step.is_last()[0], next_step.reward[0], next_step.discount[0]

  def reset(self):
    """Resets the environment; returns the batched first `TimeStep`."""
    return super().reset()
