r"""Learning curve of an IMPALA run, from its TensorBoard events, as a PNG (`figures.curves`, matplotlib).

Usage:
  python scripts/plot_learning_curve.py --logdir /tmp/impala_builtin_run \
      --output docs/results/impala_builtin_curve.png [--tag builtin/find_object/episode_return] [--window 200] \
      [--threshold 0.9]

Plots every episode return (grey dots) and the mean over the last `window` episodes (blue) against environment
frames, with the threshold (red, dashed) and a legend. Prints the frames and minutes (wall time since the events file
was created, i.e. since training started) at which the windowed mean first reaches the threshold, and the final
windowed mean (also under the chart's title).
"""

import argparse
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from figures import curves  # pylint: disable=g-import-not-at-top,wrong-import-position


def read_scalars(logdir, tag):
  """Returns (start wall time s, [(wall_time s, step, value)] sorted by step) of `tag` in logdir's events files."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (slow import: only when reading)
  files = sorted(glob.glob(os.path.join(logdir, 'events.out.tfevents.*')))
  if not files:
    raise FileNotFoundError(f'no TensorBoard events files in {logdir!r}.')
  start, points, tags = None, [], set()
  for path in files:
    for event in tf.compat.v1.train.summary_iterator(path):
      start = event.wall_time if start is None else min(start, event.wall_time)
      for value in event.summary.value:
        tags.add(value.tag)
        if value.tag == tag:
          scalar = value.simple_value if value.HasField('simple_value') else float(tf.make_ndarray(value.tensor))
          points.append((event.wall_time, event.step, scalar))
  if not points:
    raise ValueError(f'tag {tag!r} not in {logdir!r}; its tags: {", ".join(sorted(tags))}.')
  points.sort(key=lambda p: (p[1], p[0]))
  return start, points


def windowed_mean(values, window):
  """Mean of the last `window` values (fewer at the start), float64 [N]."""
  cumulative = np.concatenate([[0.], np.cumsum(values, dtype=np.float64)])
  index = np.arange(1, len(values) + 1)
  return (cumulative[index] - cumulative[np.maximum(index - window, 0)]) / np.minimum(index, window)


def first_reached(mean, window, threshold):
  """Index of the first full-window mean >= threshold, or None."""
  reached = np.nonzero((mean >= threshold) & (np.arange(len(mean)) >= window - 1))[0]
  return int(reached[0]) if len(reached) else None


def draw(steps, values, mean, window, threshold, title, output, markers=(), notes=(), episode_label='each episode',
         mean_label=None, marker_label='test mode: mean ± s.e.', xlabel='environment frames', ylabel='episode return',
         reference=None):
  """Writes the PNG (`figures.curves`): the episodes' values (grey points) and the mean over the last `window`
  episodes (blue line, full windows only) against `steps`, the threshold (dashed red; None: none) and `markers`:
  (step, mean, standard error) triples drawn as green squares with +- 1 s.e. bars (e.g. test-mode evaluations);
  `reference`: (value, label), a published score drawn as a dotted line (None: none).

  Returns:
    `figures.curves.draw`'s description of the chart (also stored in the PNG).
  """
  steps, values, mean = (np.asarray(a, np.float64) for a in (steps, values, mean))
  full = slice(min(window, len(mean)) - 1, None)  # The mean over full windows only.
  series = [
      curves.Series(steps, values, episode_label, color='0.55', linewidth=0, marker='.', markersize=2.5, alpha=0.35,
                    zorder=1),
      curves.Series(steps[full], mean[full], mean_label or f'mean of the last {window} episodes', color=curves.MEAN,
                    linewidth=2)
  ]
  if markers:
    series.append(
        curves.Series([s for s, _, _ in markers], [m for _, m, _ in markers], marker_label, color='tab:green',
                      linewidth=0, marker='s', markersize=6, edgecolor='black', yerr=[e for _, _, e in markers],
                      zorder=4))
  hlines = [curves.HLine(threshold, f'target {threshold:g}', curves.PAPER)] if threshold is not None else []
  if reference is not None:
    hlines.append(curves.HLine(reference[0], reference[1], 'black', linestyle=':'))
  return curves.draw(output, [curves.Panel('', ylabel, series, hlines)], title, xlabel, notes=notes, panel_height=420)


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('--logdir', required=True, help='the run directory (TensorBoard events)')
  parser.add_argument('--output', required=True, help='PNG to write')
  parser.add_argument('--tag', default='builtin/find_object/episode_return')
  parser.add_argument('--window', type=int, default=200, help='episodes in the moving mean')
  parser.add_argument('--threshold', type=float, default=0.9)
  args = parser.parse_args(argv)
  start, points = read_scalars(args.logdir, args.tag)
  wall = np.array([p[0] for p in points]) - start
  steps = np.array([p[1] for p in points], np.float64)
  values = np.array([p[2] for p in points], np.float64)
  mean = windowed_mean(values, args.window)
  i = first_reached(mean, args.window, args.threshold)
  if i is not None:
    summary = (f'mean of the last {args.window} >= {args.threshold:g} at {steps[i]:.0f} frames, '
               f'{wall[i] / 60:.1f} min')
  else:
    summary = f'threshold {args.threshold:g} not reached'
  summary += f'; final mean {mean[-1]:.3f} ({len(values)} episodes, {steps[-1]:.0f} frames, {wall[-1] / 60:.1f} min)'
  print(summary)
  draw(steps, values, mean, args.window, args.threshold,
       f'{args.tag}: {len(values)} episodes, {curves.steps_label(steps[-1])} frames', args.output, notes=[summary])
  print(f'wrote {args.output}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
