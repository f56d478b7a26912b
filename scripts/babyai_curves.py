r"""BabyAI learning curves of IMPALA runs (configs/impala_babyai.gin) against the BabyAI papers' sample counts.

  python scripts/babyai_curves.py --run 'with the instruction=runs/impala_babyai' \
      --run 'instruction blanked=runs/impala_babyai_blind' --output docs/results/impala_babyai_curve.png \
      [--csv docs/results/impala_babyai_curve.csv] [--window 1000]

Reads each run's TensorBoard episode summaries (`<level>/episode_return`, `<level>/episode_frames`, one per episode,
in the order written) and, per level, draws against the level's training episodes: the success rate (an episode
succeeds when its return is positive, BabyAI's criterion) and the mean return over the last `--window` episodes,
with the papers' references. Prints, per run and level: episodes and environment frames trained (the level's, and
the run's frame counter over both levels), the episode (and the level's frames until then) at which the windowed
success rate first reached 99% (the papers' criterion; BabyAI measured it on training episodes too, smoothed over
about 6,400 of them), and the last window's success rate and mean return.
"""

import argparse
import csv
import glob
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from figures import curves  # pylint: disable=g-import-not-at-top,wrong-import-position

LEVELS = ('gymnasium/BabyAI-GoToRedBallGrey-v0', 'gymnasium/BabyAI-GoToLocal-v0')
CRITERION = 0.99
# Training episodes (thousands) BabyAI's PPO baseline needed to reach 99% success: BabyAI 1.0 (Chevalier-Boisvert et
# al. 2019, Table 3; 99% confidence interval) and BabyAI 1.1 with pixel input (Hui et al. 2020, Table 1b,
# pixels_endpool_res; mean +- std).
PAPERS = {
    'gymnasium/BabyAI-GoToRedBallGrey-v0': 'BabyAI 1.0: 15.9-17.4K episodes; BabyAI 1.1 pixels: 34 +- 4K',
    'gymnasium/BabyAI-GoToLocal-v0': 'BabyAI 1.0: 903-1114K episodes; BabyAI 1.1 pixels: 242 +- 15K',
}
# Scripted references (scripts/babyai_blind_ceiling.py, 1,000 episodes each): mean return of the shortest-path policy
# that knows the target, and of the best instruction-blind one found (visits the objects nearest first).
ORACLE_RETURN = {'gymnasium/BabyAI-GoToRedBallGrey-v0': 0.924, 'gymnasium/BabyAI-GoToLocal-v0': 0.929}
BLIND_RETURN = {'gymnasium/BabyAI-GoToLocal-v0': 0.827}


