r"""Learning curve of an IMPALA run, from its TensorBoard events, as a PNG (Pillow; matplotlib is not in the stack).

Usage:
  python scripts/plot_learning_curve.py --logdir /tmp/impala_builtin_run --output docs/impala_builtin_curve.png \
      [--tag builtin/find_object/episode_return] [--window 200] [--threshold 0.9]

Plots every episode return (grey dots) and the mean over the last `window` episodes (blue) against environment
frames, with the threshold (red, dashed). Prints the frames and minutes (wall time since the events file was created,
i.e. since training started) at which the windowed mean first reaches the threshold, and the final windowed mean.
"""

import argparse
import glob
import os
import sys

import numpy as np
from PIL import Image, ImageDraw, ImageFont

WIDTH, HEIGHT = 900, 520
MARGIN_LEFT, MARGIN_RIGHT, MARGIN_TOP, MARGIN_BOTTOM = 80, 30, 50, 70


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


def draw(steps, values, mean, window, threshold, title, output, markers=(),
         legend='blue: mean of the last {window} episodes; grey: each episode'):
  """Writes the PNG: points (steps, values), line (steps, mean), horizontal threshold, and `markers`: (step,
  mean, standard error) triples drawn as green squares with +- 1 s.e. bars (e.g. test-mode evaluations)."""
  image = Image.new('RGB', (WIDTH, HEIGHT), 'white')
  d = ImageDraw.Draw(image)
  font = ImageFont.load_default()
  x0, x1 = MARGIN_LEFT, WIDTH - MARGIN_RIGHT
  y0, y1 = HEIGHT - MARGIN_BOTTOM, MARGIN_TOP
  marker_low = [m - e for _, m, e in markers] or [np.inf]
  marker_high = [m + e for _, m, e in markers] or [-np.inf]
  low = min(np.min(values), threshold if threshold is not None else np.inf, 0., min(marker_low))
  high = max(np.max(values), threshold if threshold is not None else -np.inf, max(marker_high))
  high = high if high > low else low + 1.
  low, high = low - .05 * (high - low), high + .05 * (high - low)  # Room for the points at the extremes.
  max_step = max(float(steps[-1]), 1., *[float(s) for s, _, _ in markers])
  sx = lambda s: x0 + (x1 - x0) * s / max_step
  sy = lambda v: y0 - (y0 - y1) * (v - low) / (high - low)
  d.rectangle([x0, y1, x1, y0], outline='black')
  for i in range(6):  # Ticks.
    s, v = max_step * i / 5, low + (high - low) * i / 5
    d.line([sx(s), y0, sx(s), y0 + 5], fill='black')
    d.text((sx(s) - 20, y0 + 8), f'{s / 1000:.0f}k', fill='black', font=font)
    d.line([x0 - 5, sy(v), x0, sy(v)], fill='black')
    d.text((x0 - 45, sy(v) - 6), f'{v:.2f}', fill='black', font=font)
  d.text(((x0 + x1) // 2 - 80, HEIGHT - 30), 'environment frames', fill='black', font=font)
  d.text((5, y1 - 18), 'episode return', fill='black', font=font)
  d.text((10, MARGIN_TOP - 35), title, fill='black', font=font)
  rng = np.random.default_rng(0)
  jitter = rng.uniform(-.02, .02, len(values)) * (high - low)  # Returns are few distinct values: spread them.
  for s, v, j in zip(steps, values, jitter):
    x, y = sx(s), sy(v) + j
    d.point((x, y), fill=(170, 170, 170))
  if threshold is not None:
    y = sy(threshold)
    for x in range(x0, x1, 12):
      d.line([x, y, min(x + 6, x1), y], fill='red', width=2)
    d.text((x1 - 120, y - 16), f'threshold {threshold:g}', fill='red', font=font)
  full = slice(min(window, len(mean)) - 1, None)  # The mean over full windows only.
  d.line([(sx(s), sy(m)) for s, m in zip(steps[full], mean[full])], fill='blue', width=3)
  for s, m, e in markers:
    x = sx(s)
    d.line([x, sy(m - e), x, sy(m + e)], fill=(0, 140, 0), width=2)
    d.rectangle([x - 4, sy(m) - 4, x + 4, sy(m) + 4], fill=(0, 160, 0), outline='black')
  d.text((x0 + 10, y1 + 8), legend.format(window=window), fill='black', font=font)
  image.save(output)


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
  draw(steps, values, mean, args.window, args.threshold, f'{args.tag}: {summary}', args.output)
  print(f'wrote {args.output}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
