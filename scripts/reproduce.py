r"""Reproduce HIRO's Table 1 on a task config: many seeds, each trained and evaluated on the paper's protocol.

  python scripts/reproduce.py configs/ant_maze.gin --seeds 10 --steps 10000000 --root runs/reproduce_ant_maze
  python scripts/reproduce.py configs/ant_maze.gin --seeds 10 --steps 10000000 --root ... --status

One run directory per seed, `<root>/seed_<k>`, trained by `run_train.py CONFIG --train_dir <root>/seed_<k>` with
`train_uvf.seed = k`, `train_uvf.save_policy_every_n_steps = 50000` and `train_uvf.num_episodes_train =
ceil(steps / max_steps_per_episode)` (the run stops at that x 500 + 100 steps); beside each training, `run_eval.py
CONFIG --train_dir <root>/seed_<k> --eval_dir <root>/seed_<k>/eval` evaluates every policy checkpoint as it appears
(50 episodes per eval mode: the paper's target and the config's other goals). `--parallel P` seeds run at once
(default: what fits this machine's cores, evaluations included). Outputs, regenerated as evaluations arrive:
`<root>/aggregate/` (per_seed.csv, curves.csv, table1.csv, summary.json, <config>.png; uvf/reproduction.py).
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
a Ray cluster (requirements-ray.txt; docs/reproduction.md).
"""

import argparse
import csv
import ctypes
import dataclasses
import datetime
import fcntl
import json
import os
import shlex
import signal
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)

import console  # pylint: disable=g-import-not-at-top,wrong-import-position

console.import_quietly('gym')  # its deprecation notice, as the entry scripts drop it

from uvf import reproduction  # pylint: disable=g-import-not-at-top,wrong-import-position

EXIT_USAGE = 2
MANIFEST = 'reproduce.json'
LOCK = '.reproduce.lock'
AGGREGATE_DIR = 'aggregate'
LOG_DIR = 'logs'
# Bindings the kit sets itself (each has a flag): a --gin_param may not set them.
_KIT_BINDINGS = {'train_uvf.seed': '--seeds', 'train_uvf.save_policy_every_n_steps': '--policy_every',
                 'train_uvf.num_episodes_train': '--steps', 'evaluate.num_episodes_eval': '--eval_episodes',
                 'evaluate.checkpoint_timeout': '--eval_timeout', 'evaluate.num_threads': None, 'evaluate.seed': None,
                 'evaluate.checkpoint_path': None, 'evaluate.checkpoint_range': None}
# Evaluation is this much faster than training per environment step (docs/hiro_evaluation.md: 6.6x for an
# untrained policy, 12-19x for trained ones): an evaluation's share of a core, for the default --parallel.
EVAL_SPEEDUP = 6.6


class KitError(Exception):
  """A user error: one message, exit status 2."""


def say(message):
  print(f'[{datetime.datetime.now().strftime("%H:%M:%S")}] {message}', flush=True)


# ----------------------------------------------------------------------------------------------------------------------
# Processes: find them in /proc (whoever started them), start them, stop the ones the kit started.


def _read(path):
  try:
    with open(path, 'rb') as f:
      return f.read()
  except OSError:
    return None


def _stat_fields(pid):
  """The fields of /proc/<pid>/stat after the command name (field 3, the state, first), or [] if it is gone."""
  stat = _read(f'/proc/{pid}/stat')
  return stat.decode(errors='replace').rsplit(')', 1)[-1].split() if stat else []


def process_start_ticks(pid):
  """The start time of `pid` in clock ticks since boot (/proc/<pid>/stat field 22), or None if it is gone or a
  zombie: with the pid, it identifies a process across pid reuse."""
  fields = _stat_fields(pid)
  if not fields or fields[0] in ('Z', 'X'):
    return None
  return int(fields[19])


def _flag_value(argv, names):
  for i, arg in enumerate(argv):
    for name in names:
      if arg == name and i + 1 < len(argv):
        return argv[i + 1]
      if arg.startswith(name + '='):
        return arg[len(name) + 1:]
  return None


def running(script, directory):
  """Pids of the live `script` processes (run_train.py / run_eval.py) that write `directory`: run_train.py by its
  --train_dir (or --checkpoint_dir), run_eval.py by its --eval_dir (default <train_dir>/eval); relative paths are
  resolved against the process's working directory. Linux (/proc) only."""
  target = os.path.realpath(directory)
  pids = []
  for entry in os.listdir('/proc'):
    if not entry.isdigit() or int(entry) == os.getpid():
      continue
    raw = _read(f'/proc/{entry}/cmdline')
    if not raw:
      continue
    argv = raw.decode(errors='replace').split('\0')
    if not any(os.path.basename(a) == script for a in argv[:3]):
      continue
    train_dir = _flag_value(argv, ('--train_dir', '--checkpoint_dir'))
    value = train_dir if script == 'run_train.py' else _flag_value(argv, ('--eval_dir',))
    if value is None and script == 'run_eval.py' and train_dir is not None:
      value = os.path.join(train_dir, 'eval')
    if value is None or process_start_ticks(entry) is None:
      continue
    try:
      cwd = os.readlink(f'/proc/{entry}/cwd')
    except OSError:
      continue
    if os.path.realpath(os.path.join(cwd, value)) == target:
      pids.append(int(entry))
  # A process forked by one of them (console.filter_native_stderr's stderr relay) has the same command line: it is
  # part of its parent, not a second writer.
  return [pid for pid in pids if parent_pid(pid) not in pids]


def parent_pid(pid):
  """The parent of `pid` (/proc/<pid>/stat field 4), or None if it is gone."""
  fields = _stat_fields(pid)
  return int(fields[1]) if len(fields) > 1 else None


def _die_with_parent():
  """preexec_fn: the child gets SIGTERM when its parent dies (Linux prctl PR_SET_PDEATHSIG)."""
  ctypes.CDLL(None).prctl(1, signal.SIGTERM)


