"""The IMPALA learner's bookkeeping around its steps (deepmind/scalable_agent experiment.py `train`): restore or the
first checkpoint, episode and metric summaries, progress lines (frames/s, ETA, episodes and their mean returns; each
finished episode's own line at debug level, `--verbosity=1`), periodic checkpoints, the checkpoint at the end or on an
interrupt, and the stop request a signal handler makes. Shared by single-machine training (`experiment.train`) and
the multi-machine learner job (`distributed.run_learner`).
"""

import collections
import time
from typing import Any, Deque, Dict, List, Tuple

from absl import logging
import gin
import numpy as np
import tensorflow as tf

from rundir import checkpoints as run_checkpoints
from rundir import formatting
from scalable_agent import checkpoints
from scalable_agent import dmlab30
from scalable_agent import learner as learner_lib
from scalable_agent import settings as settings_lib

SUMMARY_INTERVAL_S = 30  # The original's save_summaries_secs (learner metrics; episode summaries are written each).
PROGRESS_INTERVAL_S = 30  # Progress lines (frames, frames/s, ETA, episodes and their mean returns).
RETURN_WINDOW = 100  # The progress line's mean return per level is over this many of the level's latest episodes.
MAX_INLINE_LEVELS = 3  # With more training levels (dmlab30: 30) the progress line summarises them (`Summaries.report`).

# A stop asked by a signal (`request_stop`, called by the launcher's SIGINT / SIGTERM handler): the learner stops
# after its current step and writes its checkpoint. 'saves': whether this process has a checkpoint to write (not an
# actor job).
_stop_request = {'signal': None, 'saves': True}


def request_stop(signal_name='SIGTERM'):
  """Asks the running training to stop after the current learner step and write its checkpoint. Returns False, and
  asks nothing, in an actor job (`distributed.run_actor`): it has nothing to save and can stop at once. Safe in a
  signal handler."""
  if not _stop_request['saves']:
    return False
  _stop_request['signal'] = signal_name
  return True


def stop_requested():
  """The name of the signal that asked the training to stop, or None."""
  return _stop_request['signal']


def clear_stop_request(saves=True):
  """Forgets a stop request (when the training it stopped returns); `saves`: see `request_stop`."""
  _stop_request.update(signal=None, saves=saves)


@gin.configurable('episode_success', module='scalable_agent')
def success_threshold(above=None):
  """The return above which an episode counts as a success (gin `episode_success.above`), or None: no success
  rates. BabyAI's levels reward only success (1 - 0.9 x steps / max_steps > 0), so configs/impala_babyai.gin sets
  0."""
  return None if above is None else float(above)


def success_rate(returns, above):
  """The fraction of `returns` above `above` (float in [0, 1])."""
  return float(np.mean(np.asarray(returns, np.float64) > above))


