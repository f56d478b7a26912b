r"""The GPU check: learner throughput of IMPALA's two networks and HIRO's update steps on one GPU, as one table.

  bash benchmarks/gpu_check.sh [PYTHON]      # the wrapper: GPU facts, a time limit, then this script

Measured, each after a warm-up call that traces and compiles, on random inputs of the real shapes:
  * impala deep (released agent, ResNet + LSTM + instruction), learner step at batch 32 x unroll 100, 72 x 96 RGB:
    environment frames/s (= 32 x 100 x 4 per step). The maintainers' anchor: 30K+ frames/s on one P100
    (issue #14 of deepmind/scalable_agent).
  * impala shallow (the paper's Atari expert, configs/impala_atari.gin), learner step at batch 32 x unroll 20 on
    84 x 84 x 4 grey stacks, gradient clipping 40: frames/s; and at batch 256 (how far a GPU scales the batch).
  * hiro low / meta: the compiled low-level TD3 update and meta update (with the off-policy correction) of
    configs/ant_maze.gin, batch 100, after the initial 2500 collection steps (MuJoCo physics on the CPU): updates/s.
Every row names the device its variables live on (a GPU row on a CPU means TensorFlow did not see the GPU).

Options: --steps (timed steps per learner row), --skip_hiro, --quick (tiny steps counts: a smoke test on a CPU).
"""

import argparse
import os
from pathlib import Path
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
REPO_ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO_ROOT))
sys.path.insert(0, str(REPO_ROOT / 'benchmarks'))

import numpy as np  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

NUM_ACTION_REPEATS = 4


def _device(variable):
  name = variable.device or '?'
  return name.split('device:')[-1] if 'device:' in name else name


def _time_steps(step, steps):
  """Median seconds of `steps` calls of `step` (each forced to finish), after one warm-up call."""
  import impala_learner  # pylint: disable=g-import-not-at-top  (benchmarks/impala_learner.py)
  return impala_learner._median_ms(step, steps, warmup=1) / 1e3  # pylint: disable=protected-access


def impala_deep(steps, batch_size=32, unroll_length=100):
  import impala_learner  # pylint: disable=g-import-not-at-top  (benchmarks/impala_learner.py)

  from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import learner as learner_lib  # pylint: disable=g-import-not-at-top
  batch = impala_learner.random_batch(batch_size, unroll_length, num_actions=9)
  learner = learner_lib.Learner(agent_lib.Agent(9))
  seconds = _time_steps(lambda: learner.step(*batch)['total_loss'].numpy(), steps)  # noqa: PLW0108  (a step per call)
  frames = batch_size * unroll_length * NUM_ACTION_REPEATS / seconds
  return (f'impala deep learner, batch {batch_size} x unroll {unroll_length}, 72x96x3', frames, 'frames/s',
          _device(learner.agent.trainable_variables[0]), 'maintainers: 30K+ on one P100')


def _atari_batch(batch_size, unroll_length, num_actions=6, seed=0):
  from scalable_agent import agent as agent_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import environments  # pylint: disable=g-import-not-at-top
  rng = np.random.default_rng(seed)
  shape = (unroll_length + 1, batch_size)
  env_outputs = environments.StepOutput(
      reward=tf.constant(rng.choice([0., 0., 1., -1.], shape),
                         tf.float32), info=environments.StepOutputInfo(tf.zeros(shape), tf.zeros(shape, tf.int32)),
      done=tf.constant(rng.random(shape) < .01),
      observation=(tf.constant(rng.integers(0, 256, shape + (84, 84, 4), dtype=np.uint8)), tf.fill(shape, '')))
  agent_outputs = agent_lib.AgentOutput(action=tf.constant(rng.integers(0, num_actions, shape), tf.int32),
                                        policy_logits=tf.constant(rng.normal(size=shape + (num_actions,)), tf.float32),
                                        baseline=tf.constant(rng.normal(size=shape), tf.float32))
  state = agent_lib.LSTMState(*(tf.zeros([batch_size, agent_lib.CORE_LSTM_SIZE]) for _ in range(2)))
  return state, env_outputs, agent_outputs


def impala_shallow(steps, batch_size=32, unroll_length=20):
  from scalable_agent import learner as learner_lib  # pylint: disable=g-import-not-at-top
  from scalable_agent import networks  # pylint: disable=g-import-not-at-top
  batch = _atari_batch(batch_size, unroll_length)
  learner = learner_lib.Learner(networks.FeedForwardAgent(6, (84, 84, 4),
                                                          torso='shallow'), entropy_cost=0.01, learning_rate=0.0006,
                                epsilon=0.01, total_environment_frames=int(2e8), gradient_clipping=40.)
  seconds = _time_steps(lambda: learner.step(*batch)['total_loss'].numpy(), steps)  # noqa: PLW0108  (a step per call)
  frames = batch_size * unroll_length * NUM_ACTION_REPEATS / seconds
  return (f'impala shallow (Atari) learner, batch {batch_size} x unroll {unroll_length}, 84x84x4', frames, 'frames/s',
          _device(learner.agent.trainable_variables[0]), 'learner alone, no actors')


def hiro_updates(low_steps, meta_steps):
  import hiro_train_speed  # pylint: disable=g-import-not-at-top  (benchmarks/hiro_train_speed.py)
  rows = []
  with tempfile.TemporaryDirectory() as train_dir:
    loop = hiro_train_speed.build_loop(REPO_ROOT / 'configs' / 'ant_maze.gin', ['train_uvf.seed = 0'], train_dir)
    trainer = loop.trainer
    trainer.collect_steps(tf.constant(loop.settings.initial_steps, tf.int64))
    device = _device(trainer.global_step)
    low_rate, meta_rate = hiro_train_speed.update_rates(trainer, low_steps, meta_steps)
    for name, rate, count in (('low-level TD3 update', low_rate, low_steps), ('meta update (off-policy correction)',
                                                                              meta_rate, meta_steps)):
      rows.append((f'hiro {name}, ant_maze, batch 100', rate, 'updates/s', device, f'{count} in one tf.function'))
  return rows


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--steps', type=int, default=10, help='timed learner steps per IMPALA row')
  parser.add_argument('--skip_hiro', action='store_true')
  parser.add_argument('--quick', action='store_true', help='1 timed step, few HIRO updates: a smoke test')
  args = parser.parse_args(argv)
  steps = 1 if args.quick else args.steps
  gpus = tf.config.list_physical_devices('GPU')
  print(
      f'TensorFlow {tf.__version__} (CUDA build: {tf.test.is_built_with_cuda()}), GPUs: '
      f'{[g.name for g in gpus] or "none"}, {os.cpu_count()} CPUs', flush=True)
  rows = []
  for fn, kwargs in ((impala_deep, {}), (impala_shallow, {}), (impala_shallow, {'batch_size': 256})):
    start = time.perf_counter()
    rows.append(fn(steps, **kwargs))
    print(f'  {rows[-1][0]}: {rows[-1][1]:.0f} {rows[-1][2]} ({time.perf_counter() - start:.0f} s)', flush=True)
  if not args.skip_hiro:
    start = time.perf_counter()
    rows.extend(hiro_updates(20 if args.quick else 2000, 5 if args.quick else 200))
    print(f'  hiro updates ({time.perf_counter() - start:.0f} s)', flush=True)
  print('\n| measurement | rate | unit | device | note |\n|---|---|---|---|---|')
  for name, rate, unit, device, note in rows:
    print(f'| {name} | {rate:,.0f} | {unit} | {device} | {note} |')
  return 0


if __name__ == '__main__':
  sys.exit(main())