@dataclasses.dataclass
class SeedSpec:
  """Everything one seed's job needs (picklable: Ray sends it to a worker)."""
  seed: int
  train_dir: str
  eval_dir: str
  train_command: list
  eval_command: list
  log_dir: str
  run_length: int  # the global step at which training is complete
  modes: list
  poll_secs: float
  max_restarts: int
  detach: bool  # True: children in their own session, they outlive the kit (local); False: they die with it (Ray)
  repo_root: str
  threads: int = 0  # TensorFlow threads of the training process (TF_NUM_INTRAOP_THREADS); 0: TensorFlow's default
  cpus: tuple = ()  # the cores the training process is pinned to (sched_setaffinity); (): not pinned
  heldout_dir: str = ''  # the held-out evaluations' eval_dir (uvf.reproduction.HELDOUT_DIR)
  heldout_command: list = dataclasses.field(default_factory=list)  # run_eval.py of one held-out policy, less its
  # --checkpoint_path
  budget: int = 0  # the Table 1 budget: the best and final policies are chosen within it
  primary_mode: str = ''

  def log(self, kind):
    return os.path.join(self.log_dir, f'seed_{self.seed}.{kind}.log')

  def pid_file(self, kind):
    return os.path.join(self.log_dir, f'seed_{self.seed}.{kind}.pid')

  def directory(self, kind):
    return {'train': self.train_dir, 'eval': self.eval_dir, 'heldout': self.heldout_dir}[kind]


SCRIPTS = {'train': 'run_train.py', 'eval': 'run_eval.py', 'heldout': 'run_eval.py'}  # the kit's process kinds
# The signals that stop the kit (Ctrl-C; `timeout`, schedulers; a closed terminal): it stops the processes it
# started (they write their checkpoints) and exits with 128 + the signal's number.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The exit statuses of a training or evaluation stopped on request (docs/reliability.md): SIGINT 130, SIGTERM 143,
# SIGHUP 129 (negative: the signal came before its handler)
STOPPED_EXIT_CODES = tuple(128 + s for s in STOP_SIGNALS) + tuple(-s for s in STOP_SIGNALS)


class Stopped(str):
  """A seed job's end message when one of its processes was stopped by someone (it is not restarted)."""


def started_by_kit(spec, kind, pid):
  """Whether `pid` is the process the kit recorded in its pid file for (seed, kind) (same pid and start time)."""
  data = _read(spec.pid_file(kind))
  try:
    record = json.loads(data) if data else None
  except ValueError:
    return False
  return bool(record) and record.get('pid') == pid and record.get('start_ticks') == process_start_ticks(pid)


def start_process(spec, kind, command=None):
  """Starts the training, evaluation or a held-out evaluation (`command`) of a seed, its output appended to its log;
  records its pid file."""
  command = command or (spec.train_command if kind == 'train' else spec.eval_command)
  os.makedirs(spec.log_dir, exist_ok=True)
  log = open(spec.log(kind), 'ab')  # pylint: disable=consider-using-with
  log.write(f'\n=== reproduce.py {datetime.datetime.now().isoformat(timespec="seconds")}: '
            f'{shlex.join(command)}\n'.encode())
  log.flush()
  env = dict(os.environ, PYTHONUNBUFFERED='1')
  if kind == 'train' and spec.threads:
    env.setdefault('TF_NUM_INTRAOP_THREADS', str(spec.threads))  # the user's own setting wins
    env.setdefault('TF_NUM_INTEROP_THREADS', '1')
  process = subprocess.Popen(command, cwd=spec.repo_root, stdout=log, stderr=subprocess.STDOUT, env=env,
                             stdin=subprocess.DEVNULL, start_new_session=spec.detach,
                             preexec_fn=None if spec.detach else _die_with_parent)
  log.close()
  if kind == 'train' and spec.cpus:
    try:
      os.sched_setaffinity(process.pid, spec.cpus)  # before TensorFlow starts its threads, which inherit it
    except OSError:
      pass  # it already exited: its exit status is handled by the caller
  record = {'pid': process.pid, 'start_ticks': process_start_ticks(process.pid), 'command': command,
            'started': time.time()}
  tmp = spec.pid_file(kind) + '.tmp'
  with open(tmp, 'w', encoding='utf-8') as f:
    json.dump(record, f)
  os.replace(tmp, spec.pid_file(kind))
  return process


def stop_pid(pid, sig=signal.SIGINT, wait_s=60.0):
  """Sends `sig` to `pid`, then SIGKILL if it is still alive after `wait_s` seconds."""
  try:
    os.kill(pid, sig)
  except ProcessLookupError:
    return
  deadline = time.time() + wait_s
  while time.time() < deadline and process_start_ticks(pid) is not None:
    time.sleep(0.2)
  if process_start_ticks(pid) is not None:
    try:
      os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
      pass


def log_tail(path, lines=15):
  data = _read(path) or b''
  return '\n'.join(data.decode(errors='replace').rstrip().splitlines()[-lines:])


# ----------------------------------------------------------------------------------------------------------------------
# One seed's job: train to the run length and evaluate every policy checkpoint; resumable, adopts live processes.


