r"""Starts multi-machine IMPALA on a Ray cluster: the learner and N actors as Ray actors, from one command.

  python scripts/launch_ray_cluster.py --config configs/impala_builtin.gin --num_actors 150 --logdir runs/cluster \
      [--address auto] [--learner_resources '{"GPU": 1}'] [--actors_per_process 15] [--port 8000] \
      [-- any other run_train.py flags, e.g. --gin_param "experiment.batch_size = 32"]

Run it on the Ray cluster's head node (`ray start --head` there and `ray start --address=HEAD:6379` on the others;
without --address and without a running cluster it starts a Ray instance on this machine). Ray places the jobs:
the learner on a node with --learner_resources, the actor processes spread over the nodes (--actors_per_process actor
tasks each, as threads; docs/impala/distributed.md gives the memory of each). Each job is run_train.py in a Ray actor
(`JobRunner`) that relays its output to this console (prefixed with the job's name) and is its parent:

  learner:          run_train.py CONFIG --job_name=learner --task=0 --num_actors=N --reverb_port=PORT --logdir=LOGDIR
  actor process j:  run_train.py CONFIG --job_name=actor --task=j*K --actors_per_process=K --num_actors=N
                        --learner_address=LEARNER_NODE_IP:PORT

Reverb stays the data path (unrolls and weights); Ray starts, places and restarts the processes. An actor process
that dies (killed, crashed, its node lost) takes its Ray actor with it and Ray starts it again (max_restarts=-1); it
reconnects to the learner. A learner process that dies is started again in place by its runner (same node, same port,
so that the actors find it), at most --learner_restarts times; it resumes from its last checkpoint.

On SIGINT (Ctrl-C), SIGTERM or SIGHUP: the learner gets the signal and writes its checkpoint, then the actor processes
are stopped (they have nothing to save); it prints what it stopped and exits with 128 + the signal's number. The same
command resumes the run. Every node needs the project at the same path, with the same Python environment (the
command runs this checkout's run_train.py with this interpreter); the learner's --logdir is on the learner's node.
"""

import argparse
import ctypes
import json
import math
import os
import re
import signal
import subprocess
import sys
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if REPO_ROOT not in sys.path:
  sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import launch_local_cluster as local  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

RUN_TRAIN = os.path.join(REPO_ROOT, 'run_train.py')
DEFAULT_PORT = 8000
LEARNER_START_S = 300.  # How long the learner may take to serve (it logs its port) before the launch fails.
RESTART_BACKOFF_MAX_S = 30.  # The longest wait before a learner that died is started again.
STATUS_INTERVAL_S = 60.  # How often a line on the actor processes' restarts is printed.
_PR_SET_PDEATHSIG = 1
_CHECKPOINT_LINE = local._CHECKPOINT_LINE  # 'Interrupted at N environment frames ... Checkpoint: PATH'
_SERVING_LINE = re.compile(r'Learner \(run \w+\) serving on port')


def commands(config, num_actors, actors_per_process, logdir, port, host, extra_flags=(), python=sys.executable):
  """(learner command, [actor process commands]): lists of arguments (module docstring)."""
  base = [python, RUN_TRAIN] + ([config] if config else [])
  common = [f'--num_actors={num_actors}'] + list(extra_flags)
  learner = base + ['--job_name=learner', '--task=0'] + common + [f'--reverb_port={port}', f'--logdir={logdir}']
  actors = [
      base + ['--job_name=actor', f'--task={first}', f'--actors_per_process={actors_per_process}'] + common +
      [f'--learner_address={host}:{port}'] for first in range(0, num_actors, actors_per_process)
  ]
  return learner, actors


