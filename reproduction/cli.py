r"""Reproduce HIRO's Table 1 on a task config: many seeds, each trained and evaluated on the paper's protocol.

  python scripts/reproduce.py configs/ant_maze.gin --seeds 10 --steps 10000000 --root runs/reproduce_ant_maze
  python scripts/reproduce.py configs/ant_maze.gin --seeds 10 --steps 10000000 --root ... --status

One run directory per seed, `<root>/seed_<k>`, trained by `run_train.py CONFIG --train_dir <root>/seed_<k>` with
`train_uvf.seed = k`, `train_uvf.save_policy_every_n_steps = 50000` and `train_uvf.num_episodes_train =
ceil(steps / max_steps_per_episode)` (the run stops at that x 500 + 100 steps); beside each training, `run_eval.py
CONFIG --train_dir <root>/seed_<k> --eval_dir <root>/seed_<k>/eval` evaluates every policy checkpoint as it appears
(50 episodes per eval mode: the paper's target and the config's other goals). `--parallel P` seeds run at once
(default: what fits this machine's cores, evaluations included). Outputs, regenerated as evaluations arrive:
`<root>/aggregate/` (per_seed.csv, curves.csv, table1.csv, summary.json, <config>.png; reproduction/outputs.py).
Logs: `<root>/logs/seed_<k>.{train,eval}.log`.

The same command resumes everything after any stop (Ctrl-C, kill -9, a crash, a reboot): a seed whose training or
evaluation process is still running (started by an earlier kit, or by hand with the same --train_dir) is adopted
and waited for, never started twice; the others resume from their last full checkpoint, and checkpoints not yet
evaluated are evaluated. The launcher's run-directory guard applies: a seed directory holding another configuration
is refused before anything starts. `--status` prints where each seed stands; `--aggregate` rewrites the outputs;
`--dry_run` prints the plan; `--stop` stops the processes the kit started; `--export_best DIR` copies the best
policy over all seeds to DIR (to publish it, with the command that evaluates it again). `--only_seeds 2` runs only
seed 2 of 0..K-1, and `--results_from <per_seed.csv>` stands in for seeds evaluated on another machine (their run
directories are not here) in --status and the aggregate. `--backend ray` spreads the seeds over
a Ray cluster (requirements-ray.txt; docs/hiro/reproduction.md).
"""

import argparse
import dataclasses
import fcntl
import os
import shlex
import signal
import sys
from typing import Any, Dict, Optional, Sequence

from launcher import console
from reproduction import backends
from reproduction import export
from reproduction import plan as plans
from reproduction import processes
from reproduction import protocol
from reproduction import seeds
from reproduction import status
from rundir import errors

LOCK = '.reproduce.lock'  # held by the kit that runs the seeds of a root (one at a time)


def stop_kit_processes(plan: plans.Plan) -> None:
  """--stop: SIGINT (SIGTERM where SIGINT is ignored) to the live processes the kit started (pid files); others are
  listed, not touched."""
  for spec in plan.specs:
    for kind in processes.SCRIPTS:
      seeds.stop_started(spec, kind)


def parse_args(argv: Sequence[str]) -> argparse.Namespace:
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument('config', nargs='+', help='the task config (gin files), e.g. configs/ant_maze.gin')
  parser.add_argument('--seeds', type=int, default=protocol.PAPER_SEEDS, help='seeds 0 .. K-1 (default 10)')
  parser.add_argument(
      '--steps', type=int, default=protocol.PAPER_STEPS,
      help='environment steps per seed (default 10M): train_uvf.num_episodes_train = '
      'ceil(steps / max_steps_per_episode); the run stops at that x T + 100')
  parser.add_argument('--root', help='one run directory per seed in it (default runs/reproduce_<config>)')
  parser.add_argument('--parallel', type=int, default=None,
                      help='seeds trained and evaluated at once (default: fits the cores, evaluations included)')
  parser.add_argument('--policy_every', type=int, default=protocol.PAPER_EVAL_EVERY,
                      help='train_uvf.save_policy_every_n_steps: steps between evaluated checkpoints (50000)')
  parser.add_argument('--eval_episodes', type=int, default=protocol.PAPER_EVAL_EPISODES,
                      help='episodes per eval mode and checkpoint (50)')
  parser.add_argument('--mode', default=None, help="the headline eval mode (default: the paper's target)")
  parser.add_argument('--budget', type=int, default=None,
                      help='Table 1 view: best policy within this many steps (default --steps)')
  parser.add_argument('--gin_param', action='append', default=[],
                      help='a gin binding for training and evaluation (repeatable)')
  parser.add_argument(
      '--only_seeds', metavar='S[,S...]', default=None,
      help='train and evaluate only these of the seeds 0..K-1 (e.g. 2); the others are never started, '
      'only read for --status and the aggregate (seeds run on another machine: --results_from)')
  parser.add_argument(
      '--results_from', metavar='CSV', action='append', default=[],
      help="the per_seed.csv of an earlier aggregate (e.g. docs/reproduction/<task>/per_seed.csv): "
      "its rows stand for the seeds that have no evaluation under --root (repeatable)")
  parser.add_argument('--backend', choices=['local', 'ray'], default='local')
  parser.add_argument('--ray_address', default=None,
                      help="--backend ray: a running cluster ('auto' or HOST:PORT); default: a local Ray instance")
  parser.add_argument(
      '--eval_timeout', type=int, default=7200,
      help='an evaluator stops after this many seconds without a new checkpoint (the kit restarts '
      'it while training runs)')
  parser.add_argument('--poll_secs', type=float, default=5.0)
  parser.add_argument('--report_every', type=float, default=600.0, help='seconds between status tables (0: never)')
  parser.add_argument('--max_restarts', type=int, default=3)
  what = parser.add_mutually_exclusive_group()
  what.add_argument('--status', action='store_true', help='print where each seed stands; starts nothing')
  what.add_argument('--aggregate', action='store_true', help='rewrite <root>/aggregate/; starts nothing')
  what.add_argument('--dry_run', action='store_true', help='print the plan and commands; writes nothing')
  what.add_argument('--stop', action='store_true', help='stop the processes the kit started')
  what.add_argument(
      '--export_best', metavar='DIR',
      help="copy the best policy checkpoint over all seeds (headline mode, within --budget) to DIR, "
      "with best_policy.json; starts nothing")
  return parser.parse_args(argv)


