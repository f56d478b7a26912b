r"""HIRO training speed on CPU: environment steps per second of the full loop, and where the time goes.

  python benchmarks/hiro_train_speed.py [--config configs/ant_maze.gin] [--steps 2000] [--gin_param 'X = Y' ...]
  python benchmarks/hiro_train_speed.py --compare 'train_uvf.jit_compile = True' [--rounds 5]
  python benchmarks/hiro_train_speed.py --seeds K [--threads 1] [--steps 2000]

Builds `train_uvf` from the gin configuration exactly as run_train.py does (hiro_orig AntMaze by default: batch 100
at both levels, 200,000-row buffers, one low-level update per step, a meta update with the 10-candidate off-policy
correction every 10 steps), collects the initial 2500 steps, then times, one after another:

  physics    the environment's `step` alone (Python loop, the same noisy-action magnitudes);
  collect    compiled collection steps (actor, noise, environment via tf.numpy_function, contexts, buffer writes);
  low        compiled low-level TD3 updates alone (sampling, reward recomputation, update);
  meta       compiled meta updates alone (sampling, off-policy correction, update);
  full loop  the training loop as train_uvf runs it (collect + low update every step + meta update every 10).

Compare the full loop with the original's 70-76 steps/s on the same 2-core machine (efficient-hrl `train_uvf` as
shipped, TF 1.15.5, measured with a stand-in for MuJoCo that costs microseconds: the agent's cost alone).

`--compare BINDING` (repeatable) instead builds two training loops in one process, the configuration as given (A)
and with the extra bindings (B), and times their full loops in alternating rounds (A, B, A, B, ...), so that both
see the same machine load: it prints the median steps/s of each and the ratio B / A.

`--seeds K` runs K independent seeds (seed 0..K-1) as K processes, each with `--threads` TensorFlow threads
(intra-op; inter-op: `--inter_threads`, default the same) pinned to its own cores (round robin over the CPUs this process may use), times all of their
full loops at once (each builds, collects its initial steps and warms up first; then they start together) and prints
each seed's env steps/s, its env steps per CPU-second of its process (with one thread: its speed with a core of its
own, less sensitive to other jobs on the machine) and the total. Every seed is the ordinary single-seed training loop (its own run directory,
checkpoints and generators): a layout of processes, not a change of what is computed. `--seeds 1 --threads N` times
one process alone in the same way.
"""

import argparse
import os
from pathlib import Path
import subprocess
import sys
import tempfile
import time

os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # pylint: disable=g-import-not-at-top,wrong-import-position
import tensorflow as tf  # pylint: disable=g-import-not-at-top,wrong-import-position

import launcher  # pylint: disable=g-import-not-at-top,wrong-import-position
from uvf import run_loop  # pylint: disable=g-import-not-at-top,wrong-import-position
from uvf import train  # pylint: disable=g-import-not-at-top,wrong-import-position
import uvf.configurables  # noqa: F401,E402  pylint: disable=g-import-not-at-top,wrong-import-position,unused-import


def build_loop(config, bindings, train_dir):
  """The `TrainingLoop` train_uvf would run (its `run` is intercepted), restored or initialised."""
  launcher.parse_gin([Path(config).resolve()], bindings)
  captured = {}
  original_run = run_loop.TrainingLoop.run
  run_loop.TrainingLoop.run = lambda self: captured.setdefault('loop', self)
  try:
    train.train_uvf(train_dir)
  finally:
    run_loop.TrainingLoop.run = original_run
  loop = captured['loop']
  loop.restore_or_initialize()
  return loop


def timed(fn, steps):
  start = time.perf_counter()
  fn()
  return steps / (time.perf_counter() - start)


def update_rates(trainer, low_count, meta_count):
  """(low-level updates/s, meta updates/s): `low_count` compiled low-level TD3 updates in one tf.function call,
  then `meta_count` meta updates (sampling, off-policy correction, update), each after a 2-update warm-up call."""

  @tf.function
  def low_updates(n):
    for _ in tf.range(n):
      trainer.low_level_update()

  @tf.function
  def meta_updates(n):
    for _ in tf.range(n):
      trainer.meta_step()

  low_updates(tf.constant(2, tf.int64))
  meta_updates(tf.constant(2, tf.int64))
  low_rate = timed(lambda: low_updates(tf.constant(low_count, tf.int64)), low_count)
  meta_rate = timed(lambda: meta_updates(tf.constant(meta_count, tf.int64)), meta_count)
  return low_rate, meta_rate


