r"""Shows that a change to the HIRO code leaves its behaviour unchanged: the same seeded run, before and after.

Usage:
  python scripts/behaviour_check.py --checkout DIR --out OUT     # a short seeded HIRO run of checkout DIR into OUT
  python scripts/behaviour_check.py --compare OUT_A OUT_B        # exit status 0 when the two runs are identical

The run (a) trains `configs/point_maze.gin` with `train_uvf.seed = 0` for `--episodes` episodes of 100 steps (policy
checkpoints every 1000 steps and the final full checkpoint), with `run_train.py` of the checkout, in a fresh process,
then (b) evaluates every policy checkpoint with `run_eval.py` of the checkout (2 deterministic episodes per goal).
Everything is run from the checkout directory with this Python (the checkout's own code is imported, not this one's).

The comparison asserts, and lists every difference:
  * the same checkpoint files (full ones in OUT/train, policy ones in OUT/train/policy), each holding the same keys
    with `np.array_equal` tensors (same dtype and shape);
  * a byte-identical `operative_config.gin`;
  * equal evaluation results (every row of OUT/eval/results.json, less its wall time, date and checkpoint path).
"""

import argparse
import glob
import json
import os
import subprocess
import sys
import time

import numpy as np

CONFIG = 'configs/point_maze.gin'
EPISODE = 100  # steps per episode: short episodes for a short run
BINDINGS = (
    'train_uvf.seed = 0',
    f'RESET_EPISODE_PERIOD = {EPISODE}',
    'train_uvf.initial_episodes = 2',
    'train_uvf.save_policy_every_n_steps = 1000',
    'train_uvf.save_interval_secs = 1000000',  # only the final full checkpoint: no wall-clock-dependent one
    'train_uvf.save_summaries_secs = 1000000',
    'train_uvf.log_every_n_steps = 1000',
)
EVAL_BINDINGS = (
    'evaluate.num_episodes_eval = 2',
    'evaluate.checkpoint_timeout = 0',
    'evaluate.num_threads = 1',
)
# Fields of a result row that depend on the wall clock or the output directory, not on the behaviour.
VOLATILE_FIELDS = ('wall_time_s', 'evaluated_at', 'checkpoint')


def _run(cmd, cwd, log):
  print('+ (cd %s && %s)' % (cwd, ' '.join(cmd)), flush=True)
  start = time.time()
  with open(log, 'w') as f:
    code = subprocess.call(cmd, cwd=cwd, stdout=f, stderr=subprocess.STDOUT)
  print(f'  exit {code} after {time.time() - start:.0f} s (log: {log})', flush=True)
  if code:
    with open(log) as f:
      sys.stderr.write(f.read()[-3000:])
    raise SystemExit(f'behaviour_check: the command failed with exit status {code}; see {log}.')


def run(checkout, out, episodes):
  """Trains and evaluates in `out` (which must not exist yet: nothing is overwritten)."""
  checkout, out = os.path.abspath(checkout), os.path.abspath(out)
  if not os.path.isfile(os.path.join(checkout, 'run_train.py')):
    raise SystemExit(f'behaviour_check: {checkout} is not a checkout of this project (no run_train.py); give '
                     '--checkout the repository root.')
  if os.path.exists(out):
    raise SystemExit(f'behaviour_check: {out} exists; give --out a new directory (nothing is overwritten).')
  os.makedirs(out)
  train_dir, eval_dir = os.path.join(out, 'train'), os.path.join(out, 'eval')
  params = [a for b in BINDINGS + (f'train_uvf.num_episodes_train = {episodes}',) for a in ('--gin_param', b)]
  _run([sys.executable, 'run_train.py', CONFIG, '--train_dir', train_dir] + params, checkout,
       os.path.join(out, 'train.log'))
  eval_params = params + [a for b in EVAL_BINDINGS for a in ('--gin_param', b)]
  _run([sys.executable, 'run_eval.py', CONFIG, '--train_dir', train_dir, '--eval_dir', eval_dir] + eval_params,
       checkout, os.path.join(out, 'eval.log'))
  with open(os.path.join(out, 'checkout.txt'), 'w') as f:
    head = subprocess.run(['git', 'rev-parse', 'HEAD'], cwd=checkout, capture_output=True, text=True).stdout.strip()
    f.write(f'{checkout} {head}\n')
  print(f'behaviour_check: run of {checkout} ({head}) written to {out}.')


