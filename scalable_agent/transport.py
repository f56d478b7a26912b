"""What travels between the multi-machine IMPALA jobs (`distributed`) and how: the learner's Reverb server and its
tables, the signatures of an unroll and of the weights, the learner's input pipeline and weights publisher, and an
actor's `LearnerConnection` (the latest weights, unroll writes, reconnection).

Tables: 'unrolls' (a queue of UNROLL_QUEUE_SIZE = 1 item, the original's FIFOQueue(1): FIFO sampler and remover,
each item sampled once, inserts block while it is full; an item is an `UnrollItem`: the unroll and the frame counter
of the weights it was acted with, from which the learner measures the policy lag), 'weights' (max_size 1: a new publication replaces the old;
sampled any number of times; a sample waits for the first publication) and 'learner_run_<id>' (empty; its name
carries a random id of the learner process, so that an actor can tell a restarted learner from the one it wrote to).
"""

import collections
import re
import socket
import threading
import time
from typing import Any

from absl import logging
import numpy as np
import reverb
import tensorflow as tf
import tree

from scalable_agent import actor as actor_lib
from scalable_agent import agent as agent_lib
from scalable_agent import environments

UNROLLS_TABLE = 'unrolls'
WEIGHTS_TABLE = 'weights'
RUN_TABLE_PREFIX = 'learner_run_'
# Items of the unroll queue: 1, as the original's FIFOQueue(1) (docs/impala/distributed.md: policy lag).
UNROLL_QUEUE_SIZE = 1

POLL_S = 1.  # How often blocking calls look at the connection (and at Ctrl-C).
RPC_TIMEOUT_S = 5  # Deadline of one server_info probe (seconds, an int for Reverb).
BACKOFF_S = (1., 30.)  # First and largest wait between reconnection attempts.

_ADDRESS = re.compile(r'^(?P<host>\[[0-9a-fA-F:.]+\]|[^\s:/\[\]]+):(?P<port>\d{1,5})$')

# An item of the 'unrolls' table: `unroll` an `actor.ActorOutput` (`unroll_signature`), `policy_frames` int64 [] the
# `num_environment_frames` of the weights the actor acted with (-1: none yet). The learner's policy lag of the unroll,
# in learner updates, is (its frame counter before the update - policy_frames) / frames per update.
UnrollItem = collections.namedtuple('UnrollItem', ['unroll', 'policy_frames'])


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
# Addresses.


def parse_address(address):
  """'host:port' -> (host, port). IPv6 hosts in brackets: '[::1]:8000'.

  Raises:
    DistributedSetupError: not host:port with a port in 1-65535.
  """
  match = _ADDRESS.match(address or '')
  if not match or not 0 < int(match.group('port')) < 65536:
    raise DistributedSetupError(f'learner_address must be HOST:PORT (e.g. learner-host:8000, 10.0.0.5:8000, '
                                f'[::1]:8000), got {address!r}. The learner logs its address when it starts; its '
                                'port is --reverb_port.')
  return match.group('host'), int(match.group('port'))


# ---------------------------------------------------------------------------------------------------------------------
# What travels through the tables.


def unroll_signature(settings, num_actions, frame_shape):
  """The nest of `tf.TensorSpec` of one unroll in the 'unrolls' table: `actor.ActorOutput` without batch dim.

  ActorOutput(level_name string [], agent_state LSTMState(c, h) float32 [256] each,
    env_outputs StepOutput(reward float32 [T + 1], info StepOutputInfo(episode_return float32 [T + 1],
      episode_step int32 [T + 1]), done bool [T + 1], observation (frame uint8 [T + 1, H, W, C],
      instruction string [T + 1])),
    agent_outputs AgentOutput(action int32 [T + 1], policy_logits float32 [T + 1, num_actions],
      baseline float32 [T + 1])), T = unroll_length: the original's queue element (deepmind/scalable_agent
      experiment.py L228-309).
  """
  steps = settings.unroll_length + 1
  spec = lambda shape, dtype: tf.TensorSpec([steps] + list(shape), dtype)
  state = tf.TensorSpec([agent_lib.CORE_LSTM_SIZE], tf.float32)
  return actor_lib.ActorOutput(
      level_name=tf.TensorSpec([], tf.string), agent_state=agent_lib.LSTMState(state, state),
      env_outputs=environments.StepOutput(reward=spec([], tf.float32),
                                          info=environments.StepOutputInfo(spec([], tf.float32), spec([], tf.int32)),
                                          done=spec([], tf.bool), observation=(spec(frame_shape,
                                                                                    tf.uint8), spec([], tf.string))),
      agent_outputs=agent_lib.AgentOutput(spec([], tf.int32), spec([num_actions], tf.float32), spec([], tf.float32)))


def item_signature(unroll_spec):
  """The signature of the 'unrolls' table: `UnrollItem(unroll_spec, int64 [])`."""
  return UnrollItem(unroll_spec, tf.TensorSpec([], tf.int64))


