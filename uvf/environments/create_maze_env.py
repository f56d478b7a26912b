"""Builds the MuJoCo maze environments by name (issue #3)."""

import gin

from uvf.placeholders import placeholder


@gin.configurable
@placeholder('the maze environments (create_maze_env)', 3)
def create_maze_env(env_name=None, top_down_view=False):
  """The environment `env_name` ('AntMaze', 'AntPush', 'AntFall', 'AntBlock', 'PointMaze', ...) (issue #3)."""
