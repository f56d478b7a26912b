r"""Starts multi-machine IMPALA on this machine: one learner and N actor processes, as you would across machines.

  python scripts/launch_local_cluster.py --config configs/impala_builtin.gin --num_actors 2 --logdir /tmp/cluster \
      [--port 8000] [--stop_timeout_s 25] \
      [-- any other run_train.py flags, e.g. --gin_param "experiment.batch_size = 2"]

It prints the commands and runs them:

  python run_train.py CONFIG --job_name=learner --task=0 --num_actors=N --reverb_port=PORT --logdir=LOGDIR ...
  python run_train.py CONFIG --job_name=actor --task=i --num_actors=N --learner_address=localhost:PORT ...

On several machines, run the first on the learner's host and the others on any hosts, with the learner's host name
in --learner_address (docs/impala/distributed.md). Each process's output lines are prefixed with its name. When the
learner finishes, the actors exit by themselves; the exit status is then the learner's. Without --port, a --logdir
that holds a run already gets the port that run was started with (its run.json), so that the same command resumes it.

Stopping (docs/impala/distributed.md, "Stopping the local cluster"). The processes run in sessions of their own, so
that a terminal's or a process group's signal reaches this script only, and it stops them in order. On SIGINT
(Ctrl-C), SIGTERM (`timeout`, `kill PID`, a supervisor) or SIGHUP (a closed terminal) it passes the signal to the
learner, which writes its checkpoint and exits, then to the actors, which stop at once; what still runs
`--stop_timeout_s` (25 s) after the signal is killed. It prints what it stopped and how, and exits with 128 + the
signal's number. A signal ignored when it started stays ignored (a background job's SIGINT, `nohup`'s SIGHUP); a
second signal (2 s or more later) is passed on at once, and the learner then stops without its checkpoint. Should
this script die without stopping them (kill -9, the OOM killer), the kernel sends the learner SIGTERM (it writes its
checkpoint) and the actors SIGKILL (they have nothing to save): Linux's parent-death signal.
"""

import argparse
import ctypes
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)

from launcher import console  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

RUN_TRAIN = os.path.join(REPO_ROOT, 'run_train.py')
FINISH_TIMEOUT_S = 60.  # After the learner finished: how long the actors get to exit by themselves.
STOP_TIMEOUT_S = 25.  # After a stop signal: when what still runs is killed (inside a 30 s grace period).
ACTOR_STOP_S = 5.  # The actors' share of it: they get the signal once the learner has stopped, or this long before.
ANNOUNCE_WAIT_S = .5  # How long to look for the learner's own stop line before sending it the signal (module doc).
REPEAT_S = 2.  # A signal this soon after the first is the same stop (`timeout` signals the command, then its group).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# What the kernel sends a job when the launcher dies (`_parent_death_signal`): the learner stops after its current
# step and writes its checkpoint; an actor has nothing to save and its helper processes end when it does.
LEARNER_DEATH_SIGNAL = signal.SIGTERM
ACTOR_DEATH_SIGNAL = signal.SIGKILL
_PR_SET_PDEATHSIG = 1  # <linux/prctl.h>

# run_train.py's lines that the stop report uses (launcher/signals.py, scalable_agent/progress.py).
_STOP_ANNOUNCED = re.compile(r'run_train: SIG\w+ received: stopping')
_CHECKPOINT_LINE = re.compile(r'(?:Interrupted at|Done:) (\d+) environment frames.*Checkpoint: (\S+)')
_STOPPED = re.compile(r'run_train: stopped ')  # its last line after a stop, with or without the checkpoint


def free_port():
  """A TCP port nobody listens on now (the learner binds it a few seconds later)."""
  with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
    s.bind(('', 0))
    return s.getsockname()[1]


def run_port(logdir):
  """The learner's port recorded in `logdir`'s run.json (the binding `experiment.reverb_port = N`), or None (no run
  there yet, or one without it). A run directory keeps its configuration, the port included: a rerun must use it."""
  try:
    with open(os.path.join(logdir, 'run.json'), encoding='utf-8') as f:
      bindings = json.load(f).get('bindings', [])
  except (OSError, ValueError, AttributeError):
    return None
  for binding in bindings if isinstance(bindings, list) else []:
    found = re.fullmatch(r'\s*experiment\.reverb_port\s*=\s*(\d+)\s*', str(binding))
    if found:
      return int(found.group(1))
  return None