def weight_variables(agent):
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
  return [('/'.join(str(p)
                    for p in path), spec.shape.as_list(), spec.dtype.name, spec.name or '')
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
  """The learner's Reverb server: 'unrolls', 'weights' and the run-id table (module docstring).

  Args:
    unroll_spec: `unroll_signature(...)`.
    weights_spec: `weights_signature(agent)`.
    port: TCP port; 0 or None picks a free one (`server.port`).
    run_id: str, this learner process's id (the name of the run-id table).

  Raises:
    DistributedSetupError: the port is taken.
  """
  tables = [
      reverb.Table.queue(UNROLLS_TABLE, max_size=UNROLL_QUEUE_SIZE, signature=item_signature(unroll_spec)),
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
  """The learner's input pipeline: batches of unrolls from the 'unrolls' queue, the next batch prefetched.

  Returns:
    a `tf.data.Dataset` of `UnrollItem`: `unroll` an `actor.ActorOutput` (level_name string [B], agent_state (c, h)
    [B, 256], env_outputs and agent_outputs time-major [T + 1, B, ...]), `policy_frames` int64 [B]. It waits as long
    as needed for unrolls.
  """
  spec = item_signature(unroll_spec)
  dataset = reverb.TrajectoryDataset(
      server_address,
      UNROLLS_TABLE,
      dtypes=tf.nest.map_structure(lambda s: s.dtype, spec),
      shapes=tf.nest.map_structure(lambda s: s.shape, spec),
      max_in_flight_samples_per_worker=1,  # One unroll on its way: the original's dequeue_many taking one at a time.
      num_workers_per_iterator=1)  # A FIFO table needs exactly one worker (Reverb's documentation).
  dataset = dataset.map(lambda sample: sample.data)
  dataset = dataset.batch(batch_size, drop_remainder=True)
  dataset = dataset.map(lambda item: UnrollItem(_time_major(item.unroll), item.policy_frames))
  return dataset.prefetch(1)  # The StagingArea: one batch ready while a step runs.


class WeightsPublisher:
  """Publishes the learner's variables to the 'weights' table.

  `publish` snapshots the variables (NumPy copies) in the calling thread and hands the snapshot to a background
  thread that inserts it: a Reverb insert compresses the whole snapshot (about 80 ms for the 6.5 MB of the default
  network on one CPU core), which the learner does not wait for. When a newer snapshot arrives before the previous
  one was inserted, the older is dropped: the table always gets the newest weights.
  """

  def __init__(self, client, agent):
    self._client = client
    self._variables = weight_variables(agent)
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
    return {
        'finished': np.bool_(finished),
        'num_environment_frames': np.int64(num_environment_frames),
        'step': np.int64(step),
        'weights': tuple(np.array(v.numpy()) for v in self._variables)
    }

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
      self._wakeup.wait(timeout=POLL_S)
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


# ---------------------------------------------------------------------------------------------------------------------
# Actor side.


def _run_marker(infos):
  names = [name for name in infos if name.startswith(RUN_TABLE_PREFIX)]
  return names[0][len(RUN_TABLE_PREFIX):] if len(names) == 1 else None


class LearnerConnection:
  """An actor's connection to the learner's Reverb server: the latest weights, unroll writes, reconnection.

  Every blocking call polls the server every second (`server_info`): an unreachable server or another run id
  raises `LearnerLost`, after which `reconnect` makes a new client and writer.
  """

  def __init__(self, address, unroll_spec, weights_spec, name='actor'):
    self.address = address
    self._unroll_spec = item_signature(unroll_spec)
    self._weights_spec = weights_spec
    self._name = name
    self._client: Any = None
    self._writer: Any = None
    self.run_id = None
    self._weights_version = None

  # Connection.

  def connect(self, timeout_s):
    """Connects within `timeout_s` seconds and checks that the server is a compatible learner.

    Raises:
      LearnerUnreachableError: no answer within the timeout.
      DistributedSetupError: the server is not an IMPALA learner, or its unroll / weights signature differs from this
        actor's.
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
    for table, expected, what in ((UNROLLS_TABLE, self._unroll_spec, 'unrolls'), (WEIGHTS_TABLE, self._weights_spec,
                                                                                  'network')):
      differences = _signature_differences(expected, infos[table].signature)
      if differences:
        raise DistributedSetupError(
            f'the learner at {self.address} expects other {what} than this actor makes: '
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
    delay, attempt = BACKOFF_S[0], 0
    while True:
      attempt += 1
      remaining = timeout_s - (time.monotonic() - start)
      try:
        self.connect(min(RPC_TIMEOUT_S, max(remaining, 1.)))
        logging.info('%s: reconnected to the learner at %s (run %s) after %.1f s.', self._name, self.address,
                     self.run_id,
                     time.monotonic() - start)
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
        logging.info('%s: learner at %s unreachable (attempt %d); next attempt in %.0f s.', self._name, self.address,
                     attempt, wait)
        time.sleep(wait)
        delay = min(2 * delay, BACKOFF_S[1])

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
      infos = self._client.server_info(timeout=RPC_TIMEOUT_S)
    except (reverb.errors.DeadlineExceededError, RuntimeError) as e:
      raise LearnerLost(f'no answer within {RPC_TIMEOUT_S} s: {type(e).__name__}') from None
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
      thread.join(timeout=POLL_S)
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
    sample = self._wait_for(
        lambda: next(client.sample(WEIGHTS_TABLE, 1, emit_timesteps=False, unpack_as_table_signature=True)))
    self._weights_version = version
    return tree.map_structure(lambda column: column[0], sample.data)  # An item of one step: [1, ...] columns.

  def write(self, unroll, policy_frames=-1):
    """Writes one unroll (an `actor.ActorOutput` of NumPy arrays) acted with the weights of `policy_frames`
    (their `num_environment_frames`; -1: none) and waits until the queue takes it."""
    writer = self._writer
    writer.append(_cast_unroll(UnrollItem(unroll, policy_frames), self._unroll_spec))
    writer.create_item(UNROLLS_TABLE, 1., tf.nest.map_structure(lambda column: column[-1], writer.history))
    while True:
      try:
        writer.flush(timeout_ms=int(POLL_S * 1000))
        return
      except reverb.errors.DeadlineExceededError:
        self._probe()  # Still the same, reachable learner: its queue is full, keep waiting (the original blocked).
      except RuntimeError as e:
        raise LearnerLost(f'write failed: {e}') from None
