"""Multi-machine IMPALA (issue #8): the learner job and the actor jobs, connected through a Reverb server.

TF2 has no TF1 gRPC cluster, so the learner (`run_learner`, `--job_name=learner --task=0`) hosts a Reverb server
with three tables: 'unrolls' (a queue of UNROLL_QUEUE_SIZE = 1 item, the original's FIFOQueue(1)), 'weights' (the
latest agent variables and step counters) and 'learner_run_<id>' (a random id of this learner process, so that an
actor can tell a restarted learner from the one it wrote to). Actor i (`run_actor`, `--job_name=actor --task=i
--learner_address=HOST:PORT`) fetches the newest weights before every unroll and writes its unrolls to the queue.
The learner's bookkeeping is `progress.LearnerProgress` and the actor's unrolls `actor.Actor`, as in
single-machine training. The data path, the policy lag and the reconnection rules: docs/impala_distributed.md.
"""

import dataclasses
import os
import queue
import re
import socket
import threading
import time
import uuid

from absl import logging
import numpy as np
import reverb
import tensorflow as tf
import tree

from scalable_agent import actor as actor_lib
from scalable_agent import agent as agent_lib
from scalable_agent import checkpoints
from scalable_agent import environments
from scalable_agent import progress as progress_lib
from scalable_agent import py_process
from scalable_agent import settings as settings_lib

UNROLLS_TABLE = 'unrolls'
WEIGHTS_TABLE = 'weights'
RUN_TABLE_PREFIX = 'learner_run_'
# Items of the unroll queue: 1, as the original's FIFOQueue(1) (module docstring: policy lag).
UNROLL_QUEUE_SIZE = 1
# Weights are published after every N learner steps (the original's actors read the variables at every unroll).
PUBLISH_EVERY_STEPS = 1

WAITING_LOG_INTERVAL_S = 30.  # How often a learner without unrolls says so.
ACTOR_PROGRESS_INTERVAL_S = 60.
_POLL_S = 1.  # How often blocking calls look at the connection (and at Ctrl-C).
_RPC_TIMEOUT_S = 5  # Deadline of one server_info probe (seconds, an int for Reverb).
_BACKOFF_S = (1., 30.)  # First and largest wait between reconnection attempts.
_FINISH_QUIET_S = 3.  # At the end the learner drains unrolls until none came for this long,
_FINISH_MAX_S = 15.  # or for at most this long.

_ADDRESS = re.compile(r'^(?P<host>\[[0-9a-fA-F:.]+\]|[^\s:/\[\]]+):(?P<port>\d{1,5})$')


class DistributedSetupError(ValueError):
  """A user-facing error of a multi-machine job: a bad setting, or a learner that is incompatible or unreachable.

  The message names the problem and the fix; `user_error` tells the launcher to print it alone, without a traceback.
  """
  user_error = True


class LearnerUnreachableError(DistributedSetupError):
  """An actor could not reach the learner at its address within the timeout (the message says what to do)."""


class LearnerLost(Exception):
  """The learner an actor was talking to is gone (unreachable, or replaced by a new run); `run_actor` reconnects."""


# ---------------------------------------------------------------------------------------------------------------------
# Addresses and settings.

def parse_address(address):
  """'host:port' -> (host, port). IPv6 hosts in brackets: '[::1]:8000'.

  Raises:
    DistributedSetupError: not host:port with a port in 1-65535.
  """
  match = _ADDRESS.match(address or '')
  if not match or not 0 < int(match.group('port')) < 65536:
    raise DistributedSetupError(f'learner_address must be HOST:PORT (e.g. learner-host:8000, 10.0.0.5:8000, [::1]:8000), got '
                     f'{address!r}. The learner logs its address when it starts; its port is --reverb_port.')
  return match.group('host'), int(match.group('port'))


