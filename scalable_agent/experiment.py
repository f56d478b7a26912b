"""IMPALA experiment: the train / test entry point, with the original command-line flags as gin parameters.

Each flag of the original `experiment.py` (deepmind/scalable_agent, L48-90) is a parameter of `experiment` with the
same name and default (written once, in `original_flags`), so `--level_name=dmlab30` on the command line and
`experiment.level_name = 'dmlab30'` in a gin file are the same setting. `logdir` is the run directory and comes from
the command line (`--logdir` or `--train_dir`), not from gin.

Single-machine training (`task=-1`; original: deepmind/scalable_agent experiment.py `build_actor`, `train`), all in
this process but the environments:

  actor thread i (num_actors of them)           environment process i (`py_process`, spawn)
    `Actor.unroll()`: unroll_length agent steps, one `step` call per agent step; the agent's one-step inference
    goes through `dynamic_batching` (all actors' calls batched into one call on the learner's variables, so
    actors always act with the latest parameters), or with `actor_inference = 'numpy'` runs in the actor's thread
    in NumPy on the parameters copied after each learner step (`actor.actor_policies`)
      -> unroll queue (capacity 1, the original's FIFOQueue(1))
  prefetch thread: takes batch_size unrolls, stacks them time-major [T + 1, B, ...], makes tensors
      -> staging queue (capacity 1, the original's StagingArea: the next batch is ready while a step runs)
  learner (calling thread): `Learner.step`, episode logging and summaries, progress lines, checkpoints.

Policy lag: an unroll waits in the unroll queue or in a blocked actor while up to two batches are ahead of it (as
the original's queue + staging area), so a batch is usually 1-2 learner steps behind the parameters it trains.

Multi-machine training (`task >= 0`: `--job_name=learner --task=0` on one machine, `--job_name=actor --task=i
--learner_address=HOST:PORT` on others, as the original's cluster) is in `scalable_agent.distributed`: the same
Actor, unrolls, Learner, summaries and checkpoints, connected through a Reverb server on the learner.

The parts live below this module: `settings` (Settings, checks, levels, agent and learner factories), `actor`
(Actor, unrolls, environment processes), `progress` (the learner's summaries, progress lines and checkpoints).

Units: "frames" are environment frames (agent steps x num_action_repeats), as the original counts them; an unroll
has unroll_length agent steps and carries unroll_length + 1 (the first overlaps the previous unroll).
"""

import collections
import dataclasses
import inspect
import json
import os
import queue
import threading
from typing import Any, List

from absl import logging
import gin
import numpy as np
import tensorflow as tf

from rundir import checkpoints as run_checkpoints
from scalable_agent import actor as actor_lib
from scalable_agent import checkpoints
from scalable_agent import dmlab30
from scalable_agent import learner as learner_lib
from scalable_agent import original_flags
from scalable_agent import progress as progress_lib
from scalable_agent import py_process
from scalable_agent import settings as settings_lib

TEST_SUMMARY_DIR = 'test'  # Test mode's TensorBoard events, under the run directory.
_POLL_S = 0.1  # How often blocked threads look at the stop flag.
# The defaults of `experiment`'s parameters (logdir and mode aside): those of `Settings`, whose flag defaults are
# `original_flags.DEFAULTS`.
_DEFAULT = settings_lib.Settings()


class MissingCheckpointError(FileNotFoundError):
  """Test mode found no readable checkpoint; `user_error`: the launcher prints the message alone (exit 2)."""
  user_error = True


