"""Steps per second of the Gymnasium environments (`gymnasium.make('hiro/<task>-v0')`, with the wrappers `make` adds)
beside the tf-agents environment HIRO trains on (`create_maze_env`, its public `step`), measured side by side.

Both step the same random action sequence from the same seeded start, in short rounds that alternate which goes
first, so that both see the same machine load. Printed per task: the median rates over rounds and the median of the
per-round ratios gymnasium / tf-agents (the target is >= 0.9).

Usage: python benchmarks/gymnasium_env_speed.py [--steps_per_round 250] [--rounds 15] [--tasks AntMaze,AntPush,AntFall]
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import gymnasium  # pylint: disable=g-import-not-at-top,wrong-import-position
import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position

import uvf  # noqa: F401  pylint: disable=g-import-not-at-top,wrong-import-position,unused-import  (registers hiro/*)
from uvf.environments import create_maze_env  # pylint: disable=g-import-not-at-top,wrong-import-position


def measure(task, steps_per_round, rounds, seed=0):
  """(gymnasium steps/s, tf-agents steps/s, median per-round ratio)."""
  gym_env = gymnasium.make(f'hiro/{task}-v0', max_episode_steps=-1)  # no truncation inside a round
  tfa_env = create_maze_env.create_maze_env(task)
  space = gym_env.action_space
  actions = np.random.default_rng(seed).uniform(space.low, space.high,
                                                (steps_per_round,) + space.shape).astype(np.float32)

  def run_gym():
    gym_env.reset(seed=seed)
    step = gym_env.step
    start = time.perf_counter()
    for action in actions:
      step(action)
    return steps_per_round / (time.perf_counter() - start)

  def run_tfa():
    tfa_env.seed(seed)
    tfa_env.reset()
    step = tfa_env.step
    start = time.perf_counter()
    for action in actions:
      step(action)
    return steps_per_round / (time.perf_counter() - start)

  run_gym(), run_tfa()  # warm-up
  gym_rates, tfa_rates, ratios = [], [], []
  for r in range(rounds):
    if r % 2:
      b, a = run_tfa(), run_gym()
    else:
      a, b = run_gym(), run_tfa()
    gym_rates.append(a)
    tfa_rates.append(b)
    ratios.append(a / b)
  return statistics.median(gym_rates), statistics.median(tfa_rates), statistics.median(ratios)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--steps_per_round', type=int, default=250)
  parser.add_argument('--rounds', type=int, default=15)
  parser.add_argument('--tasks', default='AntMaze,AntPush,AntFall')
  args = parser.parse_args()
  print('| task | gymnasium steps/s | tf-agents steps/s | ratio (median of rounds) |')
  print('|---|---|---|---|')
  for task in args.tasks.split(','):
    gym_rate, tfa_rate, ratio = measure(task, args.steps_per_round, args.rounds)
    print(f'| {task} | {gym_rate:.0f} | {tfa_rate:.0f} | {ratio:.2f} |', flush=True)


if __name__ == '__main__':
  main()