def check_settings(settings):
  """Checks the settings of a distributed job (task >= 0).

  Raises:
    DistributedSetupError: an unknown job_name, a learner task other than 0, an actor task outside [0, num_actors), an actor
      without a (well-formed) learner_address, or a bad port / timeout.
  """
  if settings.job_name not in ('learner', 'actor'):
    raise DistributedSetupError(f"job_name must be 'learner' or 'actor', got {settings.job_name!r}.")
  if settings.job_name == 'learner':
    if settings.task != 0:
      raise DistributedSetupError(f'there is one learner, task 0 (as the original\'s job "learner"); got task={settings.task}. '
                       'Actors are --job_name=actor --task=0 ... num_actors - 1.')
    if not 0 <= settings.reverb_port < 65536:
      raise DistributedSetupError(f'reverb_port must be in [0, 65535] (0: pick a free port), got {settings.reverb_port}.')
  else:
    if settings.task >= settings.num_actors:
      raise DistributedSetupError(f'actor task {settings.task} is beyond num_actors={settings.num_actors}: actor tasks are 0 .. '
                       f'{settings.num_actors - 1} (actor i runs level actor_levels(level_name, num_actors)[i]). '
                       'Pass the learner\'s --num_actors, or a smaller --task.')
    if not settings.learner_address:
      raise DistributedSetupError('an actor needs --learner_address=HOST:PORT, the learner\'s host and --reverb_port (the '
                       'learner logs it when it starts).')
    parse_address(settings.learner_address)
    for name in ('connect_timeout_s', 'reconnect_timeout_s'):
      if not getattr(settings, name) > 0:
        raise DistributedSetupError(f'{name} must be > 0 (seconds), got {getattr(settings, name)}.')


# ---------------------------------------------------------------------------------------------------------------------
# What travels through the tables.

def unroll_signature(settings, num_actions, frame_shape):
  """The nest of `tf.TensorSpec` of one unroll in the 'unrolls' table: `actor.ActorOutput` without batch dim.

  ActorOutput(level_name string [], agent_state LSTMState(c, h) float32 [256] each,
    env_outputs StepOutput(reward float32 [T + 1], info StepOutputInfo(episode_return float32 [T + 1],
      episode_step int32 [T + 1]), done bool [T + 1], observation (frame uint8 [T + 1, H, W, C],
      instruction string [T + 1])),
    agent_outputs AgentOutput(action int32 [T + 1], policy_logits float32 [T + 1, num_actions],
      baseline float32 [T + 1])), T = unroll_length: the original's queue element (reference impala.md section 6).
  """
  steps = settings.unroll_length + 1
  spec = lambda shape, dtype: tf.TensorSpec([steps] + list(shape), dtype)
  state = tf.TensorSpec([agent_lib.CORE_LSTM_SIZE], tf.float32)
  return actor_lib.ActorOutput(
      level_name=tf.TensorSpec([], tf.string),
      agent_state=agent_lib.LSTMState(state, state),
      env_outputs=environments.StepOutput(
          reward=spec([], tf.float32),
          info=environments.StepOutputInfo(spec([], tf.float32), spec([], tf.int32)),
          done=spec([], tf.bool),
          observation=(spec(frame_shape, tf.uint8), spec([], tf.string))),
      agent_outputs=agent_lib.AgentOutput(spec([], tf.int32), spec([num_actions], tf.float32), spec([], tf.float32)))


def _weight_variables(agent):
  """The agent's variables in the original creation order (`Agent.tf1_variables`): what is published."""
  return list(agent.tf1_variables().values())


def weights_signature(agent):
  """The nest of `tf.TensorSpec` of a 'weights' item.

  {'finished': bool [] (the learner reached total_environment_frames), 'num_environment_frames': int64 [] (the
   global step, as the original's), 'step': int64 [] (learner steps taken by this learner process),
   'weights': tuple of the agent's variables in `Agent.tf1_variables()` order, each spec named after its original
   TF1 name}.
  """
  return {
      'finished': tf.TensorSpec([], tf.bool),
      'num_environment_frames': tf.TensorSpec([], tf.int64),
      'step': tf.TensorSpec([], tf.int64),
      'weights': tuple(tf.TensorSpec(v.shape, v.dtype, name=name) for name, v in agent.tf1_variables().items()),
  }


def _flat_specs(signature):
  """[(path, shape list, dtype name, spec name)] of a spec nest, for comparing two signatures."""
  return [('/'.join(str(p) for p in path), spec.shape.as_list(), spec.dtype.name, spec.name or '')
          for path, spec in tree.flatten_with_path(signature)]


