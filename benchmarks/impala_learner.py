"""IMPALA learner throughput and V-trace timing on this machine, measured side by side in one run.

  .venv/bin/python benchmarks/impala_learner.py                       # batch 32 x unroll 100, 72x96 frames
  TF_ENABLE_ONEDNN_OPTS=0 .venv/bin/python benchmarks/impala_learner.py   # without oneDNN (closer to TF 1.9)
  .venv/bin/python benchmarks/impala_learner.py --skip_vtrace --strategy default,mirrored   # side by side

Prints:
  * `vtrace.from_logits` at T=100, B=32, 9 actions: op by op (eager), `tf.function`, and XLA (`jit_compile=True`,
    the default path), median milliseconds per call from Python;
  * the learner step (`Learner.train_step`: unroll of T + 1 steps, V-trace, losses, gradients, RMSProp) on random
    uint8 frames: seconds per step and environment frames per second, frames = batch x unroll x 4 action repeats,
    after a warm-up step that traces and compiles; and whether the whole step compiles with `jit_compile=True`.
    With `--strategy`, the learner step under each named `tf.distribute` strategy (`learner.make_strategy`), on the
    same batch, the timed steps of the strategies interleaved (fair on a shared machine): 'mirrored' spans the local
    GPUs, or, without a GPU, `--num_cpu_devices` logical CPU devices (the CPU is split before TensorFlow
    initialises its devices; the default strategy then still uses one).

The original (deepmind/scalable_agent, TF 1.9 CPU wheel, measured on a 2-core CPU): `vtrace.from_logits` 1.7-2.0 ms;
learner step alone 211-226 / 253 / 285 frames/s at batch 2 / 4 / 8.
"""

import argparse
import os
import sys
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # The repository root.

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
  inputs = dict(behaviour_policy_logits=tf.constant(rng.normal(size=(seq_len, batch_size, num_actions)), tf.float32),
                target_policy_logits=tf.constant(rng.normal(size=(seq_len, batch_size, num_actions)), tf.float32),
                actions=tf.constant(rng.integers(0, num_actions, (seq_len, batch_size)), tf.int32),
                discounts=tf.constant(rng.choice([0., .99], (seq_len, batch_size), p=[.01, .99]),
                                      tf.float32), rewards=tf.constant(rng.normal(size=(seq_len, batch_size)),
                                                                       tf.float32),
                values=tf.constant(rng.normal(size=(seq_len, batch_size)),
                                   tf.float32), bootstrap_value=tf.constant(rng.normal(size=batch_size), tf.float32))
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
      reward=tf.constant(rng.choice([0., 0., 0., 1., -1., 10.], shape),
                         tf.float32), info=environments.StepOutputInfo(tf.zeros(shape), tf.zeros(shape, tf.int32)),
      done=tf.constant(rng.random(shape) < .01),
      observation=(tf.constant(rng.integers(0, 256, shape + agent_lib.DEFAULT_FRAME_SHAPE,
                                            dtype=np.uint8)), tf.constant(instructions)))
  agent_outputs = agent_lib.AgentOutput(action=tf.constant(rng.integers(0, num_actions, shape), tf.int32),
                                        policy_logits=tf.constant(rng.normal(size=shape + (num_actions,)), tf.float32),
                                        baseline=tf.constant(rng.normal(size=shape), tf.float32))
  agent_state = agent_lib.LSTMState(*(tf.zeros([batch_size, agent_lib.CORE_LSTM_SIZE]) for _ in range(2)))
  return agent_state, env_outputs, agent_outputs


