"""The programs run_train.py and run_eval.py: plan, hold the run directory, say what runs, run it, and exit.

`main` turns every user error into one short message on stderr and a non-zero exit status (`EXIT_*`), never a
traceback: a `LaunchError`, or any exception of the systems or of `rundir` with a true `user_error` (its
`exit_code`). A run stopped by SIGINT / SIGTERM / SIGHUP exits with `rundir.errors.signal_exit_code`.
docs/design/reliability.md gives the guarantees (what a kill can lose, disk needed, lock semantics).
"""

import datetime
import signal
import sys
from typing import List, Sequence

from absl import flags

from launcher import console
from launcher import errors
from launcher import gin_config
from launcher import manifest as manifest_lib
from launcher import planning
from launcher import signals
from launcher import systems
from rundir import errors as rundir_errors
from rundir import lock as lock_lib


def execute(p: planning.Plan) -> None:
  """Runs a plan: records the configuration in the output directory (unless `hold_run_dir` did), then runs the
  system. User errors of the system (exceptions with a true `user_error`) become `LaunchError`s with their
  `exit_code` (default EXIT_USAGE)."""
  entry = systems.load(p.system.entry[p.program])
  if p.output_dir is not None and not (p.output_dir / manifest_lib.MANIFEST).exists():
    p.manifest.setdefault('created', datetime.datetime.now().isoformat(timespec='seconds'))
    p.manifest.setdefault('command', sys.argv)
    try:
      p.wrote_manifest = manifest_lib.write_manifest(p.output_dir, p.manifest) or p.wrote_manifest
    except OSError as e:
      raise manifest_lib.write_error(p.output_dir, e) from None
  import gin  # pylint: disable=g-import-not-at-top
  if not gin.config_is_locked():
    gin.finalize()
  try:
    if p.system.key == 'uvf':
      if p.program == 'train':
        entry(str(p.train_dir))
      else:
        entry(str(p.train_dir), str(p.eval_dir))
    else:
      entry(logdir=str(p.train_dir))
  except Exception as e:  # pylint: disable=broad-except
    if p.wrote_manifest and p.output_dir is not None:  # (a written manifest has its directory)
      manifest_lib.withdraw_manifest(p.output_dir)
    if getattr(e, 'user_error', False):  # e.g. uvf.eval.EvalError: a message that names the problem and the fix
      # gin appends "In call to configurable '...'" lines to exceptions raised inside a configurable: not news here.
      message = '\n'.join(
          line for line in str(e).splitlines() if not line.strip().startswith('In call to configurable'))
      raise errors.LaunchError(message.rstrip(), exit_code=getattr(e, 'exit_code', errors.EXIT_USAGE)) from None
    raise


def first_screen(program: str, p: planning.Plan) -> str:
  """The lines a run starts with: what runs, where it writes, where TensorBoard reads. (The system's own first
  lines follow: the steps or frames planned, then progress.)"""
  configs = ', '.join(gin_config.display_path(path) for path in p.config_paths)
  lines = [f'run_{program}: {p.system.title}, config {p.config_name} ({configs})']
  state = 'resuming the run there' if p.resumes else 'a new run'
  if p.system.key == 'uvf' and p.program == 'eval':
    lines.append(f'  evaluating the policy checkpoints of {p.train_dir}; results in {p.eval_dir} ({state})')
  elif p.program == 'eval':  # IMPALA's test mode
    lines.append(f'  testing the newest checkpoint of {p.train_dir}; results in {p.train_dir}/test_results-*.json')
  elif p.output_dir is None:  # a multi-machine IMPALA actor
    lines.append('  actor job: nothing is written here (the learner owns the run directory)')
  else:
    lines.append(f'  run directory {p.output_dir} ({state})')
  if p.output_dir is not None:
    lines.append(f'  TensorBoard: tensorboard --logdir {p.output_dir}')
  return '\n'.join(lines)


def run(program: str) -> None:
  """Runs `main` as an absl app for `run_<program>.py`; `--help` exits with status 0 (absl's exits with 1)."""
  from absl import app  # pylint: disable=g-import-not-at-top

  def app_main(argv: List[str]) -> None:
    console.protect_streams()
    if flags.FLAGS['verbosity'].present:  # absl's flag: third-party output at that level too
      console.verbose(flags.FLAGS.verbosity)
    else:
      console.quiet()
    sys.exit(main(program, argv))

  try:
    app.run(app_main)
  except SystemExit as e:
    asked_help = any(a in ('--help', '-h', '-?', '--helpshort', '--helpfull') for a in sys.argv[1:])
    if asked_help and e.code == 1:
      sys.exit(0)
    raise


def main(program: str, argv: Sequence[str], fv: flags.FlagValues = flags.FLAGS) -> int:
  """Entry point of run_train.py / run_eval.py; returns the exit status."""
  lock = None
  stops = None
  try:
    p = planning.plan(program, argv, fv)
    lock = manifest_lib.hold_run_dir(p)
    print(first_screen(program, p), flush=True)
    if p.continues:
      what = 'continuing the run with ' + '; '.join(p.continues)
      if any(change.startswith(manifest_lib.DECAY_HORIZON_PARAM) for change in p.continues):
        what += (' (the learning rate decays linearly to 0 at total_environment_frames: from here it follows the '
                 'new horizon)')
      print(f'  {what}', flush=True)
    if lock is not None and lock.stale:
      print(
          f'run_{program}: warning: took over the lock of {lock.run_dir} from a process that stopped without '
          f'releasing it ({lock_lib.describe(lock.stale)}); it was killed or crashed, and its run resumes from '
          f'its last checkpoint.', file=sys.stderr, flush=True)
    stop = p.system.stop.get(p.program)
    with signals.StopSignals(program, systems.load(stop) if stop else None) as stops:
      execute(p)
  except Exception as e:  # pylint: disable=broad-except
    if not getattr(e, 'user_error', False):  # a bug: its traceback
      raise
    # A LaunchError, or a user error of `rundir` (another process holds the run directory: EXIT_RUN_DIR).
    print(f'run_{program}: error: {e}', file=sys.stderr, flush=True)
    return getattr(e, 'exit_code', errors.EXIT_USAGE)
  except KeyboardInterrupt:
    name = stops.received if stops is not None and stops.received else 'SIGINT'
    resume = ('; the run resumes from its last checkpoint with the same command'
              if lock is not None and p.program == 'train' else '')
    print(f'run_{program}: stopped at once by {name}{resume}.', file=sys.stderr, flush=True)
    return rundir_errors.signal_exit_code(getattr(signal, name))
  finally:
    if lock is not None:
      lock.release()
  if stops is not None and stops.received:
    print(
        f'run_{program}: stopped by {stops.received} after writing the checkpoint; the same command resumes '
        f'the run.', file=sys.stderr, flush=True)
    assert stops.signum is not None  # (set with `received`)
    return rundir_errors.signal_exit_code(stops.signum)
  return 0