def _error(message: object) -> None:
  print(f'reproduce: error: {message}', file=sys.stderr, flush=True)


def _first_line(plan: plans.Plan, args: argparse.Namespace) -> str:
  protocol_, manifest = plan.protocol, plan.manifest
  only = f' (this launch: {",".join(map(str, plan.only))})' if plan.only else ''
  return (f'reproduce: {plan.name} ({protocol_.task}), seeds 0..{len(plan.specs) - 1}{only}, {manifest["steps"]:,} '
          f'steps each (num_episodes_train {manifest["num_episodes_train"]}, stops at {manifest["run_length"]:,}), '
          f'policy every {args.policy_every:,} steps, {args.eval_episodes} episodes x modes {list(protocol_.modes)} '
          f'(headline {protocol_.primary_mode} {protocol_.goals[protocol_.primary_mode]}); root {plan.root}; '
          f'{plan.parallel} at once ({args.backend})')


def _dry_run(plan: plans.Plan) -> None:
  for spec in plan.run_specs():
    train, evaluation = plan.resumes[spec.seed]
    print(f'seed {spec.seed}: training {"resumes" if train else "starts"} in {spec.train_dir}; evaluation '
          f'{"resumes" if evaluation else "starts"} in {spec.eval_dir}\n  {shlex.join(spec.train_command)}\n  '
          f'{shlex.join(spec.eval_command)}')


def _run(plan: plans.Plan, old: Optional[Dict[str, Any]], args: argparse.Namespace) -> int:
  """Trains and evaluates the seeds of this launch under the root's lock; returns the exit status."""
  os.makedirs(plan.root, exist_ok=True)
  lock = open(os.path.join(plan.root, LOCK), 'a')  # pylint: disable=consider-using-with  (held until exit)
  try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    _error(f'another reproduce.py is running on {plan.root}; watch it with --status.')
    return errors.EXIT_USAGE
  plans.write_manifest(plan, old, args)
  refresher = status.Refresher(plan, args.report_every)
  launch = dataclasses.replace(plan, specs=plan.run_specs())  # the seeds this launch runs (--only_seeds)
  try:
    if args.backend == 'ray':
      results, stopped = backends.run_ray(launch, refresher, args.ray_address)
    else:
      results, stopped = backends.run_local(launch, refresher)
  except plans.KitError as e:
    _error(e)
    return e.exit_code
  refresher(force=True)
  print(status.status_table(plan))
  for line in status.refresh(plan):
    print(line)
  print(f'outputs: {os.path.join(plan.root, status.AGGREGATE_DIR)}', flush=True)
  failed = [r for r in results if r['state'] == 'failed']
  for result in failed:
    print(result['message'], file=sys.stderr, flush=True)
  if stopped or any(r['state'] == 'stopped' for r in results):
    # 128 + the stop signal's number (SIGINT's 130: a seed was stopped from outside, `--stop`)
    return stopped or errors.signal_exit_code(signal.SIGINT)
  return errors.EXIT_FAILURE if failed else errors.EXIT_OK


def main(argv: Optional[Sequence[str]] = None) -> int:
  """The kit's command line (`argv`: the arguments, default sys.argv[1:]); returns the exit status."""
  args = parse_args(sys.argv[1:] if argv is None else argv)
  console.import_quietly('gym')  # its deprecation notice, as the entry scripts drop it (before planning imports it)
  try:
    plan = plans.make_plan(args)
    old = plans.check_manifest(plan)
  except plans.KitError as e:
    _error(e)
    return e.exit_code
  print(_first_line(plan, args), flush=True)
  if args.dry_run:
    _dry_run(plan)
    return errors.EXIT_OK
  if args.status:
    print(status.status_table(plan))
    for line in status.refresh(plan, write=False):
      print(line)
    return errors.EXIT_OK
  if args.stop:
    stop_kit_processes(plan)
    return errors.EXIT_OK
  if args.export_best:
    try:
      lines = export.export_best(plan, args.export_best)
    except plans.KitError as e:
      _error(e)
      return e.exit_code
    print('\n'.join(lines), flush=True)
    return errors.EXIT_OK
  if args.aggregate:
    for line in status.refresh(plan):
      print(line)
    print(f'wrote {os.path.join(plan.root, status.AGGREGATE_DIR)}')
    return errors.EXIT_OK
  return _run(plan, old, args)
