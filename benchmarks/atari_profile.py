r"""Where an Atari training second goes: a profile of single-machine IMPALA on Pong (the shallow expert).

  nice -n 5 python benchmarks/atari_profile.py [--actors 2,4,8] [--seconds 30] [--no_baseline] [--json FILE]
                                               [--inference {batched,numpy}]
  python benchmarks/atari_profile.py --from_json FILE      # the tables again, from a --json file

For each number of actors N this runs, each in a fresh process and back to back:
  * an uninstrumented run (unless --no_baseline): `scalable_agent.experiment.train` as
    `python run_train.py configs/impala_atari.gin --num_actors=N --gin_param "experiment.actor_inference =
    'batched'"` runs it (the original's batched inference; --inference numpy: the config's NumPy actors),
    frames/s from its second learner step for --seconds (as benchmarks/atari_vs_sample_factory.py measures ours);
  * the same run instrumented. Nothing in scalable_agent/ is changed: public methods are wrapped at run time in this
    process with `time.perf_counter()` (wall) and `time.thread_time()` (the calling thread's CPU) accumulators:
      - the actor's policy call (`dynamic_batching.BatchedFunction.__call__`: the agent's step, waiting for the
        dynamic batching thread included);
      - the environment step round trip (`environments.FlowEnvironment.step`: pickling, the pipe, the child);
      - `actor.Actor.unroll` (the actor's loop; the rest of an actor thread's time is the unroll queue);
      - the batching thread (`dynamic_batching.Batcher.get_inputs`: waiting and stacking; from there to the end of
        `Batcher.set_outputs`: packing, the TensorFlow call, unpacking, waking the callers);
      - the learner step (`learner.Learner.step`) and the prefetch thread's stacking (`actor.batch_unrolls`).
    Each Python thread's CPU comes from its POSIX CPU clock, the process's from `time.process_time()`, each
    environment process's from /proc/<pid>/stat and the machine's from /proc/stat, at the start and the end of the
    same steady window as the uninstrumented run (from the second learner step, --seconds long).
  With --inference numpy the policy call wrapped is `numpy_agent.NumpyPolicy.__call__` (the forward pass in the
  actor's own thread: its wall and CPU are the actor's); there is no batching thread and no inference batch, so the
  inference calibration is skipped and the inference pool CPU is 0 (the table omits those rows).

TensorFlow runs the inference and the learner's operations in its own thread pools, shared by both, which no Python
wrapper sees. After the window the actors are held at their next policy call and their environments go idle; then,
in the same process, the profile measures in isolation (calibration): the pools' CPU per learner step (the last
batch, trained on again), the pools' CPU per inference batch of each size b in 1..N (b threads calling the batched
policy with the batcher's `minimum_batch_size` set to b), and one environment's `step` in this process (ALE +
preprocessing, no pipe). The in-run pool CPU is predicted from these and the window's learner steps and batch sizes.

Printed per N: a markdown table, part | wall ms per agent step (per actor) | CPU ms per agent step (this process
and its environment processes) | share of the 2 cores (of all the machine's cores: CPU s per s / cores) | notes,
with the frames/s of both runs and the instrumentation's cost. The wall column follows one actor's loop (policy
call, environment round trip = the child's CPU + IPC, the actor's Python, waiting for the unroll queue) and adds up
to its time per agent step; the CPU column adds up, with the "unaccounted" row (what the parts miss: mostly
TensorFlow's pools beyond the calibration, e.g. their spinning and contention), to the measured CPU of the process
and its children. Frames are environment frames (agent steps x 4).
"""

import argparse
import collections
import contextlib
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, 'benchmarks'))

from atari_profile_report import format_table  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
from atari_profile_report import KEYS as _KEYS  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

_CLK_TCK = os.sysconf('SC_CLK_TCK')


class _Done(Exception):
  pass


# ---------------------------------------------------------------------------------------------------------------------
# Measurements of this process, its threads, its children and the machine.


def _children_cpu(pid):
  """utime + stime (s) of process `pid` from /proc/<pid>/stat; None if it is gone."""
  try:
    with open(f'/proc/{pid}/stat') as f:
      fields = f.read().rsplit(')', 1)[1].split()
  except OSError:
    return None
  return (int(fields[11]) + int(fields[12])) / _CLK_TCK


def _machine_cpu():
  """(busy s, total s) of all cores from /proc/stat (busy: not idle, not iowait)."""
  with open('/proc/stat') as f:
    values = [int(v) for v in f.readline().split()[1:]]
  total = sum(values[:8])  # user nice system idle iowait irq softirq steal (guest time is inside user)
  return (total - values[3] - values[4]) / _CLK_TCK, total / _CLK_TCK


