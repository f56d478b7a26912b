"""Running the seeds' jobs (`seeds.run_seed`), at most `plan.parallel` at once: in threads of the kit's process
(`run_local`, each training pinned to its own cores), or as tasks of a Ray cluster (`run_ray`). Both return (the
jobs' results, the exit status of a stop: 128 + the signal's number, or None)."""

import dataclasses
import os
import signal
import threading
import time
import types
from typing import Any, Callable, Dict, List, Optional, Tuple

from reproduction import plan as plans
from reproduction import processes
from reproduction import seeds
from rundir import errors


def run_local(plan: plans.Plan, refresher: Callable[[], None]) -> Tuple[List[Dict[str, Any]], Optional[int]]:
  """Runs `plan.parallel` seed jobs at once in threads of this process; returns (their results, the exit status of a
  stop: 128 + the signal's number, 130 when a seed was stopped from outside, None when nothing stopped)."""
  stop = threading.Event()
  results: List[Dict[str, Any]] = []
  queue = list(plan.specs)
  threads: Dict[int, threading.Thread] = {}
  lock = threading.Lock()

  def job(spec: seeds.SeedSpec) -> None:
    try:
      result = seeds.run_seed(spec, stop)
    except Exception as e:  # pylint: disable=broad-except  (reported as the seed's failure, not lost in a thread)
      result = {'seed': spec.seed, 'state': 'failed', 'message': f'seed {spec.seed}: {type(e).__name__}: {e}'}
    with lock:
      results.append(result)
    seeds.say(result['message'])
    if result['state'] == 'stopped' and not stop.is_set():  # its process was stopped on request (`--stop`):
      seeds.say('stopping: a seed was stopped from outside; the other seeds stop too (the same command resumes).')
      stop.set()  # the whole kit stops, rather than starting the seeds still queued

  received: List[int] = []  # the stop signal that came first

  def on_signal(signum: int, frame: Optional[types.FrameType]) -> None:  # pylint: disable=unused-argument
    if not received:
      received.append(signum)
    if not stop.is_set():
      seeds.say(f'stopping ({signal.Signals(signum).name}): the processes the kit started get SIGINT (SIGTERM '
                'where SIGINT is ignored; the same command resumes).')
      stop.set()

  previous = {s: signal.signal(s, on_signal) for s in processes.STOP_SIGNALS if signal.getsignal(s) != signal.SIG_IGN}
  slots = plans.core_slots(plan.parallel)
  slot_of: Dict[int, int] = {}  # seed -> its slot in `slots`
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
  return results, (errors.signal_exit_code(received[0])
                   if received else errors.signal_exit_code(signal.SIGINT) if stop.is_set() else None)


def run_ray(plan: plans.Plan, refresher: Callable[[], None],
            address: Optional[str]) -> Tuple[List[Dict[str, Any]], Optional[int]]:
  """Runs the seed jobs as Ray tasks (one CPU each), at most `plan.parallel` at once; returns as `run_local`."""
  try:
    import ray  # pylint: disable=g-import-not-at-top
  except ImportError:
    raise plans.KitError(
        '--backend ray needs Ray: pip install -r requirements-ray.txt (docs/hiro/reproduction.md).') from None
  # The workers import the kit (`seeds.run_seed`) from this checkout, wherever the kit was started from.
  path = os.pathsep.join([plans.REPO_ROOT] + ([os.environ['PYTHONPATH']] if os.environ.get('PYTHONPATH') else []))
  runtime_env = {'env_vars': {'PYTHONPATH': path}}
  if address:
    ray.init(address=address, runtime_env=runtime_env)
  else:
    ray.init(num_cpus=plan.parallel, include_dashboard=False, runtime_env=runtime_env)
  remote = ray.remote(num_cpus=1, max_retries=0)(seeds.run_seed)
  queue = list(plan.specs)
  pending: Dict[Any, seeds.SeedSpec] = {}  # Ray's object ref -> its seed
  results: List[Dict[str, Any]] = []
  stopped = None
  received: List[int] = [signal.SIGINT]  # the stop signal (Ctrl-C raises KeyboardInterrupt itself)

  def on_signal(signum: int, frame: Optional[types.FrameType]) -> None:  # pylint: disable=unused-argument
    received[0] = signum
    raise KeyboardInterrupt

  previous = {
      s: signal.signal(s, on_signal) for s in processes.STOP_SIGNALS[1:] if signal.getsignal(s) != signal.SIG_IGN
  }
  try:
    while queue or pending:
      while queue and len(pending) < plan.parallel:
        spec = queue.pop(0)
        pending[remote.remote(spec)] = spec
        seeds.say(f'seed {spec.seed}: submitted to Ray.')
      ready, _ = ray.wait(list(pending), timeout=plan.specs[0].poll_secs)
      for ref in ready:
        spec = pending.pop(ref)
        try:
          result = ray.get(ref)
        except ray.exceptions.RayError as e:
          result = {'seed': spec.seed, 'state': 'failed', 'message': f'seed {spec.seed}: Ray task failed: {e}'}
        results.append(result)
        seeds.say(result['message'])
      refresher()
  except KeyboardInterrupt:
    stopped = errors.signal_exit_code(received[0])
    seeds.say(f'stopping ({signal.Signals(received[0]).name}): cancelling the Ray tasks (their processes get SIGINT; '
              'the same command resumes).')
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