class JobRunner:
  """A Ray actor that runs one run_train.py job as its child and relays its output (Ray forwards it to the driver,
  prefixed with `repr(self)`: the job's name).

  The child is started by a thread that lives as long as it (Linux's parent-death signal is tied to the thread that
  started a child): when the runner's process dies, the kernel sends the child `death_signal`. When the child exits
  with a failure: `restarts` > 0 starts it again in place; `die_with_job` ends this Ray actor's process, so that Ray
  restarts the actor (and the job) by its restart policy; else the exit is reported by `wait`. A usage error (exit 2)
  is never restarted: the same command would fail again.
  """

  def __init__(self, name, command, death_signal, restarts=0, die_with_job=False):
    self.name = name
    self._command = command
    self._death_signal = death_signal
    self._restarts_left = restarts
    self._die_with_job = die_with_job
    self._stopping = False
    self._process = None
    self._exit = None
    self.checkpoint = None  # (frames, path) of the learner's last "Interrupted at / Done:" line
    self.serving = False  # the learner said "serving on port" (this run of it or an earlier one)
    self.restarts = 0
    self._started = threading.Event()
    self._done = threading.Event()
    threading.Thread(target=self._run, name=f'job-{name}', daemon=True).start()
    self._started.wait(60.)

  def __repr__(self):
    return self.name

  @staticmethod
  def _describe(code):
    """'exit 1' or 'killed by SIGKILL' (this class runs in Ray workers: it uses nothing of the launcher's)."""
    if code is not None and code < 0:
      return f'killed by {signal.Signals(-code).name}'
    return f'exit {code}'

  def _preexec(self):
    prctl = ctypes.CDLL(None, use_errno=True).prctl
    parent, signum = os.getpid(), int(self._death_signal)

    def preexec():
      prctl(_PR_SET_PDEATHSIG, signum, 0, 0, 0)
      if os.getppid() != parent:
        os._exit(128 + signum)  # pylint: disable=protected-access

    return preexec

  def _run(self):
    while True:
      # A session of its own: signals meant for the Ray worker's group do not reach the job.
      # noqa reason: the child only calls prctl (looked up before the fork), taking no lock.
      self._process = subprocess.Popen(self._command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                       start_new_session=True, preexec_fn=self._preexec())  # noqa: PLW1509
      self._started.set()
      for line in iter(self._process.stdout.readline, b''):
        text = line.decode(errors='replace').rstrip('\n')
        found = _CHECKPOINT_LINE.search(text)
        if found:
          self.checkpoint = int(found.group(1)), found.group(2)
        if _SERVING_LINE.search(text):
          self.serving = True
        print(text, flush=True)
      code = self._process.wait()
      if code == 0 or code == 2 or self._stopping:
        break
      if self._restarts_left > 0:
        self._restarts_left -= 1
        self.restarts += 1
        delay = min(2.**(self.restarts - 1), RESTART_BACKOFF_MAX_S)  # 1, 2, 4, ... s: a full disk may be freed
        print(
            f'{self.name} exited ({self._describe(code)}); starting it again in {delay:.0f} s (restart '
            f'{self.restarts}).', flush=True)
        time.sleep(delay)
        continue
      if self._die_with_job:
        print(f'{self.name} exited ({self._describe(code)}); Ray restarts it.', flush=True)
        os._exit(1)  # pylint: disable=protected-access
      break
    self._exit = code
    self._done.set()

  def info(self):
    """{'host': this node's IP address, 'node_id': its Ray node id, 'pid': the job's PID, 'runner_pid', 'restarts',
    'serving': whether the learner serves, 'exit': the job's exit status once it exited for good, else None}."""
    import ray  # pylint: disable=g-import-not-at-top
    return {
        'host': ray.util.get_node_ip_address(),
        'node_id': ray.get_runtime_context().get_node_id(),
        'pid': self._process.pid,
        'runner_pid': os.getpid(),
        'restarts': self.restarts,
        'serving': self.serving,
        'exit': self._exit if self._done.is_set() else None
    }

  def last_checkpoint(self):
    """(frames, path) of the checkpoint the learner last reported at a stop or at the end, or None."""
    return self.checkpoint

  def wait(self, timeout):
    """The job's exit status once it exited for good (not restarted), or None after `timeout` seconds."""
    self._done.wait(timeout)
    return self._exit if self._done.is_set() else None

  def send(self, signum):
    """Sends `signum` to the job (it then is not restarted)."""
    self._stopping = True
    try:
      self._process.send_signal(signum)
    except OSError:
      pass