def commands(config, num_actors, logdir, port, extra_flags=(), host='localhost', python=sys.executable):
  """The learner's command and the N actors' commands (lists of arguments).

  Args:
    config: a gin file for run_train.py, or None for the original flags alone (the IMPALA defaults).
    num_actors: N.
    logdir: the learner's run directory.
    port: the learner's Reverb port.
    extra_flags: more run_train.py flags, given to every process (every process must have the same configuration).
    host: the learner's host name, as the actors reach it.
    python: the interpreter.
  """
  base = [python, RUN_TRAIN] + ([config] if config else [])
  common = [f'--num_actors={num_actors}'] + list(extra_flags)
  learner = base + ['--job_name=learner', '--task=0'] + common + [f'--reverb_port={port}', f'--logdir={logdir}']
  actors = [
      base + ['--job_name=actor', f'--task={i}'] + common + [f'--learner_address={host}:{port}']
      for i in range(num_actors)
  ]
  return learner, actors


def _shell(command):
  return ' '.join(a if a and all(c.isalnum() or c in '-_=./:@,+' for c in a) else repr(a) for a in command)


def _say(text):
  print(f'launch_local_cluster: {text}', flush=True)


def _describe_exit(code):
  """'exit 143' or 'killed by SIGKILL' for a `Popen.returncode`."""
  if code is not None and code < 0:
    try:
      return f'killed by {signal.Signals(-code).name}'
    except ValueError:
      return f'killed by signal {-code}'
  return f'exit {code}'


def _parent_death_signal(signum):
  """A child's preexec_fn on Linux: the kernel sends the child `signum` when this process dies, even by SIGKILL
  (prctl PR_SET_PDEATHSIG, kept across exec; tied to the thread that starts the child: the main thread). None
  elsewhere: the children then outlive a killed launcher.

  The signal's disposition is set to its default first (exec would do that anyway, unless it is ignored): one that
  comes between the prctl and the exec then ends the child instead of running this process's handler in it. A
  launcher that died before the prctl is seen by the parent PID check."""
  if not sys.platform.startswith('linux'):
    return None
  try:
    prctl = ctypes.CDLL(None, use_errno=True).prctl  # looked up here, not in the forked child
  except (OSError, AttributeError):
    return None
  parent = os.getpid()
  catchable = signum != signal.SIGKILL and signal.getsignal(signum) != signal.SIG_IGN

  def preexec():
    if catchable:
      signal.signal(signum, signal.SIG_DFL)
    prctl(_PR_SET_PDEATHSIG, int(signum), 0, 0, 0)
    if os.getppid() != parent:
      os._exit(128 + int(signum))  # pylint: disable=protected-access

  return preexec


class _Signals:
  """SIGINT / SIGTERM / SIGHUP while the cluster runs, recorded by a handler that does nothing else (the main loop
  acts on them). A signal ignored when the launcher started stays ignored (and so it is in the processes started)."""

  def __init__(self):
    self.first = None  # the first signal's number
    self.first_time = None  # time.monotonic() when it came
    self.repeated = None  # a later signal, REPEAT_S or more after the first, not yet acted on (once only)
    self._repeated_seen = False
    self._previous = {}

  def __enter__(self):
    for signum in STOP_SIGNALS:
      previous = signal.getsignal(signum)
      if previous != signal.SIG_IGN:
        self._previous[signum] = previous
        signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc):
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    return False

  def _handle(self, signum, frame):
    del frame
    now = time.monotonic()
    if self.first is None:
      self.first, self.first_time = signum, now
    elif now - self.first_time >= REPEAT_S and not self._repeated_seen:
      self.repeated, self._repeated_seen = signum, True


