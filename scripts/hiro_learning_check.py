r"""Learning check of a HIRO run: is the low level learning to reach goals, and the meta level the task targets?

Usage:
  python scripts/hiro_learning_check.py --train_dir /tmp/hiro_learning_check \
      --output docs/results/hiro_learning_curve.png [--eval_dir /tmp/hiro_learning_check/eval] [--bin_steps 25000] \
      [--random_final_distance 13.6]

Reads the run's latest full checkpoint and its TensorBoard events, prints a table per `bin_steps` of environment
steps and draws a PNG of three panels against environment steps:

1. Low level, from the meta replay buffer (every meta transition of the run while the 200,000-row buffer has not
   wrapped: one row per c = 10 steps): the progress of the ant towards the goal the meta level set, per meta period,
   i.e. the displacement (x, y)(s_{t+c}) - (x, y)(s_t) projected on the direction of the goal's (x, y) part, in
   maze units. A policy that ignores its goal (the random or untrained one) scores 0 on average whatever its speed;
   the run's first `initial_steps` (collected by the untrained policies) are that baseline.
2. Low level, the cosine between that displacement and the goal direction (0 for a policy that ignores its goal).
3. Meta level, `avg_episode_final_distance` (the distance between the ant's (x, y) and the task target at the end
   of each training episode, mean over the last 100 episodes), with the random policy's value (a random policy
   hardly moves: about 13.6 for AntMaze's targets, uniform on [-4, 20]^2, from the start at the origin).
4. With `--eval_dir` (a `run_eval.py` output directory), the success rate of each evaluation goal against the
   policy checkpoint's step (random policy: 0 at every AntMaze goal, docs/hiro/environments.md).

Both buffers store float32 observations whose first two dimensions are the ant's (x, y) (hiro_orig and hiro_xy
goals are relative: the low-level goal of a meta transition is g_t, to be reached at s_t + g_t).
"""

import argparse
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import plot_learning_curve  # pylint: disable=g-import-not-at-top,wrong-import-position

from figures import curves as charts  # pylint: disable=g-import-not-at-top,wrong-import-position

_META_KEY = 'meta_replay_buffer/_tensors/{}/.ATTRIBUTES/VARIABLE_VALUE'
_META_ADDS = 'meta_replay_buffer/_num_adds/.ATTRIBUTES/VARIABLE_VALUE'


def goal_progress(states, goals, next_states):
  """Per meta transition: (progress towards the goal, cosine with the goal direction, |displacement|).

  Args:
    states, next_states: float32 [N, O], s_t and s_{t+c}; dims 0, 1 are (x, y).
    goals: float32 [N, G], the relative goals g_t; dims 0, 1 are (x, y).

  Returns:
    three float64 [N] arrays, in maze units (the cosine has none). Goals with a zero (x, y) part count 0.
  """
  displacement = (next_states[:, :2] - states[:, :2]).astype(np.float64)
  goal = goals[:, :2].astype(np.float64)
  goal_norm = np.linalg.norm(goal, axis=1)
  direction = goal / np.maximum(goal_norm, 1e-12)[:, None]
  progress = np.where(goal_norm > 0, np.sum(displacement * direction, axis=1), 0.0)
  length = np.linalg.norm(displacement, axis=1)
  cosine = np.where(length > 0, progress / np.maximum(length, 1e-12), 0.0)
  return progress, cosine, length


