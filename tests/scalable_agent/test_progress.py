"""The learner's console (scalable_agent/progress.py): finished episodes are counted in the progress line, with the
mean return of each level's last 100 episodes (hand-computed here); each episode's own line (the original's
'Level: ... Episode return: ...') only at debug level (`--verbosity=1`)."""

import glob
import logging
import os
import re

from absl import logging as absl_logging
import pytest
import tensorflow as tf

from scalable_agent import dmlab30
from scalable_agent import progress as progress_lib
from scalable_agent import settings as settings_lib

PONG = 'atari/pong'


def pong(*returns):
  """Finished episodes of Pong with these returns (800 agent steps each)."""
  return [(PONG, float(r), 800) for r in returns]


@pytest.fixture
def absl_verbosity():
  """Sets absl's verbosity (as `--verbosity` does) for one test; restores it after."""
  logger = absl_logging.get_absl_logger()
  before = logger.level  # (set_verbosity(get_verbosity()) would turn an unset level into WARNING for later tests)
  yield absl_logging.set_verbosity
  logger.setLevel(before)


def test_one_level_counts_episodes_and_means_its_last_100(tmp_path):
  summaries = progress_lib.Summaries(str(tmp_path), settings_lib.Settings(level_name=PONG))
  assert summaries.report() == 'episodes 0 (0 since the start)'
  summaries.episodes(pong(-21, -20, -19), 1000)
  assert summaries.report() == 'episodes 3 (3 since the start); return (last 3) atari/pong -20.00'
  assert summaries.report() == 'episodes 0 (3 since the start); return (last 3) atari/pong -20.00'
  # 97 more (1, ..., 97): the window is full, -21 -20 -19 + 1 + ... + 97 = -60 + 4753 = 4693 over 100.
  summaries.episodes(pong(*range(1, 51)), 2000)
  summaries.episodes(pong(*range(51, 98)), 3000)
  assert summaries.report() == 'episodes 97 (100 since the start); return (last 100) atari/pong 46.93'
  # 5 more (98, ..., 102) push out the 5 oldest (-21, -20, -19, 1, 2): the window is 3, ..., 102, mean 52.5.
  summaries.episodes(pong(98, 99, 100, 101, 102), 4000)
  assert summaries.report() == 'episodes 5 (105 since the start); return (last 100) atari/pong 52.50'
  summaries.close()