@gin.configurable('experiment', module='scalable_agent', denylist=['logdir'])
def experiment(
    logdir, mode=original_flags.ORIGINAL['mode'].default, test_num_episodes=_DEFAULT.test_num_episodes,
    task=_DEFAULT.task, job_name=_DEFAULT.job_name, total_environment_frames=_DEFAULT.total_environment_frames,
    num_actors=_DEFAULT.num_actors, batch_size=_DEFAULT.batch_size, unroll_length=_DEFAULT.unroll_length,
    num_action_repeats=_DEFAULT.num_action_repeats, seed=_DEFAULT.seed, entropy_cost=_DEFAULT.entropy_cost,
    baseline_cost=_DEFAULT.baseline_cost, discounting=_DEFAULT.discounting, reward_clipping=_DEFAULT.reward_clipping,
    dataset_path=_DEFAULT.dataset_path, level_name=_DEFAULT.level_name, width=_DEFAULT.width, height=_DEFAULT.height,
    learning_rate=_DEFAULT.learning_rate, decay=_DEFAULT.decay, momentum=_DEFAULT.momentum, epsilon=_DEFAULT.epsilon,
    learner_address=_DEFAULT.learner_address, reverb_port=_DEFAULT.reverb_port,
    actors_per_process=_DEFAULT.actors_per_process, connect_timeout_s=_DEFAULT.connect_timeout_s,
    reconnect_timeout_s=_DEFAULT.reconnect_timeout_s, distribution_strategy=_DEFAULT.distribution_strategy,
    checkpoint_interval_s=_DEFAULT.checkpoint_interval_s, actor_inference=_DEFAULT.actor_inference,
    checkpoint_keep_every_frames=_DEFAULT.checkpoint_keep_every_frames):
  """Trains (`mode='train'`) or evaluates (`mode='test'`) IMPALA; the arguments are the original flags.

  Args:
    logdir: run directory: checkpoints and summaries (original flag `--logdir`).
    mode: 'train' or 'test'.
    test_num_episodes: episodes per level in test mode.
    task: task id; -1 for single-machine training, else the task of a multi-machine job: the learner is task 0,
      actor i is task i (0 <= i < num_actors). See scalable_agent/distributed.py and docs/impala/distributed.md.
    job_name: 'learner' or 'actor'; ignored when task is -1 (and in test mode).
    total_environment_frames: frames (agent steps x action repeats) to train for; also the horizon of the linear
      learning-rate decay.
    num_actors: number of actors (environments).
    batch_size: learner batch size, in unrolls.
    unroll_length: agent steps per unroll (an unroll carries unroll_length + 1 steps).
    num_action_repeats: environment frames per agent step.
    seed: random seed (TensorFlow's global seed, as the original's tf.set_random_seed; environments use i + 1).
    entropy_cost: entropy loss multiplier.
    baseline_cost: baseline loss multiplier.
    discounting: discount factor per agent step.
    reward_clipping: 'abs_one' or 'soft_asymmetric'.
    dataset_path: DeepMind Lab dataset path, needed by the psychlab_* levels.
    level_name: a level (see `scalable_agent.environments`), 'dmlab30', or several levels joined by commas.
    width: observation width in pixels.
    height: observation height in pixels.
    learning_rate: initial RMSProp learning rate (decays linearly to 0).
    decay: RMSProp decay.
    momentum: RMSProp momentum.
    epsilon: RMSProp epsilon.
    learner_address: actor jobs: HOST:PORT of the learner's Reverb server (its host and reverb_port).
    reverb_port: the learner job's Reverb server port; 0 picks a free one (logged).
    actors_per_process: actor jobs: how many actor tasks the process runs, each in a thread with its own
      environment process, variables and connection: --task=i runs tasks i .. i + K - 1 (fewer at num_actors).
    connect_timeout_s: actor jobs: how long the first connection to the learner may take before the actor stops
      with an error naming the address.
    reconnect_timeout_s: actor jobs: how long an actor that lost its learner retries (with backoff) before it stops.
    distribution_strategy: the learner's `tf.distribute` strategy: 'default' (one device), 'mirrored' (all local
      GPUs) or 'tpu' (`learner.make_strategy`); in both single-machine and multi-machine training.
    checkpoint_interval_s: seconds between the learner's checkpoints (the original's save_checkpoint_secs, 600);
      checkpoints are also written at the start, at the end and when a signal stops the run.
    actor_inference: how single-machine training's actors compute their policy step: 'batched' (the original: all
      actors' pending steps in one TensorFlow call on the learner's variables) or 'numpy' (each actor in its own
      thread, in NumPy, on a copy of the parameters made after each learner step; the shallow feed-forward agent
      only; `scalable_agent.numpy_agent`). The same function either way; 'numpy' is faster with few actors.
    checkpoint_keep_every_frames: N > 0: the learner also keeps the first checkpoint at or past each multiple of N
      frames (0 included) in `<logdir>/kept/<frames>/`, out of reach of the rotation that deletes all but the 5
      newest (`checkpoints.keep_checkpoint`), so that test mode can score them later (`--logdir
      <logdir>/kept/<frames>`). 0 (the default, the original's): only the 5 newest checkpoints exist.

  Returns:
    train: the final number of environment frames (int), or for an actor job the number of unrolls it wrote.
    test: the results dict written as JSON (see `test`).

  Raises:
    ValueError: an unknown mode or a bad setting.
  """
  arguments = dict(locals())
  del arguments['logdir'], arguments['mode']
  settings = settings_lib.Settings(**arguments)
  if mode == 'train':
    if settings.task >= 0:
      from scalable_agent import distributed  # pylint: disable=g-import-not-at-top  (needs Reverb)
      if settings.job_name == 'actor':
        return distributed.run_actor(settings)
      return distributed.run_learner(logdir, settings)
    return train(logdir, settings)
  if mode == 'test':
    return test(logdir, settings)
  raise ValueError(f"mode must be 'train' or 'test', got {mode!r}.")


