r"""IMPALA training throughput (environment frames/s): single-machine and multi-machine (distributed) modes.

  python benchmarks/impala_throughput.py [--mode single|distributed|both] [--actors 2,4,8] [--seconds 60]
      [--level builtin/find_object]

Single-machine mode (`--mode single`) runs `scalable_agent.experiment.train` as `run_train.py` would (actor threads,
environment processes, dynamic batching, prefetch, learner). Distributed mode (`--mode distributed`) runs the learner
job (`scalable_agent.distributed.run_learner`, its Reverb server on a free port) in this process and the actors as
separate processes started with the commands of `scripts/launch_local_cluster.py` (`run_train.py --job_name=actor
--task=i --learner_address=localhost:PORT`, one environment process each, CPU inference on the weights fetched from
the learner). `--mode both` (the default) measures both for each num_actors and prints them side by side.

Both run the built-in environment with the original frame size 72 x 96, unroll_length 100, num_action_repeats 4 and
batch = num_actors, like the measurements of the original (deepmind/scalable_agent, TF 1.9 CPU wheel, with a
stand-in for DeepMind Lab returning random frames: 2/2 205-215, 4/4 234, 8/8 249 frames/s on 2 cores, single machine).
Frames are environment frames (agent steps x 4). Each configuration is timed from its second learner step (after
tracing, warm-up and, in distributed mode, the actors' start) for about `--seconds`, and frames/s is (frames at the
end - frames at the start) / wall time. All processes share this machine's cores.
"""

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, REPO_ROOT)
sys.path.insert(0, os.path.join(REPO_ROOT, 'scripts'))

ORIGINAL_FRAMES_PER_SECOND = {2: '205-215', 4: '234', 8: '249'}


class _Done(Exception):
  pass


SETTINGS = dict(unroll_length=100, num_action_repeats=4, width=96, height=72, total_environment_frames=int(1e9))


def _settings(num_actors, level_name, **kwargs):
  from scalable_agent import settings as settings_lib  # pylint: disable=g-import-not-at-top  (not in the children)
  return settings_lib.Settings(level_name=level_name, num_actors=num_actors, batch_size=num_actors, **SETTINGS,
                               **kwargs)


def _rate(marks):
  (t0, f0), (t1, f1) = marks[1], marks[-1]
  return (f1 - f0) / (t1 - t0), len(marks) - 2


def measure(num_actors, seconds, level_name):
  """Single-machine training with num_actors actors and batch num_actors for ~seconds; returns (frames/s, learner
  steps timed)."""
  return timed_training(_settings(num_actors, level_name), seconds)


def timed_training(settings, seconds):
  """`experiment.train` under `settings` (in a temporary run directory) for ~seconds from its second learner step;
  returns (frames/s from the second learner step to the last, learner steps timed)."""
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  marks = []

  def hook(unused_actor_threads, metrics):
    marks.append((time.monotonic(), int(metrics['num_environment_frames'])))
    if len(marks) >= 3 and marks[-1][0] - marks[1][0] >= seconds:
      raise _Done()

  with tempfile.TemporaryDirectory() as logdir:
    try:
      experiment.train(logdir, settings, step_hook=hook, checkpoint_interval_s=1e9)
    except _Done:
      pass
  return _rate(marks)


def measure_distributed(num_actors, seconds, level_name):
  """One learner (here) and num_actors actor processes, batch num_actors, for ~seconds; returns (frames/s, learner
  steps timed)."""
  import launch_local_cluster  # pylint: disable=g-import-not-at-top

  from scalable_agent import distributed  # pylint: disable=g-import-not-at-top
  port = launch_local_cluster.free_port()
  settings = _settings(num_actors, level_name, task=0, job_name='learner', reverb_port=port)
  flags = [f'--level_name={level_name}', f'--batch_size={num_actors}'] + [f'--{k}={v}' for k, v in SETTINGS.items()]
  _, actor_commands = launch_local_cluster.commands(None, num_actors, logdir='unused', port=port, extra_flags=flags)
  marks = []

  def hook(metrics, unused_port):
    marks.append((time.monotonic(), int(metrics['num_environment_frames'])))
    if len(marks) >= 3 and marks[-1][0] - marks[1][0] >= seconds:
      raise _Done()

  actors = []
  with tempfile.TemporaryDirectory() as logdir:
    try:
      env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL='2')
      actors = [
          subprocess.Popen(c, cwd=REPO_ROOT, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
          for c in actor_commands
      ]
      distributed.run_learner(logdir, settings, step_hook=hook, checkpoint_interval_s=1e9)
    except _Done:
      pass
    finally:
      for actor in actors:
        if actor.poll() is None:
          actor.send_signal(signal.SIGTERM)
      for actor in actors:
        actor.wait()
  return _rate(marks)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--mode', choices=['single', 'distributed', 'both'], default='both')
  parser.add_argument(
      '--actors', default=None, help='comma-separated num_actors (batch_size = num_actors); default '
      '2,4,8 for --mode single, else 2,4')
  parser.add_argument('--seconds', type=float, default=60., help='timed seconds per configuration')
  parser.add_argument('--level', default='builtin/find_object')
  args = parser.parse_args(argv)
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)
  actors = [int(a) for a in (args.actors or ('2,4,8' if args.mode == 'single' else '2,4')).split(',')]
  modes = ['single', 'distributed'] if args.mode == 'both' else [args.mode]
  measures = {'single': measure, 'distributed': measure_distributed}
  rates = {}
  for num_actors in actors:
    for mode in modes:
      rate, steps = measures[mode](num_actors, args.seconds, args.level)
      rates[mode, num_actors] = rate
      print(f'{mode}: num_actors {num_actors}, batch {num_actors}: {rate:.0f} frames/s ({steps} learner steps timed)',
            flush=True)
  titles = {'single': 'single machine', 'distributed': 'distributed (1 learner + N actor processes)'}
  print(f'\n{args.level}, 72x96 frames, unroll 100, num_action_repeats 4; environment frames/s')
  print('| num_actors = batch | ' + ' | '.join(titles[m] for m in modes) + ' | original single machine '
        '(TF 1.9) |')
  print('|---|' + '---|' * (len(modes) + 1))
  for num_actors in actors:
    print(f'| {num_actors} | ' + ' | '.join(f'{rates[m, num_actors]:.0f}' for m in modes) +
          f' | {ORIGINAL_FRAMES_PER_SECOND.get(num_actors, "-")} |')
  return 0


if __name__ == '__main__':
  sys.exit(main())
