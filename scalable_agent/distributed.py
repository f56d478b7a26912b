"""Multi-machine IMPALA: the learner job and the actor jobs, connected through a Reverb server.

TF2 has no TF1 gRPC cluster, so the learner (`run_learner`, `--job_name=learner --task=0`) hosts a Reverb server
with three tables: 'unrolls' (a queue of UNROLL_QUEUE_SIZE = 1 item, the original's FIFOQueue(1)), 'weights' (the
latest agent variables and step counters) and 'learner_run_<id>' (a random id of this learner process, so that an
actor can tell a restarted learner from the one it wrote to). Actor i (`run_actor`, `--job_name=actor --task=i
--learner_address=HOST:PORT`) fetches the newest weights before every unroll and writes its unrolls to the queue.
The learner's bookkeeping is `progress.LearnerProgress` and the actor's unrolls `actor.Actor`, as in
single-machine training. The data path, the policy lag and the reconnection rules: docs/impala/distributed.md.
"""

import os
import queue
import socket
import threading
import time
from typing import Any
import uuid

from absl import logging
import numpy as np
import reverb
import tensorflow as tf

from scalable_agent import actor as actor_lib
from scalable_agent import checkpoints
from scalable_agent import progress as progress_lib
from scalable_agent import py_process
from scalable_agent import settings as settings_lib
from scalable_agent import transport

# Weights are published after every N learner steps (the original's actors read the variables at every unroll).
PUBLISH_EVERY_STEPS = 1

WAITING_LOG_INTERVAL_S = 30.  # How often a learner without unrolls says so.
ACTOR_PROGRESS_INTERVAL_S = 60.
_FINISH_QUIET_S = 3.  # At the end the learner drains unrolls until none came for this long,
_FINISH_MAX_S = 15.  # or for at most this long.


def check_settings(settings):
  """Checks the settings of a distributed job (task >= 0).

  Raises:
    transport.DistributedSetupError: an unknown job_name, a learner task other than 0, an actor task outside
      [0, num_actors), an actor without a (well-formed) learner_address, or a bad port / timeout.
  """
  error = transport.DistributedSetupError
  if settings.job_name not in ('learner', 'actor'):
    raise error(f"job_name must be 'learner' or 'actor', got {settings.job_name!r}.")
  if settings.job_name == 'learner':
    if settings.task != 0:
      raise error(f'there is one learner, task 0 (as the original\'s job "learner"); got task={settings.task}. '
                  'Actors are --job_name=actor --task=0 ... num_actors - 1.')
    if not 0 <= settings.reverb_port < 65536:
      raise error(f'reverb_port must be in [0, 65535] (0: pick a free port), got {settings.reverb_port}.')
  else:
    if settings.task >= settings.num_actors:
      raise error(f'actor task {settings.task} is beyond num_actors={settings.num_actors}: actor tasks are 0 .. '
                  f'{settings.num_actors - 1} (actor i runs level actor_levels(level_name, num_actors)[i]). '
                  'Pass the learner\'s --num_actors, or a smaller --task.')
    if not settings.learner_address:
      raise error('an actor needs --learner_address=HOST:PORT, the learner\'s host and --reverb_port (the '
                  'learner logs it when it starts).')
    transport.parse_address(settings.learner_address)
    for name in ('connect_timeout_s', 'reconnect_timeout_s'):
      if not getattr(settings, name) > 0:
        raise error(f'{name} must be > 0 (seconds), got {getattr(settings, name)}.')


# ---------------------------------------------------------------------------------------------------------------------
# The learner job.


def _numpy_batch(batch):
  """The parts of a batch the episode logging needs, as NumPy (`actor.finished_episodes`)."""
  level_names = np.array([n.decode() for n in batch.level_name.numpy()], dtype=object)
  env_outputs = tf.nest.map_structure(lambda t: t.numpy(), batch.env_outputs._replace(observation=()))
  return actor_lib.ActorOutput(level_names, None, env_outputs, None)