def run_seed(spec, stop=None, report=say):
  """Runs seed `spec.seed` to completion: its training (if not complete) and its evaluation poller (while policy
  checkpoints wait), restarting either after a crash, at most `spec.max_restarts` times in a row without progress.

  Args:
    spec: `SeedSpec`.
    stop: None or a `threading.Event`; when set, the processes the kit started are stopped (SIGINT) and the job
      returns 'stopped'.
    report: fn(message) for progress messages.

  Returns:
    dict: 'seed', 'state' ('done', 'failed' or 'stopped'), 'message'.
  """
  if spec.repo_root not in sys.path:
    sys.path.insert(0, spec.repo_root)
  from uvf import reproduction as rep  # pylint: disable=g-import-not-at-top,redefined-outer-name,reimported
  name = f'seed {spec.seed}'
  own = {'train': None, 'eval': None}  # Popen of the processes this job started
  failures = {'train': 0, 'eval': 0}
  progress_at_start = {'train': None}
  announced = set()

  def live(kind):
    process = own[kind]
    if process is not None and process.poll() is None:
      return [process.pid]
    return running(SCRIPTS[kind], spec.directory(kind))

  def finished(kind):
    """Handles the exit of a process this job started: None if fine to restart, else the failure message."""
    process = own[kind]
    if process is None or process.poll() is None:
      return None
    own[kind] = None
    code = process.returncode
    if code in STOPPED_EXIT_CODES:  # someone stopped it (Ctrl-C, SIGTERM, `--stop`): not a crash, not restarted
      return Stopped(f'{kind} was stopped (exit status {code}); the same command resumes it.')
    if code in (2, 3):  # a user error (configuration, run directory): restarting will not help
      return f'{kind} exited with status {code}:\n{log_tail(spec.log(kind))}'
    if kind == 'eval' and code == 0:  # its checkpoint_timeout: restarted while checkpoints come
      return None
    full = rep.full_checkpoint_step(spec.train_dir)
    if kind == 'train' and full is not None and full != progress_at_start['train']:
      failures[kind] = 0  # it made progress: not a crash loop
      if code == 0:
        return None
    failures[kind] += 1
    if failures[kind] > spec.max_restarts:
      return (f'{kind} failed {failures[kind]} times in a row (last status {code}); see {spec.log(kind)}:\n'
              f'{log_tail(spec.log(kind))}')
    report(f'{name}: {kind} exited with status {code}; restarting it ({failures[kind]}/{spec.max_restarts}).')
    return None

  def start(kind):
    if kind == 'train':
      progress_at_start['train'] = rep.full_checkpoint_step(spec.train_dir)
    own[kind] = start_process(spec, kind)
    verb = 'resuming' if kind == 'train' and progress_at_start['train'] else 'starting'
    layout = ''
    if kind == 'train' and (spec.threads or spec.cpus):
      layout = (f', {spec.threads or "default"} TensorFlow thread{"s" if spec.threads != 1 else ""}' +
                (f' on core{"s" if len(spec.cpus) > 1 else ""} {",".join(map(str, spec.cpus))}' if spec.cpus else ''))
    report(f'{name}: {verb} {"training" if kind == "train" else "evaluation"} (pid {own[kind].pid}{layout}); '
           f'log {spec.log(kind)}')

  def stop_own(kind, sig=signal.SIGINT):
    pids = [p.pid for p in [own[kind]] if p is not None and p.poll() is None]
    pids += [pid for pid in running(SCRIPTS[kind], spec.directory(kind))
             if pid not in pids and started_by_kit(spec, kind, pid)]
    for pid in pids:
      stop_pid(pid, sig)
    if own[kind] is not None:
      own[kind].wait()
      own[kind] = None

  try:
    while True:
      if stop is not None and stop.is_set():
        for kind in ('train', 'eval'):
          stop_own(kind)
        return {'seed': spec.seed, 'state': 'stopped', 'message': f'{name}: stopped.'}
      full = rep.full_checkpoint_step(spec.train_dir)
      complete = full is not None and full >= spec.run_length
      for kind in ('train', 'eval'):
        failure = finished(kind)
        if failure:
          stop_own('eval' if kind == 'train' else 'train')
          state = 'stopped' if isinstance(failure, Stopped) else 'failed'
          return {'seed': spec.seed, 'state': state, 'message': f'{name}: {failure}'}
      if not complete:
        pids = live('train')
        if not pids:
          start('train')
        elif own['train'] is None and ('train', pids[0]) not in announced:
          announced.add(('train', pids[0]))
          who = 'an earlier reproduce.py' if started_by_kit(spec, 'train', pids[0]) else 'another command'
          report(f'{name}: training is running already (pid {pids[0]}, started by {who}); waiting for it.')
      policies = rep.policy_steps(spec.train_dir)
      done = rep.evaluated_steps(rep.load_results(spec.eval_dir), spec.modes)
      pending = [step for step in policies if step not in done]
      if pending and not live('eval'):
        start('eval')
      if complete and not pending:
        stop_own('eval', signal.SIGTERM)
        failure = evaluate_heldout(spec, stop, report)
        if failure:
          state = 'stopped' if isinstance(failure, Stopped) else 'failed'
          return {'seed': spec.seed, 'state': state, 'message': f'{name}: {failure}'}
        return {'seed': spec.seed, 'state': 'done',
                'message': f'{name}: done ({full} steps, {len(policies)} policy checkpoints evaluated, the best and '
                           f'final ones held out).'}
      time.sleep(spec.poll_secs)
  except KeyboardInterrupt:  # Ray's cancel
    for kind in ('train', 'eval'):
      stop_own(kind)
    raise


def heldout_pending(spec):
  """The steps of a seed's policies that the held-out view needs and that are not evaluated there yet (its best and
  final policies within the budget, `uvf.reproduction.heldout_steps`)."""
  from uvf import reproduction as rep  # pylint: disable=g-import-not-at-top,redefined-outer-name,reimported
  curve = rep.seed_curves(rep.load_results(spec.eval_dir), [spec.primary_mode])[spec.primary_mode]
  done = {int(row['step']) for row in rep.load_results(spec.heldout_dir) if row['mode'] == spec.primary_mode}
  return [step for step in dict.fromkeys(rep.heldout_steps(curve, spec.budget)) if step is not None and
          step not in done]


def evaluate_heldout(spec, stop=None, report=say):
  """Evaluates a done seed's best and final policies on the held-out episodes, one `run_eval.py --checkpoint_path`
  each (in `spec.heldout_dir`). Returns None, or the failure (a `Stopped` when stopped on request)."""
  for step in heldout_pending(spec):
    command = spec.heldout_command + ['--checkpoint_path', f'model.ckpt-{step}']
    process = start_process(spec, 'heldout', command)
    report(f'seed {spec.seed}: held-out evaluation of the policy at step {step} (pid {process.pid}); log '
           f'{spec.log("heldout")}')
    while process.poll() is None:
      if stop is not None and stop.is_set():
        stop_pid(process.pid)
        process.wait()
        return Stopped('held-out evaluation stopped; the same command runs it again.')
      time.sleep(min(spec.poll_secs, 1.0))
    if process.returncode in STOPPED_EXIT_CODES:
      return Stopped(f'held-out evaluation was stopped (exit status {process.returncode}); the same command runs it '
                     'again.')
    if process.returncode != 0:
      return (f'held-out evaluation of step {step} exited with status {process.returncode}; see '
              f'{spec.log("heldout")}:\n{log_tail(spec.log("heldout"))}')
  return None


# ----------------------------------------------------------------------------------------------------------------------
# The plan: configuration, protocol, commands, and the run-directory checks of the launcher.


def _binding_name(binding):
  return binding.split('=', 1)[0].strip()


def default_parallel(cores, protocol, eval_episodes, policy_every, seeds):
  """Seeds at once: one training per core, plus each evaluation's share of a core.

  An evaluation of E episodes x T steps x M modes every `policy_every` training steps costs about
  M E T / (6.6 policy_every) of the training's time (evaluation runs ~6.6x faster per step than training): 0.23 for
  AntMaze (3 modes), 0.08 for AntPush / AntFall. So P = round(cores / (1 + that)), between 1 and the seeds.
  """
  share = len(protocol.modes) * eval_episodes * protocol.max_steps_per_episode / (EVAL_SPEEDUP * policy_every)
  return max(1, min(seeds, int(round(cores / (1.0 + share)))))