def bound_value(name: str) -> Any:
  """The value `experiment.<name>` takes under the current gin configuration (binding, else default)."""
  bindings = gin.get_bindings('experiment')
  if name in bindings:
    return bindings[name]
  return inspect.signature(experiment).parameters[name].default


def preflight(program: str = 'train') -> None:
  """Checks what the configured experiment needs before anything starts or is written (see
  `launcher.System.preflight`); `program` is unused (the mode decides).

  Raises:
    environment_specs.MissingDependencyError: the level needs DeepMind Lab and it is not installed.
    ValueError: an unknown level, a bad setting (`settings.check_settings`), or a bad setting of a multi-machine job
      (`distributed.check_settings`).
  """
  del program
  settings = settings_lib.Settings(
      **{field.name: bound_value(field.name) for field in dataclasses.fields(settings_lib.Settings)})
  settings_lib.check_settings(settings)
  if bound_value('mode') not in ('train', 'test'):
    raise ValueError(f"experiment.mode must be 'train' or 'test', got {bound_value('mode')!r}.")
  settings_lib.check_levels(settings)
  if settings.task >= 0 and bound_value('mode') == 'train':
    from scalable_agent import distributed  # pylint: disable=g-import-not-at-top  (needs Reverb)
    distributed.check_settings(settings)


def _check_settings(settings, mode='train'):
  if settings.task >= 0 and mode == 'train':
    raise ValueError(f'train() is single-machine training (task=-1); task={settings.task} (job_name='
                     f'{settings.job_name!r}) is a multi-machine job: run it with experiment() (run_train.py '
                     '--job_name=... --task=...) or scalable_agent.distributed.run_learner / run_actor.')
  settings_lib.check_settings(settings)


# ---------------------------------------------------------------------------------------------------------------------
# Training.


class _ActorThread:
  """Actor i: its environment process, its `Actor`, and the thread that feeds the unroll queue."""

  def __init__(self, index, level_name, settings, policy, num_actions, unrolls, stop):
    self.index = index
    self.level_name = level_name
    self._settings = settings
    self._unrolls = unrolls
    self._stop = stop
    self.environment = actor_lib.EnvironmentProcess(settings, level_name, seed=index + 1, name=f'Actor {index}')
    self._policy = policy
    self._num_actions = num_actions
    self.actor: Any = None
    self.error = None
    self.thread = threading.Thread(target=self._run, name=f'actor-{index}', daemon=True)

  @property
  def process(self):
    """The current environment process (a `py_process.PyProcess`; a new one after each restart)."""
    return self.environment.process

  @property
  def num_restarts(self):
    """How many times the environment process was restarted after it died."""
    return self.environment.num_restarts

  def start(self):
    """Builds the Actor on the (started) process and starts the thread."""
    self.actor = actor_lib.Actor(self.level_name, self.environment.flow(), self._policy, self._settings.unroll_length,
                                 actor_lib.initial_agent_state(), actor_lib.initial_agent_output(self._num_actions))
    self.thread.start()

  def _run(self):
    try:
      while not self._stop.is_set():
        try:
          actor_output = self.actor.unroll()
        except py_process.ProcessClosedError as e:
          if self._stop.is_set():
            return
          try:
            self.actor.reset(self.environment.restart(e))
          except py_process.ProcessClosedError:
            if progress_lib.stop_requested():  # the stop signal reached the new process as it started: expected
              return
            raise
          continue
        while not self._stop.is_set():
          try:
            self._unrolls.put(actor_output, timeout=_POLL_S)
            break
          except queue.Full:
            pass
    except learner_lib.NonFiniteError as e:
      if not self._stop.is_set():
        logging.error('Actor %d: %s', self.index, e)
        self.error = e
    except Exception as e:  # pylint: disable=broad-except
      if not self._stop.is_set():  # Errors while shutting down (cancelled inference, closed process) are expected.
        logging.exception('Actor %d failed.', self.index)
        self.error = e


