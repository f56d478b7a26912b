"""One seed's job: train to the run length, evaluate every policy checkpoint as it appears, then evaluate the best
and final policies on the held-out episodes. Resumable, and it adopts a training or evaluation that is already
running (found by its directory's lock, `processes.holder`) instead of starting a second one.
"""

import dataclasses
import datetime
import os
import signal
import subprocess
import threading
import time
from typing import Any, Callable, Dict, List, Optional, Set, Tuple

from reproduction import heldout
from reproduction import processes
from reproduction import progress
from reproduction import results

Report = Callable[[str], None]  # where a job's progress messages go: fn(message), e.g. `say`


def say(message: str) -> None:
  """Prints a kit message with the time of day."""
  print(f'[{datetime.datetime.now().strftime("%H:%M:%S")}] {message}', flush=True)


@dataclasses.dataclass
class SeedSpec:
  """Everything one seed's job needs (picklable: Ray sends it to a worker)."""
  seed: int
  train_dir: str
  eval_dir: str
  train_command: List[str]
  eval_command: List[str]
  log_dir: str
  run_length: int  # the global step at which training is complete
  modes: List[str]
  poll_secs: float
  max_restarts: int
  detach: bool  # True: children in their own session, they outlive the kit (local); False: they die with it (Ray)
  repo_root: str
  threads: int = 0  # TensorFlow threads of the training process (TF_NUM_INTRAOP_THREADS); 0: TensorFlow's default
  cpus: Tuple[int, ...] = ()  # the cores the training process is pinned to (sched_setaffinity); (): not pinned
  heldout_dir: str = ''  # the held-out evaluations' eval_dir (heldout.HELDOUT_DIR)
  heldout_command: List[str] = dataclasses.field(default_factory=list)  # run_eval.py of one held-out policy, less its
  # --checkpoint_path
  budget: int = 0  # the Table 1 budget: the best and final policies are chosen within it
  primary_mode: str = ''

  def log(self, kind: str) -> str:
    return os.path.join(self.log_dir, f'seed_{self.seed}.{kind}.log')

  def pid_file(self, kind: str) -> str:
    return os.path.join(self.log_dir, f'seed_{self.seed}.{kind}.pid')

  def directory(self, kind: str) -> str:
    return {'train': self.train_dir, 'eval': self.eval_dir, 'heldout': self.heldout_dir}[kind]


def start(spec: SeedSpec, kind: str, command: Optional[List[str]] = None) -> subprocess.Popen[bytes]:
  """Starts the seed's training, evaluation or a held-out evaluation (`command`); returns its Popen."""
  command = command or (spec.train_command if kind == 'train' else spec.eval_command)
  env: Dict[str, str] = {}
  cpus: Tuple[int, ...] = ()
  if kind == 'train':
    cpus = spec.cpus
    if spec.threads:
      env = {'TF_NUM_INTRAOP_THREADS': str(spec.threads), 'TF_NUM_INTEROP_THREADS': '1'}
  return processes.start_process(command, spec.log(kind), spec.pid_file(kind), spec.repo_root, spec.detach, env, cpus)


def stop_started(spec: SeedSpec, kind: str, sig: int = signal.SIGINT, report: Report = say) -> None:
  """Stops the seed's `kind` process if the kit started it (`--stop`); one that it did not start is left running."""
  record = processes.holder(spec.directory(kind))
  if record is None:
    return
  if processes.started_by_kit(spec.pid_file(kind), record):
    report(f'seed {spec.seed}: stopping {kind} ({processes.describe(record)}).')
    pid = processes.local_pid(record)
    assert pid is not None  # (started_by_kit: a holder on this host)
    processes.stop(pid, sig)
  else:
    report(f'seed {spec.seed}: {kind} {processes.describe(record)} was not started by the kit; left running.')


def heldout_pending(spec: SeedSpec) -> List[int]:
  """The steps of a seed's policies that the held-out view needs and that are not evaluated there yet (its best and
  final policies within the budget, `heldout.heldout_steps`)."""
  curve = results.seed_curves(results.load_results(spec.eval_dir), [spec.primary_mode])[spec.primary_mode]
  done = {int(row['step']) for row in results.load_results(spec.heldout_dir) if row['mode'] == spec.primary_mode}
  return [
      step for step in dict.fromkeys(heldout.heldout_steps(curve, spec.budget)) if step is not None and step not in done
  ]


