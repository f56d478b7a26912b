"""scripts/atari_learning_run.py's `status` (no TensorFlow: it reads the run's files only): running or stopped, the
latest checkpoint, and the mean of the last episodes the run printed to its log."""

import os
import subprocess
import sys

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def _status(logdir, *extra):
  result = subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'atari_learning_run.py'), 'status',
                           '--logdir', str(logdir), *extra], capture_output=True, text=True, timeout=60, check=True)
  return result.stdout.strip()


def test_status_of_a_stopped_run(tmp_path):
  logdir = tmp_path / 'pong'
  logdir.mkdir()
  for frames in (640, 12800, 3200):  # Sorted by number, not by name.
    (logdir / f'model.ckpt-{frames}.index').write_bytes(b'')
  control = tmp_path / 'pong.control'
  control.mkdir()
  returns = [-21., -20., -19., 3., 5.]
  (control / 'train.log').write_text(
      'Frames 640 / 200000000 (0.0%), 2516 frames/s\n' +
      ''.join(f'Level: atari/pong Episode return: {r:f}\n' for r in returns) + 'Episode return: garbled\n')
  (control / 'train.pid').write_text('999999999\n')  # No such process.
  assert _status(logdir) == (f'{logdir}: stopped; latest checkpoint at 12800 frames; mean return of the last 5 '
                             f'episodes {sum(returns) / 5:.2f}')
  assert _status(logdir, '--window', '2').endswith('mean return of the last 2 episodes 4.00')


def test_status_of_a_run_that_has_not_started(tmp_path):
  assert _status(tmp_path / 'new') == f'{tmp_path / "new"}: no run there yet (`start` begins one).'
  assert sorted(os.listdir(tmp_path)) == []  # Asking writes nothing (no `new.control/`).


def test_commands_on_a_run_that_does_not_exist_write_nothing(tmp_path):
  for command in ('pause', 'resume', 'stop', 'curve'):
    result = subprocess.run([sys.executable, os.path.join(REPO, 'scripts', 'atari_learning_run.py'), command,
                             '--logdir', str(tmp_path / 'new')], capture_output=True, text=True, timeout=120)
    assert result.returncode == 2, (command, result.stderr)
    assert 'Traceback' not in result.stderr and str(tmp_path / 'new') in result.stderr, (command, result.stderr)
  assert sorted(os.listdir(tmp_path)) == []


def test_status_of_a_started_run_with_no_checkpoint_yet(tmp_path):
  (tmp_path / 'pong.control').mkdir()
  assert _status(tmp_path / 'pong') == f'{tmp_path / "pong"}: stopped; latest checkpoint at none frames; no ' \
                                       'episode finished yet'