def _thread_cpu(thread):
  """CPU seconds of a live Python thread (its POSIX CPU clock); None when it is not alive."""
  if not thread.is_alive():
    return None
  try:
    return time.clock_gettime(time.pthread_getcpuclockid(thread.ident))
  except OSError:
    return None


def _python_threads_cpu():
  """{thread name: CPU s} of the live Python threads."""
  out = {}
  for thread in threading.enumerate():
    cpu = _thread_cpu(thread)
    if cpu is not None:
      out[thread.name] = out.get(thread.name, 0.) + cpu
  return out


class Profile:
  """The accumulators the wrappers fill (one dict per thread, written by that thread only) and the wrappers."""

  def __init__(self):
    self._local = threading.local()
    self.accumulators = {}  # thread name -> {key: float}
    self.batch_sizes = collections.Counter()  # written by the batching thread only
    self.hold = threading.Event()  # set: actors wait before their next policy call (calibration)
    self.release = threading.Event()
    self.batched_function = None  # the actors' BatchedFunction (captured at a call)
    self.policy_args = None  # the arguments of an actor's policy call
    self.learner = None
    self.learner_args = None
    self.original_call = None
    self.learning = False  # the learner is in a step (set by the main thread)

  def _acc(self):
    try:
      return self._local.acc
    except AttributeError:
      acc = self._local.acc = dict.fromkeys(_KEYS, 0.)
      self.accumulators[threading.current_thread().name] = acc
      return acc

  @contextlib.contextmanager
  def timed(self, wall_key, cpu_key, count_key):
    """Adds the wall time and the calling thread's CPU time of the `with` body to this thread's accumulators."""
    acc, w0, c0 = self._acc(), time.perf_counter(), time.thread_time()
    try:
      yield
    finally:
      acc[wall_key] += time.perf_counter() - w0
      acc[cpu_key] += time.thread_time() - c0
      acc[count_key] += 1

  def snapshot_accumulators(self):
    return {name: dict(acc) for name, acc in list(self.accumulators.items())}, dict(self.batch_sizes)

  def install(self, inference='batched'):
    """Wraps the public methods named in the module docstring (in this process only); the policy call wrapped is
    `NumpyPolicy.__call__` for inference 'numpy', else `BatchedFunction.__call__`."""
    from scalable_agent import actor as actor_lib  # pylint: disable=g-import-not-at-top
    from scalable_agent import dynamic_batching  # pylint: disable=g-import-not-at-top
    from scalable_agent import environments  # pylint: disable=g-import-not-at-top
    from scalable_agent import learner as learner_lib  # pylint: disable=g-import-not-at-top
    from scalable_agent import numpy_agent  # pylint: disable=g-import-not-at-top
    profile, clock, cpu = self, time.perf_counter, time.thread_time

    policy_class = numpy_agent.NumpyPolicy if inference == 'numpy' else dynamic_batching.BatchedFunction
    original_call = self.original_call = policy_class.__call__

    def policy_call(policy, *args):
      if profile.hold.is_set():
        profile.release.wait()
      if profile.batched_function is None and inference != 'numpy':
        profile.batched_function = policy
      profile.policy_args = args
      with profile.timed('policy_wall', 'policy_cpu', 'policy_calls'):
        return original_call(policy, *args)

    policy_class.__call__ = policy_call

    original_get_inputs = dynamic_batching.Batcher.get_inputs

    def get_inputs(batcher):
      acc, w0, c0 = profile._acc(), clock(), cpu()
      result = original_get_inputs(batcher)
      w1, c1 = clock(), cpu()
      acc['get_wall'] += w1 - w0
      acc['get_cpu'] += c1 - c0
      size = int(result[0][0].shape[0])
      acc['batches'] += 1
      acc['batch_items'] += size
      profile.batch_sizes[size] += 1
      profile._local.batch_start = (w1, c1, profile.learning)
      return result

    dynamic_batching.Batcher.get_inputs = get_inputs

    original_set_outputs = dynamic_batching.Batcher.set_outputs

    def set_outputs(batcher, flat_outputs, computation_id):
      try:
        return original_set_outputs(batcher, flat_outputs, computation_id)
      finally:
        start = getattr(profile._local, 'batch_start', None)
        if start is not None:
          acc, wall = profile._acc(), clock() - start[0]
          acc['compute_wall'] += wall
          acc['compute_cpu'] += cpu() - start[1]
          if start[2] or profile.learning:  # the learner stepped during (a part of) this batch
            acc['compute_wall_learning'] += wall
            acc['batches_learning'] += 1
          profile._local.batch_start = None

    dynamic_batching.Batcher.set_outputs = set_outputs

    original_env_step = environments.FlowEnvironment.step

    def env_step(flow, action, state):
      with profile.timed('env_wall', 'env_cpu', 'env_calls'):
        return original_env_step(flow, action, state)

    environments.FlowEnvironment.step = env_step

    original_unroll = actor_lib.Actor.unroll

    def unroll(actor):
      with profile.timed('unroll_wall', 'unroll_cpu', 'unrolls'):
        return original_unroll(actor)

    actor_lib.Actor.unroll = unroll

    original_learner_step = learner_lib.Learner.step

    def learner_step(learner, *args):
      profile.learner, profile.learner_args = learner, args
      profile.learning = True
      try:
        with profile.timed('learner_wall', 'learner_cpu', 'learner_steps'):
          return original_learner_step(learner, *args)
      finally:
        profile.learning = False

    learner_lib.Learner.step = learner_step

    original_batch_unrolls = actor_lib.batch_unrolls

    def batch_unrolls(actor_outputs):
      with profile.timed('stack_wall', 'stack_cpu', 'stacks'):
        return original_batch_unrolls(actor_outputs)

    actor_lib.batch_unrolls = batch_unrolls

  def snapshot(self, actor_threads, frames):
    accumulators, batch_sizes = self.snapshot_accumulators()
    busy, total = _machine_cpu()
    return dict(wall=time.perf_counter(), process_cpu=time.process_time(), threads=_python_threads_cpu(),
                children={a.thread.name: _children_cpu(a.process.pid) for a in actor_threads}, machine_busy=busy,
                machine_total=total, acc=accumulators, batch_sizes=batch_sizes, frames=frames)

  def total_env_calls(self):
    return sum(acc['env_calls'] for acc in list(self.accumulators.values()))