def _signature_differences(expected, actual):
  """Human-readable differences between two spec nests (empty when they match)."""
  if actual is None:
    return ['the table has no signature']
  expected_flat, actual_flat = _flat_specs(expected), _flat_specs(actual)
  differences = []
  if len(expected_flat) != len(actual_flat):
    differences.append(f'{len(actual_flat)} fields on the learner, {len(expected_flat)} here')
  for (path, shape, dtype, name), (_, other_shape, other_dtype, other_name) in zip(expected_flat, actual_flat):
    if (shape, dtype, name) != (other_shape, other_dtype, other_name):
      differences.append(f'{name or path}: learner {other_dtype}{other_shape}, here {dtype}{shape}')
  return differences


def _cast_unroll(unroll, signature):
  """An `Actor.unroll()` result as NumPy arrays of the signature's dtypes (strings as object arrays)."""
  flat_specs = tf.nest.flatten(signature)
  flat = tf.nest.flatten(unroll)
  if len(flat) != len(flat_specs):
    raise ValueError(f'an unroll has {len(flat)} fields, the unroll signature {len(flat_specs)}.')
  arrays = []
  for path_value, spec in zip(flat, flat_specs):
    array = np.asarray(path_value, dtype=object if spec.dtype == tf.string else spec.dtype.as_numpy_dtype)
    if list(array.shape) != spec.shape.as_list():
      raise ValueError(f'an unroll field has shape {list(array.shape)}, the learner expects {spec.shape.as_list()}.')
    arrays.append(array)
  return tf.nest.pack_sequence_as(signature, arrays)


# ---------------------------------------------------------------------------------------------------------------------
# Learner side.

def make_server(unroll_spec, weights_spec, port, run_id):
  """The learner's Reverb server (module docstring): 'unrolls', 'weights' and the run-id table.

  Args:
    unroll_spec: `unroll_signature(...)`.
    weights_spec: `weights_signature(agent)`.
    port: TCP port; 0 or None picks a free one (`server.port`).
    run_id: str, this learner process's id (the name of the run-id table).

  Raises:
    DistributedSetupError: the port is taken.
  """
  tables = [
      reverb.Table.queue(UNROLLS_TABLE, max_size=UNROLL_QUEUE_SIZE, signature=unroll_spec),
      reverb.Table(WEIGHTS_TABLE, sampler=reverb.selectors.Fifo(), remover=reverb.selectors.Fifo(), max_size=1,
                   rate_limiter=reverb.rate_limiters.MinSize(1), max_times_sampled=0, signature=weights_spec),
      reverb.Table.queue(RUN_TABLE_PREFIX + run_id, max_size=1),
  ]
  in_use = DistributedSetupError(
      f'the learner cannot serve on port {port}: it is in use (another learner on this machine?) or not allowed. '
      'Choose another --reverb_port (0 picks a free one) and give the actors that port in --learner_address.')
  if port:
    # gRPC binds with SO_REUSEPORT, so a second server on a taken port would start and share it with the first
    # (actors would reach either). A plain bind fails while anyone listens there.
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
      probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # TIME_WAIT of a previous learner is fine.
      try:
        probe.bind(('', port))
      except OSError:
        raise in_use from None
  try:
    return reverb.Server(tables, port=port or None)
  except (ValueError, RuntimeError) as e:
    if 'BuildAndStart' not in str(e):
      raise
    raise in_use from None


def _time_major(unrolls):
  """A batch of unrolls [B, T + 1, ...] -> ActorOutput with env_outputs and agent_outputs time-major [T + 1, B, ...]."""
  def swap(t):
    return tf.transpose(t, [1, 0] + list(range(2, t.shape.rank)))
  return actor_lib.ActorOutput(unrolls.level_name, unrolls.agent_state,
                               tf.nest.map_structure(swap, unrolls.env_outputs),
                               tf.nest.map_structure(swap, unrolls.agent_outputs))


def learner_dataset(server_address, unroll_spec, batch_size):
  """The learner's input pipeline: batches of unrolls from the 'unrolls' queue (module docstring).

  Returns:
    a `tf.data.Dataset` of `actor.ActorOutput`: level_name string [B], agent_state (c, h) [B, 256],
    env_outputs and agent_outputs time-major [T + 1, B, ...]. It waits as long as needed for unrolls.
  """
  dataset = reverb.TrajectoryDataset(
      server_address, UNROLLS_TABLE,
      dtypes=tf.nest.map_structure(lambda s: s.dtype, unroll_spec),
      shapes=tf.nest.map_structure(lambda s: s.shape, unroll_spec),
      max_in_flight_samples_per_worker=1,  # One unroll on its way: the original's dequeue_many taking one at a time.
      num_workers_per_iterator=1)  # A FIFO table needs exactly one worker (Reverb's documentation).
  dataset = dataset.map(lambda sample: sample.data)
  dataset = dataset.batch(batch_size, drop_remainder=True)
  dataset = dataset.map(_time_major)
  return dataset.prefetch(1)  # The StagingArea: one batch ready while a step runs.