class _Job:
  """One run_train.py process (the learner or an actor), its output lines prefixed with its name on our stdout."""

  def __init__(self, name, command, preexec_fn):
    self.name = name
    # In the caller's directory, as the commands would run there (relative --config / --logdir paths). A session of
    # its own: a terminal's Ctrl-C or a signal to our process group reaches this script only, which stops the jobs
    # in order.
    # noqa reason: the child only calls prctl (looked up before the fork) and resets signals, taking no lock.
    self.process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, start_new_session=True,
                                    preexec_fn=preexec_fn)  # noqa: PLW1509
    self.pid = self.process.pid
    self.announced = threading.Event()  # its own line: "run_train: SIGTERM received: stopping ..."
    self.stopped = threading.Event()  # its last line after a stop: "run_train: stopped by SIGTERM after ..."
    self.checkpoint = None  # (frames, path) of the learner's last checkpoint line, interrupted or done
    self.how = 'exited by itself'  # how it was stopped, for the report
    self._pump = None

  def start_pump(self):
    self._pump = threading.Thread(target=self._relay, name=f'pump-{self.name}', daemon=True)
    self._pump.start()

  def _relay(self):
    for line in iter(self.process.stdout.readline, b''):
      text = line.decode(errors='replace')
      if _STOP_ANNOUNCED.search(text):
        self.announced.set()
      if _STOPPED.search(text):
        self.stopped.set()
      found = _CHECKPOINT_LINE.search(text)
      if found:
        self.checkpoint = int(found.group(1)), found.group(2)
      sys.stdout.write(f'[{self.name}] {text}')
      sys.stdout.flush()

  def running(self):
    return self.process.poll() is None

  def send(self, signum, how):
    """`signum` to the job if it still runs; `how` is then how it was stopped."""
    if self.running():
      try:
        self.process.send_signal(signum)
      except OSError:
        return
      self.how = how

  def kill(self, why):
    """SIGKILL to its process group, if it still runs: the job and its environment processes (its console relay
    ends with them)."""
    if self.running():
      try:
        os.killpg(self.pid, signal.SIGKILL)
      except OSError:
        self.process.kill()
      self.how += f', then killed with SIGKILL ({why})'
    self.process.wait()

  def finish_output(self, timeout):
    """Waits up to `timeout` s for its last lines (they may come through its console relay after it exited)."""
    if self._pump is not None:
      self._pump.join(timeout)