def test_dmlab30_summarises_its_levels_with_the_human_normalised_score(tmp_path):
  names = list(dmlab30.LEVEL_MAPPING)
  summaries = progress_lib.Summaries(str(tmp_path / 'two'), settings_lib.Settings(level_name='dmlab30'))
  # Two levels: the first 10 and 20 (mean 15); the second 1, ..., 101, of which the last 100 count (mean 51.5).
  summaries.episodes([(names[0], 10., 50), (names[1], 1., 50), (names[0], 20., 50)], 100)
  summaries.episodes([(names[1], float(r), 50) for r in range(2, 102)], 200)
  assert summaries.report() == ('episodes 103 (103 since the start); return (last 100 per level) mean over 2 of 30 '
                                'levels 33.25')
  summaries.close()

  # Every level: 10 at the random score (0 %), 10 at the human score (100 %), 10 at random + 3 (human - random)
  # (300 %): uncapped (0 + 1000 + 3000) / 30 = 133.3, capped at 100 (0 + 1000 + 1000) / 30 = 66.7.
  summaries = progress_lib.Summaries(str(tmp_path / 'all'), settings_lib.Settings(level_name='dmlab30'))
  returns = {}
  for i, name in enumerate(names):
    test_name = dmlab30.LEVEL_MAPPING[name]
    human, random = dmlab30.HUMAN_SCORES[test_name], dmlab30.RANDOM_SCORES[test_name]
    returns[name] = random + [0, 1, 3][i // 10] * (human - random)
  summaries.episodes([(name, r, 50) for name, r in returns.items()], 300)
  mean = sum(returns.values()) / 30
  assert summaries.report() == (f'episodes 30 (30 since the start); return (last 100 per level) mean over 30 of 30 '
                                f'levels {mean:.2f}, human-normalised 133.3 (capped at 100: 66.7)')
  summaries.close()


def test_episode_lines_only_at_debug_verbosity(tmp_path, caplog, absl_verbosity):
  caplog.set_level(logging.DEBUG)
  summaries = progress_lib.Summaries(str(tmp_path), settings_lib.Settings(level_name=PONG))
  absl_verbosity(absl_logging.INFO)  # no --verbosity
  summaries.episodes(pong(-21), 1000)
  assert not [r for r in caplog.records if 'Episode return' in r.getMessage()]
  absl_verbosity(absl_logging.DEBUG)  # --verbosity=1
  summaries.episodes(pong(-20, 3.5), 2000)
  assert [(r.levelno, r.getMessage()) for r in caplog.records if 'Episode return' in r.getMessage()
         ] == [(logging.DEBUG, 'Level: atari/pong Episode return: -20.000000'),
               (logging.DEBUG, 'Level: atari/pong Episode return: 3.500000')]
  assert summaries.report() == 'episodes 3 (3 since the start); return (last 3) atari/pong -12.50'
  summaries.close()


def _scalars(logdir):
  """[(tag, step, value)] of the TensorBoard files in `logdir`, in the order written."""
  return [(v.tag, e.step, float(tf.make_ndarray(v.tensor)))
          for f in sorted(glob.glob(os.path.join(logdir, 'events.*')))
          for e in tf.compat.v1.train.summary_iterator(f)
          for v in e.summary.value]


def test_each_episode_is_a_return_and_a_frames_summary_at_the_learner_frame_counter(tmp_path):
  settings = settings_lib.Settings(level_name=PONG, num_action_repeats=4)
  summaries = progress_lib.Summaries(str(tmp_path), settings)
  summaries.episodes(pong(-21, -20), 1000)
  summaries.episodes([], 2000)
  summaries.episodes([(PONG, 3.5, 10), ('other', 7., 2), (PONG, 4., 11)], 3000)
  summaries.close()
  frames = 800 * 4
  assert _scalars(str(tmp_path)) == [
      (PONG + '/episode_return', 1000, -21.),
      (PONG + '/episode_frames', 1000, frames),
      (PONG + '/episode_return', 1000, -20.),
      (PONG + '/episode_frames', 1000, frames),
      (PONG + '/episode_return', 3000, 3.5),
      (PONG + '/episode_frames', 3000, 40.),
      (PONG + '/episode_return', 3000, 4.),
      (PONG + '/episode_frames', 3000, 44.),
      ('other/episode_return', 3000, 7.),
      ('other/episode_frames', 3000, 8.),
  ]


def _resident_mb():
  with open('/proc/self/statm', encoding='ascii') as f:
    return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE') / 2**20


def test_episode_summaries_leave_no_memory_behind(tmp_path):
  """Regression: two eager tf.summary.scalar calls per episode kept ~0.9 KB per new value (TF 2.15, Python 3.11):
  30,000 episodes with distinct returns at distinct frame counters left ~50 MB; written in one graph call per batch
  they leave under 1 MB."""
  summaries = progress_lib.Summaries(str(tmp_path), settings_lib.Settings(level_name=PONG))
  returns = iter(range(10**6))
  for frames in range(50):  # warm-up: traces, the writer's buffers
    summaries.episodes(pong(*(next(returns) + 0.5 for _ in range(32))), frames)
  before = _resident_mb()
  for frames in range(50, 1000):
    summaries.episodes(pong(*(next(returns) + 0.5 for _ in range(32))), frames)
  summaries.flush()
  grown = _resident_mb() - before
  summaries.close()
  assert grown < 10, f'{grown:.1f} MB left by 30,400 episode summaries'


class _Learner:
  """What `LearnerProgress` reads of a learner: the frame counter and the non-finite variables (none)."""

  def __init__(self):
    self.num_environment_frames = tf.Variable(0, dtype=tf.int64)

  def nonfinite_variables(self):
    return []


class _Manager:
  latest_checkpoint = 'model.ckpt-0'


def test_the_progress_line_carries_the_episodes(tmp_path, caplog, monkeypatch, absl_verbosity):
  monkeypatch.setattr(progress_lib.checkpoints, 'restore_latest', lambda manager: None)
  monkeypatch.setattr(progress_lib.checkpoints, 'save', lambda manager: 'model.ckpt-0')
  monkeypatch.setattr(progress_lib, 'PROGRESS_INTERVAL_S', 0)  # a line after every step
  caplog.set_level(logging.DEBUG)
  absl_verbosity(absl_logging.INFO)  # no --verbosity
  settings = settings_lib.Settings(level_name=PONG, total_environment_frames=200_000_000)
  progress = progress_lib.LearnerProgress(str(tmp_path), settings, _Learner(), _Manager())
  assert progress.start() == 0
  metrics = {'total_loss': 1.5, 'learning_rate': 0.0006}
  progress.after_step({**metrics, 'num_environment_frames': 1000}, pong(-21, -20, -19))
  progress.after_step({**metrics, 'num_environment_frames': 2000}, [])
  lines = [r.getMessage() for r in caplog.records if r.getMessage().startswith('Frames ')]
  rest = r'\(0\.0%\), \d+ frames/s \(\d+ since the start\), total_loss 1\.5, learning_rate 0\.0006, ETA \S+; '
  assert len(lines) == 2, lines
  assert re.fullmatch(
      r'Frames 1000 / 200000000 ' + rest + r'episodes 3 \(3 since the start\); return \(last 3\) '
      r'atari/pong -20\.00\.', lines[0]), lines[0]
  assert re.fullmatch(
      r'Frames 2000 / 200000000 ' + rest + r'episodes 0 \(3 since the start\); return \(last 3\) '
      r'atari/pong -20\.00\.', lines[1]), lines[1]
  assert not [r for r in caplog.records if 'Episode return' in r.getMessage()]
  progress.close()


def test_policy_lag_counts_learner_updates_between_acting_and_training():
  # 4 frames per update (batch 2 x unroll 2 x 1 repeat). The update that starts at 40 frames takes unrolls acted with
  # the weights of 40 (lag 0), 32 (2 updates old) and 12 (7); -1 (acted before any weights came) is not a lag; an
  # unroll acted with weights newer than the learner (a learner restarted from an older checkpoint) counts as 0.
  lag = progress_lib.PolicyLag(frames_per_update=4)
  assert lag.report() == '' and lag.summaries() == {}
  lag.add(40, [40, 32, 12, -1])
  lag.add(44, [52, 36])  # lags 0 (clipped from -2) and 2
  assert lag.unknown == 1
  assert dict(lag.counts) == {0: 2, 2: 2, 7: 1}
  # Lags 0, 0, 2, 2, 7: mean 11 / 5 = 2.2; nearest-rank p50 = the 3rd smallest = 2, p99 = the 5th = 7.
  assert lag.report() == 'policy lag (updates) mean 2.20, p50 2, p99 7 (since the start: 2.20, 2, 7 over 5 unrolls)'
  assert lag.summaries() == {'policy_lag/mean': 2.2, 'policy_lag/p50': 2, 'policy_lag/p99': 7}
  # The next report covers the new unrolls only; 'since the start' all of them: 0, 0, 2, 2, 7, 1, 1, 1 -> 14 / 8.
  lag.add(48, [44, 44, 44])
  assert lag.report() == ('policy lag (updates) mean 1.00, p50 1, p99 1 (since the start: 1.75, 1, 7 over 8 '
                          'unrolls)')
  assert lag.report() == 'policy lag (updates) (since the start: 1.75, 1, 7 over 8 unrolls)'
