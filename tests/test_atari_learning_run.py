"""scripts/atari_learning_run.py: `status` (no TensorFlow: it reads the run's files only): running or stopped, the
latest checkpoint, and the mean of the last episodes the run printed to its log; `test` (test mode on the kept
checkpoints, real Breakout games); `curve` (the CSV and the PNG, with the test results and the paper's score)."""

import os
import signal
import subprocess
import sys
import time

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _status(logdir, *extra):
  result = subprocess.run([
      sys.executable,
      os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'status', '--logdir',
      str(logdir), *extra
  ], capture_output=True, text=True, timeout=60, check=True)
  return result.stdout.strip()


def test_status_of_a_stopped_run(tmp_path):
  logdir = tmp_path / 'pong'
  logdir.mkdir()
  for frames in (640, 12800, 3200):  # Sorted by number, not by name.
    (logdir / f'model.ckpt-{frames}.index').write_bytes(b'')
  control = tmp_path / 'pong.control'
  control.mkdir()
  returns = [-21., -20., -19., 3., 5.]
  (control / 'train.log').write_text('Frames 640 / 200000000 (0.0%), 2516 frames/s\n' +
                                     ''.join(f'Level: atari/pong Episode return: {r:f}\n' for r in returns) +
                                     'Episode return: garbled\n')
  (control / 'train.pid').write_text('999999999\n')  # No such process.
  assert _status(logdir) == (f'{logdir}: stopped; latest checkpoint at 12800 frames; mean return of the last 5 '
                             f'episodes {sum(returns) / 5:.2f}')
  assert _status(logdir, '--window', '2').endswith('mean return of the last 2 episodes 4.00')


def test_status_reads_the_progress_line_after_the_last_episode_line(tmp_path):
  # Episode lines (an older version, or --verbosity=1) then a session whose progress lines carry the mean return.
  logdir = tmp_path / 'pong'
  control = tmp_path / 'pong.control'
  control.mkdir()
  line = ('Frames {} / 200000000 (0.0%), 2516 frames/s (2400 since the start), total_loss 12.3, learning_rate '
          '0.0006, ETA 22h05m; episodes 3 (40 since the start); return (last {}) atari/pong {}.\n')
  (control / 'train.log').write_text('Level: atari/pong Episode return: -21.000000\n' + line.format(640, 40, '-20.45') +
                                     line.format(1280, 100, '-19.50'))
  assert _status(logdir) == (f'{logdir}: stopped; latest checkpoint at none frames; mean return of the last 100 '
                             'episodes -19.50 (the last progress line)')
  with open(control / 'train.log', 'a') as f:  # --verbosity=1: the episode lines come after the progress line
    f.write('Level: atari/pong Episode return: 3.000000\n')
  assert _status(logdir).endswith('mean return of the last 2 episodes -9.00')


def test_status_of_a_run_that_has_not_started(tmp_path):
  assert _status(tmp_path / 'new') == f'{tmp_path / "new"}: no run there yet (`start` begins one).'
  assert sorted(os.listdir(tmp_path)) == []  # Asking writes nothing (no `new.control/`).


