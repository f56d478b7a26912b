r"""Atari training throughput, side by side: our IMPALA (shallow expert) against sample-factory 2.1.1.

  bash benchmarks/setup_sample_factory.sh ../venv_sf19     # once: sample-factory in its own venv (outside)
  python benchmarks/atari_vs_sample_factory.py --sf_python ../venv_sf19/bin/python [--workers 2] \
      [--rounds 2] [--seconds 75]

Each round runs, one after the other and each in a fresh process, on Pong (84 x 84, frame skip 4, CPU):
  * ours: `scalable_agent.experiment.train` as `run_train.py configs/impala_atari.gin --num_actors=N` runs it (the
    shallow feed-forward expert, grey 4-frame stack, batch 32 x unroll 20, gradient clipping 40; N actors = N
    environment processes);
  * sf-default: sample-factory's Atari example with its default Atari network (`convnet_atari`, 3 convolutions +
    FC 512, no LSTM), APPO with V-trace, as the issue's command line: `--with_vtrace=True --async_rl=True
    --num_epochs=1 --num_batches_per_epoch=1 --rollout=20 --recurrence=20 --batch_size=640
    --num_envs_per_worker=1 --worker_num_splits=1 --num_workers=N` (plus `--normalize_returns=False`, which
    sample-factory requires with V-trace);
  * sf-shallow: the same with the IMPALA shallow network (`--encoder_conv_architecture=convnet_impala
    --encoder_conv_mlp_layers 256`: conv 8x8/4 16, conv 4x4/2 32, FC 256), like for like with ours.
The rounds alternate so that a change in the machine's load hits every system alike. Rates are environment
frames/s (agent steps x 4, both count them so) over a steady window: ours from its second learner step to the
last; sample-factory from its first report of frames > 0 after `--warmup` s to its last report (it reports every
5 s). Printed: each round, the mean per system, and the ratios ours / sample-factory.
"""

import argparse
import json
import os
import re
import signal
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))

import impala_throughput  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

SF_COMMON = [
    '--env=atari_pong', '--device=cpu', '--with_wandb=False', '--with_vtrace=True', '--normalize_returns=False',
    '--async_rl=True', '--num_epochs=1', '--num_batches_per_epoch=1', '--rollout=20', '--recurrence=20',
    '--batch_size=640', '--num_envs_per_worker=1', '--worker_num_splits=1'
]
SF_NETWORKS = {
    'sf-default': [],  # sample-factory's Atari default: convnet_atari + FC 512.
    'sf-shallow': ['--encoder_conv_architecture=convnet_impala', '--encoder_conv_mlp_layers', '256'],
    # The same without pinning its workers to cores (its default pins rollout worker i to core i).
    'sf-shallow-unpinned': [
        '--encoder_conv_architecture=convnet_impala', '--encoder_conv_mlp_layers', '256',
        '--set_workers_cpu_affinity=False'
    ],
}
_SF_REPORT = re.compile(r'\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\].*Total num frames: (\d+)\.')


def measure_ours(num_actors, seconds, bindings=()):
  """Our single-machine training (configs/impala_atari.gin, num_actors actors, then `bindings`) for ~seconds;
  returns frames/s."""
  from absl import logging  # pylint: disable=g-import-not-at-top
  import gin  # pylint: disable=g-import-not-at-top  (not in the spawned children)

  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top  (registers its gin names)
  from scalable_agent import settings as settings_lib  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)
  gin.add_config_file_search_path(os.path.join(REPO_ROOT, 'configs'))
  gin.parse_config_files_and_bindings([os.path.join(REPO_ROOT, 'configs', 'impala_atari.gin')],
                                      [f'experiment.num_actors = {num_actors}', *bindings])
  settings = settings_lib.Settings(
      **{name: experiment.bound_value(name) for name in settings_lib.Settings.__dataclass_fields__})
  return impala_throughput.timed_training(settings, seconds)[0]


# Our systems: gin bindings after configs/impala_atari.gin.
OURS = {
    'ours': [],  # configs/impala_atari.gin as it is: each actor's policy step in NumPy.
    'ours-batched': ["experiment.actor_inference = 'batched'"],  # the original's batched TensorFlow inference
}


