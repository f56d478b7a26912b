r"""Resident memory left behind per agent step by a multi-machine actor's policy (`actor.numpy_policy`).

  python benchmarks/actor_policy_memory.py [--repo PATH] [--steps 20000]

Steps the built-in level's deep agent (72 x 96 frames, the default network) one step at a time with batch 1, as a
multi-machine actor does, and prints the resident memory growth per step after a warm-up, and the time per step.
On Python 3.11 with TensorFlow 2.15 every tensor created at the function's boundary leaves a small block
(docs/impala/atari.md, "Memory"), so the growth shows how many cross per step. --repo runs another checkout's code
(e.g. a `git worktree` of an earlier commit), to compare side by side.
"""

import argparse
import os
import sys
import time


def _resident_bytes():
  with open('/proc/self/statm', encoding='utf-8') as f:
    return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0])
  parser.add_argument('--repo', default=os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  parser.add_argument('--steps', type=int, default=20000)
  parser.add_argument('--warmup', type=int, default=2000)
  args = parser.parse_args()
  sys.path.insert(0, os.path.abspath(args.repo))
  import numpy as np  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from scalable_agent import actor as actor_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import environments  # pylint: disable=g-import-not-at-top
  tf.config.threading.set_intra_op_parallelism_threads(1)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  agent = agent_lib.Agent(4)
  policy = actor_lib.numpy_policy(agent, device='/cpu:0')
  rng = np.random.default_rng(0)
  env_output = environments.StepOutput(
      np.zeros([1], np.float32), environments.StepOutputInfo(np.zeros([1], np.float32), np.zeros([1], np.int32)),
      np.zeros([1], bool), (rng.integers(0, 256, [1, 72, 96, 3]).astype(np.uint8), np.array(['go'], dtype=object)))
  state = tf.nest.map_structure(lambda x: x.numpy(), agent.initial_state(1))
  action = np.zeros([1], np.int32)

  def run(steps):
    nonlocal state, action
    for _ in range(steps):
      output, state = policy(action, env_output, state)
      action = output.action

  run(args.warmup)
  before, start = _resident_bytes(), time.perf_counter()
  run(args.steps)
  seconds = time.perf_counter() - start
  growth = _resident_bytes() - before
  print(f'{os.path.abspath(args.repo)}: {growth / args.steps:.0f} resident bytes per step '
        f'({growth / 2**20:.1f} MB over {args.steps} steps), {1000 * seconds / args.steps:.2f} ms per step')


if __name__ == '__main__':
  main()