class _BatchReader:
  """Takes batches from the dataset iterator in a helper thread, so that the learner's wait stays interruptible
  (Ctrl-C) and can log that it is waiting. No buffering beyond the dataset's own prefetch: the thread asks for the
  next batch only when the learner wants one. The thread is a daemon: one still blocked in the iterator when the
  learner stops (no unroll came) does not keep the process alive."""

  def __init__(self, dataset):
    self._iterator = iter(dataset)
    self._requests: queue.Queue[Any] = queue.Queue()
    self._results: queue.Queue[Any] = queue.Queue()
    self._pending = False
    self._thread = threading.Thread(target=self._run, name='unroll-reader', daemon=True)
    self._thread.start()

  def _run(self):
    while self._requests.get() is not None:
      try:
        self._results.put((next(self._iterator), None))
      except BaseException as e:  # pylint: disable=broad-except
        self._results.put((None, e))

  def next(self, timeout):
    """The next batch, or None if none came within `timeout` seconds (the request stays pending)."""
    if not self._pending:
      self._requests.put(True)
      self._pending = True
    try:
      batch, error = self._results.get(timeout=timeout)
    except queue.Empty:
      return None
    self._pending = False
    if error is not None:
      raise error
    return batch

  def close(self):
    self._requests.put(None)


def _host_name():
  try:
    return socket.getfqdn() or socket.gethostname()
  except OSError:
    return 'LEARNER_HOST'


def run_learner(logdir, settings, step_hook=None, checkpoint_interval_s=None):
  """The learner job (`--job_name=learner --task=0`): trains on the actors' unrolls until total_environment_frames.

  Args:
    logdir: run directory (checkpoints `model.ckpt-<frames>`, TensorBoard events), as `experiment.train`; a new
      run in it resumes from its latest checkpoint.
    settings: `settings.Settings` with job_name 'learner', task 0.
    step_hook: optional callable(metrics dict of NumPy values, server port), called after each learner step.
    checkpoint_interval_s: seconds between checkpoints; None: `settings.checkpoint_interval_s` (the original's
      600); also at the start, at the end and after a stop request (`progress.request_stop`).

  Returns:
    int, the environment frames trained on (over all runs of this logdir).
  """
  check_settings(settings)
  settings_lib.check_settings(settings)
  tf.random.set_seed(settings.seed)
  os.makedirs(logdir, exist_ok=True)
  levels = settings_lib.actor_levels(settings.level_name, settings.num_actors)
  agent, learner = settings_lib.make_agent_and_learner(settings, levels[0])
  manager = checkpoints.make_checkpoint_manager(logdir, agent, learner.optimizer, learner.num_environment_frames)
  progress = progress_lib.LearnerProgress(logdir, settings, learner, manager, checkpoint_interval_s)
  frames = progress.start()
  if progress.done:
    return frames

  frame_shape = tuple(settings_lib.environment_constructor(settings, levels[0]).frame_shape)
  unroll_spec = transport.unroll_signature(settings, agent.num_actions, frame_shape)
  run_id = uuid.uuid4().hex[:16]
  server = transport.make_server(unroll_spec, transport.weights_signature(agent), settings.reverb_port, run_id)
  client = reverb.Client(f'localhost:{server.port}')
  publisher = transport.WeightsPublisher(client, agent)
  publisher.publish(frames, step=0, block=True)
  address = f'{_host_name()}:{server.port}'
  logging.info(
      'Learner (run %s) serving on port %d: start actor i (0 <= i < %d) with this configuration and '
      '--job_name=actor --task=i --learner_address=%s', run_id, server.port, settings.num_actors, address)
  reader = _BatchReader(transport.learner_dataset(f'localhost:{server.port}', unroll_spec, settings.batch_size))
  step = 0
  finished = False
  try:
    waiting_since = time.monotonic()
    while not progress.done and not progress_lib.stop_requested():
      item = reader.next(timeout=transport.POLL_S)
      if item is None:
        if publisher.error is not None:
          raise RuntimeError(f'publishing the weights failed: {publisher.error!r}') from publisher.error
        if time.monotonic() - waiting_since >= WAITING_LOG_INTERVAL_S:
          logging.info(
              'No unrolls for %.0f s: waiting for actors (--job_name=actor --task=0 .. %d '
              '--learner_address=%s).',
              time.monotonic() - waiting_since, settings.num_actors - 1, address)
          waiting_since = time.monotonic()
        continue
      batch = item.unroll
      progress.policy_lag.add(progress.frames, item.policy_frames.numpy())
      metrics = {
          k: v.numpy() for k, v in learner.step(batch.agent_state, batch.env_outputs, batch.agent_outputs).items()
      }
      step += 1
      frames = int(metrics['num_environment_frames'])
      # Checks the step's values (non-finite: stop) before the actors get its weights.
      progress.after_step(metrics, actor_lib.finished_episodes(_numpy_batch(batch)))
      if step % PUBLISH_EVERY_STEPS == 0 and frames < settings.total_environment_frames:
        publisher.publish(frames, step)
      waiting_since = time.monotonic()
      if step_hook is not None:
        step_hook(metrics, server.port)
    if progress_lib.stop_requested() and not progress.done:
      progress.interrupted(progress_lib.stop_requested())
      return progress.frames
    progress.finish()
    finished = True
    publisher.publish(progress.frames, step, finished=True, block=True)
    _drain(reader)
    return progress.frames
  except KeyboardInterrupt:
    progress.interrupted()
    raise
  finally:
    progress_lib.clear_stop_request()
    if not finished:
      logging.info('Stopping the Reverb server: actors will reconnect to a restarted learner.')
    publisher.close()
    server.stop()
    reader.close()
    progress.close()