def full_loop_rate(loop, steps):
  """Env steps/s of `steps` (rounded to whole calls) iterations of the training loop as train_uvf runs them."""
  t = loop.trainer
  chunk = loop.settings.steps_per_call
  calls = max(steps // chunk, 1)

  def full():
    for _ in range(calls):
      t.run_steps(tf.constant(chunk, tf.int64), tf.constant(int(t.global_step.numpy()), tf.int64))

  return timed(full, calls * chunk)


def compare(args):
  """Side-by-side full-loop speed of the configuration (A) and the configuration plus `args.compare` (B)."""
  loops = {}
  with tempfile.TemporaryDirectory() as dir_a, tempfile.TemporaryDirectory() as dir_b:
    for name, bindings, train_dir in (('A', args.gin_param, dir_a), ('B', args.gin_param + args.compare, dir_b)):
      loop = build_loop(args.config, ['train_uvf.seed = 0'] + bindings, train_dir)
      loop.trainer.collect_steps(tf.constant(loop.settings.initial_steps, tf.int64))
      full_loop_rate(loop, loop.settings.steps_per_call)  # trace and warm up
      loops[name] = loop
    rates = {'A': [], 'B': []}
    for _ in range(args.rounds):
      for name in ('A', 'B'):
        rates[name].append(full_loop_rate(loops[name], args.steps))
  median = {name: float(np.median(r)) for name, r in rates.items()}
  print(f'\nconfig {args.config}, {os.cpu_count()} CPUs, TF {tf.__version__}; {args.rounds} alternating rounds of '
        f'{args.steps} steps')
  for name, extra in (('A', args.gin_param), ('B', args.gin_param + args.compare)):
    print(f'{name}: {median[name]:6.0f} env steps/s (rounds: {", ".join(f"{r:.0f}" for r in rates[name])}); '
          f'bindings {extra}')
  print(f'B / A = {median["B"] / median["A"]:.2f}')


def seed_worker(args):
  """One seed of `--seeds`: build, collect, warm up, print 'ready', wait for a line on stdin, time the full loop,
  print 'rate <env steps/s> <env steps per CPU-second of this process>'."""
  os.sched_setaffinity(0, {int(c) for c in args.cpus.split(',')})
  tf.config.threading.set_intra_op_parallelism_threads(args.threads)
  tf.config.threading.set_inter_op_parallelism_threads(args.inter_threads or args.threads)
  with tempfile.TemporaryDirectory() as train_dir:
    loop = build_loop(args.config, [f'train_uvf.seed = {args.seed}'] + args.gin_param, train_dir)
    loop.trainer.collect_steps(tf.constant(loop.settings.initial_steps, tf.int64))
    full_loop_rate(loop, loop.settings.steps_per_call)  # trace and warm up
    print('ready', flush=True)
    sys.stdin.readline()
    cpu = time.process_time()
    rate = full_loop_rate(loop, args.steps)
    cpu = time.process_time() - cpu
    chunk = loop.settings.steps_per_call
    steps = max(args.steps // chunk, 1) * chunk  # as full_loop_rate rounds them
    print(f'rate {rate} {steps / cpu}', flush=True)


def many_seeds(args):
  """K seeds as K pinned processes, timed together (module docstring)."""
  cpus = sorted(os.sched_getaffinity(0))
  workers = []
  for seed in range(args.seeds):
    mine = [cpus[(seed * args.threads + i) % len(cpus)] for i in range(args.threads)]
    command = [
        sys.executable, __file__, '--seed_worker', '--seed',
        str(seed), '--threads',
        str(args.threads), '--inter_threads',
        str(args.inter_threads), '--cpus', ','.join(map(str, mine)), '--config', args.config, '--steps',
        str(args.steps)
    ]
    for binding in args.gin_param:
      command += ['--gin_param', binding]
    workers.append(subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True))
  for worker in workers:
    line = worker.stdout.readline()
    while line and line.strip() != 'ready':
      line = worker.stdout.readline()
    if not line:
      raise SystemExit(f'a seed worker failed (exit {worker.wait()})')
  start = time.perf_counter()
  for worker in workers:
    worker.stdin.write('go\n')
    worker.stdin.flush()
  rates, cpu_rates = [], []
  for worker in workers:
    out, _ = worker.communicate()
    for line in out.splitlines():
      if line.startswith('rate '):
        rates.append(float(line.split()[1]))
        cpu_rates.append(float(line.split()[2]))
  if len(rates) != args.seeds:
    raise SystemExit('a seed worker failed while timing')
  print(
      f'\nconfig {args.config}, {os.cpu_count()} CPUs, TF {tf.__version__}; {args.seeds} seeds as processes with '
      f'{args.threads} thread(s) each (inter-op {args.inter_threads or args.threads}), {args.steps} steps each ({time.perf_counter() - start:.1f} s); bindings '
      f'{args.gin_param}')
  print('per seed env steps/s: ' + ', '.join(f'{r:.0f}' for r in rates) + '; per CPU-second of each process: ' +
        ', '.join(f'{r:.0f}' for r in cpu_rates))
  print(f'total env steps/s: {sum(rates):.0f}')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--config', default='configs/ant_maze.gin')
  parser.add_argument('--steps', type=int, default=2000, help='environment steps per timed phase')
  parser.add_argument('--gin_param', action='append', default=[])
  parser.add_argument('--compare', action='append', default=[], help='bindings of configuration B (side by side)')
  parser.add_argument('--rounds', type=int, default=5, help='alternating rounds with --compare')
  parser.add_argument('--seeds', type=int, default=0, help='K seeds as K processes, timed together')
  parser.add_argument('--threads', type=int, default=1, help='TensorFlow threads of each --seeds process (its cores)')
  parser.add_argument('--inter_threads', type=int, default=0, help='inter-op threads of each --seeds process '
                      '(default: --threads)')
  parser.add_argument('--seed_worker', action='store_true', help=argparse.SUPPRESS)
  parser.add_argument('--seed', type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument('--cpus', default='0', help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.seed_worker:
    seed_worker(args)
    return
  if args.seeds:
    many_seeds(args)
    return
  if args.compare:
    compare(args)
    return
  steps = args.steps
  with tempfile.TemporaryDirectory() as train_dir:
    loop = build_loop(args.config, ['train_uvf.seed = 0'] + args.gin_param, train_dir)
    t = loop.trainer
    start = time.perf_counter()
    t.collect_steps(tf.constant(loop.settings.initial_steps, tf.int64))
    print(f'initial collection: {loop.settings.initial_steps} steps in {time.perf_counter() - start:.1f} s '
          '(includes tracing)')

    env = t.collector.stepper.env
    saved = t.collector.stepper.get_state()
    rng = np.random.default_rng(0)
    actions = np.clip(rng.normal(0, 1, (steps, t.collector.action_dim)), -30, 30).astype(np.float32)

    def physics():
      for i in range(steps):
        env.step(actions[i])

    physics_rate = timed(physics, steps)
    t.collector.stepper.set_state(saved)

    collect_rate = timed(lambda: t.collect_steps(tf.constant(steps, tf.int64)), steps)

    low_rate, meta_rate = update_rates(t, steps, max(steps // 10, 10))

    step = int(t.global_step.numpy())
    t.run_steps(tf.constant(10, tf.int64), tf.constant(step, tf.int64))  # trace
    rates = []
    for _ in range(3):
      step = int(t.global_step.numpy())
      chunk = loop.settings.steps_per_call
      calls = max(steps // chunk // 3, 1)

      def full(calls=calls, chunk=chunk):
        for _ in range(calls):
          t.run_steps(tf.constant(chunk, tf.int64), tf.constant(int(t.global_step.numpy()), tf.int64))

      rates.append(timed(full, calls * chunk))
    full_rate = float(np.median(rates))

  ms = lambda rate: 1000.0 / rate  # pylint: disable=unnecessary-lambda-assignment
  collect_ms = ms(collect_rate)
  print(f'\nconfig {args.config}, {os.cpu_count()} CPUs, TF {tf.__version__}; bindings {args.gin_param}')
  print(f'{"phase":<34}{"per second":>12}{"ms each":>10}{"ms per env step":>18}')
  print(f'{"physics (env.step)":<34}{physics_rate:>12.0f}{ms(physics_rate):>10.3f}{ms(physics_rate):>18.3f}')
  print(f'{"collection step (incl. physics)":<34}{collect_rate:>12.0f}{collect_ms:>10.3f}{collect_ms:>18.3f}')
  print(f'{"low-level update":<34}{low_rate:>12.0f}{ms(low_rate):>10.3f}{ms(low_rate):>18.3f}')
  print(f'{"meta update (with correction)":<34}{meta_rate:>12.1f}{ms(meta_rate):>10.3f}{ms(meta_rate) / 10:>18.3f}')
  predicted = collect_ms + ms(low_rate) + ms(meta_rate) / 10
  print(f'{"sum of the parts":<34}{1000 / predicted:>12.0f}{"":>10}{predicted:>18.3f}')
  print(f'{"full training loop":<34}{full_rate:>12.0f}{"":>10}{ms(full_rate):>18.3f}   (runs: ' +
        ', '.join(f'{r:.0f}' for r in rates) + ')')
  print('original (efficient-hrl train_uvf, TF 1.15.5, same kind of machine, agent cost alone): 70-76 env steps/s')


if __name__ == '__main__':
  main()