def _prefetch(unrolls, batches, batch_size, stop, errors):
  """The StagingArea analog: batch_size unrolls -> `actor.batch_unrolls` -> tensors -> `batches` (capacity 1)."""
  try:
    while not stop.is_set():
      items: List[Any] = []
      while len(items) < batch_size and not stop.is_set():
        try:
          items.append(unrolls.get(timeout=_POLL_S))
        except queue.Empty:
          pass
      if stop.is_set():
        return
      batch = actor_lib.batch_unrolls(items)
      tensors = tf.nest.map_structure(tf.convert_to_tensor, (batch.agent_state, batch.env_outputs, batch.agent_outputs))
      while not stop.is_set():
        try:
          batches.put((batch, tensors), timeout=_POLL_S)
          break
        except queue.Full:
          pass
  except Exception as e:  # pylint: disable=broad-except
    logging.exception('The prefetch thread failed.')
    errors.append(e)


def train(logdir, settings, step_hook=None, checkpoint_interval_s=None):
  """Single-machine training (module docstring) until total_environment_frames; resumes from logdir's checkpoint.

  Args:
    logdir: run directory: `model.ckpt-<frames>` checkpoints (every checkpoint_interval_s seconds, at the start and
      at the end) and TensorBoard events.
    settings: `settings.Settings`.
    step_hook: optional callable(actor_threads, metrics dict of NumPy values), called after each learner step (for
      tests: `actor_threads[i].process`, `.num_restarts`).
    checkpoint_interval_s: seconds between checkpoints; None: `settings.checkpoint_interval_s` (the original's
      600).

  Returns:
    int, the environment frames trained on when it stopped (counted over all runs of this logdir): at
    total_environment_frames, or earlier after a stop request (`progress.request_stop`: the checkpoint is written).

  Raises:
    learner.NonFiniteError: the learner's losses or update, or an actor's logits, are non-finite (no checkpoint
      holds them).
    rundir.errors.RunDirectoryError: logdir holds checkpoints but none is readable, or a save failed (disk full).
  """
  _check_settings(settings)
  tf.random.set_seed(settings.seed)
  os.makedirs(logdir, exist_ok=True)
  levels = settings_lib.actor_levels(settings.level_name, settings.num_actors)
  agent, learner = settings_lib.make_agent_and_learner(settings, levels[0])
  manager = checkpoints.make_checkpoint_manager(logdir, agent, learner.optimizer, learner.num_environment_frames)
  progress = progress_lib.LearnerProgress(logdir, settings, learner, manager, checkpoint_interval_s)
  frames = progress.start()  # The original also wrote a checkpoint at step 0.
  if progress.done:
    return frames

  policies, after_step, close_inference = actor_lib.actor_policies(settings, agent)
  stop = threading.Event()
  unrolls: queue.Queue[Any] = queue.Queue(maxsize=1)
  batches: queue.Queue[Any] = queue.Queue(maxsize=1)
  errors: List[BaseException] = []
  actor_threads = [
      _ActorThread(i, level, settings, policies[i], agent.num_actions, unrolls, stop) for i, level in enumerate(levels)
  ]
  prefetch_thread = threading.Thread(target=_prefetch, args=(unrolls, batches, settings.batch_size, stop, errors),
                                     name='prefetch', daemon=True)
  logging.info(
      'Training to %d environment frames: %d actors (%s); batch %d unrolls of %d agent steps, %d frames '
      'per agent step; a progress line every %d s.', settings.total_environment_frames, settings.num_actors,
      ', '.join(sorted(set(levels))), settings.batch_size, settings.unroll_length, settings.num_action_repeats,
      progress_lib.PROGRESS_INTERVAL_S)
  try:
    py_process.start_all([a.process for a in actor_threads], environment=actor_lib.CHILD_ENVIRONMENT)
    for actor_thread in actor_threads:
      actor_thread.start()
    prefetch_thread.start()

    while not progress.done and not progress_lib.stop_requested():
      batch_and_tensors = _next_batch(batches, actor_threads, errors, prefetch_thread)
      if batch_and_tensors is None:
        break
      batch, tensors = batch_and_tensors
      metrics = {k: v.numpy() for k, v in learner.step(*tensors).items()}
      after_step()
      progress.after_step(metrics, actor_lib.finished_episodes(batch))
      if step_hook is not None:
        step_hook(actor_threads, metrics)
    if progress_lib.stop_requested() and not progress.done:
      progress.interrupted(progress_lib.stop_requested())
    else:
      progress.finish()
    return progress.frames
  except KeyboardInterrupt:
    progress.interrupted()
    raise
  finally:
    progress_lib.clear_stop_request()
    stop.set()
    close_inference()  # Actors waiting for batched inference get CancelledError and stop.
    py_process.close_all([a.process for a in actor_threads])
    for actor_thread in actor_threads:
      if actor_thread.thread.is_alive():
        actor_thread.thread.join(timeout=10.)
    if prefetch_thread.is_alive():
      prefetch_thread.join(timeout=10.)
    progress.close()