# ---------------------------------------------------------------------------------------------------------------------
# Calibration: the parts TensorFlow's pools take, measured in isolation after the window (actors held).


def _pool_cpu(process_before, process_after, threads_before, threads_after, extra_python_cpu=0.):
  """CPU of the non-Python threads (TensorFlow's pools): the process's minus its live Python threads' and
  `extra_python_cpu` (threads that report their own)."""
  python = sum(threads_after[name] - threads_before.get(name, 0.) for name in threads_after)
  return process_after - process_before - python - extra_python_cpu


def _hold_actors(profile, settle_s=0.3, timeout_s=10.):
  """Holds the actors at their next policy call; returns when no environment step was made for settle_s."""
  profile.release.clear()
  profile.hold.set()
  deadline, last, last_change = time.monotonic() + timeout_s, profile.total_env_calls(), time.monotonic()
  while time.monotonic() < deadline:
    time.sleep(0.05)
    calls = profile.total_env_calls()
    if calls != last:
      last, last_change = calls, time.monotonic()
    elif time.monotonic() - last_change >= settle_s:
      break


def _release_actors(profile):
  profile.hold.clear()
  profile.release.set()


def calibrate_learner(profile, steps):
  """(pool CPU s, main-thread CPU s, wall s) per learner step, on the last batch, alone."""
  learner, args = profile.learner, profile.learner_args
  {k: v.numpy() for k, v in learner.step(*args).items()}  # pylint: disable=expression-not-assigned
  threads0, process0, main0, wall0 = _python_threads_cpu(), time.process_time(), time.thread_time(), time.perf_counter()
  for _ in range(steps):
    {k: v.numpy() for k, v in learner.step(*args).items()}  # pylint: disable=expression-not-assigned
  wall, main = time.perf_counter() - wall0, time.thread_time() - main0
  process1, threads1 = time.process_time(), _python_threads_cpu()
  return _pool_cpu(process0, process1, threads0, threads1) / steps, main / steps, wall / steps