def _cores():
  try:
    return len(os.sched_getaffinity(0))
  except AttributeError:
    return os.cpu_count() or 1


def core_slots(parallel):
  """The cores of each of `parallel` training slots: this process's cores in `parallel` equal contiguous groups
  (docs/hiro_training.md, "Process layout": one pinned single-thread process per core is 1.13x two unpinned
  processes at TensorFlow's default threads); [] when there are fewer cores than slots (nothing is pinned)."""
  try:
    cores = sorted(os.sched_getaffinity(0))
  except AttributeError:
    return []
  if parallel < 1 or len(cores) < parallel:
    return []
  size = len(cores) // parallel
  return [tuple(cores[i * size:(i + 1) * size]) for i in range(parallel)]


@dataclasses.dataclass
class Plan:
  root: str
  name: str
  protocol: object
  specs: list
  resumes: dict  # seed -> (train resumes, eval resumes)
  manifest: dict
  parallel: int
  budget: int
  only: tuple = ()  # --only_seeds: the seeds this launch trains and evaluates; (): all
  imported: dict = dataclasses.field(default_factory=dict)  # --results_from: seed -> rows evaluated elsewhere
  imported_heldout: dict = dataclasses.field(default_factory=dict)  # the same for their held-out evaluations

  def run_specs(self):
    """The seeds this launch trains and evaluates (--only_seeds; default all)."""
    return [spec for spec in self.specs if not self.only or spec.seed in self.only]