def _next_batch(batches, actor_threads, errors, prefetch_thread):
  """The next prefetched batch, or None when a stop was requested (`progress.request_stop`) while waiting; raises
  the error of an actor or of the prefetch thread if one failed. A stop request comes before an actor's failure
  (other than non-finite logits): a signal sent to the whole process group may end environment processes too, and
  the learner still writes its checkpoint."""
  while True:
    for actor_thread in actor_threads:
      if isinstance(actor_thread.error, learner_lib.NonFiniteError):
        raise learner_lib.NonFiniteError(f'actor {actor_thread.index}: {actor_thread.error}') from None
    if progress_lib.stop_requested():
      return None
    for actor_thread in actor_threads:
      if actor_thread.error is not None:
        raise RuntimeError(f'actor {actor_thread.index} ({actor_thread.level_name}) failed: '
                           f'{actor_thread.error!r}') from actor_thread.error
    if errors:
      raise RuntimeError(f'the prefetch thread failed: {errors[0]!r}') from errors[0]
    try:
      return batches.get(timeout=1.)
    except queue.Empty:
      if not prefetch_thread.is_alive():
        raise RuntimeError('the prefetch thread stopped') from None


# ---------------------------------------------------------------------------------------------------------------------
# Test mode.


def test(logdir, settings):
  """Test mode (deepmind/scalable_agent experiment.py `test`, L646-679): the latest checkpoint of logdir,
  test_num_episodes per test level.

  Levels run one after the other, each in one environment process (is_test=True, seed 1), with the training
  policy (sampled actions) and the LSTM state carried across episodes (reset by `done`), in unrolls of
  unroll_length; an episode counts where done[1:] (step 0 overlaps the previous unroll).

  Writes `<logdir>/test_results-<frames>.json` (frames: the checkpoint's frame counter; a rerun on the same
  checkpoint writes `test_results-<frames>.1.json`, `.2.json`, ...: an earlier result is never overwritten), and TensorBoard scalars of
  its means in `<logdir>/test/` at step frames (`_write_test_summaries`):
    {'checkpoint': path, 'num_environment_frames': int, 'test_num_episodes': int,
     'levels': {level: {'mean_return': float, 'returns': [float, ...]}},
     'mean_return': mean over the levels of their mean returns,
     with a success threshold (`progress.success_threshold`) 'success_rate' per level and over the levels (the mean
     of theirs), and for dmlab30 'human_normalized_score': {'no_cap': %, 'cap_100': %}}.

  Returns:
    That dict.

  Test mode runs on this machine whatever task / job_name say.

  Raises:
    MissingCheckpointError (a FileNotFoundError): logdir holds no readable checkpoint.
  """
  _check_settings(settings, mode='test')
  tf.random.set_seed(settings.seed)
  levels = settings_lib.test_levels(settings.level_name)
  agent = settings_lib.make_agent(settings, levels[0])
  num_environment_frames = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_environment_frames')
  manager = checkpoints.make_checkpoint_manager(logdir, agent, num_environment_frames=num_environment_frames)
  path, unreadable, _ = run_checkpoints.newest_readable(logdir)  # the files, not only the index file
  for prefix, error in unreadable:
    logging.warning('%s is unreadable (%s); testing an older checkpoint.', prefix, error)
  if path is not None:  # Agent and frame counter only: the optimizer slots in the checkpoint are not needed.
    manager.checkpoint.restore(path).assert_existing_objects_matched().expect_partial()
  if path is None:
    readable = ' readable' if unreadable else ''
    raise MissingCheckpointError(f'test mode needs a{readable} checkpoint (model.ckpt-<frames>) in {logdir!r}; there '
                                 'is none. Train first (run_train.py), or pass the run directory with --train_dir / '
                                 '--logdir.')
  frames = int(num_environment_frames.numpy())
  logging.info('Testing %s (%d environment frames): %d episodes per level.', path, frames, settings.test_num_episodes)

  policy = actor_lib.numpy_policy(agent)
  level_returns = collections.OrderedDict()
  for level_name in levels:
    environment = actor_lib.EnvironmentProcess(settings, level_name, seed=1, is_test=True)
    flow = environment.start()
    try:
      actor = actor_lib.Actor(level_name, flow, policy, settings.unroll_length, actor_lib.initial_agent_state(),
                              actor_lib.initial_agent_output(agent.num_actions))
      returns: List[float] = []
      while len(returns) < settings.test_num_episodes:
        output = actor.unroll()
        done = output.env_outputs.done[1:]
        returns.extend(float(r) for r in output.env_outputs.info.episode_return[1:][done])
    finally:
      environment.close()
    level_returns[level_name] = returns[:settings.test_num_episodes]
    logging.info('Level: %s Mean episode return: %f', level_name, np.mean(level_returns[level_name]))

  results = {
      'checkpoint': path,
      'num_environment_frames': frames,
      'test_num_episodes': settings.test_num_episodes,
      'levels': {
          name: {
              'mean_return': float(np.mean(r)),
              'returns': r
          } for name, r in level_returns.items()
      },
      'mean_return': float(np.mean([np.mean(r) for r in level_returns.values()]))
  }
  success_above = progress_lib.success_threshold()
  if success_above is not None:
    for name, r in level_returns.items():
      results['levels'][name]['success_rate'] = progress_lib.success_rate(r, success_above)
    results['success_rate'] = float(np.mean([level['success_rate'] for level in results['levels'].values()]))
    logging.info('Success rate (return > %g) over %d level(s): %.3f', success_above, len(levels),
                 results['success_rate'])
  if settings.level_name == 'dmlab30':
    no_cap = float(dmlab30.compute_human_normalized_score(level_returns, per_level_cap=None))
    cap_100 = float(dmlab30.compute_human_normalized_score(level_returns, per_level_cap=100))
    logging.info('No cap.: %f Cap 100: %f', no_cap, cap_100)
    results['human_normalized_score'] = {'no_cap': no_cap, 'cap_100': cap_100}
  logging.info('Mean episode return over %d level(s): %f', len(levels), results['mean_return'])
  _write_test_summaries(os.path.join(logdir, TEST_SUMMARY_DIR), results)
  results_path = _write_new_json(logdir, f'test_results-{frames}', results)
  logging.info('Test results: %s', results_path)
  return results