def _numpy_batch(batch):
  """The parts of a batch the episode logging needs, as NumPy (`actor.finished_episodes`)."""
  level_names = np.array([n.decode() for n in batch.level_name.numpy()], dtype=object)
  env_outputs = tf.nest.map_structure(lambda t: t.numpy(), batch.env_outputs._replace(observation=()))
  return actor_lib.ActorOutput(level_names, None, env_outputs, None)


class WeightsPublisher:
  """Publishes the learner's variables to the 'weights' table.

  `publish` snapshots the variables (NumPy copies) in the calling thread and hands the snapshot to a background
  thread that inserts it: a Reverb insert compresses the whole snapshot (about 80 ms for the 6.5 MB of the default
  network on one CPU core), which the learner does not wait for. When a newer snapshot arrives before the previous
  one was inserted, the older is dropped: the table always gets the newest weights.
  """

  def __init__(self, client, agent):
    self._client = client
    self._variables = _weight_variables(agent)
    # A plain lock and an event polled with a timeout (no Condition): a Ctrl-C in the learner's thread in the middle
    # of `publish` cannot leave the publisher thread waiting for ever.
    self._lock = threading.Lock()
    self._pending = None
    self._wakeup = threading.Event()
    self._insert_lock = threading.Lock()
    self._closed = False
    self.error = None
    self.num_published = 0
    self._thread = threading.Thread(target=self._run, name='weights-publisher', daemon=True)
    self._thread.start()

  def _snapshot(self, num_environment_frames, step, finished):
    return {'finished': np.bool_(finished), 'num_environment_frames': np.int64(num_environment_frames),
            'step': np.int64(step), 'weights': tuple(np.array(v.numpy()) for v in self._variables)}

  def _insert(self, snapshot):
    with self._insert_lock:
      self._client.insert(snapshot, priorities={WEIGHTS_TABLE: 1.})
      self.num_published += 1

  def publish(self, num_environment_frames, step, finished=False, block=False):
    """Publishes the current variables with the counters; `block`: insert now, in this thread (and drop any pending
    snapshot, which is older)."""
    if self.error is not None:
      raise RuntimeError(f'publishing the weights failed: {self.error!r}') from self.error
    snapshot = self._snapshot(num_environment_frames, step, finished)
    if block:
      with self._lock:
        self._pending = None
      self._insert(snapshot)
      return
    with self._lock:
      self._pending = snapshot
    self._wakeup.set()

  def _run(self):
    while not self._closed:
      self._wakeup.wait(timeout=_POLL_S)
      self._wakeup.clear()
      with self._lock:
        snapshot, self._pending = self._pending, None
      if snapshot is None or self._closed:
        continue
      try:
        self._insert(snapshot)
      except Exception as e:  # pylint: disable=broad-except
        if not self._closed:
          logging.exception('Publishing the weights failed.')
          self.error = e
        return

  def close(self):
    self._closed = True
    self._wakeup.set()
    self._thread.join(timeout=10.)