def make_plan(args):
  """Resolves the configuration and checks every seed's run and eval directories with the launcher (as run_train.py
  and run_eval.py will); writes nothing. Raises KitError."""
  for binding in args.gin_param:
    if _binding_name(binding) in _KIT_BINDINGS:
      flag = _KIT_BINDINGS[_binding_name(binding)]
      raise KitError(f'--gin_param "{binding}": the kit sets {_binding_name(binding)} itself' +
                     (f' (use {flag}).' if flag else '.'))
  if args.seeds < 1 or args.steps < 1 or args.policy_every < 1 or args.eval_episodes < 1:
    raise KitError('--seeds, --steps, --policy_every and --eval_episodes must be positive.')
  only = parse_only_seeds(args.only_seeds, args.seeds)
  for path in args.results_from:
    if not os.path.isfile(path):
      raise KitError(f'--results_from {path}: no such file (give the per_seed.csv of an earlier aggregate).')
  import launcher  # pylint: disable=g-import-not-at-top  (imports TensorFlow: only when planning)
  launcher.prepare_process()
  from absl import flags  # pylint: disable=g-import-not-at-top
  try:
    config_paths = [launcher.resolve_config_path(p) for p in args.config]
    launcher.register_configurables()
    launcher.parse_gin(config_paths, args.gin_param)
    if not launcher.bound_configurables()['uvf']:
      raise KitError('the kit reproduces HIRO task configs (configs/ant_maze.gin, ant_push.gin, ant_fall.gin, ...); '
                     f'{" ".join(args.config)} is not one.')
    protocol = reproduction.protocol_from_gin(args.mode)
  except launcher.LaunchError as e:
    raise KitError(str(e)) from None
  except ValueError as e:
    raise KitError(str(e)) from None
  import gin  # pylint: disable=g-import-not-at-top
  base_config = gin.config_str()
  name = launcher.config_name(config_paths)
  root = os.path.abspath(args.root or os.path.join('runs', f'reproduce_{name}'))
  if os.path.exists(root) and not os.path.isdir(root):
    raise KitError(f'--root {root} exists and is not a directory.')
  episodes = reproduction.num_episodes_for_steps(args.steps, protocol.max_steps_per_episode)
  length = reproduction.run_length(episodes, protocol.max_steps_per_episode)
  cores = _cores()
  parallel = args.parallel or default_parallel(cores, protocol, args.eval_episodes, args.policy_every, args.seeds)
  threads = max(1, cores // parallel)
  configs = [str(p) for p in config_paths]
  user = [arg for binding in args.gin_param for arg in ('--gin_param', binding)]
  specs, resumes = [], {}
  for seed in range(args.seeds):
    train_dir = os.path.join(root, f'seed_{seed}')
    eval_dir = os.path.join(train_dir, 'eval')
    train_args = configs + ['--train_dir', train_dir] + user + [
        '--gin_param', f'train_uvf.seed = {seed}',
        '--gin_param', f'train_uvf.save_policy_every_n_steps = {args.policy_every}',
        '--gin_param', f'train_uvf.num_episodes_train = {episodes}']
    eval_args = configs + ['--train_dir', train_dir, '--eval_dir', eval_dir] + user + [
        '--gin_param', f'evaluate.num_episodes_eval = {args.eval_episodes}',
        '--gin_param', f'evaluate.checkpoint_timeout = {args.eval_timeout}',
        '--gin_param', f'evaluate.num_threads = {threads}']
    checks = []
    for program, program_args in (('train', train_args), ('eval', eval_args)):
      fv = flags.FlagValues()
      launcher.define_flags(fv)
      try:
        checks.append(launcher.plan(program, fv([f'run_{program}.py'] + program_args), fv).resumes)
      except launcher.LaunchError as e:
        raise KitError(f'seed {seed} ({program}): {e}') from None
    resumes[seed] = tuple(checks)
    heldout_dir = os.path.join(train_dir, reproduction.HELDOUT_DIR)
    heldout_args = configs + ['--train_dir', train_dir, '--eval_dir', heldout_dir] + user + [
        '--gin_param', f'evaluate.num_episodes_eval = {reproduction.HELDOUT_EPISODES}',
        '--gin_param', f'evaluate.seed = {reproduction.HELDOUT_SEED}',
        '--gin_param', f"evaluate.eval_modes = ['{protocol.primary_mode}']",
        '--gin_param', f'evaluate.num_threads = {threads}']
    specs.append(SeedSpec(
        seed=seed, train_dir=train_dir, eval_dir=eval_dir,
        train_command=[sys.executable, os.path.join(REPO_ROOT, 'run_train.py')] + train_args,
        eval_command=[sys.executable, os.path.join(REPO_ROOT, 'run_eval.py')] + eval_args,
        log_dir=os.path.join(root, LOG_DIR), run_length=length, modes=list(protocol.modes), poll_secs=args.poll_secs,
        max_restarts=args.max_restarts, detach=args.backend == 'local', repo_root=REPO_ROOT, threads=threads,
        heldout_dir=heldout_dir, budget=args.budget or args.steps, primary_mode=protocol.primary_mode,
        heldout_command=[sys.executable, os.path.join(REPO_ROOT, 'run_eval.py')] + heldout_args))
  manifest = {
      'config_files': configs, 'bindings': list(args.gin_param), 'gin_config': base_config,
      'policy_every': args.policy_every, 'eval_episodes': args.eval_episodes, 'protocol': protocol.to_json(),
      'steps': args.steps, 'num_episodes_train': episodes, 'run_length': length, 'seeds': args.seeds,
  }
  imported, imported_heldout = {}, {}
  for path in args.results_from:
    for seed, rows in load_per_seed_csv(path, protocol, args.seeds).items():
      imported.setdefault(seed, []).extend(rows)
    heldout = os.path.join(os.path.dirname(path), 'heldout.csv')  # written beside it by the same aggregate
    if os.path.isfile(heldout):
      for seed, rows in load_per_seed_csv(heldout, protocol, args.seeds).items():
        imported_heldout.setdefault(seed, []).extend(rows)
  return Plan(root=root, name=name, protocol=protocol, specs=specs, resumes=resumes, manifest=manifest,
              parallel=parallel, budget=args.budget or args.steps, only=only, imported=imported,
              imported_heldout=imported_heldout)


def parse_only_seeds(value, seeds):
  """--only_seeds '2' or '1,2' -> (1, 2); None -> (). Raises KitError."""
  if value is None:
    return ()
  try:
    only = tuple(sorted({int(part) for part in value.split(',') if part.strip()}))
  except ValueError:
    only = ()
  if not only or any(not 0 <= seed < seeds for seed in only):
    raise KitError(f'--only_seeds {value}: give seeds of 0..{seeds - 1} (--seeds {seeds}) separated by commas, '
                   'e.g. --only_seeds 2.')
  return only


def load_per_seed_csv(path, protocol, seeds):
  """--results_from: the rows of a per_seed.csv written by an earlier aggregate (uvf.reproduction.write_outputs),
  as results.json rows by seed (seeds 0..seeds-1 only), each marked 'imported_from': path. Raises KitError when
  the file is not such a table or is of another task (a mode this protocol lacks, or another goal)."""
  out = {}
  try:
    with open(path, newline='', encoding='utf-8') as f:
      reader = csv.DictReader(f)
      missing = [c for c in reproduction.PER_SEED_FIELDS if c not in (reader.fieldnames or ())]
      if missing:
        raise KitError(f'--results_from {path}: not a per_seed.csv of the kit (no column {", ".join(missing)}).')
      for line, record in enumerate(reader, start=2):
        mode = record['mode']
        try:
          goal = json.loads(record['goal'])
          row = {'step': int(record['step']), 'mode': mode, 'goal': goal,
                 'success_rate': float(record['success_rate']),
                 'mean_final_distance': float(record['mean_final_distance']),
                 'num_episodes': int(record['num_episodes']), 'imported_from': path}
          seed = int(record['seed'])
        except (ValueError, TypeError):
          raise KitError(f'--results_from {path}, line {line}: not a result row ({dict(record)}).') from None
        expected = protocol.goals.get(mode)
        if mode not in protocol.modes or (expected is not None and not (
            isinstance(goal, list) and reproduction.same_point(goal, expected))):
          raise KitError(f'--results_from {path}: its {mode} goal {record["goal"]} is not this task\'s '
                         f'({protocol.task}: {json.dumps(protocol.goals)}); it is the results of another task.')
        if 0 <= seed < seeds:
          out.setdefault(seed, []).append(row)
  except OSError as e:
    raise KitError(f'--results_from {path}: {e.strerror}.') from None
  return out


def check_manifest(plan):
  """Refuses a root that holds a reproduction of another configuration (reproduce.json); returns the old one."""
  path = os.path.join(plan.root, MANIFEST)
  if not os.path.exists(path):
    return None
  with open(path, encoding='utf-8') as f:
    old = json.load(f)
  keys = ('gin_config', 'policy_every', 'eval_episodes')
  differ = [k for k in keys if old.get(k) != plan.manifest[k]]
  if old.get('protocol', {}).get('primary_mode') != plan.protocol.primary_mode:
    differ.append('primary mode (--mode)')
  if differ:
    raise KitError(f'{plan.root} holds a reproduction of another configuration ({MANIFEST}: {", ".join(differ)} '
                   f'differ; it was {" ".join(old.get("config_files", []))} {old.get("bindings")}). Nothing was '
                   'changed: use another --root, or the same config, --gin_param, --policy_every, --eval_episodes and '
                   '--mode as before.')
  return old


def write_manifest(plan, old, args):
  """Records the reproduction in <root>/reproduce.json; earlier launches are kept in its 'launches' list."""
  data = dict(plan.manifest)
  launches = list(old.get('launches', [])) if old else []
  launches.append({'time': datetime.datetime.now().isoformat(timespec='seconds'), 'command': sys.argv,
                   'seeds': args.seeds, 'steps': args.steps, 'parallel': plan.parallel, 'backend': args.backend})
  data['launches'] = launches
  data['seeds'] = max(args.seeds, old.get('seeds', 0) if old else 0)
  os.makedirs(plan.root, exist_ok=True)
  tmp = os.path.join(plan.root, MANIFEST + '.tmp')
  with open(tmp, 'w', encoding='utf-8') as f:
    json.dump(data, f, indent=1)
    f.write('\n')
  os.replace(tmp, os.path.join(plan.root, MANIFEST))


# ----------------------------------------------------------------------------------------------------------------------
# Reports.


def seed_rows(plan):
  """{seed: results.json rows}: a seed's own evaluations, or, where it has none here, its --results_from rows."""
  return {spec.seed: reproduction.load_results(spec.eval_dir) or plan.imported.get(spec.seed, [])
          for spec in plan.specs}


def heldout_rows(plan):
  """{seed: the rows of its held-out evaluations}, as `seed_rows`."""
  return {spec.seed: reproduction.load_results(spec.heldout_dir) or plan.imported_heldout.get(spec.seed, [])
          for spec in plan.specs}


def status_table(plan, now=None):
  """The per-seed table of --status (and of the running kit, every --report_every seconds)."""
  now = time.time() if now is None else now
  primary = plan.protocol.primary_mode
  header = (f'{"seed":>4}  {"state":<30} {"steps":>10} {"of":>10} {"steps/s":>8} {"ETA":>7}  {"evaluated":>9}  '
            f'{"latest " + primary:>20}  {"best within " + reproduction.steps_label(plan.budget):>22}  '
            f'{"held out: best / final":>22}')
  lines = [header]
  all_rows, all_heldout = seed_rows(plan), heldout_rows(plan)
  for spec in plan.specs:
    progress = reproduction.read_progress(spec.train_dir, spec.log('train'), now)
    rows = all_rows[spec.seed]
    imported = bool(rows) and 'imported_from' in rows[0]
    curve = reproduction.seed_curves(rows, [primary])[primary]
    done = reproduction.evaluated_steps(rows, plan.protocol.modes)
    complete = (progress['full_checkpoint'] or 0) >= spec.run_length
    train_pids, eval_pids = running('run_train.py', spec.train_dir), running('run_eval.py', spec.eval_dir)
    if train_pids:
      kit = started_by_kit(spec, 'train', train_pids[0])
      state = f'training (pid {train_pids[0]}{"" if kit else ", not the kit"})'
    elif complete and not set(progress['policy_steps']) - done:
      state = 'done'
    elif complete:
      state = 'evaluating' if eval_pids else 'trained, evaluation stopped'
    elif progress['steps']:
      state = f'stopped (resumes at {progress["full_checkpoint"] or 0})'
    elif imported:
      state = 'run elsewhere (--results_from)'
    else:
      state = 'not started'
    if eval_pids and train_pids:
      state = state[:-1] + ' + eval)'
    rate = progress['rate'] if train_pids else None
    steps = str(progress['steps'])
    eta = None
    if rate:  # running: extrapolated from the newest checkpoint or progress line
      estimate = min(spec.run_length, int(progress['steps'] + rate * max(0.0, now - (progress['updated'] or now))))
      steps, eta = f'~{estimate}', (spec.run_length - estimate) / rate
    latest = f'{curve[-1].success:.2f} @ {reproduction.steps_label(curve[-1].step)}' if curve else ''
    best = reproduction.best_within(curve, plan.budget)
    best = f'{best.success:.2f} @ {reproduction.steps_label(best.step)}' if best else ''
    again = {p.step: p.success for p in reproduction.seed_curves(all_heldout[spec.seed], [primary])[primary]}
    heldout = ' / '.join('-' if again.get(step) is None else f'{again[step]:.2f}'
                         for step in reproduction.heldout_steps(curve, plan.budget))
    evaluated = f'{len(done & set(progress["policy_steps"]))}/{len(progress["policy_steps"])}'
    if imported and not progress['policy_steps']:  # the seed's run directory is elsewhere: what was evaluated there
      steps, evaluated = str(max(done, default=0)), f'{len(done)}/{len(done)}'
    lines.append(f'{spec.seed:>4}  {state:<30} {steps:>10} {spec.run_length:>10} '
                 f'{(f"{rate:.0f}" if rate else ""):>8} {reproduction.format_duration(eta):>7}  {evaluated:>9}  '
                 f'{latest:>20}  {best:>22}  {heldout if curve else "":>22}')
  return '\n'.join(lines)


def refresh(plan, write=True):
  """Aggregates the seeds' evaluations; writes <root>/aggregate/ when `write`. Returns the summary lines."""
  result = reproduction.aggregate(seed_rows(plan), plan.protocol, plan.budget, heldout_rows(plan))
  if write:
    reproduction.write_outputs(result, os.path.join(plan.root, AGGREGATE_DIR), plan.name)
  return reproduction.summary_lines(result)


class Refresher(object):
  """Rewrites the aggregate when a seed's results change; prints the status table every `report_every` s."""

  def __init__(self, plan, report_every):
    self.plan, self.report_every = plan, report_every
    self.signature, self.last_report = None, time.time()

  def __call__(self, force=False):
    signature = []
    for spec in self.plan.specs:
      for directory in (spec.eval_dir, spec.heldout_dir):
        path = os.path.join(directory, reproduction.RESULTS_FILE)
        signature.append(os.path.getmtime(path) if os.path.exists(path) else None)
    if force or signature != self.signature:
      self.signature = signature
      try:
        lines = refresh(self.plan)
      except (OSError, ValueError) as e:  # a results file being replaced: next time
        say(f'aggregate not updated this time ({e}).')
      else:
        if any(s is not None for s in signature):
          say('aggregate: ' + lines[0])
    if self.report_every and time.time() - self.last_report >= self.report_every:
      self.last_report = time.time()
      print(status_table(self.plan), flush=True)


# ----------------------------------------------------------------------------------------------------------------------
# Backends.


def run_local(plan, refresher):
  """Runs `plan.parallel` seed jobs at once in threads of this process; returns (their results, the exit status of a
  stop: 128 + the signal's number, 130 when a seed was stopped from outside, None when nothing stopped)."""
  stop = threading.Event()
  results, queue = [], list(plan.specs)
  threads = {}
  lock = threading.Lock()

  def job(spec):
    try:
      result = run_seed(spec, stop)
    except Exception as e:  # pylint: disable=broad-except  (reported as the seed's failure, not lost in a thread)
      result = {'seed': spec.seed, 'state': 'failed', 'message': f'seed {spec.seed}: {type(e).__name__}: {e}'}
    with lock:
      results.append(result)
    say(result['message'])
    if result['state'] == 'stopped' and not stop.is_set():  # its process was stopped on request (`--stop`):
      say('stopping: a seed was stopped from outside; the other seeds stop too (the same command resumes).')
      stop.set()  # the whole kit stops, rather than starting the seeds still queued

  received = []  # the stop signal that came first

  def on_signal(signum, frame):  # pylint: disable=unused-argument
    if not received:
      received.append(signum)
    if not stop.is_set():
      say(f'stopping ({signal.Signals(signum).name}): the processes the kit started get SIGINT (the same command '
          f'resumes).')
      stop.set()

  previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS if signal.getsignal(s) != signal.SIG_IGN}
  slots = core_slots(plan.parallel)
  slot_of = {}  # seed -> its slot in `slots`
  try:
    while queue or threads:
      while queue and len(threads) < plan.parallel and not stop.is_set():
        spec = queue.pop(0)
        if slots:
          slot_of[spec.seed] = min(set(range(len(slots))) - set(slot_of.values()))
          spec = dataclasses.replace(spec, cpus=slots[slot_of[spec.seed]])
        threads[spec.seed] = threading.Thread(target=job, args=(spec,), name=f'seed_{spec.seed}', daemon=True)
        threads[spec.seed].start()
      for seed in [s for s, t in threads.items() if not t.is_alive()]:
        del threads[seed]
        slot_of.pop(seed, None)
      if stop.is_set():
        queue.clear()
      refresher()
      time.sleep(min(1.0, plan.specs[0].poll_secs))
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
  return results, (128 + received[0] if received else 130 if stop.is_set() else None)