def test_commands_on_a_run_that_does_not_exist_write_nothing(tmp_path):
  for command in ('pause', 'resume', 'stop', 'curve'):
    result = subprocess.run([
        sys.executable,
        os.path.join(REPO, 'scripts', 'atari_learning_run.py'), command, '--logdir',
        str(tmp_path / 'new')
    ], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, (command, result.stderr)
    assert 'Traceback' not in result.stderr and str(tmp_path / 'new') in result.stderr, (command, result.stderr)
  assert sorted(os.listdir(tmp_path)) == []


def test_status_of_a_started_run_with_no_checkpoint_yet(tmp_path):
  (tmp_path / 'pong.control').mkdir()
  assert _status(tmp_path / 'pong') == f'{tmp_path / "pong"}: stopped; latest checkpoint at none frames; no ' \
                                       'episode finished yet'


@pytest.mark.slow
def test_curve_draws_the_test_mode_results_beside_the_training_episodes(tmp_path):
  import json  # pylint: disable=g-import-not-at-top

  import numpy as np  # pylint: disable=g-import-not-at-top
  from PIL import Image  # pylint: disable=g-import-not-at-top
  import tensorflow as tf  # pylint: disable=g-import-not-at-top

  import figures.curves  # pylint: disable=g-import-not-at-top
  logdir = tmp_path / 'breakout'
  writer = tf.summary.create_file_writer(str(logdir))
  episodes = [(1000, 0.), (2000, 2.), (3000, 1.), (4000, 5.)]  # (frames, return of one life)
  with writer.as_default():
    for frames, episode_return in episodes:
      tf.summary.scalar('atari/breakout/episode_return', episode_return, step=frames)
  writer.close()
  games = [3., 9., 12., 30.]  # Whole games, as run_eval.py writes them.
  (logdir / 'test_results-4000.json').write_text(
      json.dumps({
          'num_environment_frames': 4000,
          'levels': {
              'atari/breakout': {
                  'mean_return': 13.5,
                  'returns': games
              }
          }
      }))
  (logdir / 'test_results-5000.json').write_text('{"num_environment_frames": 5000')  # Cut short: skipped.
  output = tmp_path / 'curve'
  result = subprocess.run([
      sys.executable,
      os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'curve', '--game', 'breakout', '--logdir',
      str(logdir), '--window', '2', '--target', '3', '--output',
      str(output)
  ], capture_output=True, text=True, timeout=300)
  assert result.returncode == 0, result.stderr
  se = np.std(games, ddof=1) / np.sqrt(len(games))
  assert f'test mode at 4000 frames: mean 13.50 +- {se:.2f} (s.e.) over 4 whole games' in result.stdout
  assert 'mean of the last 2 >= 3 at 4000 frames' in result.stdout  # (1 + 5) / 2 = 3 at the fourth episode.
  assert 'test_results-5000.json skipped' in result.stderr and 'Traceback' not in result.stderr
  rows = (tmp_path / 'curve.csv').read_text().splitlines()
  assert rows[0] == 'frames,training_hours,episode_return,mean_last_2'
  assert [(int(r.split(',')[0]), float(r.split(',')[2]), float(r.split(',')[3])) for r in rows[1:]] == [(1000, 0., 0.),
                                                                                                        (2000, 2., 1.),
                                                                                                        (3000, 1., 1.5),
                                                                                                        (4000, 5., 3.)]
  every_3 = subprocess.run([
      sys.executable,
      os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'curve', '--game', 'breakout', '--logdir',
      str(logdir), '--window', '2', '--every', '3', '--output',
      str(tmp_path / 'every_3')
  ], capture_output=True, text=True, timeout=300)
  assert every_3.returncode == 0, every_3.stderr
  assert (tmp_path / 'every_3.csv').read_text().splitlines() == [rows[0], rows[3], rows[4]]  # The 3rd, the last.
  zero = subprocess.run([
      sys.executable,
      os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'curve', '--game', 'breakout', '--logdir',
      str(logdir), '--every', '0'
  ], capture_output=True, text=True, timeout=300)
  assert zero.returncode == 2 and '--every: expected a whole number >= 1' in zero.stderr
  assert 'Traceback' not in zero.stderr
  # The PNG: a valid image, and what it shows (`figures.curves` stores it there): the 4 episodes, their mean over
  # full windows of 2 (1, 1.5, 3 from the second episode on), the target 3 and the test-mode result 13.5 at 4000.
  with Image.open(tmp_path / 'curve.png') as image:
    image.load()
    assert image.format == 'PNG' and image.size[0] == 1000
  drawn = figures.curves.read_png(str(tmp_path / 'curve.png'))['description']
  assert drawn['title'].startswith('IMPALA, Atari breakout: 4k frames, ') and drawn['xlabel'] == 'environment frames'
  assert drawn['notes'][1] == f'test mode at 4k frames: 13.50 ± {se:.2f} (s.e.) over 4 whole games, median 10.5'
  expected = [('each training episode (one life)', 4, [1000, 4000], [0, 5]),
              ('mean of the last 2 training episodes', 3, [2000, 4000], [1, 3]),
              ('test mode: whole games, mean ± s.e.', 1, [4000, 4000], [13.5, 13.5])]
  (panel,) = drawn['panels']
  assert [(s['label'], s['points'], s['x'], s['y']) for s in panel['series']] == expected
  assert panel['hlines'] == [{'value': 3.0, 'label': 'target 3'}]
  assert drawn['xlim'][1] == 4000 * 1.01 and panel['ylim'][1] > 13.5 + se  # the marker and its bar are inside
  # --from_csv draws the same curve again from the CSV alone (and the test results given).
  again = subprocess.run([
      sys.executable,
      os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'curve', '--game', 'breakout', '--from_csv',
      str(tmp_path / 'curve.csv'), '--target', '3', '--paper', '640.43', '--test_results',
      str(logdir / 'test_results-4000.json'), '--output',
      str(tmp_path / 'again')
  ], capture_output=True, text=True, timeout=300)
  assert again.returncode == 0, again.stderr
  assert 'mean of the last 2 >= 3 at 4000 frames' in again.stdout
  redrawn = figures.curves.read_png(str(tmp_path / 'again.png'))['description']
  assert [(s['label'], s['points'], s['x'], s['y']) for s in redrawn['panels'][0]['series']
         ] == [('training episodes in the CSV (one life)',) + expected[0][1:]] + expected[1:]
  assert redrawn['panels'][0]['hlines'] == [{
      'value': 3.0,
      'label': 'target 3'
  }, {
      'value': 640.43,
      'label': 'paper, test mode: 640.43'
  }]
  bad = subprocess.run([
      sys.executable,
      os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'curve', '--from_csv',
      str(logdir / 'test_results-4000.json')
  ], capture_output=True, text=True, timeout=300)
  assert bad.returncode == 2 and 'not a curve CSV' in bad.stderr and 'Traceback' not in bad.stderr


def test_stop_interrupted_by_a_closed_terminal_leaves_the_learner_stopping(tmp_path):
  """`stop` sends the learner SIGINT and waits; SIGHUP to the script's process group (its terminal closed) ends the
  wait with status 129 and a line saying the learner goes on; the learner, in a session of its own as `start` starts
  it, is not reached. (The stand-in learner ignores SIGINT, as a learner busy writing its checkpoint seems to.)"""
  (tmp_path / 'pong.control').mkdir()
  learner = subprocess.Popen([
      sys.executable, '-c', 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)'
      '\nprint(1, flush=True)\ntime.sleep(120)'
  ], stdout=subprocess.PIPE, start_new_session=True)
  try:
    assert learner.stdout.readline().strip() == b'1'
    (tmp_path / 'pong.control' / 'train.pid').write_text(str(learner.pid))
    stop = subprocess.Popen([
        sys.executable,
        os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'stop', '--logdir',
        str(tmp_path / 'pong')
    ], stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(3)
    os.killpg(stop.pid, signal.SIGHUP)
    assert stop.wait(timeout=60) == 129
    assert stop.stderr.read() == (f'stop: SIGHUP while waiting; the learner (pid {learner.pid}) goes on writing its '
                                  'checkpoint and stops; `status` says when.\n')
    assert learner.poll() is None
  finally:
    learner.kill()
    learner.wait()


def test_compare_curves_reads_each_run_at_the_same_frames_and_draws_them(tmp_path):
  header = 'frames,training_hours,episode_return,mean_last_100\n'
  (tmp_path / 'a.csv').write_text(header + '1000,0.010,-21,-21.000\n3000,0.030,-19,-20.000\n5000,0.050,-17,-19.000\n')
  (tmp_path / 'b.csv').write_text(header + '2000,0.020,-20,-20.000\n6000,0.040,-10,-15.000\n')
  (tmp_path / 'bad.csv').write_text('frames,return\n1,2\n')
  script = os.path.join(REPO, 'scripts', 'compare_atari_curves.py')
  png = tmp_path / 'compare.png'
  result = subprocess.run([
      sys.executable, script,
      str(tmp_path / 'a.csv'),
      str(tmp_path / 'b.csv'), '--labels', 'A', 'B', '--at', '500,3000,6000', '--upto', '5000', '--output',
      str(png)
  ], capture_output=True, text=True, timeout=120, check=True)
  lines = result.stdout.splitlines()
  assert lines[:5] == [
      '| frames | A | B |', '|---:|---:|---:|', '| 500 | - | - |', '| 3,000 | -20.00 (0.03 h) | -20.00 (0.02 h) |',
      '| 6,000 | -19.00 (0.05 h) | -15.00 (0.04 h) |'
  ]
  sys.path.insert(0, REPO)
  from figures import curves  # pylint: disable=g-import-not-at-top
  series = curves.read_png(str(png))['description']['panels'][0]['series']
  assert [(s['label'], s['points'], s['x'], s['y']) for s in series] == [('A', 3, [1000., 5000.], [-21., -19.]),
                                                                         ('B', 1, [2000., 2000.], [-20., -20.])]
  bad = subprocess.run([sys.executable, script, str(tmp_path / 'bad.csv')], capture_output=True, text=True, timeout=60)
  assert bad.returncode == 2 and 'not a curve CSV' in bad.stderr and 'Traceback' not in bad.stderr


_SHALLOW_CHECKPOINT = """
import sys
import gin
from scalable_agent import checkpoints, experiment, settings  # experiment: the gin configurable
gin.add_config_file_search_path('configs')
gin.parse_config_files_and_bindings(['configs/impala_atari.gin'], [])
s = settings.Settings(level_name='atari/breakout', width=84, height=84)
agent, learner = settings.make_agent_and_learner(s, s.level_name)
learner.num_environment_frames.assign(int(sys.argv[2]))
checkpoints.make_checkpoint_manager(sys.argv[1], agent, learner.optimizer, learner.num_environment_frames).save()
"""


@pytest.mark.slow
def test_test_plays_whole_games_on_each_kept_checkpoint_once(tmp_path):
  """`test` on a run whose learner kept a checkpoint at 0 frames (the configured shallow agent, untrained): real
  Breakout games in test mode, the result beside the checkpoint, read by `curve`; a second `test` plays nothing."""
  import json  # pylint: disable=g-import-not-at-top

  import numpy as np  # pylint: disable=g-import-not-at-top
  logdir = tmp_path / 'breakout'
  subprocess.run([sys.executable, '-c', _SHALLOW_CHECKPOINT,
                  str(logdir / 'kept' / '0'), '0'], cwd=REPO, check=True, capture_output=True, timeout=300)
  script = [sys.executable, os.path.join(REPO, 'scripts', 'atari_learning_run.py')]
  result = subprocess.run(
      script +
      ['test', '--game', 'breakout', '--logdir', str(logdir), '--games', '3'], capture_output=True, text=True,
      timeout=600)
  assert result.returncode == 0, result.stderr
  with open(logdir / 'kept' / '0' / 'test_results-0.json') as f:
    data = json.load(f)
  returns = data['levels']['atari/breakout']['returns']
  assert data['test_num_episodes'] == 3 and len(returns) == 3 and all(r >= 0 for r in returns)
  se = np.std(returns, ddof=1) / np.sqrt(3)
  assert (f'test mode at 0 frames: {np.mean(returns):.2f} ± {se:.2f} (s.e.) over 3 whole games, median '
          f'{np.median(returns):g}') in result.stdout
  again = subprocess.run(
      script +
      ['test', '--game', 'breakout', '--logdir', str(logdir), '--games', '3'], capture_output=True, text=True,
      timeout=300)
  assert again.returncode == 0 and again.stdout.strip() == '0 frames: tested already (3 games).'
  missing = subprocess.run(
      script +
      ['test', '--game', 'breakout', '--logdir', str(logdir), '--frames', '5'], capture_output=True, text=True,
      timeout=300)
  assert missing.returncode == 2 and missing.stderr.strip() == (
      f'no kept checkpoint at 5 frames in {logdir}/kept (kept: 0).')
  none = subprocess.run(script + ['test', '--logdir', str(tmp_path / 'pong')], capture_output=True, text=True,
                        timeout=300)
  assert none.returncode == 2 and 'no kept checkpoint' in none.stderr and 'Traceback' not in none.stderr