class _BatchReader:
  """Takes batches from the dataset iterator in a helper thread, so that the learner's wait stays interruptible
  (Ctrl-C) and can log that it is waiting. No buffering beyond the dataset's own prefetch: the thread asks for the
  next batch only when the learner wants one. The thread is a daemon: one still blocked in the iterator when the
  learner stops (no unroll came) does not keep the process alive."""

  def __init__(self, dataset):
    self._iterator = iter(dataset)
    self._requests = queue.Queue()
    self._results = queue.Queue()
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
  unroll_spec = unroll_signature(settings, agent.num_actions, frame_shape)
  run_id = uuid.uuid4().hex[:16]
  server = make_server(unroll_spec, weights_signature(agent), settings.reverb_port, run_id)
  client = reverb.Client(f'localhost:{server.port}')
  publisher = WeightsPublisher(client, agent)
  publisher.publish(frames, step=0, block=True)
  address = f'{_host_name()}:{server.port}'
  logging.info('Learner (run %s) serving on port %d: start actor i (0 <= i < %d) with this configuration and '
               '--job_name=actor --task=i --learner_address=%s', run_id, server.port, settings.num_actors, address)
  reader = _BatchReader(learner_dataset(f'localhost:{server.port}', unroll_spec, settings.batch_size))
  step = 0
  finished = False
  try:
    waiting_since = time.monotonic()
    while not progress.done and not progress_lib.stop_requested():
      batch = reader.next(timeout=_POLL_S)
      if batch is None:
        if publisher.error is not None:
          raise RuntimeError(f'publishing the weights failed: {publisher.error!r}') from publisher.error
        if time.monotonic() - waiting_since >= WAITING_LOG_INTERVAL_S:
          logging.info('No unrolls for %.0f s: waiting for actors (--job_name=actor --task=0 .. %d '
                       '--learner_address=%s).', time.monotonic() - waiting_since, settings.num_actors - 1, address)
          waiting_since = time.monotonic()
        continue
      metrics = {k: v.numpy() for k, v in learner.step(batch.agent_state, batch.env_outputs,
                                                       batch.agent_outputs).items()}
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
# Actor side.

def _run_marker(infos):
  names = [name for name in infos if name.startswith(RUN_TABLE_PREFIX)]
  return names[0][len(RUN_TABLE_PREFIX):] if len(names) == 1 else None


@dataclasses.dataclass
class _Counters:
  unrolls: int = 0
  reconnections: int = 0


