"""Random-policy baseline on the maze tasks (original: efficient-hrl run_env.py).

For each task and each of its evaluation goals (the EVAL_MODES of the task's gin file, as in the original's
research/efficient-hrl/context/configs/<env>.gin), runs episodes of `--episode_length` (500) steps with actions drawn
uniformly from the action spec, and counts an episode as a success if the distance between the goal and the goal
dimensions of the final observation is < 5 (x, y; x, y, z for AntFall; the block's x, y for the Block tasks), as the
original's run_env.py success function and eval.

Prints a Markdown table (success rate, mean and minimum final distance) for docs/hiro/environments.md.

Usage: python scripts/run_env.py [--tasks AntMaze,AntPush,...] [--episodes_per_goal 20] [--seed 0]
"""

import argparse
import os
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

from uvf.environments import create_maze_env  # pylint: disable=g-import-not-at-top,wrong-import-position

# Task -> (observation indices compared with the goal, evaluation goals), from the context gin files.
EVAL_GOALS = {
    'AntMaze': ([0, 1], [(16, 0), (16, 16), (0, 16)]),
    'AntPush': ([0, 1], [(0, 19)]),
    'AntFall': ([0, 1, 2], [(0, 27, 4.5)]),
    'AntBlock': ([3, 4], [(16, 0), (16, 16), (0, 16)]),
    'AntBlockMaze': ([3, 4], [(8, 0), (8, 16), (0, 16)]),
    'PointMaze': ([0, 1], [(8, 0), (8, 8), (0, 8)]),
}
SUCCESS_DISTANCE = 5.0


def run_task(task, episodes_per_goal, episode_length, seed):
  """Yields (goal, successes, final distances) for each evaluation goal of `task`."""
  indices, goals = EVAL_GOALS[task]
  env = create_maze_env.create_maze_env(task)
  env.seed(seed)
  spec = env.action_spec()
  rng = np.random.default_rng(seed)
  for goal in goals:
    goal = np.asarray(goal, dtype=np.float64)
    distances = []
    for _ in range(episodes_per_goal):
      env.reset()
      actions = rng.uniform(spec.minimum, spec.maximum, (episode_length,) + spec.shape).astype(spec.dtype)
      for action in actions:
        obs = env.step(action).observation
      distances.append(float(np.linalg.norm(obs[indices] - goal)))
    distances = np.array(distances)
    yield goal, distances < SUCCESS_DISTANCE, distances
  env.close()


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--tasks', default=','.join(EVAL_GOALS))
  parser.add_argument('--episodes_per_goal', type=int, default=20)
  parser.add_argument('--episode_length', type=int, default=500)
  parser.add_argument('--seed', type=int, default=0)
  args = parser.parse_args(argv)
  tasks = [t for t in args.tasks.split(',') if t]
  for task in tasks:
    if task not in EVAL_GOALS:
      raise ValueError(f'Unknown task {task!r}; valid tasks: {", ".join(EVAL_GOALS)}.')

  print(f'Random policy, {args.episodes_per_goal} episodes of {args.episode_length} steps per goal, seed {args.seed}; '
        f'success = final distance < {SUCCESS_DISTANCE:g}.\n')
  print('| task | goal (obs dims) | success rate | mean final distance | min final distance |')
  print('|---|---|---|---|---|')
  start = time.time()
  for task in tasks:
    indices = EVAL_GOALS[task][0]
    for goal, successes, distances in run_task(task, args.episodes_per_goal, args.episode_length, args.seed):
      goal_text = '(' + ', '.join(f'{g:g}' for g in goal) + ')'
      print(
          f'| {task} | {goal_text} (obs{indices}) | {successes.mean():.2f} ({successes.sum()}/{len(successes)}) | '
          f'{distances.mean():.2f} | {distances.min():.2f} |', flush=True)
  print(f'\n{time.time() - start:.0f} s')


if __name__ == '__main__':
  main()