class Summaries:
  """Episode logging and TensorBoard summaries of the learner (deepmind/scalable_agent experiment.py `train`), and
  the episode part of the progress line (`report`): the original logged a line per finished episode
  (`tf.logging.info`); here those lines are at debug level (`--verbosity=1`) and the progress line counts the
  episodes and gives the mean return of each level's latest `RETURN_WINDOW`."""

  def __init__(self, logdir, settings):
    self._writer = tf.summary.create_file_writer(logdir)
    self._settings = settings
    self._dmlab30 = settings.level_name == 'dmlab30'
    self._level_returns: Dict[str, List[float]] = {
        name: [] for name in settings_lib.training_levels(settings.level_name)
    }
    # Per training level, the returns of its latest RETURN_WINDOW episodes (oldest first); episodes counted since
    # this object was made and since the last `report`.
    self._recent_returns: Dict[str, Deque[float]] = {
        name: collections.deque(maxlen=RETURN_WINDOW) for name in self._level_returns
    }
    self.num_episodes = self._episodes_since_report = 0
    self._success_above = success_threshold()
    self._episode_writers: Dict[str, Any] = {}  # level name -> tf.function (`_episode_writer`)

  def episodes(self, episodes, num_environment_frames):
    """Books the finished episodes: list of (level name, return, agent steps). Logs each at debug level (the
    original's line); summaries `<level>/episode_return` and `<level>/episode_frames` at the frame counter (int,
    environment frames); for dmlab30, once every level has a return, `dmlab30/training_no_cap` and
    `dmlab30/training_cap_100`."""
    by_level: Dict[str, List[Tuple[float, int]]] = {}
    for level_name, episode_return, episode_step in episodes:
      logging.debug('Level: %s Episode return: %f', level_name, episode_return)
      by_level.setdefault(level_name, []).append((episode_return, episode_step))
      if self._dmlab30:
        self._level_returns[level_name].append(episode_return)
      self._recent_returns.setdefault(level_name, collections.deque(maxlen=RETURN_WINDOW)).append(float(episode_return))
    step = np.int64(num_environment_frames)
    for level_name, level_episodes in by_level.items():
      returns, steps = zip(*level_episodes)
      self._episode_writer(level_name)(np.array(returns, np.float32),
                                       np.array(steps, np.int64) * self._settings.num_action_repeats, step)
    self.num_episodes += len(episodes)
    self._episodes_since_report += len(episodes)
    with self._writer.as_default():
      if self._dmlab30 and min(map(len, self._level_returns.values())) >= 1:
        no_cap = dmlab30.compute_human_normalized_score(self._level_returns, per_level_cap=None)
        cap_100 = dmlab30.compute_human_normalized_score(self._level_returns, per_level_cap=100)
        tf.summary.scalar('dmlab30/training_no_cap', no_cap, step=num_environment_frames)
        tf.summary.scalar('dmlab30/training_cap_100', cap_100, step=num_environment_frames)
        self._level_returns = {name: [] for name in self._level_returns}

  def _episode_writer(self, level_name):
    """The `tf.function` (returns float32 [n], frames int64 [n], step int64 []) that writes a level's episodes as
    `<level>/episode_return` and `<level>/episode_frames` at `step`, traced once per level.

    One graph call per level and batch instead of two eager `tf.summary.scalar` calls per episode: each eager call
    converts its new Python values to tensors, which TensorFlow 2.15 on Python 3.11 never frees (about 0.9 KB per
    new value; a 2-actor learner on short episodes grew by 14 MB a minute), and costs ~0.2 ms per scalar."""
    if level_name not in self._episode_writers:
      writer = self._writer
      signature = [tf.TensorSpec([None], tf.float32), tf.TensorSpec([None], tf.int64), tf.TensorSpec([], tf.int64)]

      @tf.function(input_signature=signature)
      def write(returns, frames, step):
        with writer.as_default():
          for i in tf.range(tf.size(returns)):
            # At the graph's top name scope: the tags stay '<level>/...' (not 'while/<level>/...').
            with tf.compat.v1.get_default_graph().name_scope(None):
              tf.summary.scalar(level_name + '/episode_return', returns[i], step=step)
              tf.summary.scalar(level_name + '/episode_frames', frames[i], step=step)
        return tf.size(returns)

      self._episode_writers[level_name] = write
    return self._episode_writers[level_name]

  def report(self):
    """The episode part of the progress line, and the count since the last call starts again at 0. Examples:

      'episodes 12 (845 since the start); return (last 100) atari/pong -14.30'  (one level: its mean return over
          its latest RETURN_WINDOW episodes, '(last 37)' while it has fewer)
      'episodes 0 (0 since the start)'  (no episode finished yet)
      'episodes 41 (2310 since the start); return (last 100 per level) mean over 30 of 30 levels 18.52,
          human-normalised 24.1 (capped at 100: 22.8)'  (more than MAX_INLINE_LEVELS levels: the mean of the levels'
          means; for dmlab30, once every level has an episode, the human-normalised score in percent of those means,
          uncapped and capped; TensorBoard keeps each level's returns)
      'episodes 30 (900 since the start); return (last 100) gymnasium/BabyAI-GoToLocal-v0 0.61 (success 82%)'
          (with a success threshold, `success_threshold`: the share of those episodes above it; over more than
          MAX_INLINE_LEVELS levels: ', success 82%', the mean of the levels' shares)

    'since the start': since this process started (a resumed run counts again from 0)."""
    text = f'episodes {self._episodes_since_report} ({self.num_episodes} since the start)'
    self._episodes_since_report = 0
    windows = self._windows()
    if not windows:
      return text
    if len(self._recent_returns) <= MAX_INLINE_LEVELS:
      parts = []
      for name, returns in windows.items():
        parts.append(f'(last {len(returns)}) {name} {np.mean(returns):.2f}')
        if self._success_above is not None:
          parts[-1] += f' (success {100 * success_rate(returns, self._success_above):.0f}%)'
      return text + '; return ' + ', '.join(parts)
    means = self.level_means(windows)
    text += (f'; return (last {RETURN_WINDOW} per level) mean over {len(windows)} of {len(self._recent_returns)} '
             f'levels {means["levels/mean_return"]:.2f}')
    if self._success_above is not None:
      text += f', success {100 * means["levels/success_rate"]:.0f}%'
    if self._dmlab30 and len(windows) == len(self._recent_returns):
      no_cap = dmlab30.compute_human_normalized_score(windows, per_level_cap=None)
      cap_100 = dmlab30.compute_human_normalized_score(windows, per_level_cap=100)
      text += f', human-normalised {no_cap:.1f} (capped at 100: {cap_100:.1f})'
    return text

  def _windows(self):
    """{level: its latest returns (up to RETURN_WINDOW)} of the levels with an episode."""
    return {name: returns for name, returns in self._recent_returns.items() if returns}

  def level_means(self, windows=None):
    """The scores of the levels' latest returns (`RETURN_WINDOW` each): 'levels/mean_return' (the mean over the
    levels of their mean returns) and, with a success threshold, '<level>/success_rate' per level and
    'levels/success_rate' (the mean of the levels' success rates, each in [0, 1]); {} before any episode."""
    windows = self._windows() if windows is None else windows
    if not windows:
      return {}
    means = {'levels/mean_return': float(np.mean([np.mean(returns) for returns in windows.values()]))}
    if self._success_above is not None:
      rates = {name + '/success_rate': success_rate(returns, self._success_above) for name, returns in windows.items()}
      means.update(rates)
      means['levels/success_rate'] = float(np.mean(list(rates.values())))
    return means

  def metrics(self, metrics, num_environment_frames):
    """Scalar summaries of the learner's metrics (learning_rate, total_loss, ...) at the frame counter, with the
    levels' scores (`level_means`)."""
    with self._writer.as_default():
      for name, value in {**metrics, **self.level_means()}.items():
        if name != 'num_environment_frames':
          tf.summary.scalar(name, value, step=num_environment_frames)

  def flush(self):
    self._writer.flush()

  def close(self):
    self._writer.close()