def evaluate_heldout(spec: SeedSpec, stop: Optional[threading.Event] = None, report: Report = say) -> Optional[str]:
  """Evaluates a done seed's best and final policies on the held-out episodes, one `run_eval.py --checkpoint_path`
  each (in `spec.heldout_dir`). Returns None, or the failure (a `processes.Stopped` when stopped on request)."""
  for step in heldout_pending(spec):
    checkpoint = f'{progress.CHECKPOINT_PREFIX}{step}'
    process = start(spec, 'heldout', spec.heldout_command + ['--checkpoint_path', checkpoint])
    report(f'seed {spec.seed}: held-out evaluation of the policy at step {step} (pid {process.pid}); log '
           f'{spec.log("heldout")}')
    while process.poll() is None:
      if stop is not None and stop.is_set():
        processes.stop(process.pid, process=process)
        return processes.Stopped('held-out evaluation stopped; the same command runs it again.')
      time.sleep(min(spec.poll_secs, 1.0))
    if process.returncode in processes.STOPPED_EXIT_CODES:
      return processes.Stopped(f'held-out evaluation was stopped (exit status {process.returncode}); the same '
                               'command runs it again.')
    if process.returncode != 0:
      return (f'held-out evaluation of step {step} exited with status {process.returncode}; see '
              f'{spec.log("heldout")}:\n{processes.log_tail(spec.log("heldout"))}')
  return None