class LearnerConnection:
  """An actor's connection to the learner's Reverb server: the latest weights, unroll writes, reconnection.

  Every blocking call polls the server every second (`server_info`): an unreachable server or another run id
  raises `LearnerLost`, after which `reconnect` makes a new client and writer.
  """

  def __init__(self, address, unroll_spec, weights_spec, name='actor'):
    self.address = address
    self._unroll_spec = unroll_spec
    self._weights_spec = weights_spec
    self._name = name
    self._client = None
    self._writer = None
    self.run_id = None
    self._weights_version = None

  # Connection.

  def connect(self, timeout_s):
    """Connects within `timeout_s` seconds and checks that the server is a compatible learner.

    Raises:
      LearnerUnreachableError: no answer within the timeout.
      DistributedSetupError: the server is not an IMPALA learner, or its unroll / weights signature differs from this actor's.
    """
    client = reverb.Client(self.address)
    try:
      infos = client.server_info(timeout=max(1, int(np.ceil(timeout_s))))
    except (reverb.errors.DeadlineExceededError, RuntimeError) as e:
      raise LearnerUnreachableError(self._unreachable_message(timeout_s, e)) from None
    missing = [t for t in (UNROLLS_TABLE, WEIGHTS_TABLE) if t not in infos]
    if missing or _run_marker(infos) is None:
      raise DistributedSetupError(f'the Reverb server at {self.address} is not an IMPALA learner (its tables: '
                       f'{", ".join(sorted(infos))}).')
    for table, expected, what in ((UNROLLS_TABLE, self._unroll_spec, 'unrolls'),
                                  (WEIGHTS_TABLE, self._weights_spec, 'network')):
      differences = _signature_differences(expected, infos[table].signature)
      if differences:
        raise DistributedSetupError(f'the learner at {self.address} expects other {what} than this actor makes: '
                         f'{"; ".join(differences[:6])}. Start every actor with the learner\'s configuration (the '
                         'same config file and flags, plus --job_name=actor --task=i --learner_address).')
    self._close_writer()
    self._client = client
    self._writer = client.trajectory_writer(num_keep_alive_refs=1)
    self.run_id = _run_marker(infos)
    self._weights_version = None

  def _unreachable_message(self, timeout_s, error):
    host, port = parse_address(self.address)
    return (f'cannot reach the IMPALA learner at {self.address} within {timeout_s:.0f} s '
            f'({type(error).__name__}: {str(error).strip().splitlines()[0] if str(error).strip() else ""}). Start the '
            f'learner first, on {host}: python run_train.py CONFIG --job_name=learner --task=0 '
            f'--num_actors=N --reverb_port={port} --logdir=RUN_DIR (it logs "serving on port {port}"); check that '
            f'{host} resolves from this machine and that TCP port {port} is open (firewall). The timeout is '
            'experiment.connect_timeout_s.')

  def reconnect(self, reason, timeout_s):
    """After `LearnerLost`: new client and writer, retrying with exponential backoff for up to `timeout_s`.

    Raises:
      LearnerUnreachableError: still unreachable after timeout_s.
      DistributedSetupError: the learner came back with other signatures.
    """
    logging.warning('%s: lost the learner at %s (%s); reconnecting (retrying for up to %.0f s).', self._name,
                    self.address, reason, timeout_s)
    self._close_writer()
    start = time.monotonic()
    delay, attempt = _BACKOFF_S[0], 0
    while True:
      attempt += 1
      remaining = timeout_s - (time.monotonic() - start)
      try:
        self.connect(min(_RPC_TIMEOUT_S, max(remaining, 1.)))
        logging.info('%s: reconnected to the learner at %s (run %s) after %.1f s.', self._name, self.address,
                     self.run_id, time.monotonic() - start)
        return
      except LearnerUnreachableError:
        remaining = timeout_s - (time.monotonic() - start)
        if remaining <= 0:
          raise LearnerUnreachableError(
              f'lost the learner at {self.address} ({reason}) and could not reconnect within {timeout_s:.0f} s '
              f'({attempt} attempts). If the learner finished or was stopped, this actor is not needed any more; '
              'otherwise restart the learner (it resumes from its checkpoint) and then this actor. The time is '
              'experiment.reconnect_timeout_s.') from None
        wait = min(delay, remaining)
        logging.info('%s: learner at %s unreachable (attempt %d); next attempt in %.0f s.', self._name,
                     self.address, attempt, wait)
        time.sleep(wait)
        delay = min(2 * delay, _BACKOFF_S[1])

  def _close_writer(self):
    if self._writer is not None:
      try:
        self._writer.close()
      except Exception:  # pylint: disable=broad-except
        pass
    self._writer = None

  def close(self):
    self._close_writer()

  def _probe(self):
    """server_info of the current learner; raises LearnerLost if unreachable or replaced by a new run."""
    try:
      infos = self._client.server_info(timeout=_RPC_TIMEOUT_S)
    except (reverb.errors.DeadlineExceededError, RuntimeError) as e:
      raise LearnerLost(f'no answer within {_RPC_TIMEOUT_S} s: {type(e).__name__}') from None
    run_id = _run_marker(infos)
    if run_id != self.run_id:
      raise LearnerLost(f'the learner restarted (run {self.run_id} -> {run_id})')
    return infos

  def _wait_for(self, fn):
    """Runs fn() in a helper thread, probing the server every second while it blocks. Returns fn's result."""
    result = {}

    def target():
      try:
        result['value'] = fn()
      except Exception as e:  # pylint: disable=broad-except
        result['error'] = e

    thread = threading.Thread(target=target, name='reverb-call', daemon=True)
    thread.start()
    while True:
      thread.join(timeout=_POLL_S)
      if not thread.is_alive():
        break
      self._probe()  # The call is abandoned (its daemon thread left behind) if the learner is lost.
    if 'error' in result:
      raise LearnerLost(f'{type(result["error"]).__name__}: {result["error"]}') from result['error']
    return result['value']

  # Data.

  def latest_weights(self):
    """The newest 'weights' item (dict, `weights_signature`) if one was published since the last call, else None."""
    infos = self._probe()
    version = infos[WEIGHTS_TABLE].rate_limiter_info.insert_stats.completed
    if version == self._weights_version:
      return None
    client = self._client
    sample = self._wait_for(lambda: next(client.sample(WEIGHTS_TABLE, 1, emit_timesteps=False,
                                                       unpack_as_table_signature=True)))
    self._weights_version = version
    return tree.map_structure(lambda column: column[0], sample.data)  # An item of one step: [1, ...] columns.

  def write(self, unroll):
    """Writes one unroll (an `actor.ActorOutput` of NumPy arrays) and waits until the queue takes it."""
    writer = self._writer
    writer.append(_cast_unroll(unroll, self._unroll_spec))
    writer.create_item(UNROLLS_TABLE, 1., tf.nest.map_structure(lambda column: column[-1], writer.history))
    while True:
      try:
        writer.flush(timeout_ms=int(_POLL_S * 1000))
        return
      except reverb.errors.DeadlineExceededError:
        self._probe()  # Still the same, reachable learner: its queue is full, keep waiting (the original blocked).
      except RuntimeError as e:
        raise LearnerLost(f'write failed: {e}') from None