def run_ray(plan, refresher, address):
  """Runs the seed jobs as Ray tasks (one CPU each), at most `plan.parallel` at once; returns as `run_local`."""
  try:
    import ray  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise KitError('--backend ray needs Ray: pip install -r requirements-ray.txt (docs/reproduction.md).') from None
  if address:
    ray.init(address=address)
  else:
    ray.init(num_cpus=plan.parallel, include_dashboard=False)
  remote = ray.remote(num_cpus=1, max_retries=0)(run_seed)
  queue, pending, results = list(plan.specs), {}, []
  stopped = None
  received = [signal.SIGINT]  # the stop signal (Ctrl-C raises KeyboardInterrupt itself)

  def on_signal(signum, frame):  # pylint: disable=unused-argument
    received[0] = signum
    raise KeyboardInterrupt

  previous = {s: signal.signal(s, on_signal) for s in STOP_SIGNALS[1:] if signal.getsignal(s) != signal.SIG_IGN}
  try:
    while queue or pending:
      while queue and len(pending) < plan.parallel:
        spec = queue.pop(0)
        pending[remote.remote(spec)] = spec
        say(f'seed {spec.seed}: submitted to Ray.')
      ready, _ = ray.wait(list(pending), timeout=plan.specs[0].poll_secs)
      for ref in ready:
        spec = pending.pop(ref)
        try:
          result = ray.get(ref)
        except ray.exceptions.RayError as e:
          result = {'seed': spec.seed, 'state': 'failed', 'message': f'seed {spec.seed}: Ray task failed: {e}'}
        results.append(result)
        say(result['message'])
      refresher()
  except KeyboardInterrupt:
    stopped = 128 + received[0]
    say(f'stopping ({signal.Signals(received[0]).name}): cancelling the Ray tasks (their processes get SIGINT; the '
        f'same command resumes).')
    for ref in pending:
      ray.cancel(ref)
    for ref in pending:
      try:
        ray.get(ref, timeout=120)
      except (ray.exceptions.RayError, KeyboardInterrupt):
        pass
  finally:
    for s, handler in previous.items():
      signal.signal(s, handler)
    ray.shutdown()
  return results, stopped


