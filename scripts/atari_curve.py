"""The learning curve of an Atari learning run (`scripts/atari_learning_run.py curve`): the training episodes' returns
against frames and training hours (sessions added up, pauses removed), their windowed mean, the test-mode results
(whole games; mean ± standard error, median) and the paper's score; the CSV and the PNG (`figures.curves`)."""

import csv
import glob
import os
import sys
import time

import plot_learning_curve  # scripts/, on sys.path (atari_learning_run.py puts it there)

from figures.curves import steps_label

REPO_ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def pause_intervals(pauses_path):
  """[(paused_at, resumed_at)] from pauses.log (an open pause lasts until now)."""
  intervals, paused_at = [], None
  if os.path.exists(pauses_path):
    with open(pauses_path) as f:
      for line in f:
        label, stamp = line.split()
        if label == 'pause' and paused_at is None:
          paused_at = float(stamp)
        elif label == 'resume' and paused_at is not None:
          intervals.append((paused_at, float(stamp)))
          paused_at = None
  if paused_at is not None:
    intervals.append((paused_at, time.time()))
  return intervals


def training_hours(logdir, pauses_path, points):
  """Training hours at each point (wall_time, step, value): sessions (events files) added up, pauses removed."""
  import tensorflow as tf  # pylint: disable=g-import-not-at-top  (slow import: only when reading)
  sessions = []
  for path in sorted(glob.glob(os.path.join(logdir, 'events.out.tfevents.*'))):
    times = [event.wall_time for event in tf.compat.v1.train.summary_iterator(path)]
    if times:
      sessions.append((min(times), max(times)))
  sessions.sort()
  pauses = pause_intervals(pauses_path)

  def active(t0, t1):
    paused = sum(max(0., min(t1, b) - max(t0, a)) for a, b in pauses)
    return max(t1 - t0 - paused, 0.)

  hours = []
  for wall_time, _, _ in points:
    seconds = 0.
    for begin, end in sessions:
      if wall_time >= begin:
        seconds += active(begin, min(end, wall_time))
    hours.append(seconds / 3600.)
  return hours


def test_result_paths(logdir):
  """The test-mode result files of a run: LOGDIR/test_results-*.json and LOGDIR/kept/<frames>/test_results-*.json."""
  return sorted(
      glob.glob(os.path.join(logdir, 'test_results-*.json')) +
      glob.glob(os.path.join(logdir, 'kept', '*', 'test_results-*.json')))


def test_results(paths, level_name):
  """Test-mode evaluations of a run (`run_eval.py` writes LOGDIR/test_results-<frames>[.k].json: whole games with up
  to 30 no-ops, as the paper reports its scores), from those files: [(frames, mean return, standard error, games,
  median)] by frames."""
  import json  # pylint: disable=g-import-not-at-top

  import numpy as np  # pylint: disable=g-import-not-at-top
  results = []
  for path in paths:
    try:
      with open(path) as f:
        data = json.load(f)
      returns = np.asarray(data['levels'][level_name]['returns'], np.float64)
      frames = int(data['num_environment_frames'])
    except (OSError, ValueError, KeyError, TypeError) as e:
      print(f'warning: {path} skipped ({e!r}).', file=sys.stderr)
      continue
    if returns.size:
      se = returns.std(ddof=1) / np.sqrt(returns.size) if returns.size > 1 else 0.
      results.append((frames, float(returns.mean()), float(se), returns.size, float(np.median(returns))))
  return sorted(results)


def test_line(result, frames_text):
  frames, mean, se, games, median = result
  return f'test mode at {frames_text} frames: {mean:.2f} ± {se:.2f} (s.e.) over {games} whole games, median {median:g}'


def summary_line(frames, hours, mean, window, target, episodes=None):
  """The windowed mean's course: the frames and training hours at which it first reached `target` (None: no target)
  and its latest value (with the number of episodes, where known)."""
  i = None if target is None else plot_learning_curve.first_reached(mean, window, target)
  count = f'{episodes} episodes, ' if episodes is not None else ''
  latest = f'latest {mean[-1]:.2f} ({count}{frames[-1]:.0f} frames, {hours[-1]:.2f} h)'
  if target is None:
    return f'mean of the last {window} episodes: {latest}'
  if i is not None:
    return f'mean of the last {window} >= {target:g} at {frames[i]:.0f} frames, {hours[i]:.2f} training hours; {latest}'
  return f'{target:g} not reached yet; {latest}'