def calibrate_inference(profile, batch_size, batches):
  """For batches of `batch_size` calls (b threads calling the batched policy, the batcher's minimum batch size set
  to b): dict of per-batch pool CPU, batching-thread CPU, callers' CPU and wall, and the mean batch size made."""
  batched, args = profile.batched_function, profile.policy_args
  batcher = batched.batcher
  batching_thread = next(t for t in threading.enumerate() if t.name.startswith('batch_fn'))
  minimum = batcher.minimum_batch_size
  batcher.minimum_batch_size = batch_size
  barrier = threading.Barrier(batch_size + 1)
  callers_cpu = [0.] * batch_size

  def caller(j):
    barrier.wait()
    c0 = time.thread_time()
    for _ in range(batches):
      profile.original_call(batched, *args)  # not through the wrapper: the actors are held there
    callers_cpu[j] = time.thread_time() - c0

  try:
    callers = [threading.Thread(target=caller, args=(j,), name=f'calibration-{j}') for j in range(batch_size)]
    for thread in callers:
      thread.start()
    sizes0 = dict(profile.batch_sizes)
    batcher0 = _thread_cpu(batching_thread)
    threads0 = {k: v for k, v in _python_threads_cpu().items() if not k.startswith('calibration')}
    process0, wall0 = time.process_time(), time.perf_counter()
    barrier.wait()
    for thread in callers:
      thread.join()
    wall = time.perf_counter() - wall0
    process1 = time.process_time()
    threads1 = {k: v for k, v in _python_threads_cpu().items() if k in threads0}
    batcher1 = _thread_cpu(batching_thread)
  finally:
    batcher.minimum_batch_size = minimum
  made = {b: n - sizes0.get(b, 0) for b, n in profile.batch_sizes.items() if n - sizes0.get(b, 0)}
  num_batches = sum(made.values())
  pool = _pool_cpu(process0, process1, threads0, threads1, extra_python_cpu=sum(callers_cpu))
  return dict(pool_cpu=pool / num_batches, batching_thread_cpu=(batcher1 - batcher0) / num_batches,
              callers_cpu=sum(callers_cpu) / num_batches, wall=wall / num_batches,
              mean_size=sum(b * n for b, n in made.items()) / num_batches)


def calibrate_environment(settings, steps):
  """(CPU s, wall s) of one agent step of the actors' environment (`AtariEnvironment.step`) in this process."""
  import numpy as np  # pylint: disable=g-import-not-at-top

  from scalable_agent import settings as settings_lib  # pylint: disable=g-import-not-at-top
  constructor = settings_lib.environment_constructor(settings, settings.level_name, seed=12345)
  env = constructor()
  env.initial()
  actions = np.random.RandomState(0).randint(0, constructor.num_actions, size=steps + 50)
  for a in actions[:50]:
    env.step(int(a))
  c0, w0 = time.thread_time(), time.perf_counter()
  for a in actions[50:]:
    env.step(int(a))
  cpu, wall = time.thread_time() - c0, time.perf_counter() - w0
  env.close()
  return cpu / steps, wall / steps


# ---------------------------------------------------------------------------------------------------------------------
# One run (in a fresh process).


def _settings(num_actors, inference='batched'):
  import gin  # pylint: disable=g-import-not-at-top  (not in the spawned children)

  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top  (registers its gin names)
  from scalable_agent import settings as settings_lib  # pylint: disable=g-import-not-at-top
  gin.add_config_file_search_path(os.path.join(REPO_ROOT, 'configs'))
  gin.parse_config_files_and_bindings(
      [os.path.join(REPO_ROOT, 'configs', 'impala_atari.gin')],
      [f'experiment.num_actors = {num_actors}', f"experiment.actor_inference = '{inference}'"])
  return settings_lib.Settings(
      **{name: experiment.bound_value(name) for name in settings_lib.Settings.__dataclass_fields__})


def run(num_actors, seconds, instrument, inference='batched', calibration_batches=60, learner_steps=4, env_steps=400):
  """One training run of ~seconds after its second learner step, the actors' policy step as `inference` says
  ('batched' or 'numpy'); returns a dict (frames/s and, instrumented, the window's snapshots and the calibrations:
  none of inference batches for 'numpy')."""
  from absl import logging  # pylint: disable=g-import-not-at-top

  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)
  settings = _settings(num_actors, inference)
  profile = Profile() if instrument else None
  if profile:
    profile.install(inference)
  marks, result = [], {
      'num_actors': num_actors,
      'instrumented': instrument,
      'cores': os.cpu_count(),
      'inference': inference
  }

  def hook(actor_threads, metrics):
    frames = int(metrics['num_environment_frames'])
    marks.append((time.monotonic(), frames))
    if profile and len(marks) == 2:
      result['start'] = profile.snapshot(actor_threads, frames)
    if len(marks) >= 3 and marks[-1][0] - marks[1][0] >= seconds:
      if profile:
        result['end'] = profile.snapshot(actor_threads, frames)
        _hold_actors(profile)
        try:
          pool, main, wall = calibrate_learner(profile, learner_steps)
          result['learner_calibration'] = dict(pool_cpu=pool, main_cpu=main, wall=wall)
          result['inference_calibration'] = {} if inference == 'numpy' else {
              b: calibrate_inference(profile, b, calibration_batches) for b in range(1, num_actors + 1)
          }
          cpu, wall = calibrate_environment(settings, env_steps)
          result['environment_calibration'] = dict(cpu=cpu, wall=wall)
        finally:
          _release_actors(profile)
      raise _Done()

  with tempfile.TemporaryDirectory() as logdir:
    try:
      experiment.train(logdir, settings, step_hook=hook, checkpoint_interval_s=1e9)
    except _Done:
      pass
  (t0, f0), (t1, f1) = marks[1], marks[-1]
  result.update(frames_per_second=(f1 - f0) / (t1 - t0), learner_steps_timed=len(marks) - 2, seconds=t1 - t0)
  return result