# ----------------------------------------------------------------------------------------------------------------------
# Commands.


def stop_kit_processes(plan):
  """--stop: SIGINT to the live processes the kit started (pid files); others are listed, not touched."""
  for spec in plan.specs:
    for kind in SCRIPTS:
      for pid in running(SCRIPTS[kind], spec.directory(kind)):
        if started_by_kit(spec, kind, pid):
          say(f'seed {spec.seed}: stopping {kind} (pid {pid}).')
          stop_pid(pid)
        else:
          say(f'seed {spec.seed}: {kind} pid {pid} was not started by the kit; left running.')


def export_best(plan, out_dir):
  """--export_best DIR: copies the task's best policy checkpoint over all seeds (headline mode, within the budget)
  to DIR with best_policy.json (where it comes from, its evaluation, the command that evaluates it again).
  Returns the lines to print. Raises KitError."""
  protocol, rows = plan.protocol, seed_rows(plan)
  found = reproduction.best_policy(rows, protocol.primary_mode, plan.budget)
  if found is None:
    raise KitError(f'no policy of {plan.root} is evaluated in {protocol.primary_mode} within '
                   f'{plan.budget:,} steps yet: nothing to export.')
  seed, row = found
  if 'imported_from' in row:
    raise KitError(f'the best {protocol.primary_mode} policy within {plan.budget:,} steps is seed {seed}\'s at step '
                   f'{int(row["step"]):,} (success {float(row["success_rate"]):.2f}), evaluated elsewhere '
                   f'({row["imported_from"]}): its checkpoint is not under {plan.root}. Nothing was exported; an '
                   'export made where that seed ran stays the best one.')
  source = os.path.join(plan.specs[seed].train_dir, 'policy', os.path.basename(row['checkpoint']))
  step = int(row['step'])
  same = {r['mode']: {'goal': r.get('goal'), 'success_rate': r['success_rate'],
                      'mean_final_distance': r['mean_final_distance'], 'num_episodes': r['num_episodes']}
          for r in rows[seed] if int(r['step']) == step}
  configs = [os.path.relpath(p, REPO_ROOT) if p.startswith(REPO_ROOT + os.sep) else p
             for p in plan.manifest['config_files']]
  exported = os.path.join(out_dir, os.path.basename(source))
  command = (['python', 'run_eval.py'] + configs + ['--checkpoint_path', exported, '--eval_dir',
                                                    f'runs/reevaluate_{plan.name}'] +
             [a for b in plan.manifest['bindings'] for a in ('--gin_param', b)] +
             ['--gin_param', f'evaluate.num_episodes_eval = {plan.manifest["eval_episodes"]}'])
  info = {
      'task': protocol.task, 'config_files': configs, 'bindings': plan.manifest['bindings'],
      'mode': protocol.primary_mode, 'goal': protocol.goals.get(protocol.primary_mode), 'budget': plan.budget,
      'seed': seed, 'step': step, 'success_rate': row['success_rate'],
      'mean_final_distance': row['mean_final_distance'], 'num_episodes': row['num_episodes'],
      'evaluations_at_this_step': same, 'seeds_evaluated': sorted(s for s, r in rows.items() if r),
      'paper_table1': dataclasses.asdict(protocol.paper) if protocol.paper else None,
      'source': source, 'exported_at': datetime.datetime.now().isoformat(timespec='seconds'),
      'reevaluate': shlex.join(command),
  }
  try:
    reproduction.export_checkpoint(source, out_dir, info)
  except (OSError, ValueError) as e:
    raise KitError(str(e)) from None
  return [f'exported the best {protocol.primary_mode} policy within {plan.budget:,} steps: seed {seed}, step '
          f'{step:,}, success {row["success_rate"]:.2f} (mean final distance {row["mean_final_distance"]:.2f}, '
          f'{row["num_episodes"]} episodes) -> {exported}',
          f'evaluate it again: {shlex.join(command)}']


