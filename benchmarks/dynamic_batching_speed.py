"""Speed of the actor-side plumbing: PyProcess round trips and dynamic batching, on this machine.

  .venv/bin/python benchmarks/dynamic_batching_speed.py [--seconds 3] [--threads 8,32] [--actors 4,8]

Prints:
  * py_process: round trips per second of a method returning one 72x96x3 uint8 frame (the original's
    `process_one` benchmark), for 1 process and for --actors processes each called from its own thread;
  * dynamic batching, many small: `batch_fn(lambda a, b: a + b)` on [1, 10] float32 (the original's
    `batching_many_small`) called from --threads threads; calls per second and mean batch size;
  * dynamic batching, agent-like: the IMPALA agent's one-step call (scalable_agent.agent.Agent, 9 actions, 72x96x3
    frames, LSTM state) batched from --actors threads, against the same step called at batch size 1 without batching.
"""

import argparse
import os
import sys
import threading
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position


class Frames:
  """A stand-in environment in the child process (this module is imported there: no TensorFlow at the top)."""

  def __init__(self, seed=0):
    self._frame = np.random.default_rng(seed).integers(0, 256, (72, 96, 3), dtype=np.uint8)

  def compute(self, unused_a):
    return self._frame


def _rate(call, seconds, threads=1):
  """Total calls per second of `call()` run in a loop by `threads` threads for about `seconds`."""
  counts = [0] * threads
  stop = time.perf_counter() + seconds

  def loop(i):
    n = 0
    while time.perf_counter() < stop:
      call(i)
      n += 1
    counts[i] = n

  start = time.perf_counter()
  workers = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
  for w in workers:
    w.start()
  for w in workers:
    w.join()
  return sum(counts) / (time.perf_counter() - start)


def bench_py_process(seconds, actors):
  from scalable_agent import py_process  # pylint: disable=g-import-not-at-top
  for n in (1, actors):
    processes = [py_process.PyProcess(Frames, seed=i) for i in range(n)]
    py_process.start_all(processes)
    try:
      for p in processes:  # Warm-up.
        p.proxy.compute(2)
      # noqa reason: called within this iteration.
      rate = _rate(lambda i: processes[i].proxy.compute(2), seconds, threads=n)  # noqa: B023
    finally:
      py_process.close_all(processes)
    print(f'py_process  {n:3d} process(es), 72x96x3 uint8 frame round trip: {rate:9.0f} calls/s'
          f'  ({1e6 * n / rate:.0f} us per call per process)')


def bench_many_small(seconds, thread_counts):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from scalable_agent import dynamic_batching  # pylint: disable=g-import-not-at-top

  def add(a, b):
    return a + b, tf.fill(tf.shape(a)[:1], tf.shape(a)[0])

  for threads in thread_counts:
    f = dynamic_batching.batch_fn(add)
    ones = np.ones([1, 10], np.float32)
    sizes = []
    f(ones, ones)
    # noqa reason: called within this iteration.
    rate = _rate(lambda i: sizes.append(int(f(ones, ones)[1][0])), seconds, threads)  # noqa: B023
    f.close()
    print(f'batching    many small [1, 10], {threads:3d} threads: {rate:9.0f} calls/s, mean batch size '
          f'{np.mean(sizes):.1f}')


def bench_agent(seconds, actor_counts):
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import dynamic_batching  # pylint: disable=g-import-not-at-top
  from scalable_agent import environments  # pylint: disable=g-import-not-at-top

  agent = agent_lib.Agent(num_actions=9)
  rng = np.random.default_rng(0)

  def step(last_action, env_output, core_state):
    """last_action int32 [B]; env_output StepOutput of [B, ...]; core_state (c, h) [B, 256] -> same for one step."""
    agent_output, core_state = agent(last_action, env_output, core_state)
    return agent_output, core_state, tf.fill(tf.shape(last_action), tf.shape(last_action)[0])

  def actor_inputs():
    env_output = environments.StepOutput(
        reward=np.zeros([1], np.float32), info=environments.StepOutputInfo(np.zeros([1], np.float32),
                                                                           np.zeros([1], np.int32)),
        done=np.zeros([1], bool), observation=(rng.integers(0, 256, (1, 72, 96, 3),
                                                            dtype=np.uint8), np.array(['go to the red ball'])))
    core_state = agent_lib.LSTMState(np.zeros([1, 256], np.float32), np.zeros([1, 256], np.float32))
    return np.zeros([1], np.int32), env_output, core_state

  args = actor_inputs()
  # The same concrete function as batch_fn uses (batch dimension None), called directly at batch size 1.
  signature = tf.nest.map_structure(
      lambda x: tf.TensorSpec([None] + list(x.shape[1:]), tf.string if x.dtype.kind == 'U' else x.dtype), args)
  unbatched = tf.function(step).get_concrete_function(*signature)
  tensors = tf.nest.map_structure(tf.constant, args)
  rate = _rate(lambda i: tf.nest.map_structure(np.asarray, unbatched(*tensors)), seconds)
  print(f'agent step  unbatched tf.function, batch 1, 1 thread:    {rate:9.0f} calls/s')
  for actors in actor_counts:
    f = dynamic_batching.batch_fn(step)
    per_actor = [actor_inputs() for _ in range(actors)]
    sizes = []
    f(*per_actor[0])
    # noqa reason: called within this iteration.
    rate = _rate(lambda i: sizes.append(int(f(*per_actor[i])[2][0])), seconds, actors)  # noqa: B023
    f.close()
    print(f'agent step  batch_fn, {actors:3d} actor threads:             {rate:9.0f} calls/s, mean batch size '
          f'{np.mean(sizes):.1f}')


def main():
  parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
  parser.add_argument('--seconds', type=float, default=3.)
  parser.add_argument('--threads', default='8,32', help='caller threads for the many-small benchmark')
  parser.add_argument(
      '--actors', default='4,8', help='actor threads for the agent benchmark; the largest is also '
      'the number of processes of the multi-process py_process benchmark')
  args = parser.parse_args()
  actors = [int(n) for n in args.actors.split(',')]
  bench_py_process(args.seconds, max(actors))
  bench_many_small(args.seconds, [int(n) for n in args.threads.split(',')])
  bench_agent(args.seconds, actors)


if __name__ == '__main__':
  main()