class Cluster:
  """The learner and the actors, started from the main thread (the parent-death signal is tied to the thread that
  started a child)."""

  def __init__(self, learner_command, actor_commands, logdir, signals, stop_timeout_s=STOP_TIMEOUT_S):
    self.logdir = logdir
    self.signals = signals
    self.stop_timeout_s = stop_timeout_s
    self.jobs = [_Job('learner', learner_command, _parent_death_signal(LEARNER_DEATH_SIGNAL))]
    actor_preexec = _parent_death_signal(ACTOR_DEATH_SIGNAL)
    for i, command in enumerate(actor_commands):
      if signals.first is not None:
        break  # stopped while starting: start no more
      self.jobs.append(_Job(f'actor {i}', command, actor_preexec))
    for job in self.jobs:  # after every fork: no preexec_fn runs while a pump thread does
      job.start_pump()
    self.learner = self.jobs[0]
    self.actors = self.jobs[1:]
    _say('started (each in a session of its own; SIGINT, SIGTERM or SIGHUP here stops them all): ' +
         ', '.join(f'{job.name} PID {job.pid}' for job in self.jobs) + '.')

  def run(self):
    """Runs until the learner finishes (then the actors get FINISH_TIMEOUT_S to exit) or a stop signal; returns the
    exit status."""
    while self.learner.running():
      if self.signals.first is not None:
        return self.stop()
      time.sleep(.2)
    code = self.learner.process.returncode
    _say(f'the learner exited ({_describe_exit(code)}); waiting for the actors (up to {FINISH_TIMEOUT_S:.0f} s).')
    deadline = time.monotonic() + FINISH_TIMEOUT_S
    while any(job.running() for job in self.actors) and time.monotonic() < deadline:
      if self.signals.first is not None:
        return self.stop()
      time.sleep(.2)
    for job in self.actors:
      if job.running():
        _say(f'{job.name} did not exit within {FINISH_TIMEOUT_S:.0f} s of the learner; stopping it (SIGTERM).')
        job.send(signal.SIGTERM, 'SIGTERM from the launcher')
    self._wait(self.actors, time.monotonic() + 10.)
    for job in self.actors:
      job.kill('still running 10 s after the SIGTERM')
    self.learner.finish_output(5.)
    return 128 - code if code < 0 else code

  def _wait(self, jobs, deadline, done=lambda: False):
    """Waits until `jobs` exited, `done()` or `deadline`; passes a repeated stop signal on to every job still
    running."""
    while any(job.running() for job in jobs) and not done() and time.monotonic() < deadline:
      self._pass_on_repeated()
      time.sleep(.1)

  def _pass_on_repeated(self):
    signum = self.signals.repeated
    if signum is None:
      return
    self.signals.repeated = None
    name = signal.Signals(signum).name
    running = [job for job in self.jobs if job.running()]
    learner = ('; the learner without writing its checkpoint, its previous one stays'
               if self.learner in running else '')
    _say(f'{name} again: passing it on to {", ".join(job.name for job in running) or "nobody"} (they stop at '
         f'once{learner}).')
    for job in running:
      job.send(signum, f'{job.how}, then {name} again')

  def stop(self):
    """Stops the cluster after the first stop signal: the learner, then the actors, then kills what is left; prints
    what it stopped and how; returns 128 + the signal's number."""
    signum = self.signals.first
    name = signal.Signals(signum).name
    start = self.signals.first_time
    _say(f'{name} received: stopping the learner (it writes its checkpoint), then the actors; what still runs '
         f'{self.stop_timeout_s:.0f} s after the signal is killed. (A second signal, {REPEAT_S:.0f} s or more later, '
         f'stops them at once.)')
    # Under SLURM or systemd every process of the job gets the signal: a learner that says it got it itself gets none
    # from here (a second signal would stop it without its checkpoint), nor do the actors (they got it too; a second
    # one would interrupt their cleanup).
    everyone = False
    if self.learner.running():
      if self.learner.announced.wait(ANNOUNCE_WAIT_S):
        everyone = True
        self.learner.how = f'its own {name} (sent to every process of the job); none from the launcher'
      else:
        self.learner.send(signum, f'{name} from the launcher')
    # The actors' turn once the learner has written its checkpoint and said so (its exit takes a few seconds more).
    learner_s = self.stop_timeout_s - min(ACTOR_STOP_S, self.stop_timeout_s / 2)
    self._wait([self.learner], start + learner_s, done=self.learner.stopped.is_set)
    when = (' after the learner\'s stop' if self.learner.stopped.is_set() or not self.learner.running() else
            f' ({learner_s:.0f} s after the stop signal, the learner still running)')
    for job in self.actors:
      if everyone:
        job.how = f'its own {name}, as the learner\'s; none from the launcher'
      else:
        job.send(signum, f'{name} from the launcher{when}')
    self._wait(self.jobs, start + self.stop_timeout_s)
    for job in self.jobs:
      job.kill(f'still running {self.stop_timeout_s:.0f} s after the stop signal')
    for job in self.jobs:
      job.finish_output(1.)
    self._report(name, time.monotonic() - start)
    return 128 + signum

  def _report(self, name, seconds):
    lines = [f'stopped by {name} in {seconds:.1f} s:']
    for job in self.jobs:
      lines.append(f'  {job.name} (PID {job.pid}): {job.how}; {_describe_exit(job.process.returncode)}')
    _say('\n'.join(lines))
    if self.learner.checkpoint is not None:
      frames, path = self.learner.checkpoint
      _say(f'the learner\'s checkpoint: {path} ({frames} environment frames); the same command resumes the run from '
           f'it.')
    else:
      _say(f'the learner wrote no checkpoint at the stop; the same command resumes the run from the newest '
           f'model.ckpt-* in {self.logdir}.')


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0],
                                   epilog='Flags after -- (or unknown flags) go to every run_train.py process.')
  parser.add_argument('--config', default=None, help='gin file (e.g. configs/impala_builtin.gin); default: the '
                      'original IMPALA flags alone')
  parser.add_argument('--num_actors', type=int, required=True)
  parser.add_argument('--logdir', required=True, help='the learner\'s run directory')
  parser.add_argument(
      '--port', type=int, default=0, help='the learner\'s Reverb port (default: the one the run in '
      '--logdir was started with, so that the same command resumes it; for a new run a free one)')
  parser.add_argument(
      '--stop_timeout_s', type=float, default=STOP_TIMEOUT_S,
      help='after a stop signal, seconds until what still runs is killed (default %(default)s: inside '
      'the 30 s grace period of SLURM and Kubernetes)')
  args, extra = parser.parse_known_args(argv)
  extra = [a for a in extra if a != '--']
  if args.num_actors < 1:
    parser.error('--num_actors must be >= 1')
  if not args.stop_timeout_s > 0:
    parser.error('--stop_timeout_s must be > 0 (seconds)')
  console.protect_streams()  # a closed terminal (SIGHUP) must not stop the output pumps: the jobs would block
  port = args.port or run_port(args.logdir)
  if port:
    if not args.port:
      _say(f'port {port}: the one the run in {args.logdir} was started with (its run.json).')
  else:
    port = free_port()
  learner_command, actor_commands = commands(args.config, args.num_actors, args.logdir, port, extra)
  _say('the learner (on its host):\n  ' + _shell(learner_command))
  _say('the actors (on any hosts; replace localhost by the learner\'s host name):')
  for command in actor_commands:
    print('  ' + _shell(command), flush=True)
  with _Signals() as signals:
    return Cluster(learner_command, actor_commands, args.logdir, signals, args.stop_timeout_s).run()


if __name__ == '__main__':
  sys.exit(main())