def parse_args(argv):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0],
                                   formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
  parser.add_argument('config', nargs='+', help='the task config (gin files), e.g. configs/ant_maze.gin')
  parser.add_argument('--seeds', type=int, default=reproduction.PAPER_SEEDS, help='seeds 0 .. K-1 (default 10)')
  parser.add_argument('--steps', type=int, default=reproduction.PAPER_STEPS,
                      help='environment steps per seed (default 10M): train_uvf.num_episodes_train = '
                           'ceil(steps / max_steps_per_episode); the run stops at that x T + 100')
  parser.add_argument('--root', help='one run directory per seed in it (default runs/reproduce_<config>)')
  parser.add_argument('--parallel', type=int, default=None,
                      help='seeds trained and evaluated at once (default: fits the cores, evaluations included)')
  parser.add_argument('--policy_every', type=int, default=reproduction.PAPER_EVAL_EVERY,
                      help='train_uvf.save_policy_every_n_steps: steps between evaluated checkpoints (50000)')
  parser.add_argument('--eval_episodes', type=int, default=reproduction.PAPER_EVAL_EPISODES,
                      help='episodes per eval mode and checkpoint (50)')
  parser.add_argument('--mode', default=None, help="the headline eval mode (default: the paper's target)")
  parser.add_argument('--budget', type=int, default=None,
                      help='Table 1 view: best policy within this many steps (default --steps)')
  parser.add_argument('--gin_param', action='append', default=[],
                      help='a gin binding for training and evaluation (repeatable)')
  parser.add_argument('--only_seeds', metavar='S[,S...]', default=None,
                      help='train and evaluate only these of the seeds 0..K-1 (e.g. 2); the others are never started, '
                           'only read for --status and the aggregate (seeds run on another machine: --results_from)')
  parser.add_argument('--results_from', metavar='CSV', action='append', default=[],
                      help="the per_seed.csv of an earlier aggregate (e.g. docs/reproduction/<task>/per_seed.csv): "
                           "its rows stand for the seeds that have no evaluation under --root (repeatable)")
  parser.add_argument('--backend', choices=['local', 'ray'], default='local')
  parser.add_argument('--ray_address', default=None,
                      help="--backend ray: a running cluster ('auto' or HOST:PORT); default: a local Ray instance")
  parser.add_argument('--eval_timeout', type=int, default=7200,
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
  what.add_argument('--export_best', metavar='DIR',
                    help="copy the best policy checkpoint over all seeds (headline mode, within --budget) to DIR, "
                         "with best_policy.json; starts nothing")
  return parser.parse_args(argv)


def main(argv=None):
  args = parse_args(sys.argv[1:] if argv is None else argv)
  try:
    plan = make_plan(args)
    old = check_manifest(plan)
  except KitError as e:
    print(f'reproduce: error: {e}', file=sys.stderr, flush=True)
    return EXIT_USAGE
  protocol = plan.protocol
  only = f' (this launch: {",".join(map(str, plan.only))})' if plan.only else ''
  print(f'reproduce: {plan.name} ({protocol.task}), seeds 0..{len(plan.specs) - 1}{only}, {plan.manifest["steps"]:,} '
        f'steps each (num_episodes_train {plan.manifest["num_episodes_train"]}, stops at '
        f'{plan.manifest["run_length"]:,}), policy every {args.policy_every:,} steps, {args.eval_episodes} episodes '
        f'x modes {list(protocol.modes)} '
        f'(headline {protocol.primary_mode} {protocol.goals[protocol.primary_mode]}); root {plan.root}; '
        f'{plan.parallel} at once ({args.backend})', flush=True)
  if args.dry_run:
    for spec in plan.run_specs():
      train, evaluation = plan.resumes[spec.seed]
      print(f'seed {spec.seed}: training {"resumes" if train else "starts"} in {spec.train_dir}; evaluation '
            f'{"resumes" if evaluation else "starts"} in {spec.eval_dir}\n  {shlex.join(spec.train_command)}\n  '
            f"{shlex.join(spec.eval_command)}")
    return 0
  if args.status:
    print(status_table(plan))
    for line in refresh(plan, write=False):
      print(line)
    return 0
  if args.stop:
    stop_kit_processes(plan)
    return 0
  if args.export_best:
    try:
      lines = export_best(plan, args.export_best)
    except KitError as e:
      print(f'reproduce: error: {e}', file=sys.stderr, flush=True)
      return EXIT_USAGE
    print('\n'.join(lines), flush=True)
    return 0
  if args.aggregate:
    for line in refresh(plan):
      print(line)
    print(f'wrote {os.path.join(plan.root, AGGREGATE_DIR)}')
    return 0
  os.makedirs(plan.root, exist_ok=True)
  lock = open(os.path.join(plan.root, LOCK), 'a')  # pylint: disable=consider-using-with
  try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
  except OSError:
    print(f'reproduce: error: another reproduce.py is running on {plan.root}; watch it with --status.',
          file=sys.stderr, flush=True)
    return EXIT_USAGE
  write_manifest(plan, old, args)
  refresher = Refresher(plan, args.report_every)
  launch = dataclasses.replace(plan, specs=plan.run_specs())  # the seeds this launch runs (--only_seeds)
  try:
    if args.backend == 'ray':
      results, stopped = run_ray(launch, refresher, args.ray_address)
    else:
      results, stopped = run_local(launch, refresher)
  except KitError as e:
    print(f'reproduce: error: {e}', file=sys.stderr, flush=True)
    return EXIT_USAGE
  refresher(force=True)
  print(status_table(plan))
  for line in refresh(plan):
    print(line)
  print(f'outputs: {os.path.join(plan.root, AGGREGATE_DIR)}', flush=True)
  failed = [r for r in results if r['state'] == 'failed']
  for result in failed:
    print(result['message'], file=sys.stderr, flush=True)
  if stopped or any(r['state'] == 'stopped' for r in results):
    return stopped or 130  # 128 + the stop signal's number (130: a seed was stopped from outside, `--stop`)
  return 1 if failed else 0


if __name__ == '__main__':
  console.protect_streams()  # a closed terminal (SIGHUP) must not fail the kit's last lines
  sys.exit(main())
