"""The ant in a maze (original: efficient-hrl environments/ant_maze_env.py)."""

from uvf.environments import ant
from uvf.environments import maze_env


class AntMazeEnv(maze_env.MazeEnv):
  """`MazeEnv` with the rllab ant (`ant.AntEnv`); create_maze_env uses maze_size_scaling 8."""
  MODEL_CLASS = ant.AntEnv