def _set_single_threaded():
  """One TensorFlow thread per actor process (many actors share a machine); only before TF's runtime starts."""
  try:
    tf.config.threading.set_intra_op_parallelism_threads(1)
    tf.config.threading.set_inter_op_parallelism_threads(1)
  except RuntimeError:  # Already initialised (an actor run inside another program, e.g. a test).
    pass


def run_actor(settings, max_unrolls=None):
  """The actor job (`--job_name=actor --task=i --learner_address=HOST:PORT`), module docstring.

  Args:
    settings: `settings.Settings` with job_name 'actor'.
    max_unrolls: stop after writing this many unrolls (tests); None: until the learner finishes.

  Returns:
    int, the unrolls written.

  Raises:
    DistributedSetupError: bad settings (task beyond num_actors, no or malformed learner_address), or a learner whose
      unrolls or network differ from this actor's.
    LearnerUnreachableError: the learner could not be reached within connect_timeout_s at the start, or again
      within reconnect_timeout_s after it was lost.
  """
  check_settings(settings)
  settings_lib.check_settings(settings)
  progress_lib.clear_stop_request(saves=False)  # A signal stops an actor at once: it has nothing to save.
  _set_single_threaded()
  name = f'Actor {settings.task}'
  levels = settings_lib.actor_levels(settings.level_name, settings.num_actors)
  level_name = levels[settings.task]
  tf.random.set_seed(settings.seed + settings.task)
  with tf.device('/cpu:0'):
    agent = settings_lib.make_agent(settings, levels[0])
  frame_shape = tuple(settings_lib.environment_constructor(settings, levels[0]).frame_shape)
  connection = LearnerConnection(settings.learner_address,
                                 unroll_signature(settings, agent.num_actions, frame_shape),
                                 weights_signature(agent), name=name)
  logging.info('%s (%s): connecting to the learner at %s (waiting up to %.0f s).', name, level_name,
               settings.learner_address, settings.connect_timeout_s)
  connection.connect(settings.connect_timeout_s)
  logging.info('%s: connected to the learner at %s (run %s).', name, settings.learner_address, connection.run_id)

  variables = _weight_variables(agent)

  policy = actor_lib.numpy_policy(agent, device='/cpu:0')
  environment = actor_lib.EnvironmentProcess(settings, level_name, seed=settings.task + 1, name=name)
  actor = None
  counters = _Counters()
  learner_frames = learner_step = -1
  last_progress = time.monotonic()
  progress_unrolls = 0
  try:
    while max_unrolls is None or counters.unrolls < max_unrolls:
      try:
        weights = connection.latest_weights()
        if weights is not None:
          for variable, value in zip(variables, weights['weights']):
            variable.assign(value)
          learner_frames, learner_step = int(weights['num_environment_frames']), int(weights['step'])
          if weights['finished']:
            logging.info('%s: the learner finished the run at %d environment frames; %d unrolls written. Exiting.',
                         name, learner_frames, counters.unrolls)
            break
        if actor is None:
          actor = actor_lib.Actor(level_name, environment.start(), policy, settings.unroll_length,
                                  actor_lib.initial_agent_state(), actor_lib.initial_agent_output(agent.num_actions))
        try:
          unroll = actor.unroll()
        except py_process.ProcessClosedError as e:
          actor.reset(environment.restart(e))
          continue
        connection.write(unroll)
        counters.unrolls += 1
        if counters.unrolls == 1:
          logging.info('%s: first unroll written (learner at %d environment frames).', name, learner_frames)
        now = time.monotonic()
        if now - last_progress >= ACTOR_PROGRESS_INTERVAL_S:
          logging.info('%s: %d unrolls written (%.2f unrolls/s); acting with the weights of learner step %d '
                       '(%d environment frames).', name, counters.unrolls,
                       (counters.unrolls - progress_unrolls) / (now - last_progress), learner_step, learner_frames)
          last_progress, progress_unrolls = now, counters.unrolls
      except LearnerLost as e:
        counters.reconnections += 1
        connection.reconnect(str(e), settings.reconnect_timeout_s)
    return counters.unrolls
  finally:
    progress_lib.clear_stop_request()
    connection.close()
    environment.close(timeout=10.)