def _write_new_json(directory, stem, data):
  """Writes `data` to `<directory>/<stem>.json`, or to `<stem>.<n>.json` (n = 1, 2, ...: the first free one) when a
  file of that name exists already: test mode never overwrites an earlier result. Returns the path written."""
  n = 0
  while True:
    path = os.path.join(directory, f'{stem}.json' if n == 0 else f'{stem}.{n}.json')
    try:
      with open(path, 'x', encoding='utf-8') as f:  # exclusive: fails if the file exists, even for a second writer
        json.dump(data, f, indent=2)
      return path
    except FileExistsError:
      n += 1


def _write_test_summaries(directory, results):
  """TensorBoard scalars of a test-mode `results` dict in `directory`, at step = the checkpoint's frames:
  `<level>/test_mean_return` per level, `test_mean_return`, with success rates `<level>/test_success_rate` and
  `test_success_rate`, and for dmlab30 `dmlab30/test_no_cap` and
  `dmlab30/test_cap_100`."""
  step = results['num_environment_frames']
  writer = tf.summary.create_file_writer(directory)
  with writer.as_default():
    for level_name, level in results['levels'].items():
      tf.summary.scalar(level_name + '/test_mean_return', level['mean_return'], step=step)
      if 'success_rate' in level:
        tf.summary.scalar(level_name + '/test_success_rate', level['success_rate'], step=step)
    tf.summary.scalar('test_mean_return', results['mean_return'], step=step)
    if 'success_rate' in results:
      tf.summary.scalar('test_success_rate', results['success_rate'], step=step)
    for name, value in results.get('human_normalized_score', {}).items():
      tf.summary.scalar(f'dmlab30/test_{name}', value, step=step)
  writer.close()