class SeedJob:
  """Runs one seed to completion (`run`): its training (if not complete) and its evaluation poller (while policy
  checkpoints wait), restarting either after a crash, at most `spec.max_restarts` times in a row without progress.

  Attributes:
    spec: `SeedSpec`.
    stop: None or a `threading.Event`; when set, the processes the kit started are stopped (SIGINT) and the job
      ends 'stopped'.
    report: fn(message) for progress messages.
  """

  KINDS = ('train', 'eval')

  def __init__(self, spec: SeedSpec, stop: Optional[threading.Event] = None, report: Report = say) -> None:
    self.spec, self.stop, self.report = spec, stop, report
    self.name = f'seed {spec.seed}'
    # Popen of the processes this job started.
    self.own: Dict[str, Optional[subprocess.Popen[bytes]]] = {kind: None for kind in self.KINDS}
    self.failures = {kind: 0 for kind in self.KINDS}  # exits in a row without progress
    self.resume_step: Optional[int] = None  # the full checkpoint training was last started from
    self.announced: Set[Tuple[str, Any]] = set()  # (kind, pid) of the running processes adopted and reported

  def run(self) -> Dict[str, Any]:
    """Returns {'seed', 'state' ('done', 'failed' or 'stopped'), 'message'}."""
    try:
      return self._loop()
    except KeyboardInterrupt:  # Ray's cancel
      self._stop_all()
      raise

  def _loop(self) -> Dict[str, Any]:
    spec = self.spec
    while True:
      if self.stop is not None and self.stop.is_set():
        self._stop_all()
        return self._end('stopped', 'stopped.')
      full = progress.full_checkpoint_step(spec.train_dir)
      complete = full is not None and full >= spec.run_length
      for kind in self.KINDS:
        failure = self._exited(kind)
        if failure:
          self._stop_own('eval' if kind == 'train' else 'train')
          return self._failed(failure)
      if not complete:
        self._keep_training()
      policies = progress.policy_steps(spec.train_dir)
      done = results.evaluated_steps(results.load_results(spec.eval_dir), spec.modes)
      pending = [step for step in policies if step not in done]
      if pending and not self._live('eval'):
        self._start('eval')
      if complete and not pending:
        self._stop_own('eval', signal.SIGTERM)
        failure = evaluate_heldout(spec, self.stop, self.report)
        if failure:
          return self._failed(failure)
        return self._end(
            'done', f'done ({full} steps, {len(policies)} policy checkpoints evaluated, the best and '
            'final ones held out).')
      time.sleep(spec.poll_secs)

  def _end(self, state: str, message: str) -> Dict[str, Any]:
    return {'seed': self.spec.seed, 'state': state, 'message': f'{self.name}: {message}'}

  def _failed(self, failure: str) -> Dict[str, Any]:
    return self._end('stopped' if isinstance(failure, processes.Stopped) else 'failed', failure)

  def _running(self, kind: str) -> bool:
    process = self.own[kind]
    return process is not None and process.poll() is None

  def _live(self, kind: str) -> bool:
    """Whether a `kind` process of the seed runs: one this job started, or the holder of its directory."""
    return self._running(kind) or processes.holder(self.spec.directory(kind)) is not None

  def _keep_training(self) -> None:
    """Starts the training unless one runs; reports a running one that this job did not start, once."""
    if self._running('train'):
      return
    record = processes.holder(self.spec.train_dir)
    if record is None:
      self._start('train')
      return
    key = ('train', record.get('pid'))
    if key not in self.announced:
      self.announced.add(key)
      who = ('an earlier reproduce.py'
             if processes.started_by_kit(self.spec.pid_file('train'), record) else 'another command')
      self.report(f'{self.name}: training is running already ({processes.describe(record)}, started by {who}); '
                  'waiting for it.')

  def _exited(self, kind: str) -> Optional[str]:
    """Handles the exit of a process this job started: None if fine to restart, else the failure message."""
    process = self.own[kind]
    if process is None or process.poll() is None:
      return None
    self.own[kind] = None
    code, spec = process.returncode, self.spec
    if code in processes.STOPPED_EXIT_CODES:  # someone stopped it (Ctrl-C, SIGTERM, `--stop`): not a crash
      return processes.Stopped(f'{kind} was stopped (exit status {code}); the same command resumes it.')
    if code in processes.USER_ERROR_EXIT_CODES:  # restarting will not help
      return f'{kind} exited with status {code}:\n{processes.log_tail(spec.log(kind))}'
    if kind == 'eval' and code == 0:  # its checkpoint_timeout: restarted while checkpoints come
      return None
    full = progress.full_checkpoint_step(spec.train_dir)
    if kind == 'train' and full is not None and full != self.resume_step:
      self.failures[kind] = 0  # it made progress: not a crash loop
      if code == 0:
        return None
    self.failures[kind] += 1
    if self.failures[kind] > spec.max_restarts:
      return (f'{kind} failed {self.failures[kind]} times in a row (last status {code}); see {spec.log(kind)}:\n'
              f'{processes.log_tail(spec.log(kind))}')
    self.report(f'{self.name}: {kind} exited with status {code}; restarting it '
                f'({self.failures[kind]}/{spec.max_restarts}).')
    return None

  def _start(self, kind: str) -> None:
    spec = self.spec
    if kind == 'train':
      self.resume_step = progress.full_checkpoint_step(spec.train_dir)
    process = self.own[kind] = start(spec, kind)
    verb = 'resuming' if kind == 'train' and self.resume_step else 'starting'
    layout = ''
    if kind == 'train' and (spec.threads or spec.cpus):
      layout = (f', {spec.threads or "default"} TensorFlow thread{"s" if spec.threads != 1 else ""}' +
                (f' on core{"s" if len(spec.cpus) > 1 else ""} {",".join(map(str, spec.cpus))}' if spec.cpus else ''))
    self.report(f'{self.name}: {verb} {"training" if kind == "train" else "evaluation"} (pid {process.pid}'
                f'{layout}); log {spec.log(kind)}')

  def _stop_own(self, kind: str, sig: int = signal.SIGINT) -> None:
    """Stops the seed's `kind` process if this job or an earlier kit started it."""
    process = self.own[kind]
    if process is not None and self._running(kind):
      processes.stop(process.pid, sig, process=process)
    else:
      record = processes.holder(self.spec.directory(kind))
      if record is not None and processes.started_by_kit(self.spec.pid_file(kind), record):
        pid = processes.local_pid(record)
        assert pid is not None  # (started_by_kit: a holder on this host)
        processes.stop(pid, sig)
    if process is not None:
      process.wait()
      self.own[kind] = None

  def _stop_all(self) -> None:
    for kind in self.KINDS:
      self._stop_own(kind)


def run_seed(spec: SeedSpec, stop: Optional[threading.Event] = None, report: Report = say) -> Dict[str, Any]:
  """Runs seed `spec.seed` to completion (`SeedJob`); returns {'seed', 'state', 'message'}. A function of the
  module, so that Ray can send it to a worker."""
  return SeedJob(spec, stop, report).run()