def _drain(reader):
  """Takes (and drops) unrolls until none came for _FINISH_QUIET_S, at most _FINISH_MAX_S: actors blocked in a
  write complete it and see the final weights' `finished` flag at their next unroll."""
  deadline = time.monotonic() + _FINISH_MAX_S
  quiet_since = time.monotonic()
  while time.monotonic() < deadline and time.monotonic() - quiet_since < _FINISH_QUIET_S:
    if reader.next(timeout=0.2) is not None:
      quiet_since = time.monotonic()


# ---------------------------------------------------------------------------------------------------------------------
# The actor job.


def actor_tasks(settings):
  """The actor tasks this actor process runs: `task` .. `task + actors_per_process - 1`, within num_actors."""
  return list(range(settings.task, min(settings.task + settings.actors_per_process, settings.num_actors)))


def _set_single_threaded():
  """One TensorFlow thread per actor process (many actors share a machine); only before TF's runtime starts."""
  try:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
  except RuntimeError:  # Already initialised (an actor run inside another program, e.g. a test).
    pass


class _ActorTask:
  """One actor task (its level, environment process, policy and connection to the learner) and its loop."""

  def __init__(self, settings, task, agent, stop_event):
    self.task = task
    self.name = f'Actor {task}'
    self._settings = settings
    self._agent = agent
    self._stop = stop_event
    self.level_name = settings_lib.actor_levels(settings.level_name, settings.num_actors)[task]
    frame_shape = tuple(settings_lib.environment_constructor(settings, self.level_name).frame_shape)
    self.connection = transport.LearnerConnection(settings.learner_address,
                                                  transport.unroll_signature(settings, agent.num_actions, frame_shape),
                                                  transport.weights_signature(agent), name=self.name)
    self.environment = None
    self.unrolls = self.reconnections = 0

  def connect(self):
    settings = self._settings
    logging.info('%s (%s): connecting to the learner at %s (waiting up to %.0f s).', self.name, self.level_name,
                 settings.learner_address, settings.connect_timeout_s)
    self.connection.connect(settings.connect_timeout_s)
    logging.info('%s: connected to the learner at %s (run %s).', self.name, settings.learner_address,
                 self.connection.run_id)

  def run(self, max_unrolls=None):
    """Writes unrolls until the learner finishes (or `max_unrolls`, or the stop event). Returns the unrolls written."""
    settings, agent, name = self._settings, self._agent, self.name
    variables = transport.weight_variables(agent)
    policy = actor_lib.numpy_policy(agent, device='/cpu:0')
    self.environment = actor_lib.EnvironmentProcess(settings, self.level_name, seed=self.task + 1, name=name)
    actor = None
    learner_frames = learner_step = -1
    last_progress = time.monotonic()
    progress_unrolls = 0
    while (max_unrolls is None or self.unrolls < max_unrolls) and not self._stop.is_set():
      try:
        weights = self.connection.latest_weights()
        if weights is not None:
          for variable, value in zip(variables, weights['weights']):
            variable.assign(value)
          learner_frames, learner_step = int(weights['num_environment_frames']), int(weights['step'])
          if weights['finished']:
            logging.info('%s: the learner finished the run at %d environment frames; %d unrolls written. Exiting.',
                         name, learner_frames, self.unrolls)
            break
        if actor is None:
          actor = actor_lib.Actor(self.level_name, self.environment.start(), policy, settings.unroll_length,
                                  actor_lib.initial_agent_state(), actor_lib.initial_agent_output(agent.num_actions))
        try:
          unroll = actor.unroll()
        except py_process.ProcessClosedError as e:
          if self._stop.is_set():
            break
          actor.reset(self.environment.restart(e))
          continue
        self.connection.write(unroll, learner_frames)
        self.unrolls += 1
        if self.unrolls == 1:
          logging.info('%s: first unroll written (learner at %d environment frames).', name, learner_frames)
        now = time.monotonic()
        if now - last_progress >= ACTOR_PROGRESS_INTERVAL_S:
          logging.info(
              '%s: %d unrolls written (%.2f unrolls/s); acting with the weights of learner step %d '
              '(%d environment frames).', name, self.unrolls, (self.unrolls - progress_unrolls) / (now - last_progress),
              learner_step, learner_frames)
          last_progress, progress_unrolls = now, self.unrolls
      except transport.LearnerLost as e:
        self.reconnections += 1
        self.connection.reconnect(str(e), settings.reconnect_timeout_s)
    return self.unrolls

  def close(self, timeout=10.):
    self.connection.close()
    if self.environment is not None:
      self.environment.close(timeout=timeout)


