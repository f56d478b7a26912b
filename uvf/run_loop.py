"""The run loop of HIRO training: the Python work between the compiled calls of the training step.

Job: `TrainingLoop` restores or initialises the run, calls the compiled step (`uvf.train_step.HiroTrainer.run_steps`)
and between calls writes summaries, logs progress (a line with steps, rate and ETA, and the progress file
`<train_dir>/progress.json`, `rundir.progress`), saves the policy and full checkpoints, and honours stop requests
(files: `uvf.train`'s module docstring). Built by `uvf.train.train_uvf` from `train_settings.LoopSettings`.
"""

import os
import time
from typing import Any

from absl import logging
import gin
import tensorflow as tf

from rundir import checkpoints as run_checkpoints
from rundir import errors
from rundir import formatting
from rundir import progress
from rundir import storage
from uvf import checkpoints
from uvf import collect


def restore_low_level(trainer, load_path):
  """The original's `load_path`: the low-level actor and critics (and with hiro_repr the representation, as the
  original's `lowlevel_saver`) from a checkpoint holding their TF1 names (an original TF1 checkpoint, or a policy
  checkpoint of this port)."""
  low_level = dict(trainer.uvf_agent.variables_by_tf1_name(), **trainer.state_preprocess.variables_by_tf1_name())
  low_level = {name: variable for name, variable in low_level.items() if '/target_' not in name}
  path = checkpoints.restore_policy(load_path, low_level, subset=True)
  logging.info('Restored the %d low-level variables from %s', len(low_level), path)


# A stop asked by a signal (`request_stop`, called by the launcher's SIGINT / SIGTERM handler): the loop stops at the
# next episode end, after writing a full checkpoint.
_stop_request = {'signal': None}


def request_stop(signal_name='SIGTERM'):
  """Asks the running `train_uvf` to stop at the next episode end after writing its full checkpoint (there the
  environment's state is exact, so the resumed run is exactly the uninterrupted one). Returns True (the request is
  taken). Safe in a signal handler."""
  _stop_request['signal'] = signal_name
  return True


FULL_CHECKPOINTS_KEPT = 2  # newest full checkpoints kept in train_dir


def _variable_bytes(checkpoint, optimizers=()):
  """Bytes of the variables a `tf.train.Checkpoint` holds (TF1 optimizers keep their slots apart: pass them)."""
  seen = {}
  for trackable in tf.train.TrackableView(checkpoint).descendants():
    if isinstance(trackable, tf.Variable):
      seen[id(trackable)] = trackable
  for optimizer in optimizers:
    for variable in optimizer.variables():
      seen[id(variable)] = variable
  return sum(v.shape.num_elements() * (v.dtype.size if v.dtype != tf.string else 1) for v in seen.values())


