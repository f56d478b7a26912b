"""HIRO's named maze environments and their tasks, without TensorFlow (original: efficient-hrl
environments/create_maze_env.py for the names, context/configs/*.gin for the tasks).

Names: an optional 'Ego' prefix (8 range-sensor rays in the observation), a robot ('Ant': maze size scaling 8;
'Point': scaling 4 and manual collision) and a maze ('Maze', 'Push', 'Fall', 'Block', 'BlockMaze'; the Block mazes
also get a small spinning block next to the robot and observe the blocks' positions). E.g. 'AntMaze', 'AntPush',
'AntFall', 'AntBlock', 'AntBlockMaze', 'PointMaze', 'EgoAntMaze'.

Tasks: the evaluation target of each maze in its config (`eval*/ConstantSampler.value`) and the observation indices
the task reward compares with it (`task/negative_distance.state_indices`): reward = -sqrt(||s'[indices] - target||^2
+ 1e-10), success = distance < 5 at the episode's last step (the papers' Table 1 / Figure 4 targets for AntMaze,
AntPush and AntFall).
"""

import dataclasses
from typing import Any, Dict, Tuple

from uvf import protocol
from uvf.environments import ant
from uvf.environments import point

# Robot prefix -> (robot simulation class, maze size scaling, manual collision).
ROBOTS = {
    'Ant': (ant.AntEnv, 8, False),
    'Point': (point.PointEnv, 4, True),
}
# Maze suffix -> (maze id, put_spin_near_agent and observe_blocks).
_MAZES = {
    'Maze': ('Maze', False),
    'Push': ('Push', False),
    'Fall': ('Fall', False),
    'Block': ('Block', True),
    'BlockMaze': ('BlockMaze', True),
}
ENV_NAMES = tuple(f'{ego}{robot}{maze}' for ego in ('', 'Ego') for robot in ROBOTS for maze in _MAZES)


@dataclasses.dataclass(frozen=True)
class Task:
  """A maze's evaluation task.

  Attributes:
    target: the default goal, environment length units (2 or 3 values).
    indices: the observation indices compared with the goal (robot x, y [, z]; the first block's x, y for Block*).
    mode: the evaluation mode of the config that has this target (e.g. 'eval3').
  """
  target: Tuple[float, ...]
  indices: Tuple[int, ...]
  mode: str


# Maze name without 'Ego' -> its task (context/configs/<maze>.gin; the mode of the papers' target where one exists,
# else the far corner, as AntMaze's).
TASKS = {
    'AntMaze': Task((0.0, 16.0), (0, 1), 'eval3'),
    'AntPush': Task((0.0, 19.0), (0, 1), 'eval2'),
    'AntFall': Task((0.0, 27.0, 4.5), (0, 1, 2), 'eval1'),
    'AntBlock': Task((0.0, 16.0), (3, 4), 'eval3'),
    'AntBlockMaze': Task((0.0, 16.0), (3, 4), 'eval3'),
    'PointMaze': Task((0.0, 8.0), (0, 1), 'eval3'),
}
SUCCESS_DISTANCE = protocol.SUCCESS_DISTANCE  # environment length units (the original's `last_meta_reward > -5`)


def check_name(env_name: object) -> None:
  """Raises ValueError naming the valid names if `env_name` is not one of `ENV_NAMES`."""
  if not isinstance(env_name, str) or env_name not in ENV_NAMES:
    raise ValueError(f'Unknown maze environment {env_name!r}; valid names: {", ".join(ENV_NAMES)}.')


def maze_kwargs(env_name: str) -> Dict[str, Any]:
  """The `maze.Maze` keyword arguments of `env_name` (robot_class, maze_id, n_bins, observe_blocks, ...)."""
  check_name(env_name)
  name = env_name
  n_bins = 0
  if name.startswith('Ego'):
    n_bins = 8
    name = name[len('Ego'):]
  robot = next(r for r in ROBOTS if name.startswith(r))
  robot_class, maze_size_scaling, manual_collision = ROBOTS[robot]
  maze_id, blocks = _MAZES[name[len(robot):]]
  return dict(robot_class=robot_class, maze_id=maze_id, n_bins=n_bins, observe_blocks=blocks,
              put_spin_near_agent=blocks, manual_collision=manual_collision, maze_size_scaling=maze_size_scaling)


def task_of(env_name: str) -> Task:
  """The `Task` of `env_name` ('Ego' variants share their maze's); KeyError if the maze has no task here."""
  check_name(env_name)
  return TASKS[env_name[len('Ego'):] if env_name.startswith('Ego') else env_name]