def benchmark_learners(batch_size, unroll_length, steps, strategies=('default',), num_actions=9):
  """Learner step timings under each strategy, on the same batch, with the timed steps interleaved.

  Each strategy gets a learner (agent and learner built under its scope) and a warm-up step that traces and
  compiles; then `steps` rounds each time one step of every learner in turn, so that the load of a shared machine
  weighs on all of them alike.

  Args:
    strategies: `learner.make_strategy` names.

  Returns:
    {name: (warm-up seconds, seconds per step (median of `steps`), environment frames per second, replicas)}.
  """
  batch = random_batch(batch_size, unroll_length, num_actions)
  learners, warmup_s, times = {}, {}, {}
  for name in strategies:
    strategy = learner_lib.make_strategy(name)
    with strategy.scope():
      learners[name] = learner_lib.Learner(agent_lib.Agent(num_actions))
    start = time.perf_counter()
    learners[name].step(*batch)['total_loss'].numpy()
    warmup_s[name] = time.perf_counter() - start
    times[name] = []
  for _ in range(steps):
    for name, learner in learners.items():
      start = time.perf_counter()
      learner.step(*batch)['total_loss'].numpy()
      times[name].append(time.perf_counter() - start)
  results = {}
  for name, learner in learners.items():
    assert learner.train_step.experimental_get_tracing_count() == 1
    step_s = float(np.median(times[name]))
    results[name] = (warmup_s[name], step_s, batch_size * unroll_length * NUM_ACTION_REPEATS / step_s,
                     learner.num_replicas)
  return results


def benchmark_learner(batch_size, unroll_length, steps, num_actions=9, strategy='default'):
  """Warm-up seconds, seconds per learner step (median of `steps` after the warm-up step), environment frames per
  second, and the number of replicas, under one strategy (`benchmark_learners`)."""
  return benchmark_learners(batch_size, unroll_length, steps, (strategy,), num_actions)[strategy]


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
  parser.add_argument('--skip_vtrace', action='store_true')
  parser.add_argument(
      '--strategy', default='default',
      help='comma-separated tf.distribute strategies to time the learner under, interleaved: '
      f'{", ".join(learner_lib.STRATEGIES)}')
  parser.add_argument('--num_cpu_devices', type=int, default=2,
                      help='logical CPU devices for the mirrored strategy when there is no GPU')
  args = parser.parse_args()
  strategies = args.strategy.split(',')
  for name in strategies:
    if name not in learner_lib.STRATEGIES:
      parser.error(f'unknown strategy {name!r}; the choices are {", ".join(learner_lib.STRATEGIES)}')
  if 'mirrored' in strategies and not tf.config.list_physical_devices('GPU') and args.num_cpu_devices > 1:
    # Before anything initialises TensorFlow's devices.
    tf.config.set_logical_device_configuration(
        tf.config.list_physical_devices('CPU')[0], [tf.config.LogicalDeviceConfiguration()] * args.num_cpu_devices)

  print(f'TensorFlow {tf.__version__}, TF_ENABLE_ONEDNN_OPTS={os.environ.get("TF_ENABLE_ONEDNN_OPTS", "unset")}, '
        f'{os.cpu_count()} CPUs')
  if not args.skip_vtrace:
    vtrace_ms = benchmark_vtrace(calls=args.vtrace_calls)
    print('vtrace.from_logits T=100 B=32 A=9, median ms per call: ' +
          ', '.join(f'{mode} {ms:.3f}' for mode, ms in vtrace_ms.items()) + ' (original TF 1.9: 1.7-2.0)')
  if args.skip_learner:
    return
  if strategies == ['default']:
    print(f'learner train_step with jit_compile=True: {try_jit_learner()}')
  results = benchmark_learners(args.batch_size, args.unroll_length, args.steps, strategies)
  for name, (warmup_s, step_s, frames_per_s, replicas) in results.items():
    print(f'learner [{name}, {replicas} replica{"s" if replicas > 1 else ""}] batch {args.batch_size} x unroll '
          f'{args.unroll_length} (72x96 frames): warm-up {warmup_s:.1f} s, {step_s:.2f} s per step (median of '
          f'{args.steps}), {frames_per_s:.0f} environment frames/s (original TF 1.9, batch 2-8: 211-285)')


if __name__ == '__main__':
  main()