class TrainingLoop(object):
  """The Python side of training: restore or initialise, call the compiled loop, summaries, logs, checkpoints.

  Args:
    trainer: the run's `uvf.train_step.HiroTrainer`.
    train_dir: the run directory.
    settings: `train_settings.LoopSettings`.
    should_stop_early: None, or a callable returning True to stop (checked between compiled calls; a full
      checkpoint is written at the stop).
  """

  def __init__(self, trainer, train_dir, *, settings, should_stop_early=None):
    self.trainer = trainer
    self.train_dir = train_dir
    self.settings = settings
    self.should_stop_early = should_stop_early
    self.checkpoint = trainer.full_checkpoint()
    self.policy_dir = os.path.join(train_dir, settings.policy_save_dir)
    self.manager = self._full_manager()
    self.policy_checkpoint = tf.train.Checkpoint(variables=trainer.policy_variables_by_tf1_name())
    self.policy_manager = tf.train.CheckpointManager(self.policy_checkpoint, self.policy_dir,
                                                     max_to_keep=settings.max_policies_to_save,
                                                     checkpoint_name=run_checkpoints.CHECKPOINT_NAME)
    self.writer: Any = None  # created by `run`, after the checks of the run directory
    self.checkpoint_bytes = None  # of one full checkpoint (`check_free_space`)
    self.last_saved_step = None
    self.timings = {'initial_collect': 0.0, 'train': 0.0}

  def _full_manager(self):
    return tf.train.CheckpointManager(self.checkpoint, self.train_dir, max_to_keep=FULL_CHECKPOINTS_KEPT,
                                      checkpoint_name=run_checkpoints.CHECKPOINT_NAME)

  # Checkpoints.

  def restore_or_initialize(self):
    """Restores the newest readable full checkpoint (True), or initialises a fresh run (False): targets <- online
    networks, then the low level from `load_path` if given. `checkpoints.find_resumable` chooses the checkpoint
    (the directory is scanned; a corrupt newer one is set aside) or refuses a directory it cannot resume."""
    latest = checkpoints.find_resumable(self.train_dir, self.policy_dir)
    self.manager = self._full_manager()  # find_resumable may have rebuilt the checkpoint index file
    if latest:
      try:
        self.checkpoint.restore(latest).assert_existing_objects_matched()
      except (AssertionError, ValueError) as e:
        raise errors.RunDirectoryError(
            f'{latest} does not match this configuration\'s training state ({str(e).strip().splitlines()[0]}): it '
            'was written by another configuration or version of this code. Nothing was changed; use another '
            '--train_dir.') from None
      if not self.trainer.collector.restore_env_state():
        raise ValueError(f'{latest} holds no environment state.')
      self.last_saved_step = int(self.trainer.global_step.numpy())
      self.checkpoint_bytes = run_checkpoints.checkpoint_bytes(latest)
      print(f'Resumed from {latest} at global step {self.last_saved_step}.', flush=True)
      return True
    self.trainer.uvf_agent.copy_to_targets()
    self.trainer.meta_agent.copy_to_targets()
    if self.settings.load_path:
      restore_low_level(self.trainer, self.settings.load_path)
    return False

  def full_checkpoint_bytes(self):
    """Bytes of one full checkpoint: the newest one's size when there is one, else the sum of the sizes of the
    variables it holds (replay buffers, networks, optimizer slots, ...), plus 1%."""
    if self.checkpoint_bytes:
      return self.checkpoint_bytes
    return int(1.01 * _variable_bytes(
        self.checkpoint,
        list(self.trainer.optimizers.values()) +
        ([self.trainer.repr_update.optimizer] if self.trainer.repr_update is not None else [])))

  def check_free_space(self):
    """Says what the checkpoints of the run need, and stops if the disk cannot hold its full checkpoints.

    `FULL_CHECKPOINTS_KEPT` (2) full checkpoints are kept, and a save writes the next one before the oldest is
    deleted: up to 3 exist during a save. Policy checkpoints are all kept (max_policies_to_save None).

    Raises:
      errors.RunDirectoryError: the free space is less than the full checkpoints still need.
    """
    full = self.full_checkpoint_bytes()
    existing = len(run_checkpoints.list_checkpoints(self.train_dir))
    full_needed = max(1, FULL_CHECKPOINTS_KEPT + 1 - existing) * full
    policy = _variable_bytes(self.policy_checkpoint)
    step = int(self.trainer.global_step.numpy())
    every = self.settings.save_policy_every_n_steps
    policies = (self.settings.total_steps // every - step // every) if every else 0
    if self.settings.max_policies_to_save:
      policies = min(policies, self.settings.max_policies_to_save + 1)
    free = storage.free_bytes(self.train_dir)
    print(
        f'Checkpoints: full checkpoints {formatting.format_bytes(full)} each ({FULL_CHECKPOINTS_KEPT} kept, '
        f'{FULL_CHECKPOINTS_KEPT + 1} during a save: {formatting.format_bytes(full_needed)} more needed), policy '
        f'checkpoints {formatting.format_bytes(policy)} each ({policies} more to the end: '
        f'{formatting.format_bytes(policies * policy)}); {formatting.format_bytes(free)} free in '
        f'{self.train_dir}.', flush=True)
    if free is None:
      return
    if free < full_needed:
      raise errors.RunDirectoryError(
          f'not enough disk space in {self.train_dir} for the full checkpoints of this run: they need '
          f'{formatting.format_bytes(full_needed)} more ({formatting.format_bytes(full)} each, '
          f'{FULL_CHECKPOINTS_KEPT} kept and one more during a save), {formatting.format_bytes(free)} is free. '
          'Free some space, or use another --train_dir (smaller replay buffers, CircularBuffer.buffer_size, make '
          'smaller checkpoints). Nothing was written.')
    if free < full_needed + policies * policy:
      logging.warning('The policy checkpoints to the end of the run need %s more than the %s free in %s.',
                      formatting.format_bytes(full_needed + policies * policy - free), formatting.format_bytes(free),
                      self.train_dir)

  def save(self):
    """Writes a full checkpoint `model.ckpt-<global step>` (not again for the step of the last one).

    Raises:
      errors.RunDirectoryError: the save failed (disk full, permission): what it left is removed and the
        previous checkpoint is intact.
    """
    step = int(self.trainer.global_step.numpy())
    if step == self.last_saved_step:
      return None
    self.trainer.collector.save_env_state()
    try:
      path = self.manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as e:
      run_checkpoints.remove_partial_saves(self.train_dir)
      raise storage.storage_error(e, self.train_dir, f'the full checkpoint model.ckpt-{step}',
                                  needed=self.full_checkpoint_bytes(), intact=self.manager.latest_checkpoint) from None
    self.last_saved_step = step
    self.checkpoint_bytes = run_checkpoints.checkpoint_bytes(path)
    logging.info('Saved the full checkpoint %s', path)
    return path

  def save_policy(self):
    """Writes the policy checkpoint `policy/model.ckpt-<global step>`, unless one of that step exists: an
    interrupted run wrote it after its last full checkpoint, and the resumed run, exact, would write the same.

    Raises:
      errors.RunDirectoryError: the save failed (disk full, permission).
    """
    step = int(self.trainer.global_step.numpy())
    existing = os.path.join(self.policy_dir, f'{run_checkpoints.CHECKPOINT_NAME}-{step}')
    if tf.io.gfile.exists(existing + '.index'):
      logging.info('The policy checkpoint %s exists (written before the run was interrupted); kept.', existing)
      return existing
    try:
      path = self.policy_manager.save(checkpoint_number=step)
    except (tf.errors.OpError, OSError) as e:
      run_checkpoints.remove_partial_saves(self.policy_dir)
      raise storage.storage_error(e, self.policy_dir, f'the policy checkpoint model.ckpt-{step}',
                                  needed=_variable_bytes(self.policy_checkpoint),
                                  intact=self.manager.latest_checkpoint) from None
    logging.info('Saved the policy checkpoint %s', path)
    if self.settings.save_policy_interval_secs > 0:
      logging.info('Wait %d secs after save policy.', self.settings.save_policy_interval_secs)
      time.sleep(self.settings.save_policy_interval_secs)
    return path

  # Summaries and progress.

  def write_summaries(self, metrics, steps_per_sec):
    t = self.trainer
    step = int(t.global_step.numpy())
    episodes = t.collector.episode_summaries()
    with self.writer.as_default(step=step):
      for name, counter in (('environment_steps', t.global_step), ('num_episodes', t.num_episodes),
                            ('num_resets', t.num_resets), ('num_updates', t.num_updates),
                            ('num_meta_updates', t.num_meta_updates), ('replay_buffer_adds', t.replay_buffer.num_adds),
                            ('meta_replay_buffer_adds', t.meta_replay_buffer.num_adds)):
        tf.summary.scalar('Counters/' + name, counter)
      tf.summary.scalar('avg_episode_rewards', episodes['avg_episode_rewards'])
      tf.summary.scalar('avg_episode_meta_rewards', episodes['avg_episode_meta_rewards'])
      tf.summary.histogram('episode_rewards', episodes['episode_rewards'])
      tf.summary.histogram('episode_meta_rewards', episodes['episode_meta_rewards'])
      for name in ('nometa', 'meta'):
        tf.summary.scalar(f'{name}/Reward/average_step_reward', metrics[f'{name}/average_step_reward'])
        tf.summary.scalar(f'{name}/critic_loss', metrics[f'{name}/critic_loss'])
        tf.summary.scalar(f'{name}/actor_loss', metrics[f'{name}/actor_loss'])
      if 'repr/loss' in metrics:
        tf.summary.scalar('repr/loss', metrics['repr/loss'])
      finished = int(min(t.num_episodes.numpy(), collect.EPISODE_HISTORY))
      if finished:
        tf.summary.scalar('avg_episode_final_distance', tf.reduce_mean(t.collector.episode_final_distances[:finished]))
      if steps_per_sec is not None:
        tf.summary.scalar('global_step/sec', steps_per_sec)
    self.writer.flush()

  # The loop.

  def _next_stop(self, step, checkpoint_pending, last_step):
    """The global step at which the current compiled call should end."""
    stop = min(self.settings.total_steps, step + self.settings.steps_per_call)
    for period in (self.settings.log_every_n_steps, self.settings.save_policy_every_n_steps):
      if period:
        stop = min(stop, (step // period + 1) * period)
    if checkpoint_pending:
      stop = min(stop, (step // self.settings.max_steps_per_episode + 1) * self.settings.max_steps_per_episode)
    if not self.trainer.inline_meta_update:
      period = self.trainer.meta_period
      stop = min(stop, (step // period + 1) * period)
      if last_step // period != (step + 1) // period:  # the first iteration of a fresh run: its own call
        stop = step + 1
    return max(stop, step + 1)

  def _write_operative_config(self, step):
    """`operative_config.gin`, or `operative_config-<step>.gin` when a resumed run's differs (a longer run): the
    earlier run's file is not overwritten."""
    text = gin.operative_config_str()
    path = os.path.join(self.train_dir, 'operative_config.gin')
    if tf.io.gfile.exists(path):
      with tf.io.gfile.GFile(path) as f:
        if f.read() == text:
          return
      path = os.path.join(self.train_dir, f'operative_config-{step}.gin')
    with tf.io.gfile.GFile(path, 'w') as f:
      f.write(text)

  def _writing(self, what, fn, *args):
    """fn(*args); a failed write (disk full, permission) becomes one `RunDirectoryError`."""
    try:
      return fn(*args)
    except (tf.errors.OpError, OSError) as e:
      raise storage.storage_error(e, self.train_dir, what, intact=self.manager.latest_checkpoint) from None

  def _report_progress(self, step, rate, loss):
    """Prints the progress line and rewrites the progress file (`rundir.progress`, state 'running').

    Args:
      step: the global step reached (environment steps).
      rate: environment steps per second over the last logging interval.
      loss: the last low-level critic + actor loss (the line shows it).
    """
    total = self.settings.total_steps
    eta_s = (total - step) / max(rate, 1e-9)
    print(
        f'global step {step} / {total}: loss = {loss:.4f} ({1.0 / max(rate, 1e-9):.4f} sec/step) ({rate:.0f} '
        f'steps/sec), ETA {formatting.format_duration(eta_s)}', flush=True)
    progress.write_progress(self.train_dir, step, total_steps=total, rate=rate, eta_s=eta_s, state='running')

  def run(self):
    """Trains until the step budget, `should_stop_early` or a stop request (`request_stop`: at the next episode
    end, after a full checkpoint); returns the final global step.

    Keeps `<train_dir>/progress.json` (`rundir.progress`) up to date: a record at the start and at each progress
    line ('running'), and one at the end: 'finished' (the step budget reached) or 'stopped' (a stop request or
    `should_stop_early`; the full checkpoint is written), with the rate over the whole run.
    """
    t, settings = self.trainer, self.settings
    resumed = self.restore_or_initialize()
    self.check_free_space()
    self._writing('the operative configuration', self._write_operative_config, int(t.global_step.numpy()))
    self.writer = self._writing('TensorBoard summaries', tf.summary.create_file_writer, self.train_dir)
    policy_every = (f'a policy checkpoint every {settings.save_policy_every_n_steps} steps'
                    if settings.save_policy_every_n_steps else 'no policy checkpoints')
    progress_every = (f'a progress line every {settings.log_every_n_steps} steps'
                      if settings.log_every_n_steps else 'no progress lines')
    logging.info('Training to global step %d (environment steps), from step %d; %s, %s.', settings.total_steps,
                 int(t.global_step.numpy()), progress_every, policy_every)
    progress.write_progress(self.train_dir, int(t.global_step.numpy()), total_steps=settings.total_steps,
                            state='running')
    start = time.time()
    if not resumed:
      if int(t.global_step.numpy()) != 0:
        raise ValueError('Global step should be zero at the start of a fresh run.')
      if settings.initial_steps:
        t.collect_steps(tf.constant(settings.initial_steps, tf.int64))
      logging.info('Collected %d initial steps in %.1f s', settings.initial_steps, time.time() - start)
    self.timings['initial_collect'] = time.time() - start
    step = int(t.global_step.numpy())
    # The original's TrainStep remembered the previous global step from 0, so a fresh run's first iteration also
    # runs a meta update. A resumed run continues as the uninterrupted run would.
    last_step = step if resumed else 0
    metrics = None
    train_start = last_log_time = last_summary_time = last_save_time = time.time()
    last_log_step = last_summary_step = step
    first_step = step
    checkpoint_pending = False
    stopping = None  # the signal whose stop is under way
    episode = settings.max_steps_per_episode
    while step < settings.total_steps:
      if _stop_request['signal'] and not stopping:
        stopping = _stop_request['signal']
        if t.collector.at_episode_boundary or step == self.last_saved_step:
          break  # already at an episode end
        logging.info('%s: stopping at the next episode end (global step %d), after a full checkpoint.', stopping,
                     (step // episode + 1) * episode)
        checkpoint_pending = True
      target = self._next_stop(step, checkpoint_pending, last_step)
      metrics = t.run_steps(tf.constant(target - step, tf.int64), tf.constant(last_step, tf.int64))
      previous, step = step, int(t.global_step.numpy())
      if not t.inline_meta_update and int(t.meta_replay_buffer.num_adds.numpy()) > 0 and bool(
          t.meta_due(tf.constant(last_step if target - previous == 1 else step - 1, tf.int64),
                     tf.constant(step, tf.int64))):
        metrics = dict(metrics, **{'meta/' + k: v for k, v in t.meta_step().items()})
      last_step = step
      now = time.time()
      policy_period, log_period = settings.save_policy_every_n_steps, settings.log_every_n_steps
      if policy_period and step // policy_period != previous // policy_period:
        self.save_policy()
      if log_period and step // log_period != previous // log_period:
        rate = (step - last_log_step) / max(now - last_log_time, 1e-9)
        self._report_progress(step, rate, float(metrics['nometa/critic_loss'] + metrics['nometa/actor_loss']))
        last_log_time, last_log_step = now, step
      if now - last_summary_time >= settings.save_summaries_secs:
        self._writing('TensorBoard summaries', self.write_summaries, metrics,
                      (step - last_summary_step) / max(now - last_summary_time, 1e-9))
        last_summary_time, last_summary_step = now, step
      if now - last_save_time >= settings.save_interval_secs:
        checkpoint_pending = True
      if checkpoint_pending and t.collector.at_episode_boundary:
        self.save()
        last_save_time, checkpoint_pending = time.time(), False
        if stopping:
          break
      if self.should_stop_early and self.should_stop_early():
        logging.info('should_stop_early: stopping at global step %d', step)
        break
    self.timings['train'] = time.time() - train_start
    rate = (step - first_step) / max(self.timings['train'], 1e-9)
    if metrics is not None:
      self._writing('TensorBoard summaries', self.write_summaries, metrics, rate)
    self.save()
    self.writer.close()
    _stop_request['signal'] = None  # honoured (or the run had ended anyway)
    finished = step >= settings.total_steps
    progress.write_progress(self.train_dir, step, total_steps=settings.total_steps, rate=rate,
                            state='finished' if finished else 'stopped')
    if stopping:
      print(
          f'{stopping}: stopped at global step {step} of {settings.total_steps}; full checkpoint '
          f'{self.manager.latest_checkpoint} written.', flush=True)
    logging.info('Training finished at global step %d (%.1f s of training)', step, self.timings['train'])
    return step
