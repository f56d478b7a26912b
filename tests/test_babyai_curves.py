"""scripts/babyai_curves.py on a hand-made run: its table (episodes, frames, the episode where the windowed success
rate first reaches 99%, the last window's means) against values worked out by hand, and its PNG's description."""

import csv
import os
import subprocess
import sys

import tensorflow as tf

from figures import curves

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
RED_BALL = 'gymnasium/BabyAI-GoToRedBallGrey-v0'
LOCAL = 'gymnasium/BabyAI-GoToLocal-v0'


def _write_run(logdir, episodes):
  """TensorBoard episode summaries as the learner writes them: {level: [(return, frames, frame counter)]}."""
  writer = tf.summary.create_file_writer(logdir)
  with writer.as_default():
    for level, rows in episodes.items():
      for episode_return, frames, counter in rows:
        tf.summary.scalar(level + '/episode_return', episode_return, step=counter)
        tf.summary.scalar(level + '/episode_frames', frames, step=counter)
  writer.close()


def test_table_and_figure_of_a_hand_made_run(tmp_path):
  # GoToRedBallGrey: failures (return 0, 64 frames) then successes (0.9, 10 frames). With a window of 4 the success
  # rate over full windows is 0.25, 0.5, 0.75, 1.0 at episodes 4, 5, 6, 7: 99% first at episode 7, after
  # 3 x 64 + 4 x 10 = 232 of the level's frames (run frame counter 700). Last window: success 1, return 0.9.
  red = [(0., 64, 100 * (i + 1)) for i in range(3)] + [(0.9, 10, 100 * (i + 4)) for i in range(5)]
  # GoToLocal: alternating success and failure: never 99%; last 4: success 0.5, return (0.5 + 0) / 2 = 0.25.
  local = [(0.5 if i % 2 == 0 else 0., 20, 100 * (i + 1)) for i in range(8)]
  _write_run(str(tmp_path / 'run'), {RED_BALL: red, LOCAL: local})
  png, table = str(tmp_path / 'curve.png'), str(tmp_path / 'curve.csv')
  result = subprocess.run([
      sys.executable,
      os.path.join(REPO, 'scripts', 'babyai_curves.py'), '--run', f'hand={tmp_path / "run"}', '--output', png, '--csv',
      table, '--window', '4'
  ], capture_output=True, text=True, timeout=300, check=True)
  assert '| hand | BabyAI-GoToRedBallGrey-v0 | 8 | 242 | 800 | 7 (232) | 1.000 | 0.900 |' in result.stdout
  assert '| hand | BabyAI-GoToLocal-v0 | 8 | 160 | 800 | not reached | 0.500 | 0.250 |' in result.stdout
  with open(table, encoding='utf-8') as f:
    rows = list(csv.DictReader(f))
  assert [(r['level'], r['episode_99'], r['run_frames_99']) for r in rows] == [('BabyAI-GoToRedBallGrey-v0', '7',
                                                                                '700'), ('BabyAI-GoToLocal-v0', '', '')]
  description = curves.read_png(png)['description']
  titles = [panel['title'] for panel in description['panels']]
  assert titles[0].startswith('BabyAI-GoToRedBallGrey-v0: success rate, last 4 episodes (BabyAI 1.0: 15.9-17.4K')
  assert len(titles) == 4