class PolicyLag:
  """The policy lag of the unrolls the learner trains on: learner updates between the weights an unroll was acted
  with and the update that consumes it (0: acted with the weights this update starts from). IMPALA's Section 3 /
  5.1 call it the lag between the actors' policy and the learner's. An unroll acted with the weights of
  `policy_frames` (their frame counter), consumed by the update that starts at `frames`, lags by
  (frames - policy_frames) / frames_per_update, frames_per_update = batch_size x unroll_length x num_action_repeats.

  `report()` gives the progress line's part (the unrolls since the last report, and since the start); `summaries()`
  the TensorBoard scalars policy_lag/mean, p50, p99 of the unrolls since the last call.
  """

  def __init__(self, frames_per_update):
    self._frames_per_update = frames_per_update
    self._recent: List[np.ndarray] = []
    self._recent_summary: List[np.ndarray] = []
    self.counts: collections.Counter = collections.Counter()  # {lag: unrolls} since the start (of this process)
    self.unknown = 0  # unrolls acted before any weights came (policy_frames < 0)

  def add(self, frames, policy_frames):
    """Books a batch: `frames` the learner's frame counter before the update (int), `policy_frames` int [B]."""
    policy_frames = np.asarray(policy_frames, np.int64)
    known = policy_frames[policy_frames >= 0]
    self.unknown += policy_frames.size - known.size
    # A learner restarted from an older checkpoint than the weights an actor still holds: lag 0, not negative.
    lags = np.maximum(np.rint((frames - known) / self._frames_per_update), 0).astype(np.int64)
    self._recent.append(lags)
    self._recent_summary.append(lags)
    self.counts.update(lags.tolist())

  @staticmethod
  def statistics(lags):
    """(mean, p50, p99) of an int array of lags (nearest-rank percentiles: values that occurred)."""
    lags = np.sort(np.asarray(lags))
    if not lags.size:
      return None
    rank = lambda q: lags[max(int(np.ceil(q * lags.size)) - 1, 0)]
    return float(lags.mean()), int(rank(.5)), int(rank(.99))

  def total_statistics(self):
    """(mean, p50, p99, unrolls) since the start, or None."""
    if not self.counts:
      return None
    values = np.array(sorted(self.counts))
    weights = np.array([self.counts[v] for v in values])
    cumulative = np.cumsum(weights)
    rank = lambda q: int(values[np.searchsorted(cumulative, max(np.ceil(q * cumulative[-1]), 1))])
    return float(np.dot(values, weights) / cumulative[-1]), rank(.5), rank(.99), int(cumulative[-1])

  def report(self):
    """'policy lag (updates) mean 1.52, p50 1, p99 4 (since the start: 1.49, 1, 4 over 5120 unrolls)', or ''."""
    recent = self.statistics(np.concatenate(self._recent)) if self._recent else None
    self._recent = []
    total = self.total_statistics()
    if total is None:
      return ''
    text = 'policy lag (updates)'
    if recent is not None:
      text += f' mean {recent[0]:.2f}, p50 {recent[1]}, p99 {recent[2]}'
    return text + f' (since the start: {total[0]:.2f}, {total[1]}, {total[2]} over {total[3]} unrolls)'

  def summaries(self):
    """{'policy_lag/mean': .., 'policy_lag/p50': .., 'policy_lag/p99': ..} of the unrolls since the last call."""
    stats = self.statistics(np.concatenate(self._recent_summary)) if self._recent_summary else None
    self._recent_summary = []
    if stats is None:
      return {}
    return dict(zip(('policy_lag/mean', 'policy_lag/p50', 'policy_lag/p99'), stats))