def _checkpoints(directory):
  return sorted(os.path.basename(p)[:-len('.index')] for p in glob.glob(os.path.join(directory, '*.index')))


def _tensors(prefix):
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')
  import tensorflow as tf  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  reader = tf.train.load_checkpoint(prefix)
  return {name: reader.get_tensor(name) for name in reader.get_variable_to_shape_map()}


def _compare_checkpoints(dir_a, dir_b, problems):
  names_a, names_b = _checkpoints(dir_a), _checkpoints(dir_b)
  if names_a != names_b:
    problems.append(f'{dir_a} holds the checkpoints {names_a}, {dir_b} holds {names_b}')
  count = 0
  for name in sorted(set(names_a) & set(names_b)):
    a, b = _tensors(os.path.join(dir_a, name)), _tensors(os.path.join(dir_b, name))
    if sorted(a) != sorted(b):
      problems.append(f'{name}: keys only in A {sorted(set(a) - set(b))[:5]}, only in B {sorted(set(b) - set(a))[:5]}')
    for key in sorted(set(a) & set(b)):
      x, y = a[key], b[key]
      if not (isinstance(x, np.ndarray) and isinstance(y, np.ndarray)):
        equal = x == y
      else:
        equal = x.dtype == y.dtype and x.shape == y.shape and np.array_equal(x, y)
      count += 1
      if not equal:
        problems.append(f'{os.path.basename(dir_a)}/{name}: tensor {key} differs')
  return len(names_a), count


def _results(out):
  with open(os.path.join(out, 'eval', 'results.json')) as f:
    rows = json.load(f)
  rows = rows['rows'] if isinstance(rows, dict) and 'rows' in rows else rows
  return [{k: v for k, v in row.items() if k not in VOLATILE_FIELDS} for row in rows]


def compare(out_a, out_b):
  """Returns the list of differences between two runs (empty: identical behaviour)."""
  problems = []
  train_a, train_b = os.path.join(out_a, 'train'), os.path.join(out_b, 'train')
  full = _compare_checkpoints(train_a, train_b, problems)
  policy = _compare_checkpoints(os.path.join(train_a, 'policy'), os.path.join(train_b, 'policy'), problems)
  with open(os.path.join(train_a, 'operative_config.gin'), 'rb') as f:
    config_a = f.read()
  with open(os.path.join(train_b, 'operative_config.gin'), 'rb') as f:
    config_b = f.read()
  if config_a != config_b:
    problems.append('operative_config.gin differs')
  results_a, results_b = _results(out_a), _results(out_b)
  if results_a != results_b:
    problems.append(f'the evaluation results differ:\n  A {results_a}\n  B {results_b}')
  print(f'Compared {full[0]} full checkpoints ({full[1]} tensors), {policy[0]} policy checkpoints ({policy[1]} '
        f'tensors), operative_config.gin ({len(config_a)} bytes) and {len(results_a)} evaluation rows.')
  return problems


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument('--checkout', help='the repository root whose code runs')
  parser.add_argument('--out', help='a new directory for the run')
  parser.add_argument('--episodes', type=int, default=30, help=f'training episodes of {EPISODE} steps (30)')
  parser.add_argument('--compare', nargs=2, metavar=('OUT_A', 'OUT_B'), help='compare two runs')
  args = parser.parse_args(argv)
  if args.compare:
    if args.checkout or args.out:
      parser.error('--compare takes no --checkout / --out')
    problems = compare(*args.compare)
    for problem in problems:
      print('DIFFERENT:', problem)
    print('IDENTICAL' if not problems else f'{len(problems)} difference(s)')
    return 1 if problems else 0
  if not (args.checkout and args.out):
    parser.error('give --checkout DIR --out DIR to run, or --compare OUT_A OUT_B')
  if args.episodes < 3:
    parser.error('--episodes must be at least 3 (2 initial episodes and one trained)')
  run(args.checkout, args.out, args.episodes)
  return 0


if __name__ == '__main__':
  sys.exit(main())