def _say(text):
  print(f'launch_ray_cluster: {text}', flush=True)


def _resources(text, flag):
  try:
    value = json.loads(text) if text else {}
  except ValueError:
    value = None
  if not isinstance(value, dict) or not all(isinstance(v, (int, float)) and v >= 0 for v in value.values()):
    raise SystemExit(f'launch_ray_cluster: error: {flag} must be a JSON object of resource amounts, e.g. '
                     f'\'{{"GPU": 1}}\' or \'{{"CPU": 4}}\'; got {text!r}.')
  return value


def _options(resources):
  """Ray actor options for a resource dict (CPU and GPU as num_cpus / num_gpus, the rest as custom resources)."""
  resources = dict(resources)
  return {'num_cpus': resources.pop('CPU', 0), 'num_gpus': resources.pop('GPU', 0), 'resources': resources}


class RayCluster:
  """The learner's runner and the actor processes' runners (module docstring)."""

  def __init__(self, ray, args, extra, signals):
    self.ray, self.args, self.signals = ray, args, signals
    runner = ray.remote(JobRunner)
    learner_command, _ = commands(args.config, args.num_actors, args.actors_per_process, args.logdir, args.port, 'HOST',
                                  extra)
    self.learner = runner.options(name=None, max_restarts=0, max_concurrency=4,
                                  **_options(args.learner_resources)).remote('learner', learner_command,
                                                                             local.LEARNER_DEATH_SIGNAL,
                                                                             args.learner_restarts)
    info = self._wait_for_learner()
    self.host = info['host']
    _say(f'learner on {self.host} (node {info["node_id"][:12]}, PID {info["pid"]}), Reverb port {args.port}:\n  ' +
         local._shell(learner_command))
    _, actor_commands = commands(args.config, args.num_actors, args.actors_per_process, args.logdir, args.port,
                                 self.host, extra)
    _say(f'{len(actor_commands)} actor processes of up to {args.actors_per_process} actors (first: '
         f'{local._shell(actor_commands[0])})')
    options = dict(max_restarts=-1, max_concurrency=4, scheduling_strategy='SPREAD',
                   **_options(args.actor_process_resources))
    self.actors = []
    for i, command in enumerate(actor_commands):
      first = i * args.actors_per_process
      last = min(first + args.actors_per_process, args.num_actors) - 1
      name = f'actor {first}' if first == last else f'actors {first}-{last}'
      self.actors.append(runner.options(**options).remote(name, command, local.ACTOR_DEATH_SIGNAL, 0, True))

  def _wait_for_learner(self):
    """The learner runner's info once its job serves (the actors start then, so that none waits for it); raises
    SystemExit if the job exits first, or does not serve within LEARNER_START_S."""
    deadline = time.monotonic() + LEARNER_START_S
    while True:
      info = self.ray.get(self.learner.info.remote())
      if info['serving']:
        return info
      if info['exit'] is not None or time.monotonic() > deadline or self.signals.first is not None:
        why = (f'exited ({local._describe_exit(info["exit"])})' if info['exit'] is not None else
               'was stopped' if self.signals.first is not None else f'did not serve within {LEARNER_START_S:.0f} s')
        self.ray.kill(self.learner, no_restart=True)
        raise SystemExit(f'launch_ray_cluster: error: the learner {why} before the actors started (its output is '
                         'above).')
      time.sleep(.5)

  def _actor_status(self):
    """{index: info} of the actor runners that answer within 5 s (a restarting one may not)."""
    refs = {i: actor.info.remote() for i, actor in enumerate(self.actors)}
    ready, _ = self.ray.wait(list(refs.values()), num_returns=len(refs), timeout=5.)
    ready = set(ready)
    status = {}
    for i, ref in refs.items():
      if ref in ready:
        try:
          status[i] = self.ray.get(ref)
        except self.ray.exceptions.RayActorError:
          pass
    return status

  def run(self):
    """Runs until the learner finishes or a stop signal; returns the exit status."""
    restarts = 0
    last_status = time.monotonic()
    status = self._actor_status()
    pids = {i: s['runner_pid'] for i, s in status.items()}
    _say('actor processes: ' +
         ', '.join(f'{i} on node {s["node_id"][:12]} (PID {s["pid"]})' for i, s in sorted(status.items())) + '.')
    while True:
      if self.signals.first is not None:
        return self.stop()
      try:
        code = self.ray.get(self.learner.wait.remote(1.))
      except self.ray.exceptions.RayActorError as e:
        _say(f'the learner\'s Ray worker died ({type(e).__name__}); stopping the actors. The same command resumes '
             f'from its last checkpoint in {self.args.logdir}.')
        self._kill_actors()
        return 1
      if code is not None:
        break
      if time.monotonic() - last_status >= STATUS_INTERVAL_S:
        status = self._actor_status()
        for i, s in status.items():
          if i in pids and s['runner_pid'] != pids[i]:
            restarts += 1
          pids[i] = s['runner_pid']
        failed = [i for i, s in status.items() if s['exit'] not in (None, 0)]
        if failed:  # an error Ray's restarts cannot mend (bad flags; a learner lost for reconnect_timeout_s)
          _say(f'actor process {failed[0]} exited with status {status[failed[0]]["exit"]} (its error is above); '
               'stopping the run.')
          self.signals.first, self.signals.first_time = signal.SIGTERM, time.monotonic()
          self.stop()
          return 1
        _say(f'{len(status)} of {len(self.actors)} actor processes running; {restarts} restarted by Ray so far.')
        last_status = time.monotonic()
    if code == 0:  # It finished: the actors see its last weights' `finished` flag and exit by themselves.
      _say(f'the learner finished; waiting for the actor processes (up to {local.FINISH_TIMEOUT_S:.0f} s).')
      waits = [actor.wait.remote(local.FINISH_TIMEOUT_S) for actor in self.actors]
      self.ray.wait(waits, num_returns=len(waits), timeout=local.FINISH_TIMEOUT_S + 5.)
    else:
      _say(f'the learner exited ({local._describe_exit(code)}); stopping the actor processes.')
    self._kill_actors()
    return 128 - code if code < 0 else code

  def _kill_actors(self):
    for actor in self.actors:  # Their jobs get SIGKILL from the kernel (parent-death signal): nothing to save.
      self.ray.kill(actor, no_restart=True)

  def stop(self):
    """After a stop signal: the learner's checkpoint, then the actors; returns 128 + the signal's number."""
    signum = self.signals.first
    name = signal.Signals(signum).name
    start = self.signals.first_time
    _say(f'{name} received: stopping the learner (it writes its checkpoint), then the actors.')
    self.learner.send.remote(signum)
    # The actors go once the learner has written its checkpoint (they have nothing to save), or after learner_s.
    learner_s = self.args.stop_timeout_s - min(local.ACTOR_STOP_S, self.args.stop_timeout_s / 2)
    code = checkpoint = None
    actors_stopped = False
    try:
      while time.monotonic() - start < self.args.stop_timeout_s:
        code = self.ray.get(self.learner.wait.remote(.5))
        checkpoint = self.ray.get(self.learner.last_checkpoint.remote())
        if not actors_stopped and (code is not None or checkpoint is not None or time.monotonic() - start >= learner_s):
          self._kill_actors()
          actors_stopped = True
        if code is not None:
          break
    except self.ray.exceptions.RayActorError:
      pass
    if not actors_stopped:
      self._kill_actors()
    if code is None:
      _say(f'the learner still ran {self.args.stop_timeout_s:.0f} s after the signal: killing it.')
    self.ray.kill(self.learner, no_restart=True)
    _say(f'stopped by {name} in {time.monotonic() - start:.1f} s: learner {local._describe_exit(code)}, '
         f'{len(self.actors)} actor processes killed (nothing to save).')
    if checkpoint is not None:
      _say(f'the learner\'s checkpoint: {checkpoint[1]} ({checkpoint[0]} environment frames); the same command '
           'resumes the run from it.')
    else:
      _say(f'the learner wrote no checkpoint at the stop; the same command resumes the run from the newest '
           f'model.ckpt-* in {self.args.logdir}.')
    return 128 + signum


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n', 1)[0],
                                   epilog='Flags after -- (or unknown flags) go to every run_train.py process.')
  parser.add_argument('--config', default=None, help='gin file (e.g. configs/impala_builtin.gin)')
  parser.add_argument('--num_actors', type=int, required=True)
  parser.add_argument('--logdir', required=True, help='the learner\'s run directory (on the learner\'s node)')
  parser.add_argument(
      '--address', default=None, help='Ray cluster address, or "local" for a new Ray instance on this '
      'machine (default: RAY_ADDRESS, a cluster started on this node with `ray start`, else "local")')
  parser.add_argument(
      '--port', type=int, default=0, help='the learner\'s Reverb port (default: the one the run in '
      f'--logdir was started with, else {DEFAULT_PORT})')
  parser.add_argument('--actors_per_process', type=int, default=1, help='actor tasks per actor process (threads)')
  parser.add_argument('--learner_resources', default='{"CPU": 1}', help='Ray resources of the learner (JSON)')
  parser.add_argument('--actor_process_resources', default='{"CPU": 1}',
                      help='Ray resources of each actor process (JSON)')
  parser.add_argument('--learner_restarts', type=int, default=10, help='how often a learner that died is started '
                      'again in place')
  parser.add_argument('--stop_timeout_s', type=float, default=local.STOP_TIMEOUT_S)
  args, extra = parser.parse_known_args(argv)
  extra = [a for a in extra if a != '--']
  if args.num_actors < 1 or args.actors_per_process < 1:
    parser.error('--num_actors and --actors_per_process must be >= 1')
  args.learner_resources = _resources(args.learner_resources, '--learner_resources')
  args.actor_process_resources = _resources(args.actor_process_resources, '--actor_process_resources')
  args.port = args.port or local.run_port(args.logdir) or DEFAULT_PORT
  args.logdir = os.path.abspath(args.logdir)
  if args.config:
    args.config = os.path.abspath(args.config)
  os.environ.setdefault('RAY_DEDUP_LOGS', '0')  # every job's lines, as they come
  import ray  # pylint: disable=g-import-not-at-top
  processes = math.ceil(args.num_actors / args.actors_per_process)
  address = args.address or os.environ.get('RAY_ADDRESS')
  if address is None:
    try:
      ray.init(address='auto', include_dashboard=False, log_to_driver=True, logging_level='warning')
    except ConnectionError:
      address = 'local'
  if address is not None:
    extra_init = {}
    if address == 'local':  # a new instance: enough logical CPUs for every job (Ray counts, it does not limit)
      cpus = args.learner_resources.get('CPU', 0) + processes * args.actor_process_resources.get('CPU', 0)
      extra_init = dict(num_cpus=max(int(math.ceil(cpus)), os.cpu_count() or 1), object_store_memory=200 << 20)
    ray.init(address=None if address == 'local' else address, include_dashboard=False, log_to_driver=True,
             logging_level='warning', **extra_init)
  with local._Signals() as signals:
    cluster = RayCluster(ray, args, extra, signals)
    try:
      return cluster.run()
    finally:
      ray.shutdown()


if __name__ == '__main__':
  sys.exit(main())