class LearnerProgress:
  """The learner's bookkeeping around its steps (module docstring).

  Usage: `frames = progress.start()`; return if `progress.done`; then per learner step
  `frames = progress.after_step(metrics, episodes)` (it stops the run on non-finite values, before any checkpoint
  holds them); finally `progress.finish()`, or `progress.interrupted(reason)` after a stop request (`request_stop`)
  or in an `except KeyboardInterrupt`, and `progress.close()`.
  """

  def __init__(self, logdir, settings, learner, manager, checkpoint_interval_s=None):
    self._settings = settings
    self._learner = learner
    self._manager = manager
    self._checkpoint_interval_s = (settings.checkpoint_interval_s
                                   if checkpoint_interval_s is None else checkpoint_interval_s)
    self._logdir = logdir
    self.summaries: Any = None
    self.frames = self.start_frames = 0
    self._steps = 0
    self.policy_lag = PolicyLag(settings.batch_size * settings.unroll_length * settings.num_action_repeats)

  @property
  def done(self):
    """Whether total_environment_frames is reached."""
    return self.frames >= self._settings.total_environment_frames

  def start(self):
    """Restores the latest checkpoint (or writes the first one, as the original did at step 0), opens the
    summaries; returns the frame counter (int)."""
    restored = checkpoints.restore_latest(self._manager)
    self.frames = self.start_frames = int(self._learner.num_environment_frames.numpy())
    if restored:
      logging.info('Restored %s: resuming at %d environment frames.', restored, self.frames)
    else:
      checkpoints.save(self._manager)
    self._checkpoint_frames = self.frames  # the frame counter of the newest checkpoint
    every = self._settings.checkpoint_keep_every_frames
    kept = checkpoints.kept_checkpoints(self._logdir) if every else []
    # The multiple of checkpoint_keep_every_frames whose checkpoint was kept last (-1: none yet).
    self._kept_multiple = max((frames // every for frames, _ in kept), default=-1)
    if not restored:
      self._maybe_keep(self._manager.latest_checkpoint)
    if self.done:
      logging.info('Already trained for %d >= total_environment_frames = %d frames; nothing to do.', self.frames,
                   self._settings.total_environment_frames)
      return self.frames
    self.summaries = Summaries(self._logdir, self._settings)
    self._start_time = self._last_progress_time = self._last_summary_time = time.monotonic()
    self._last_checkpoint_time = self._start_time
    self._last_progress_frames = self.frames
    return self.frames

  def after_step(self, metrics, episodes):
    """Books one learner step: metrics (dict of NumPy values with 'num_environment_frames'), the episodes that
    finished in its batch (`actor.finished_episodes`). Returns the frame counter (int)."""
    self._steps += 1
    settings = self._settings
    self._check_finite(metrics)
    self.frames = frames = int(metrics['num_environment_frames'])
    self.summaries.episodes(episodes, frames)
    now = time.monotonic()
    if now - self._last_summary_time >= SUMMARY_INTERVAL_S or self._steps == 1:
      self.summaries.metrics({**metrics, **self.policy_lag.summaries()}, frames)
      self._last_summary_time = now
    if now - self._last_progress_time >= PROGRESS_INTERVAL_S:
      rate = (frames - self._last_progress_frames) / (now - self._last_progress_time)
      logging.info(
          'Frames %d / %d (%.1f%%), %.0f frames/s (%.0f since the start), total_loss %.4g, '
          'learning_rate %.3g, ETA %s; %s.', frames, settings.total_environment_frames,
          100. * frames / settings.total_environment_frames, rate,
          (frames - self.start_frames) / (now - self._start_time), metrics['total_loss'], metrics['learning_rate'],
          formatting.format_duration((settings.total_environment_frames - frames) / max(rate, 1e-9)),
          '; '.join(part for part in (self.summaries.report(), self.policy_lag.report()) if part))
      self._last_progress_time, self._last_progress_frames = now, frames
      self.summaries.flush()
    if now - self._last_checkpoint_time >= self._checkpoint_interval_s:
      logging.info('Checkpoint: %s', self._save())
      self._last_checkpoint_time = now
    self._last_metrics = metrics
    return frames

  def _save(self):
    """A checkpoint at the current frame counter, unless the newest one has it (never rewritten)."""
    frames = int(self._learner.num_environment_frames.numpy())
    if frames == self._checkpoint_frames:
      return self._manager.latest_checkpoint
    path = checkpoints.save(self._manager)
    self._checkpoint_frames = frames
    self._maybe_keep(path)
    return path

  def _maybe_keep(self, path):
    """Keeps the checkpoint `path` (`checkpoints.keep_checkpoint`) if it is the first at or past a multiple of
    checkpoint_keep_every_frames that has none yet."""
    every = self._settings.checkpoint_keep_every_frames
    if not every or path is None:
      return
    multiple = run_checkpoints.step_of(path) // every
    if multiple > self._kept_multiple:
      logging.info('Kept %s (a checkpoint every %d frames).', checkpoints.keep_checkpoint(path, self._logdir), every)
      self._kept_multiple = multiple

  def _check_finite(self, metrics):
    """Raises `learner.NonFiniteError` naming the step and the tensors if the step's losses, or the variables and
    RMSProp slots after its update (a non-finite gradient makes them so), are not all finite."""
    losses = [
        f'{name} = {float(metrics[name])}' for name in learner_lib.LOSS_NAMES
        if name in metrics and not np.isfinite(metrics[name])
    ]
    tensors = self._learner.nonfinite_variables()
    if not losses and not tensors:
      return
    parts = ([', '.join(losses)] if losses else []) + ([
        f'non-finite after its update (a non-finite gradient, or an update that overflowed): '
        f'{", ".join(tensors[:6])}' + (f' and {len(tensors) - 6} more' if len(tensors) > 6 else '')
    ] if tensors else [])
    raise learner_lib.NonFiniteError(
        f'learner step {self._steps} of this run (from {self.frames} environment frames) produced non-finite '
        f'values: {"; ".join(parts)}. Training stopped without writing them: the last checkpoint, '
        f'{self._manager.latest_checkpoint}, holds finite values. Lower experiment.learning_rate or check the rewards '
        '(experiment.reward_clipping) and the environment.')

  def finish(self):
    """The last summaries and checkpoint, and a log line with the run's speed."""
    if self._steps:
      self.summaries.metrics(self._last_metrics, self.frames)
    elapsed = time.monotonic() - self._start_time
    logging.info('Done: %d environment frames (%d in this run, %.0f frames/s). Checkpoint: %s', self.frames,
                 self.frames - self.start_frames, (self.frames - self.start_frames) / max(elapsed, 1e-9), self._save())

  def interrupted(self, reason='Ctrl-C'):
    """The checkpoint on a stop request or Ctrl-C. Logs the counter, not `frames`: a Ctrl-C may come inside a step,
    after the update (whose values `after_step` has then not checked)."""
    frames = int(self._learner.num_environment_frames.numpy())
    if frames != self.frames and self._learner.nonfinite_variables():
      logging.error(
          'Interrupted at %d environment frames inside a step whose update is non-finite: no checkpoint '
          'written; the last is %s.', frames, self._manager.latest_checkpoint)
      return
    path = self._save()
    logging.warning('Interrupted at %d environment frames of %d (%s). Checkpoint: %s', frames,
                    self._settings.total_environment_frames, reason, path)

  def close(self):
    if self.summaries is not None:
      self.summaries.close()
