"""The point robot in a maze (original: efficient-hrl environments/point_maze_env.py)."""

from uvf.environments import maze_env
from uvf.environments import point


class PointMazeEnv(maze_env.MazeEnv):
  """`MazeEnv` with the kinematic point (`point.PointEnv`); create_maze_env uses maze_size_scaling 4 and
  manual collision."""
  MODEL_CLASS = point.PointEnv
