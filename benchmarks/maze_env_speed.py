"""Environment steps per second of each maze task beside the physics floor, measured side by side.

For each task the environment (`create_maze_env`, stepped through the public tf-agents `step`) and the bare physics
of the same compiled model (a second `MjData`: write the controls, then `frame_skip` x `mujoco.mj_step`, i.e. 5 for
the ant, 1 for the point) run the same random action sequence from the same reset state, back to back in short rounds
(alternating which goes first) so that both see the same machine load. Printed: the median rates over rounds and
the median of the per-round ratios env / raw (the target is >= 0.85 for the ant tasks).

Usage: python benchmarks/maze_env_speed.py [--steps_per_round 250] [--rounds 21] [--tasks AntMaze,AntPush,...]
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# uvf first: it imports mujoco without an OpenGL back end.
import mujoco  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import uvf  # noqa: F401  pylint: disable=g-import-not-at-top,wrong-import-position,unused-import
from uvf.environments import create_maze_env  # pylint: disable=g-import-not-at-top,wrong-import-position
from uvf.environments import point  # pylint: disable=g-import-not-at-top,wrong-import-position

TASKS = ('AntMaze', 'AntPush', 'AntFall', 'AntBlock', 'AntBlockMaze', 'PointMaze')


def _random_actions(spec, n, seed):
  rng = np.random.default_rng(seed)
  return rng.uniform(spec.minimum, spec.maximum, (n,) + spec.shape).astype(spec.dtype)


def measure(task, steps_per_round, rounds, seed=0):
  """(env steps/s, raw steps/s, env/raw, frame_skip): medians over `rounds` rounds of `steps_per_round` steps."""
  env = create_maze_env.create_maze_env(task)
  robot = env.wrapped_env
  model = robot.model
  raw_data = mujoco.MjData(model)
  actions = _random_actions(env.action_spec(), steps_per_round, seed)
  is_point = isinstance(robot, point.PointEnv)
  env_rates, raw_rates, ratios = [], [], []
  ctrl, nstep, mj_step = raw_data.ctrl, robot.frame_skip, mujoco.mj_step

  def run_env():
    step = env.step
    start = time.perf_counter()
    for a in actions:
      step(a)
    return steps_per_round / (time.perf_counter() - start)

  def run_raw():
    start = time.perf_counter()
    if is_point:  # The point is moved kinematically; its motors are never driven.
      for _ in actions:
        mj_step(model, raw_data, nstep)
    else:
      for a in actions:
        ctrl[:] = a
        mj_step(model, raw_data, nstep)
    return steps_per_round / (time.perf_counter() - start)

  for r in range(rounds):
    env.seed(seed + r)
    env.reset()
    # The raw run starts from the environment's reset state and replays the same actions.
    raw_data.qpos[:] = robot.data.qpos
    raw_data.qvel[:] = robot.data.qvel
    mujoco.mj_forward(model, raw_data)
    # Back to back, in alternating order, so that both halves of a round see the same machine load.
    if r % 2:
      raw_rate = run_raw()
      env_rate = run_env()
    else:
      env_rate = run_env()
      raw_rate = run_raw()
    env_rates.append(env_rate)
    raw_rates.append(raw_rate)
    ratios.append(env_rate / raw_rate)
  env.close()
  return statistics.median(env_rates), statistics.median(raw_rates), statistics.median(ratios), robot.frame_skip


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--steps_per_round', type=int, default=250)
  parser.add_argument('--rounds', type=int, default=21)
  parser.add_argument('--tasks', default=','.join(TASKS))
  args = parser.parse_args(argv)
  tasks = [t for t in args.tasks.split(',') if t]
  print(f'mujoco {mujoco.__version__}; {args.rounds} rounds x {args.steps_per_round} steps; medians '
        '(env/raw: median of the per-round ratios)')
  print(f'{"task":<14}{"frame_skip":>11}{"env steps/s":>14}{"raw steps/s":>14}{"env/raw":>9}')
  for task in tasks:
    env_rate, raw_rate, ratio, frame_skip = measure(task, args.steps_per_round, args.rounds)
    print(f'{task:<14}{frame_skip:>11}{env_rate:>14.0f}{raw_rate:>14.0f}{ratio:>9.3f}', flush=True)


if __name__ == '__main__':
  main()