def run_actor(settings, max_unrolls=None):
  """The actor job (`--job_name=actor --task=i --learner_address=HOST:PORT`), module docstring. With
  `actors_per_process` K > 1 the process runs actor tasks i .. i + K - 1 (`actor_tasks`), each in a thread of its own
  with its own environment process, agent variables, policy and connection to the learner (one TensorFlow runtime and
  Python interpreter shared: docs/impala/distributed.md gives the memory of each).

  Args:
    settings: `settings.Settings` with job_name 'actor'.
    max_unrolls: each task stops after writing this many unrolls (tests); None: until the learner finishes.

  Returns:
    int, the unrolls written (by all tasks of the process).

  Raises:
    transport.DistributedSetupError: bad settings (task beyond num_actors, no or malformed learner_address), or a
      learner whose unrolls or network differ from this actor's.
    transport.LearnerUnreachableError: the learner could not be reached within connect_timeout_s at the start, or again
      within reconnect_timeout_s after it was lost. With several tasks, the first task's error stops the others.
  """
  check_settings(settings)
  settings_lib.check_settings(settings)
  progress_lib.clear_stop_request(saves=False)  # A signal stops an actor at once: it has nothing to save.
  _set_single_threaded()
  levels = settings_lib.actor_levels(settings.level_name, settings.num_actors)
  tf.random.set_seed(settings.seed + settings.task)
  stop = threading.Event()
  tasks = []
  try:
    for task in actor_tasks(settings):
      with tf.device('/cpu:0'):
        agent = settings_lib.make_agent(settings, levels[0])
      tasks.append(_ActorTask(settings, task, agent, stop))
    if len(tasks) == 1:
      tasks[0].connect()
      return tasks[0].run(max_unrolls)
    return _run_threads(tasks, stop, max_unrolls)
  finally:
    stop.set()
    progress_lib.clear_stop_request()
    for task in tasks:
      task.close()


def _run_threads(tasks, stop, max_unrolls):
  """Runs each task in a thread; the first error (or a KeyboardInterrupt here) stops all of them."""
  errors = []

  def target(task):
    try:
      task.connect()
      task.run(max_unrolls)
    except BaseException as e:  # pylint: disable=broad-except
      errors.append(e)
      stop.set()

  threads = [threading.Thread(target=target, args=(task,), name=task.name, daemon=True) for task in tasks]
  for thread in threads:
    thread.start()
  logging.info('Actor tasks %d .. %d running in one process (%d threads).', tasks[0].task, tasks[-1].task, len(tasks))
  try:
    for thread in threads:
      while thread.is_alive():
        thread.join(timeout=transport.POLL_S)
  except BaseException:
    stop.set()
    for task in tasks:  # A task blocked in its environment gets a ProcessClosedError and ends.
      task.close(timeout=1.)
    raise
  if errors:
    raise errors[0]
  return sum(task.unrolls for task in tasks)
