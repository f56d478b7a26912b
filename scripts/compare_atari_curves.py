r"""Atari learning runs side by side: the curve CSVs of `scripts/atari_learning_run.py curve` on one chart, and their
windowed mean returns at the same frames.

  python scripts/compare_atari_curves.py \
      docs/results/impala_atari_pong_curve.csv docs/results/impala_atari_pong_curve_run2.csv \
      docs/results/impala_atari_pong_curve_numpy_actors.csv --labels "run 1" "run 2" "NumPy actors" \
      --upto 10000000 --at 2500000,5000000,7500000,10000000 \
      --output docs/results/impala_atari_pong_numpy_actors_compare.png

Prints a markdown table: one row per frame count of --at, one column per run, each the run's mean of the last 100
episodes (its CSV's `mean_last_100`) at the last episode that ended at or before those frames, and the training hours
there. Draws each run's windowed mean against frames up to --upto (`figures.curves`).
"""

import argparse
import csv
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from figures import curves  # pylint: disable=g-import-not-at-top,wrong-import-position


def read_curve(path):
  """(frames, training hours, windowed mean) lists of a curve CSV (`atari_learning_run.py curve`)."""
  with open(path, newline='') as f:
    rows = list(csv.DictReader(f))
  if not rows or 'mean_last_100' not in rows[0]:
    raise ValueError(f'{path} is not a curve CSV of scripts/atari_learning_run.py (no mean_last_100 column).')
  return ([int(r['frames']) for r in rows], [float(r['training_hours']) for r in rows],
          [float(r['mean_last_100']) for r in rows])


def value_at(curve, frames):
  """(windowed mean, hours) at the last episode ending at or before `frames`; None before the first."""
  points = [(m, h) for f, h, m in zip(*curve) if f <= frames]
  return points[-1] if points else None


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
  parser.add_argument('csvs', nargs='+', help='curve CSVs (docs/results/impala_atari_<game>_curve*.csv)')
  parser.add_argument('--labels', nargs='+', default=None, help='one per CSV (default: the file names)')
  parser.add_argument('--at', default='2500000,5000000,7500000,10000000', help='comma-separated frame counts')
  parser.add_argument('--upto', type=int, default=None, help='draw up to these frames (default: all)')
  parser.add_argument('--output', default=None, help='PNG to write (default: none)')
  parser.add_argument('--title', default='Pong: mean return of the last 100 training episodes')
  args = parser.parse_args(argv)
  labels = args.labels or [os.path.splitext(os.path.basename(p))[0] for p in args.csvs]
  if len(labels) != len(args.csvs):
    print(f'--labels needs one label per CSV ({len(args.csvs)}), got {len(labels)}.', file=sys.stderr)
    return 2
  try:
    runs = [read_curve(p) for p in args.csvs]
  except (OSError, ValueError, KeyError) as e:
    print(f'cannot read the curves: {e}', file=sys.stderr)
    return 2
  print('| frames | ' + ' | '.join(labels) + ' |')
  print('|---:|' + '---:|' * len(labels))
  for frames in [int(x) for x in args.at.split(',')]:
    cells = []
    for run in runs:
      point = value_at(run, frames)
      cells.append('-' if point is None else f'{point[0]:+.2f} ({point[1]:.2f} h)')
    print(f'| {frames:,} | ' + ' | '.join(cells) + ' |')
  if args.output:
    series = []
    for i, (label, (frames, _, means)) in enumerate(zip(labels, runs)):
      keep = [j for j, f in enumerate(frames) if args.upto is None or f <= args.upto]
      series.append(
          curves.Series([frames[j] for j in keep], [means[j] for j in keep], label,
                        color=curves.PALETTE[i % len(curves.PALETTE)], linewidth=1.5))
    curves.draw(args.output, [curves.Panel('', 'mean return, last 100 episodes', series)], args.title,
                'environment frames')
    print(f'wrote {args.output}')
  return 0


if __name__ == '__main__':
  sys.exit(main())