def read_episodes(logdir, level):
  """(returns float [N], frames float [N], counter int [N]) of a level's episodes in a run directory: return, its
  environment frames, and the run's frame counter when it was written."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (slow import: only when reading)
  returns, frames, counters = [], [], []
  for path in sorted(glob.glob(os.path.join(logdir, 'events.out.tfevents.*'))):
    for event in tf.compat.v1.train.summary_iterator(path):
      for value in event.summary.value:
        if value.tag == level + '/episode_return':
          returns.append(float(tf.make_ndarray(value.tensor)))
          counters.append(event.step)
        elif value.tag == level + '/episode_frames':
          frames.append(float(tf.make_ndarray(value.tensor)))
  return np.array(returns), np.array(frames[:len(returns)]), np.array(counters, np.int64)


def trailing_mean(values, window):
  """float [N]: the mean of values[max(0, i - window + 1) .. i]."""
  sums = np.cumsum(np.concatenate([[0.], values]))
  counts = np.minimum(np.arange(1, len(values) + 1), window)
  return (sums[1:] - sums[np.maximum(np.arange(1, len(values) + 1) - window, 0)]) / counts


def summarise(returns, frames, counters, window):
  """The printed row of one run and level (dict)."""
  success = trailing_mean((returns > 0).astype(np.float64), window)
  mean_return = trailing_mean(returns, window)
  full = np.arange(len(returns)) >= window - 1  # windows of `window` episodes only
  reached = np.nonzero(full & (success >= CRITERION))[0]
  first = int(reached[0]) if reached.size else None
  return {
      'episodes': len(returns),
      'level_frames': int(frames.sum()),
      'run_frames': int(counters[-1]) if len(counters) else 0,
      'episode_99': None if first is None else first + 1,
      'level_frames_99': None if first is None else int(frames[:first + 1].sum()),
      'run_frames_99': None if first is None else int(counters[first]),
      'success_last': float(success[-1]) if len(returns) else float('nan'),
      'return_last': float(mean_return[-1]) if len(returns) else float('nan'),
  }


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n', maxsplit=1)[0])
  parser.add_argument('--run', action='append', required=True, help="'label=run directory', once per run")
  parser.add_argument('--output', required=True, help='PNG to write')
  parser.add_argument('--csv', help='CSV of the printed table')
  parser.add_argument('--window', type=int, default=1000, help='episodes in the trailing means')
  args = parser.parse_args(argv)
  runs = [tuple(run.split('=', 1)) for run in args.run]
  colors = (curves.MEAN, curves.PALETTE[0], curves.PALETTE[1])
  success_panels, return_panels, rows = [], [], []
  for level in LEVELS:
    name = level.split('/', 1)[1]
    success_series, return_series = [], []
    for (label, logdir), color in zip(runs, colors):
      returns, frames, counters = read_episodes(logdir, level)
      row = {'run': label, 'level': name, **summarise(returns, frames, counters, args.window)}
      rows.append(row)
      x = np.arange(1, len(returns) + 1)
      success_series.append(
          curves.Series(x, trailing_mean((returns > 0).astype(np.float64), args.window), label, color=color))
      return_series.append(curves.Series(x, trailing_mean(returns, args.window), label, color=color))
    success_panels.append(
        curves.Panel(f'{name}: success rate, last {args.window} episodes ({PAPERS[level]})', 'success rate',
                     success_series, hlines=[curves.HLine(CRITERION, "the papers' criterion: 99%",
                                                          curves.THRESHOLD)], ylim=(0, 1.02)))
    hlines = [curves.HLine(ORACLE_RETURN[level], f'shortest path to the target: {ORACLE_RETURN[level]}')]
    if level in BLIND_RETURN:
      hlines.append(
          curves.HLine(BLIND_RETURN[level], f'instruction-blind scripted policy: {BLIND_RETURN[level]}', 'tab:gray'))
    return_panels.append(
        curves.Panel(f'{name}: mean return, last {args.window} episodes', 'return', return_series, hlines=hlines,
                     ylim=(0, 1)))
  curves.draw(
      args.output, success_panels + return_panels, 'IMPALA on BabyAI: two levels trained at once',
      "training episodes of the level", notes=[
          'Deep agent (ResNet + LSTM + instruction LSTM), 16 actors round robin over the two levels, 56 x 56 '
          'pixel views; an episode succeeds when its return is positive.'
      ])
  print('| run | level | episodes | level frames | run frames | 99% success at episode (level frames) | '
        f'success, last {args.window} | return, last {args.window} |')
  print('|---|---|---|---|---|---|---|---|')
  for row in rows:
    reached = 'not reached' if row['episode_99'] is None else f"{row['episode_99']:,} ({row['level_frames_99']:,})"
    print(f"| {row['run']} | {row['level']} | {row['episodes']:,} | {row['level_frames']:,} | {row['run_frames']:,} | "
          f"{reached} | {row['success_last']:.3f} | {row['return_last']:.3f} |")
  if args.csv:
    with open(args.csv, 'w', newline='', encoding='utf-8') as f:
      writer = csv.DictWriter(f, fieldnames=list(rows[0]))
      writer.writeheader()
      writer.writerows(rows)


if __name__ == '__main__':
  main()
