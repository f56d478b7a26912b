r"""IMPALA single-machine training throughput (environment frames/s) for num_actors 2, 4 and 8, batch = actors.

  python benchmarks/impala_throughput.py [--actors 2,4,8] [--seconds 60] [--level builtin/find_object]

Runs `scalable_agent.experiment.train` as `run_train.py` would (actor threads, environment processes, dynamic
batching, prefetch, learner) on the built-in environment with the original frame size 72 x 96, unroll_length 100
and num_action_repeats 4, like the measurements of the original in ../shared/reference/anchors.md (which used a
stand-in for DeepMind Lab returning random frames: 2/2 205-215, 4/4 234, 8/8 249 frames/s on 2 cores). Frames are
environment frames (agent steps x 4). Each configuration is timed from its second learner step (after tracing and
warm-up) for about `--seconds`, and frames/s is (frames at the end - frames at the start) / wall time.
"""

import argparse
import os
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # The repository root.

ORIGINAL_FRAMES_PER_SECOND = {2: '205-215', 4: '234', 8: '249'}


class _Done(Exception):
  pass


def measure(num_actors, seconds, level_name):
  """Trains with num_actors actors and batch num_actors for ~seconds; returns (frames/s, learner steps timed)."""
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top  (not in the spawned children)
  settings = experiment.Settings(level_name=level_name, num_actors=num_actors, batch_size=num_actors,
                                 unroll_length=100, num_action_repeats=4, width=96, height=72,
                                 total_environment_frames=int(1e9))
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
  (t0, f0), (t1, f1) = marks[1], marks[-1]
  return (f1 - f0) / (t1 - t0), len(marks) - 2


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--actors', default='2,4,8', help='comma-separated num_actors (batch_size = num_actors)')
  parser.add_argument('--seconds', type=float, default=60., help='timed seconds per configuration')
  parser.add_argument('--level', default='builtin/find_object')
  args = parser.parse_args(argv)
  from absl import logging  # pylint: disable=g-import-not-at-top
  logging.set_verbosity(logging.WARNING)
  rows = []
  for num_actors in [int(a) for a in args.actors.split(',')]:
    rate, steps = measure(num_actors, args.seconds, args.level)
    rows.append((num_actors, rate, steps))
    print(f'num_actors {num_actors}, batch {num_actors}: {rate:.0f} frames/s ({steps} learner steps timed)',
          flush=True)
  print(f'\n{args.level}, 72x96 frames, unroll 100, num_action_repeats 4; environment frames/s')
  print('| num_actors = batch | ours | original (anchors.md) |')
  print('|---|---|---|')
  for num_actors, rate, _ in rows:
    print(f'| {num_actors} | {rate:.0f} | {ORIGINAL_FRAMES_PER_SECOND.get(num_actors, "-")} |')
  return 0


if __name__ == '__main__':
  sys.exit(main())