def read_meta_transitions(checkpoint):
  """(global step of the checkpoint, s_t [N, O], g_t [N, G], s_{t+c} [N, O]) in the order they were added."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (slow import)
  reader = tf.train.load_checkpoint(checkpoint)
  adds = int(reader.get_tensor(_META_ADDS))
  states, goals, next_states = (reader.get_tensor(_META_KEY.format(i)) for i in (0, 1, 4))
  size = states.shape[0]
  if adds > size:  # wrapped: oldest first
    order = (np.arange(size) + adds) % size
    states, goals, next_states = states[order], goals[order], next_states[order]
  else:
    states, goals, next_states = states[:adds], goals[:adds], next_states[:adds]
  step = int(checkpoint.rsplit('-', 1)[1])
  return step, adds, states, goals, next_states


def binned(x, values, width):
  """Means of `values` in bins [k * width, (k + 1) * width) of x: (bin starts, means), non-empty bins only."""
  index = (x // width).astype(np.int64)
  starts, means = [], []
  for k in np.unique(index):
    starts.append(k * width)
    means.append(float(np.mean(values[index == k])))
  return np.array(starts, np.float64), np.array(means)


def read_eval_results(eval_dir):
  """{mode: (goal, [(step, success rate)] sorted by step)} from `<eval_dir>/results.json` (run_eval.py)."""
  import json  # pylint: disable=g-import-not-at-top
  with open(os.path.join(eval_dir, 'results.json')) as f:
    rows = json.load(f)
  curves = {}
  for row in rows:
    curves.setdefault(row['mode'], (row['goal'], {}))[1][int(row['step'])] = float(row['success_rate'])
  return {mode: (goal, sorted(points.items())) for mode, (goal, points) in sorted(curves.items())}


def figure_panels(train_dir, bin_steps, curves_xy, base_progress, random_final_distance, eval_curves):
  """The chart's `charts.Panel`s: low-level progress and cosine, meta-level final distance, and with evaluation
  results the success rate per goal.

  Args:
    train_dir: the run (its name titles the first panel).
    bin_steps: environment steps per bin.
    curves_xy: {'progress', 'cosine', 'distance'}: (bin centres in steps, means).
    base_progress: the untrained policies' mean progress (maze units per meta period).
    random_final_distance: the random policy's final distance (maze units).
    eval_curves: `read_eval_results`' {mode: (goal, [(step, success rate)])}, or {}.
  """
  name = os.path.basename(os.path.normpath(train_dir))
  panels = [
      charts.Panel(
          f'{name}: low level, progress towards the goal per meta period (maze units), mean per '
          f'{bin_steps // 1000}k steps', 'progress',
          [charts.Series(*curves_xy['progress'], label='progress', color='tab:blue', linewidth=2, marker='o')],
          hlines=[charts.HLine(base_progress, f'untrained policies: {base_progress:+.3f}')]),
      charts.Panel('low level, cosine between the displacement and the goal direction', 'cosine',
                   [charts.Series(*curves_xy['cosine'], label='cosine', color='tab:blue', linewidth=2, marker='o')],
                   hlines=[charts.HLine(0.0, 'a goal-blind policy: 0')]),
      charts.Panel(
          'meta level, final (x, y) distance to the training target (avg_episode_final_distance)', 'distance',
          [charts.Series(*curves_xy['distance'], label='final distance', color='tab:blue', linewidth=2, marker='o')],
          hlines=[charts.HLine(random_final_distance, f'random policy: {random_final_distance:g}')]),
  ]
  if eval_curves:
    panels.append(
        charts.Panel('evaluation (run_eval.py): success rate, 50 deterministic episodes per goal; random policy: 0',
                     'success rate', [
                         charts.Series([step
                                        for step, _ in points], [rate
                                                                 for _, rate in points], label=f'{mode} {tuple(goal)}',
                                       color=charts.PALETTE[k % len(charts.PALETTE)], linewidth=2, marker='o')
                         for k, (mode, (goal, points)) in enumerate(eval_curves.items())
                     ], ylim=(-0.05, 1.05)))
  return panels


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--train_dir', required=True)
  parser.add_argument('--output', required=True, help='PNG to write')
  parser.add_argument('--eval_dir', default=None, help='a run_eval.py output directory (results.json)')
  parser.add_argument('--bin_steps', type=int, default=25000)
  parser.add_argument('--initial_steps', type=int, default=2500, help='steps collected by the untrained policies')
  parser.add_argument('--random_final_distance', type=float, default=13.6,
                      help="the random policy's final distance to the training targets (AntMaze: 13.6)")
  args = parser.parse_args(argv)
  import tensorflow as tf  # pylint: disable=g-import-not-at-top
  checkpoint = tf.train.latest_checkpoint(args.train_dir)
  if checkpoint is None:
    raise SystemExit(f'no full checkpoint (model.ckpt-N) in {args.train_dir}.')
  step, adds, states, goals, next_states = read_meta_transitions(checkpoint)
  if adds > states.shape[0]:
    print(f'note: the meta buffer wrapped ({adds} adds); the curve covers its last {states.shape[0]} transitions.')
  transition_steps = step - (len(states) - 1 - np.arange(len(states))) * (step / max(adds, 1))
  progress, cosine, length = goal_progress(states, goals, next_states)
  initial = transition_steps < args.initial_steps
  base_progress = float(np.mean(progress[initial])) if np.any(initial) else 0.0
  xs, p_means = binned(transition_steps, progress, args.bin_steps)
  _, c_means = binned(transition_steps, cosine, args.bin_steps)
  _, l_means = binned(transition_steps, length, args.bin_steps)
  _, g_means = binned(transition_steps, np.linalg.norm(goals[:, :2], axis=1), args.bin_steps)
  _, points = plot_learning_curve.read_scalars(args.train_dir, 'avg_episode_final_distance')
  d_steps = np.array([p[1] for p in points], np.float64)
  d_values = np.array([p[2] for p in points], np.float64)
  d_x, d_means = binned(d_steps, d_values, args.bin_steps)

  print(f'{checkpoint}: {adds} meta transitions; untrained policies (first {args.initial_steps} steps): progress '
        f'{base_progress:+.4f}')
  print('| steps | low: progress towards the goal per 10 steps | cosine | distance moved | goal (x, y) size | '
        'meta: final distance to the target |')
  print('|---|---|---|---|---|---|')
  final = dict(zip(d_x, d_means))
  for i, x in enumerate(xs):
    meta = f'{final[x]:.2f}' if x in final else ''
    print(f'| {x / 1000:.0f}k | {p_means[i]:+.3f} | {c_means[i]:+.2f} | {l_means[i]:.3f} | {g_means[i]:.2f} | '
          f'{meta} |')

  curves = read_eval_results(args.eval_dir) if args.eval_dir else {}
  for mode, (goal, points) in curves.items():
    print(f'evaluation {mode} {goal}: success ' +
          ', '.join(f'{rate:.2f} at {step / 1000:.0f}k' for step, rate in points))
  max_x = float(step)
  centers = np.minimum(xs + args.bin_steps / 2, max_x)
  curves_xy = {
      'progress': (centers, p_means),
      'cosine': (centers, c_means),
      'distance': (np.minimum(d_x + args.bin_steps / 2, max_x), d_means)
  }
  charts.draw(
      args.output,
      figure_panels(args.train_dir, args.bin_steps, curves_xy, base_progress, args.random_final_distance, curves),
      f'HIRO learning check: {os.path.basename(os.path.normpath(args.train_dir))}, {step:,} steps', 'environment steps',
      width=900)
  print(f'wrote {args.output}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