def _run_in_subprocess(num_actors, seconds, instrument, inference='batched'):
  command = [
      sys.executable,
      os.path.abspath(__file__), '--_run',
      str(num_actors), '--seconds',
      str(seconds), '--inference', inference
  ]
  if not instrument:
    command.append('--_plain')
  completed = subprocess.run(command, cwd=REPO_ROOT, capture_output=True, text=True, check=False,
                             env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2'))
  lines = [line for line in completed.stdout.splitlines() if line.startswith('{')]
  if completed.returncode or not lines:
    raise RuntimeError(f'the run (num_actors {num_actors}, instrumented {instrument}, inference {inference}) failed '
                       f'({completed.returncode}):\n{completed.stderr[-3000:]}')
  return json.loads(lines[-1])


# ---------------------------------------------------------------------------------------------------------------------
# The table.


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--actors', default='2,4,8', help='comma-separated numbers of actors (= environments)')
  parser.add_argument('--seconds', type=float, default=30., help='timed seconds per run, from the second learner step')
  parser.add_argument('--no_baseline', action='store_true', help='skip the uninstrumented run of each N')
  parser.add_argument('--json', default=None, help='also write the raw measurements to this file')
  parser.add_argument('--from_json', default=None, help='print the tables of a file written by --json (no runs)')
  parser.add_argument(
      '--inference', choices=('batched', 'numpy'), default='batched',
      help="the actors' policy step (experiment.actor_inference): the original's batched TensorFlow "
      "call (default) or each actor's NumPy forward pass (the config's)")
  parser.add_argument('--_run', type=int, default=0, help=argparse.SUPPRESS)
  parser.add_argument('--_plain', action='store_true', help=argparse.SUPPRESS)
  args = parser.parse_args(argv)
  if args._run:  # pylint: disable=protected-access
    result = run(args._run, args.seconds, not args._plain, args.inference)  # pylint: disable=protected-access
    print(json.dumps(result), flush=True)
    return 0
  results = []
  if args.from_json:
    with open(args.from_json) as f:
      results = [(r['num_actors'], r['baseline'], r['profiled']) for r in json.load(f)]
  for num_actors in [] if args.from_json else [int(a) for a in args.actors.split(',')]:
    baseline = None if args.no_baseline else _run_in_subprocess(num_actors, args.seconds, False, args.inference)
    if baseline:
      print(
          f'{num_actors} actors, uninstrumented: {baseline["frames_per_second"]:.0f} frames/s '
          f'(load average {os.getloadavg()[0]:.1f})', flush=True)
    profiled = _run_in_subprocess(num_actors, args.seconds, True, args.inference)
    print(
        f'{num_actors} actors, instrumented: {profiled["frames_per_second"]:.0f} frames/s '
        f'(load average {os.getloadavg()[0]:.1f})', flush=True)
    results.append((num_actors, baseline, profiled))
    if args.json:
      with open(args.json, 'w') as f:
        json.dump([dict(num_actors=n, baseline=b, profiled=p) for n, b, p in results], f, indent=1)
  print('\nPong, configs/impala_atari.gin (the shallow expert, batch 32 x unroll 20), CPU; per agent step = 4 frames')
  for _, baseline, profiled in results:
    print()
    print(format_table(profiled, baseline))
    if baseline:
      change = profiled['frames_per_second'] / baseline['frames_per_second'] - 1
      if abs(change) > 0.05:
        print(f'Note: the instrumented run\'s rate differs from the uninstrumented one by {100 * change:+.0f}% (more '
              'than 5%: instrumentation cost or load noise; a single pair of runs).')
  return 0


if __name__ == '__main__':
  sys.exit(main())
