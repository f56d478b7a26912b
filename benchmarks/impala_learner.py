"""IMPALA learner throughput and V-trace timing on this machine, measured side by side in one run.

  .venv/bin/python benchmarks/impala_learner.py                       # batch 32 x unroll 100, 72x96 frames
  TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python benchmarks/impala_learner.py   # without oneDNN (closer to TF 1.9)

Prints:
  * `vtrace.from_logits` at T=100, B=32, 9 actions: op by op (eager), `tf.function`, and XLA (`jit_compile=True`,
    the default path), median milliseconds per call from Python;
  * the learner step (`Learner.train_step`: unroll of T + 1 steps, V-trace, losses, gradients, RMSProp) on random
    uint8 frames: seconds per step and environment frames per second, frames = batch x unroll x 4 action repeats,
    after a warm-up step that traces and compiles; and whether the whole step compiles with `jit_compile=True`.

Reference (reference/anchors.md, the original TF 1.9 on a 2-core CPU): `vtrace.from_logits` 1.7-2.0 ms; learner
step alone 211-226 / 253 / 285 frames/s at batch 2 / 4 / 8.
"""

import argparse
import os
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from scalable_agent import environments  # pylint: disable=g-import-not-at-top,wrong-import-position
from scalable_agent import learner as learner_lib  # pylint: disable=g-import-not-at-top,wrong-import-position
from scalable_agent import vtrace  # pylint: disable=g-import-not-at-top,wrong-import-position

NUM_ACTION_REPEATS = 4


def _median_ms(fn, calls, warmup=3):
  for _ in range(warmup):
    fn()
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return 1e3 * float(np.median(times))


def benchmark_vtrace(seq_len=100, batch_size=32, num_actions=9, calls=200):
  """Median ms per `vtrace.from_logits` call on each execution path (the same inputs)."""
  rng = np.random.default_rng(0)
  inputs = dict(
      behaviour_policy_logits=tf.constant(rng.normal(size=(seq_len, batch_size, num_actions)), tf.float32),
      target_policy_logits=tf.constant(rng.normal(size=(seq_len, batch_size, num_actions)), tf.float32),
      actions=tf.constant(rng.integers(0, num_actions, (seq_len, batch_size)), tf.int32),
      discounts=tf.constant(rng.choice([0., .99], (seq_len, batch_size), p=[.01, .99]), tf.float32),
      rewards=tf.constant(rng.normal(size=(seq_len, batch_size)), tf.float32),
      values=tf.constant(rng.normal(size=(seq_len, batch_size)), tf.float32),
      bootstrap_value=tf.constant(rng.normal(size=batch_size), tf.float32))
  results = {}
  for mode in ('eager', 'function', 'jit'):
    def call(mode=mode):
      return vtrace.from_logits(execution_mode=mode, **inputs).vs.numpy()
    results[mode] = _median_ms(call, calls // 10 if mode == 'eager' else calls)
  return results


def random_batch(batch_size, unroll_length, num_actions, seed=0):
  """(agent_state, env_outputs, agent_outputs), time-major [T + 1, B, ...], random 72x96x3 uint8 frames."""
  rng = np.random.default_rng(seed)
  shape = (unroll_length + 1, batch_size)
  words = np.array(['go', 'to', 'the', 'red', 'ball', 'pick', 'up', 'apple'])
  instructions = np.array([' '.join(rng.choice(words, 4)) for _ in range(np.prod(shape))]).reshape(shape)
  env_outputs = environments.StepOutput(
      reward=tf.constant(rng.choice([0., 0., 0., 1., -1., 10.], shape), tf.float32),
      info=environments.StepOutputInfo(tf.zeros(shape), tf.zeros(shape, tf.int32)),
      done=tf.constant(rng.random(shape) < .01),
      observation=(tf.constant(rng.integers(0, 256, shape + agent_lib.DEFAULT_FRAME_SHAPE, dtype=np.uint8)),
                   tf.constant(instructions)))
  agent_outputs = agent_lib.AgentOutput(
      action=tf.constant(rng.integers(0, num_actions, shape), tf.int32),
      policy_logits=tf.constant(rng.normal(size=shape + (num_actions,)), tf.float32),
      baseline=tf.constant(rng.normal(size=shape), tf.float32))
  agent_state = agent_lib.LSTMState(*(tf.zeros([batch_size, agent_lib.CORE_LSTM_SIZE]) for _ in range(2)))
  return agent_state, env_outputs, agent_outputs


def benchmark_learner(batch_size, unroll_length, steps, num_actions=9):
  """Seconds per learner step (median of `steps` after one warm-up step) and environment frames per second."""
  learner = learner_lib.Learner(agent_lib.Agent(num_actions))
  batch = random_batch(batch_size, unroll_length, num_actions)
  start = time.perf_counter()
  learner.step(*batch)['total_loss'].numpy()
  warmup_s = time.perf_counter() - start
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    learner.step(*batch)['total_loss'].numpy()
    times.append(time.perf_counter() - start)
  step_s = float(np.median(times))
  assert learner.train_step.experimental_get_tracing_count() == 1
  return warmup_s, step_s, batch_size * unroll_length * NUM_ACTION_REPEATS / step_s


def try_jit_learner(num_actions=9):
  """Whether the whole train step compiles with jit_compile=True (tiny batch); returns a one-line verdict."""
  learner = learner_lib.Learner(agent_lib.Agent(num_actions))
  jit_step = tf.function(learner.train_step.python_function, jit_compile=True)
  try:
    jit_step(*random_batch(2, 3, num_actions))
  except (tf.errors.InvalidArgumentError, tf.errors.UnimplementedError, ValueError) as e:
    message = str(e)
    if 'DT_STRING' in message:  # The instruction (tf.string) and its string ops have no XLA kernels.
      return f'no ({type(e).__name__}: XLA has no kernels for tf.string tensors, the instruction input)'
    return f'no ({type(e).__name__}: {message.strip().splitlines()[0][:300]})'
  return 'yes'


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--batch_size', type=int, default=32)
  parser.add_argument('--unroll_length', type=int, default=100)
  parser.add_argument('--steps', type=int, default=3, help='timed learner steps after the warm-up step')
  parser.add_argument('--vtrace_calls', type=int, default=200)
  parser.add_argument('--skip_learner', action='store_true')
  args = parser.parse_args()

  print(f'TensorFlow {tf.__version__}, TF_ENABLE_ONEDNN_OPTS={os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")}, '
        f'{os.cpu_count()} CPUs')
  vtrace_ms = benchmark_vtrace(calls=args.vtrace_calls)
  print('vtrace.from_logits T=100 B=32 A=9, median ms per call: ' +
        ', '.join(f'{mode} {ms:.3f}' for mode, ms in vtrace_ms.items()) + ' (original TF 1.9: 1.7-2.0)')
  if args.skip_learner:
    return
  print(f'learner train_step with jit_compile=True: {try_jit_learner()}')
  warmup_s, step_s, frames_per_s = benchmark_learner(args.batch_size, args.unroll_length, args.steps)
  print(f'learner batch {args.batch_size} x unroll {args.unroll_length} (72x96 frames): warm-up {warmup_s:.1f} s, '
        f'{step_s:.2f} s per step (median of {args.steps}), {frames_per_s:.0f} environment frames/s '
        f'(original TF 1.9, batch 2-8: 211-285)')


if __name__ == '__main__':
  main()