def draw_curve(game, frames, hours, returns, mean, window, target, summary, tests, path,
               episodes='each training episode', paper=None):
  """The PNG of the curve (`plot_learning_curve.draw`): each training episode's return (`episodes`: their legend
  entry), their windowed mean, the target, the test-mode results and the paper's score (`paper`, a dotted line; None:
  none) against frames; the title states the frames and training hours."""
  lives = game != 'pong'  # Pong has no lives; other games' training episodes end at a lost life.
  notes = [summary] + [test_line(t, steps_label(t[0])) for t in tests]
  return plot_learning_curve.draw(
      frames, returns, mean, window, target,
      f'IMPALA, Atari {game}: {steps_label(frames[-1])} frames, {hours[-1]:.2f} training hours', path,
      markers=[t[:3] for t in tests], notes=notes, episode_label=episodes + (' (one life)' if lives else ''),
      mean_label=f'mean of the last {window} training episodes', marker_label='test mode: whole games, mean ± s.e.',
      reference=None if paper is None else (paper, f'paper, test mode: {paper:g}'))


def read_curve_csv(path):
  """(frames, training hours, returns, windowed means, window) of a CSV that `curve` wrote."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  with open(path, newline='') as f:
    reader = csv.reader(f)
    header = next(reader, [])
    rows = [row for row in reader if row]
  if header[:3] != ['frames', 'training_hours', 'episode_return'
                   ] or len(header) != 4 or not (header[3].startswith('mean_last_') and
                                                 header[3][len('mean_last_'):].isdigit()) or not rows:
    raise ValueError(f'{path}: not a curve CSV (frames,training_hours,episode_return,mean_last_N and its rows).')
  data = np.array(rows, np.float64)
  return data[:, 0], data[:, 1], data[:, 2], data[:, 3], int(header[3][len('mean_last_'):])


def redraw(args):
  """curve --from_csv: the PNG again from the CSV (and test results) alone."""
  try:
    frames, hours, returns, mean, window = read_curve_csv(args.from_csv)
  except (OSError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  target = args.target if args.target is not None else (18. if args.game == 'pong' else None)
  summary = summary_line(frames, hours, mean, window, target)
  print(summary)
  tests = test_results(args.test_results, f'atari/{args.game}')
  output = (os.path.join(REPO_ROOT, 'docs', 'results', args.output)
            if args.output else os.path.splitext(args.from_csv)[0])
  draw_curve(args.game, frames, hours, returns, mean, window, target, summary, tests, output + '.png',
             episodes='training episodes in the CSV', paper=args.paper)
  print(f'wrote {output}.png')
  return 0


def curve(args, logdir, pauses_path):
  """`curve` (atari_learning_run.py's usage) of the run in `logdir`, its pauses in `pauses_path`."""
  import numpy as np  # pylint: disable=g-import-not-at-top
  tag = f'atari/{args.game}/episode_return'
  try:
    _, points = plot_learning_curve.read_scalars(logdir, tag)
  except (FileNotFoundError, ValueError) as e:
    print(f'error: {e}', file=sys.stderr)
    return 2
  hours = np.asarray(training_hours(logdir, pauses_path, points))
  frames = np.array([p[1] for p in points], np.float64)
  returns = np.array([p[2] for p in points], np.float64)
  mean = plot_learning_curve.windowed_mean(returns, args.window)
  output = os.path.join(REPO_ROOT, 'docs', 'results', args.output or f'impala_atari_{args.game}_curve')
  with open(output + '.csv', 'w', newline='') as f:
    writer = csv.writer(f)
    writer.writerow(['frames', 'training_hours', 'episode_return', f'mean_last_{args.window}'])
    kept = np.arange(len(returns))
    kept = kept[(kept % args.every == args.every - 1) | (kept == len(returns) - 1)]
    for row in zip(frames[kept], hours[kept], returns[kept], mean[kept]):
      writer.writerow([int(row[0]), f'{row[1]:.3f}', f'{row[2]:g}', f'{row[3]:.3f}'])
  target = args.target if args.target is not None else (18. if args.game == 'pong' else None)
  summary = summary_line(frames, hours, mean, args.window, target, episodes=len(returns))
  print(summary)
  tests = test_results(test_result_paths(logdir), f'atari/{args.game}')
  for test_frames, test_mean, test_se, games, median in tests:
    print(f'test mode at {test_frames} frames: mean {test_mean:.2f} +- {test_se:.2f} (s.e.) over {games} whole games, '
          f'median {median:g}')
  draw_curve(args.game, frames, hours, returns, mean, args.window, target, summary, tests, output + '.png',
             paper=args.paper)
  print(f'wrote {output}.csv and {output}.png')
  return 0