def _run_ours(num_actors, seconds, tree=REPO_ROOT, bindings=()):
  """Our training in a fresh process, from the checkout `tree` (this one, or --base_tree's)."""
  script = os.path.join(tree, 'benchmarks', os.path.basename(__file__))
  command = [
      sys.executable, script, '--_ours',
      str(num_actors), '--seconds',
      str(seconds), *[f'--_binding={b}' for b in bindings]
  ]
  result = subprocess.run(command, cwd=tree, capture_output=True, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'), check=False)
  lines = [line for line in result.stdout.splitlines() if line.startswith('{')]
  if result.returncode or not lines:
    raise RuntimeError(f'our run failed ({result.returncode}):\n{result.stderr[-3000:]}')
  return json.loads(lines[-1])['frames_per_second']


def _sf_time(stamp):
  return time.mktime(time.strptime(stamp[:19], '%Y-%m-%d %H:%M:%S')) + int(stamp[20:]) / 1000.


def _run_sample_factory(sf_python, name, num_workers, seconds, warmup):
  """One sample-factory run of warmup + seconds (+ its start-up); returns frames/s over its steady window."""
  with tempfile.TemporaryDirectory() as train_dir:
    command = [
        sf_python, '-m', 'sf_examples.atari.train_atari', *SF_COMMON, *SF_NETWORKS[name],
        f'--num_workers={num_workers}', f'--train_dir={train_dir}', '--experiment=bench'
    ]
    log_path = os.path.join(train_dir, 'stdout.log')
    with open(log_path, 'w') as log:
      process = subprocess.Popen(command, cwd=train_dir, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
      start, reports = time.monotonic(), []
      try:
        while time.monotonic() - start < 600:
          time.sleep(2.)
          if process.poll() is not None:
            break
          with open(log_path) as f:
            reports = [(_sf_time(m.group(1)), int(m.group(2))) for m in _SF_REPORT.finditer(f.read())]
          steady = [r for r in reports if r[1] > 0]
          if steady and steady[-1][0] - steady[0][0] >= warmup + seconds:
            break
      finally:
        if process.poll() is None:
          os.killpg(process.pid, signal.SIGINT)
          try:
            process.wait(timeout=30)
          except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)
            process.wait()
    with open(log_path) as f:
      text = f.read()
  reports = [(_sf_time(m.group(1)), int(m.group(2))) for m in _SF_REPORT.finditer(text)]
  steady = [r for r in reports if r[1] > 0]
  if len(steady) < 2:
    raise RuntimeError(f'sample-factory {name} reported no progress:\n{text[-3000:]}')
  window = [r for r in steady if r[0] >= steady[0][0] + warmup] or steady
  (t0, f0), (t1, f1) = window[0], steady[-1]
  return (f1 - f0) / (t1 - t0)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--sf_python', default='../venv_sf19/bin/python',
                      help="sample-factory's venv python (benchmarks/setup_sample_factory.sh)")
  parser.add_argument(
      '--workers', default='2', help='our actors = sample-factory workers (environments); several, '
      'comma-separated (e.g. 2,4,8), run one after the other')
  parser.add_argument('--rounds', type=int, default=2)
  parser.add_argument('--seconds', type=float, default=75., help='timed seconds per run (after warm-up)')
  parser.add_argument(
      '--warmup', type=float, default=15., help="sample-factory: seconds skipped after its first "
      'frames (ours skips its first learner step, which holds the tracing)')
  parser.add_argument(
      '--systems', default='ours,sf-default,sf-shallow',
      help='comma-separated: ours, ours-batched (the original inference), sf-default, sf-shallow, '
      'sf-shallow-unpinned, base (ours from --base_tree)')
  parser.add_argument(
      '--base_tree', default=None,
      help="another checkout of this repository (e.g. `git worktree add /tmp/base HEAD~1`): system "
      "'base' runs ours from it, to compare two versions of our code side by side")
  parser.add_argument('--_ours', type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument('--_binding', action='append', default=[], help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args._ours:  # pylint: disable=protected-access
    rate = measure_ours(args._ours, args.seconds, args._binding)  # pylint: disable=protected-access
    print(json.dumps({'frames_per_second': rate}), flush=True)
    return 0
  systems = args.systems.split(',')
  if any(s.startswith('sf') for s in systems) and not os.path.exists(args.sf_python):
    print(f'no sample-factory python at {args.sf_python}: run benchmarks/setup_sample_factory.sh first',
          file=sys.stderr)
    return 2
  if 'base' in systems and not (args.base_tree and os.path.isdir(os.path.join(args.base_tree, 'scalable_agent'))):
    print('system base needs --base_tree, a checkout of this repository', file=sys.stderr)
    return 2
  unknown = [s for s in systems if s not in OURS and s not in SF_NETWORKS and s != 'base']
  if unknown:
    print(f'unknown systems {unknown}; see --help', file=sys.stderr)
    return 2
  for workers in [int(w) for w in args.workers.split(',')]:
    _compare(args, systems, workers)
  return 0


def _compare(args, systems, workers):
  """Alternating rounds of `systems` with `workers` environments; prints each run and a table."""
  rates = {s: [] for s in systems}
  for round_index in range(args.rounds):
    for system in systems:
      if system in OURS:
        rate = _run_ours(workers, args.seconds, bindings=OURS[system])
      elif system == 'base':
        rate = _run_ours(workers, args.seconds, tree=os.path.abspath(args.base_tree))
      else:
        rate = _run_sample_factory(args.sf_python, system, workers, args.seconds, args.warmup)
      rates[system].append(rate)
      print(
          f'round {round_index + 1}: {system}, {workers} environments: {rate:.0f} frames/s '
          f'(load average {os.getloadavg()[0]:.1f})', flush=True)
  print(f'\nPong, 84 x 84, frame skip 4, CPU, {workers} environments (our actors, sample-factory workers); '
        f'environment frames/s, {args.rounds} alternating rounds of {args.seconds:.0f} s')
  print('| system | ' + ' | '.join(f'round {i + 1}' for i in range(args.rounds)) + ' | mean | ours / it |')
  print('|---|' + '---|' * (args.rounds + 2))
  mean = {s: sum(r) / len(r) for s, r in rates.items()}
  for system in systems:
    ratio = f'{mean["ours"] / mean[system]:.2f}' if 'ours' in mean and system != 'ours' else '-'
    print(f'| {system} | ' + ' | '.join(f'{r:.0f}' for r in rates[system]) + f' | {mean[system]:.0f} | {ratio} |',
          flush=True)
  return 0


if __name__ == '__main__':
  sys.exit(main())
