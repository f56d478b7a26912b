"""IMPALA experiment: the train / test entry point, with the original command-line flags as gin parameters.

Each flag of the original `experiment.py` (reference impala.md section 2) is a parameter of `experiment` with the
same name and default, so `--level_name=dmlab30` on the command line and `experiment.level_name = 'dmlab30'` in a
gin file are the same setting. `logdir` is the run directory and comes from the command line (`--logdir` or
`--train_dir`), not from gin.

Single-machine training (`task=-1`, reference impala.md sections 6 and 10), all in this process but the environments:

  actor thread i (num_actors of them)           environment process i (`py_process`, spawn)
    `Actor.unroll()`: unroll_length agent steps, one `step` call per agent step; the agent's one-step inference
    goes through `dynamic_batching` (all actors' calls batched into one call on the learner's variables, so
    actors always act with the latest parameters)
      -> unroll queue (capacity 1, the original's FIFOQueue(1))
  prefetch thread: takes batch_size unrolls, stacks them time-major [T + 1, B, ...], makes tensors
      -> staging queue (capacity 1, the original's StagingArea: the next batch is ready while a step runs)
  learner (calling thread): `Learner.step`, episode logging and summaries, progress lines, checkpoints.

Policy lag: an unroll waits in the unroll queue or in a blocked actor while up to two batches are ahead of it (as
the original's queue + staging area), so a batch is usually 1-2 learner steps behind the parameters it trains.

Multi-machine training (`task >= 0`: `--job_name=learner --task=0` on one machine, `--job_name=actor --task=i
--learner_address=HOST:PORT` on others, as the original's cluster) is in `scalable_agent.distributed`: the same
Actor, unrolls, Learner, summaries and checkpoints, connected through a Reverb server on the learner.

Units: "frames" are environment frames (agent steps x num_action_repeats), as the original counts them; an unroll
has unroll_length agent steps and carries unroll_length + 1 (the first overlaps the previous unroll).
"""

import collections
import contextlib
import dataclasses
import inspect
import json
import os
import queue
import threading
import time

from absl import logging
import gin
import numpy as np
import tensorflow as tf

from scalable_agent import agent as agent_lib
from scalable_agent import checkpoints
from scalable_agent import dmlab30
from scalable_agent import dynamic_batching
from scalable_agent import environments
from scalable_agent import learner as learner_lib
from scalable_agent import networks
from scalable_agent import py_process

# The queue element of the original (reference impala.md section 6). For one unroll (`Actor.unroll`):
#   level_name: str, the actor's level (for dmlab30 its training level name);
#   agent_state: LSTMState(c, h), float32 [256] each, the core state before env_outputs[0];
#   env_outputs: StepOutput of [T + 1, ...] arrays; [0] is the last step of the previous unroll;
#   agent_outputs: AgentOutput(action int32 [T + 1], policy_logits float32 [T + 1, A], baseline float32 [T + 1]);
#     agent_outputs[t].action led to env_outputs[t] (t >= 1).
# Batched by the learner: agent_state [B, 256], the outputs time-major [T + 1, B, ...].
ActorOutput = collections.namedtuple('ActorOutput', ['level_name', 'agent_state', 'env_outputs', 'agent_outputs'])

CHECKPOINT_INTERVAL_S = 600  # The original's save_checkpoint_secs.
SUMMARY_INTERVAL_S = 30  # The original's save_summaries_secs (learner metrics; episode summaries are written each).
PROGRESS_INTERVAL_S = 30  # Progress lines (frames, frames/s, ETA).
TEST_SUMMARY_DIR = 'test'  # Test mode's TensorBoard events, under the run directory.
_POLL_S = 0.1  # How often blocked threads look at the stop flag.


class MissingCheckpointError(FileNotFoundError):
  """Test mode found no readable checkpoint; `user_error`: the launcher prints the message alone (exit 2)."""
  user_error = True


@dataclasses.dataclass(frozen=True)
class Settings:
  """The original flags (see `experiment`), minus logdir and mode."""
  test_num_episodes: int = 10
  task: int = -1
  job_name: str = 'learner'
  total_environment_frames: int = int(1e9)
  num_actors: int = 4
  batch_size: int = 2
  unroll_length: int = 100
  num_action_repeats: int = 4
  seed: int = 1
  entropy_cost: float = 0.00025
  baseline_cost: float = .5
  discounting: float = .99
  reward_clipping: str = 'abs_one'
  dataset_path: str = ''
  level_name: str = 'explore_goal_locations_small'
  width: int = 96
  height: int = 72
  learning_rate: float = 0.00048
  decay: float = .99
  momentum: float = 0.
  epsilon: float = .1
  # Multi-machine training (issue #8; not flags of the original): scalable_agent/distributed.py.
  learner_address: str = ''
  reverb_port: int = 8000
  connect_timeout_s: float = 60.
  reconnect_timeout_s: float = 600.
  distribution_strategy: str = 'default'
  checkpoint_interval_s: float = float(CHECKPOINT_INTERVAL_S)


@gin.configurable('experiment', module='scalable_agent', denylist=['logdir'])
def experiment(logdir,
               mode='train',
               test_num_episodes=10,
               task=-1,
               job_name='learner',
               total_environment_frames=int(1e9),
               num_actors=4,
               batch_size=2,
               unroll_length=100,
               num_action_repeats=4,
               seed=1,
               entropy_cost=0.00025,
               baseline_cost=.5,
               discounting=.99,
               reward_clipping='abs_one',
               dataset_path='',
               level_name='explore_goal_locations_small',
               width=96,
               height=72,
               learning_rate=0.00048,
               decay=.99,
               momentum=0.,
               epsilon=.1,
               learner_address='',
               reverb_port=8000,
               connect_timeout_s=60.,
               reconnect_timeout_s=600.,
               distribution_strategy='default',
               checkpoint_interval_s=float(CHECKPOINT_INTERVAL_S)):
  """Trains (`mode='train'`) or evaluates (`mode='test'`) IMPALA; the arguments are the original flags.

  Args:
    logdir: run directory: checkpoints and summaries (original flag `--logdir`).
    mode: 'train' or 'test'.
    test_num_episodes: episodes per level in test mode.
    task: task id; -1 for single-machine training, else the task of a multi-machine job: the learner is task 0,
      actor i is task i (0 <= i < num_actors). See scalable_agent/distributed.py and docs/impala_distributed.md.
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
    level_name: a level (see `scalable_agent.environments`), or 'dmlab30'.
    width: observation width in pixels.
    height: observation height in pixels.
    learning_rate: initial RMSProp learning rate (decays linearly to 0).
    decay: RMSProp decay.
    momentum: RMSProp momentum.
    epsilon: RMSProp epsilon.
    learner_address: actor jobs: HOST:PORT of the learner's Reverb server (its host and reverb_port).
    reverb_port: the learner job's Reverb server port; 0 picks a free one (logged).
    connect_timeout_s: actor jobs: how long the first connection to the learner may take before the actor stops
      with an error naming the address.
    reconnect_timeout_s: actor jobs: how long an actor that lost its learner retries (with backoff) before it stops.
    distribution_strategy: the learner's `tf.distribute` strategy: 'default' (one device), 'mirrored' (all local
      GPUs) or 'tpu' (`learner.make_strategy`); in both single-machine and multi-machine training.
    checkpoint_interval_s: seconds between the learner's checkpoints (the original's save_checkpoint_secs, 600);
      checkpoints are also written at the start, at the end and when a signal stops the run.

  Returns:
    train: the final number of environment frames (int), or for an actor job the number of unrolls it wrote.
    test: the results dict written as JSON (see `test`).

  Raises:
    ValueError: an unknown mode or a bad setting.
  """
  arguments = dict(locals())
  del arguments['logdir'], arguments['mode']
  settings = Settings(**arguments)
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


def bound_value(name):
  """The value `experiment.<name>` takes under the current gin configuration (binding, else default)."""
  bindings = gin.get_bindings('experiment')
  if name in bindings:
    return bindings[name]
  return inspect.signature(experiment).parameters[name].default


def preflight(program='train'):
  """Checks what the configured experiment needs before anything starts or is written (see
  `launcher.System.preflight`); `program` is unused (the mode decides).

  Raises:
    environments.MissingDependencyError: the level needs DeepMind Lab and it is not installed.
    ValueError: an unknown level, a bad setting (`check_settings`), or a bad setting of a multi-machine job
      (`distributed.check_settings`).
  """
  del program
  settings = Settings(**{field.name: bound_value(field.name) for field in dataclasses.fields(Settings)})
  check_settings(settings)
  if bound_value('mode') not in ('train', 'test'):
    raise ValueError(f"experiment.mode must be 'train' or 'test', got {bound_value('mode')!r}.")
  environments.check_level_available(settings.level_name)
  if settings.task >= 0 and bound_value('mode') == 'train':
    from scalable_agent import distributed  # pylint: disable=g-import-not-at-top  (needs Reverb)
    distributed.check_settings(settings)


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


# ---------------------------------------------------------------------------------------------------------------------
# Levels.

def training_levels(level_name):
  """The training levels: the keys of `dmlab30.LEVEL_MAPPING` for 'dmlab30', else [level_name]."""
  return list(dmlab30.LEVEL_MAPPING.keys()) if level_name == 'dmlab30' else [level_name]


def test_levels(level_name):
  """The test levels: the values of `dmlab30.LEVEL_MAPPING` for 'dmlab30', else [level_name]."""
  return list(dmlab30.LEVEL_MAPPING.values()) if level_name == 'dmlab30' else [level_name]


def actor_levels(level_name, num_actors):
  """Level of each actor, round-robin over `training_levels` (actor i: levels[i % len(levels)]), as the original."""
  levels = training_levels(level_name)
  return [levels[i % len(levels)] for i in range(num_actors)]


# ---------------------------------------------------------------------------------------------------------------------
# Actor.

def _stack(values, axis=0):
  """np.stack; strings become object arrays (strings of any length, and what tf.constant takes as tf.string)."""
  stacked = np.stack([np.asarray(v) for v in values], axis=axis)
  return stacked.astype(object) if stacked.dtype.kind in 'US' else stacked


def _add_batch_dimension(nest):
  return tf.nest.map_structure(lambda x: _stack([x]), nest)


def _remove_batch_dimension(nest):
  return tf.nest.map_structure(lambda x: np.asarray(x)[0], nest)


class Actor:
  """Produces unrolls from one environment, as the original's `build_actor` (reference impala.md section 6).

  It keeps (env_state, env_output, agent_state, agent_output) between unrolls. One unroll of T = unroll_length agent
  steps: from the held values, T times { agent_output, agent_state = policy(agent_output.action, env_output,
  agent_state); env_output, env_state = env.step(agent_output.action, env_state) }; the result is
  ActorOutput(level_name, agent_state at the start, [held env_output] + T env outputs, [held agent_output] + T agent
  outputs), and the last values are held for the next unroll, which therefore overlaps this one by one step.
  """

  def __init__(self, level_name, env, policy, unroll_length, initial_agent_state, initial_agent_output):
    """Args:
      level_name: str, reported in each ActorOutput.
      env: a `environments.FlowEnvironment` (or anything with its `initial()` / `step(action, state)`).
      policy: callable (last_action int32 [1], env_output StepOutput of [1, ...], agent_state (c, h) [1, 256]) ->
        (AgentOutput of [1, ...] arrays, agent_state); e.g. the batched agent step.
      unroll_length: T, agent steps per unroll (>= 1).
      initial_agent_state: (c, h) float32 [1, 256] each, the core state at the start and after `reset`.
      initial_agent_output: AgentOutput(action int32 [], policy_logits float32 [A], baseline float32 []), held before
        the first step (zeros in the original; its action is the first `last_action`).
    """
    if unroll_length < 1:
      raise ValueError(f'unroll_length must be >= 1, got {unroll_length}.')
    self.level_name = level_name
    self.unroll_length = unroll_length
    self._policy = policy
    self._initial_agent_state = tf.nest.map_structure(np.asarray, initial_agent_state)
    self._initial_agent_output = tf.nest.map_structure(np.asarray, initial_agent_output)
    self.reset(env)

  def reset(self, env):
    """Starts again on `env` (e.g. a new environment process): `env.initial()`, zero agent state and output."""
    self._env = env
    self._env_output, self._env_state = env.initial()
    self._agent_state = self._initial_agent_state
    self._agent_output = self._initial_agent_output

  def unroll(self):
    """Runs unroll_length agent steps. Returns an ActorOutput of NumPy arrays (module docstring; no batch dim)."""
    start_agent_state = _remove_batch_dimension(self._agent_state)
    env_outputs, agent_outputs = [self._env_output], [self._agent_output]
    env_output, env_state = self._env_output, self._env_state
    agent_output, agent_state = self._agent_output, self._agent_state
    for _ in range(self.unroll_length):
      batched_output, agent_state = self._policy(_stack([agent_output.action]), _add_batch_dimension(env_output),
                                                 agent_state)
      agent_output = _remove_batch_dimension(batched_output)
      if not np.all(np.isfinite(agent_output.policy_logits)):
        raise learner_lib.NonFiniteError(
            f'the policy\'s logits are non-finite ({np.asarray(agent_output.policy_logits).tolist()}) at a step of '
            f'{self.level_name}: the agent\'s parameters have diverged, so no valid action can be sampled. Lower '
            'experiment.learning_rate (or check the rewards) and train again from a checkpoint with finite values.')
      env_output, env_state = self._env.step(int(agent_output.action), env_state)
      env_outputs.append(env_output)
      agent_outputs.append(agent_output)
    # Only a complete unroll moves the held values (an exception leaves them at the previous unroll's end).
    self._env_output, self._env_state = env_output, env_state
    self._agent_output, self._agent_state = agent_output, agent_state
    stack = lambda *values: _stack(values)
    return ActorOutput(self.level_name, start_agent_state, tf.nest.map_structure(stack, *env_outputs),
                       tf.nest.map_structure(stack, *agent_outputs))


def initial_agent_state():
  """The core state of a new actor: LSTMState(c, h), float32 zeros [1, 256] each (`Agent.initial_state(1)`)."""
  zeros = np.zeros([1, agent_lib.CORE_LSTM_SIZE], np.float32)
  return agent_lib.LSTMState(zeros, zeros)


def initial_agent_output(num_actions):
  """The agent output held before an actor's first step: action 0, zero logits [num_actions], baseline 0."""
  return agent_lib.AgentOutput(np.int32(0), np.zeros([num_actions], np.float32), np.float32(0.))


def batch_unrolls(actor_outputs):
  """Stacks unrolls for the learner.

  Args:
    actor_outputs: B `ActorOutput`s of one unroll each (from `Actor.unroll`), all of the same T.

  Returns:
    ActorOutput(level_name object array [B], agent_state (c, h) [B, 256], env_outputs and agent_outputs time-major
    [T + 1, B, ...]), NumPy arrays.
  """
  level_names = _stack([o.level_name for o in actor_outputs])
  agent_state = tf.nest.map_structure(lambda *xs: _stack(xs), *[o.agent_state for o in actor_outputs])
  time_major = lambda *xs: _stack(xs, axis=1)
  env_outputs = tf.nest.map_structure(time_major, *[o.env_outputs for o in actor_outputs])
  agent_outputs = tf.nest.map_structure(time_major, *[o.agent_outputs for o in actor_outputs])
  return ActorOutput(level_names, agent_state, env_outputs, agent_outputs)


def finished_episodes(batch):
  """The episodes that end in a batch, skipping step 0 (it overlaps the previous unroll, as the original).

  Args:
    batch: a `batch_unrolls` result (NumPy, time-major).

  Returns:
    list of (level_name str, episode_return float, episode_step int (agent steps)), in time-major order.
  """
  done = np.asarray(batch.env_outputs.done)[1:]
  info = batch.env_outputs.info
  level_names = np.broadcast_to(np.asarray(batch.level_name), done.shape)
  return [(str(name), float(ret), int(step)) for name, ret, step in
          zip(level_names[done], np.asarray(info.episode_return)[1:][done], np.asarray(info.episode_step)[1:][done])]


# ---------------------------------------------------------------------------------------------------------------------
# Environments in processes.

@contextlib.contextmanager
def _single_threaded_children():
  """OPENBLAS_NUM_THREADS=1 for the environment processes started inside (NumPy in each child uses one thread)."""
  previous = os.environ.get('OPENBLAS_NUM_THREADS')
  os.environ['OPENBLAS_NUM_THREADS'] = '1'
  try:
    yield
  finally:
    if previous is None:
      os.environ.pop('OPENBLAS_NUM_THREADS', None)
    else:
      os.environ['OPENBLAS_NUM_THREADS'] = previous


def _environment_process(settings, level_name, seed, is_test):
  """An unstarted PyProcess of the level's environment (`environments.environment_constructor`)."""
  constructor = environments.environment_constructor(
      level_name, seed, is_test=is_test, width=settings.width, height=settings.height,
      dataset_path=settings.dataset_path, num_action_repeats=settings.num_action_repeats)
  return py_process.PyProcess(constructor.env_type, **constructor.kwargs)


def make_agent(settings, level_name):
  """The agent (`networks.make_agent`: gin `agent_network.network`) for a level's action set and frame shape."""
  constructor = environments.environment_constructor(
      level_name, seed=1, width=settings.width, height=settings.height, dataset_path=settings.dataset_path,
      num_action_repeats=settings.num_action_repeats)
  return networks.make_agent(constructor.num_actions, constructor.frame_shape)



def make_agent_and_learner(settings, level_name):
  """The agent and its `Learner` under the `distribution_strategy` (built in its scope unless 'default').

  Returns:
    (agent, learner).
  """
  if settings.distribution_strategy == 'default':
    scope = contextlib.nullcontext()  # The single-device learner, as before strategies existed.
  else:
    scope = learner_lib.make_strategy(settings.distribution_strategy).scope()
  with scope:
    agent = make_agent(settings, level_name)
    learner = learner_lib.Learner(
        agent, entropy_cost=settings.entropy_cost, baseline_cost=settings.baseline_cost,
        discounting=settings.discounting, reward_clipping=settings.reward_clipping,
        learning_rate=settings.learning_rate, decay=settings.decay, momentum=settings.momentum,
        epsilon=settings.epsilon, total_environment_frames=settings.total_environment_frames,
        num_action_repeats=settings.num_action_repeats)
  return agent, learner



def check_settings(settings):
  """Checks the settings every mode and job shares: each has its field's type (an int where the original flag is
  an integer, a number where it is a float, a string), counts are >= 1, intervals >= 0.

  Raises:
    ValueError: naming the setting (experiment.<name>, flag --<name>) and what it must be.
  """
  kinds = {int: ((int, np.integer), 'an int'), float: ((int, float, np.integer, np.floating), 'a number'),
           str: ((str,), 'a string')}
  for field in dataclasses.fields(Settings):
    value = getattr(settings, field.name)
    types, what = kinds[field.type]
    if not isinstance(value, types) or isinstance(value, (bool, np.bool_)):
      raise ValueError(f'experiment.{field.name} (--{field.name}) must be {what}, got {value!r}.')
  for name in ('num_actors', 'batch_size', 'unroll_length', 'num_action_repeats', 'total_environment_frames',
               'test_num_episodes'):
    if getattr(settings, name) < 1:
      raise ValueError(f'{name} must be >= 1, got {getattr(settings, name)} (experiment.{name}, --{name}).')
  for name in ('width', 'height'):
    if getattr(settings, name) < 1:
      raise ValueError(f'{name} must be >= 1 pixel, got {getattr(settings, name)} (--{name}).')
  if not settings.checkpoint_interval_s >= 0:
    raise ValueError(f'experiment.checkpoint_interval_s must be >= 0 seconds, got {settings.checkpoint_interval_s}.')
  if settings.reward_clipping not in learner_lib.REWARD_CLIPPING_MODES:
    raise ValueError(f'reward_clipping must be one of {", ".join(learner_lib.REWARD_CLIPPING_MODES)}; got '
                     f'{settings.reward_clipping!r}.')
  if settings.distribution_strategy not in learner_lib.STRATEGIES:
    raise ValueError(f'distribution_strategy must be one of {", ".join(learner_lib.STRATEGIES)}; got '
                     f'{settings.distribution_strategy!r}.')


def _check_settings(settings, mode='train'):
  if settings.task >= 0 and mode == 'train':
    raise ValueError(f'train() is single-machine training (task=-1); task={settings.task} (job_name='
                     f'{settings.job_name!r}) is a multi-machine job: run it with experiment() (run_train.py '
                     '--job_name=... --task=...) or scalable_agent.distributed.run_learner / run_actor.')
  check_settings(settings)


# ---------------------------------------------------------------------------------------------------------------------
# Training.

class _ActorThread:
  """Actor i: its environment process, its `Actor`, and the thread that feeds the unroll queue."""

  def __init__(self, index, level_name, settings, policy, num_actions, unrolls, stop):
    self.index = index
    self.level_name = level_name
    self.num_restarts = 0
    self._settings = settings
    self._unrolls = unrolls
    self._stop = stop
    self.process = _environment_process(settings, level_name, seed=index + 1, is_test=False)
    self._policy = policy
    self._num_actions = num_actions
    self.actor = None
    self.error = None
    self.thread = threading.Thread(target=self._run, name=f'actor-{index}', daemon=True)

  def start(self):
    """Builds the Actor on the (started) process and starts the thread."""
    self.actor = Actor(self.level_name, environments.FlowEnvironment(self.process.proxy), self._policy,
                       self._settings.unroll_length, initial_agent_state(), initial_agent_output(self._num_actions))
    self.thread.start()

  def _restart_environment(self, error):
    logging.warning('Actor %d (%s): its environment process stopped (%s); starting a new one.', self.index,
                    self.level_name, error)
    self.process.close(timeout=5.)
    self.process = _environment_process(self._settings, self.level_name, seed=self.index + 1, is_test=False)
    with _single_threaded_children():
      self.process.start()
    self.actor.reset(environments.FlowEnvironment(self.process.proxy))
    self.num_restarts += 1
    logging.info('Actor %d: new environment process started (restart %d).', self.index, self.num_restarts)

  def _run(self):
    try:
      while not self._stop.is_set():
        try:
          actor_output = self.actor.unroll()
        except py_process.ProcessClosedError as e:
          if self._stop.is_set():
            return
          self._restart_environment(e)
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
  """The StagingArea analog: batch_size unrolls -> `batch_unrolls` -> tensors -> `batches` (capacity 1)."""
  try:
    while not stop.is_set():
      items = []
      while len(items) < batch_size and not stop.is_set():
        try:
          items.append(unrolls.get(timeout=_POLL_S))
        except queue.Empty:
          pass
      if stop.is_set():
        return
      batch = batch_unrolls(items)
      tensors = tf.nest.map_structure(tf.convert_to_tensor, (batch.agent_state, batch.env_outputs,
                                                             batch.agent_outputs))
      while not stop.is_set():
        try:
          batches.put((batch, tensors), timeout=_POLL_S)
          break
        except queue.Full:
          pass
  except Exception as e:  # pylint: disable=broad-except
    logging.exception('The prefetch thread failed.')
    errors.append(e)


def _format_duration(seconds):
  if not np.isfinite(seconds):
    return '?'
  seconds = int(seconds)
  days, seconds = divmod(seconds, 86400)
  return (f'{days}d ' if days else '') + time.strftime('%H:%M:%S', time.gmtime(seconds))


class _Summaries:
  """Episode logging and TensorBoard summaries of the learner (reference impala.md section 10)."""

  def __init__(self, logdir, settings):
    self._writer = tf.summary.create_file_writer(logdir)
    self._settings = settings
    self._dmlab30 = settings.level_name == 'dmlab30'
    self._level_returns = {name: [] for name in training_levels(settings.level_name)}

  def episodes(self, episodes, num_environment_frames):
    """Logs each finished episode; summaries `<level>/episode_return` and `<level>/episode_frames` at the frame
    counter; for dmlab30, once every level has a return, `dmlab30/training_no_cap` and `dmlab30/training_cap_100`."""
    with self._writer.as_default():
      for level_name, episode_return, episode_step in episodes:
        logging.info('Level: %s Episode return: %f', level_name, episode_return)
        tf.summary.scalar(level_name + '/episode_return', episode_return, step=num_environment_frames)
        tf.summary.scalar(level_name + '/episode_frames', episode_step * self._settings.num_action_repeats,
                          step=num_environment_frames)
        if self._dmlab30:
          self._level_returns[level_name].append(episode_return)
      if self._dmlab30 and min(map(len, self._level_returns.values())) >= 1:
        no_cap = dmlab30.compute_human_normalized_score(self._level_returns, per_level_cap=None)
        cap_100 = dmlab30.compute_human_normalized_score(self._level_returns, per_level_cap=100)
        tf.summary.scalar('dmlab30/training_no_cap', no_cap, step=num_environment_frames)
        tf.summary.scalar('dmlab30/training_cap_100', cap_100, step=num_environment_frames)
        self._level_returns = {name: [] for name in self._level_returns}

  def metrics(self, metrics, num_environment_frames):
    """Scalar summaries of the learner's metrics (learning_rate, total_loss, ...) at the frame counter."""
    with self._writer.as_default():
      for name, value in metrics.items():
        if name != 'num_environment_frames':
          tf.summary.scalar(name, value, step=num_environment_frames)

  def flush(self):
    self._writer.flush()

  def close(self):
    self._writer.close()


class LearnerProgress:
  """The learner's bookkeeping around its steps, shared by single-machine training (`train`) and the multi-machine
  learner job (`distributed.run_learner`): restore or the first checkpoint, episode and metric summaries, progress
  lines (frames/s, ETA), periodic checkpoints, and the checkpoint at the end or on an interrupt.

  Usage: `frames = progress.start()`; return if `progress.done`; then per learner step
  `frames = progress.after_step(metrics, episodes)` (it stops the run on non-finite values, before any checkpoint
  holds them); finally `progress.finish()`, or `progress.interrupted(reason)` after a stop request (`request_stop`)
  or in an `except KeyboardInterrupt`, and `progress.close()`.
  """

  def __init__(self, logdir, settings, learner, manager, checkpoint_interval_s=None):
    self._settings = settings
    self._learner = learner
    self._manager = manager
    self._checkpoint_interval_s = (settings.checkpoint_interval_s if checkpoint_interval_s is None
                                   else checkpoint_interval_s)
    self._logdir = logdir
    self.summaries = None
    self.frames = self.start_frames = 0
    self._steps = 0

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
    if self.done:
      logging.info('Already trained for %d >= total_environment_frames = %d frames; nothing to do.', self.frames,
                   self._settings.total_environment_frames)
      return self.frames
    self.summaries = _Summaries(self._logdir, self._settings)
    self._start_time = self._last_progress_time = self._last_summary_time = time.monotonic()
    self._last_checkpoint_time = self._start_time
    self._last_progress_frames = self.frames
    return self.frames

  def after_step(self, metrics, episodes):
    """Books one learner step: metrics (dict of NumPy values with 'num_environment_frames'), the episodes that
    finished in its batch (`finished_episodes`). Returns the frame counter (int)."""
    self._steps += 1
    settings = self._settings
    self._check_finite(metrics)
    self.frames = frames = int(metrics['num_environment_frames'])
    self.summaries.episodes(episodes, frames)
    now = time.monotonic()
    if now - self._last_summary_time >= SUMMARY_INTERVAL_S or self._steps == 1:
      self.summaries.metrics(metrics, frames)
      self._last_summary_time = now
    if now - self._last_progress_time >= PROGRESS_INTERVAL_S:
      rate = (frames - self._last_progress_frames) / (now - self._last_progress_time)
      logging.info('Frames %d / %d (%.1f%%), %.0f frames/s (%.0f since the start), total_loss %.4g, '
                   'learning_rate %.3g, ETA %s.', frames, settings.total_environment_frames,
                   100. * frames / settings.total_environment_frames, rate,
                   (frames - self.start_frames) / (now - self._start_time), metrics['total_loss'],
                   metrics['learning_rate'],
                   _format_duration((settings.total_environment_frames - frames) / max(rate, 1e-9)))
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
    return path

  def _check_finite(self, metrics):
    """Raises `learner.NonFiniteError` naming the step and the tensors if the step's losses, or the variables and
    RMSProp slots after its update (a non-finite gradient makes them so), are not all finite."""
    losses = [f'{name} = {float(metrics[name])}' for name in learner_lib.LOSS_NAMES
              if name in metrics and not np.isfinite(metrics[name])]
    tensors = self._learner.nonfinite_variables()
    if not losses and not tensors:
      return
    parts = ([', '.join(losses)] if losses else []) + (
        [f'non-finite after its update (a non-finite gradient, or an update that overflowed): '
         f'{", ".join(tensors[:6])}' +
         (f' and {len(tensors) - 6} more' if len(tensors) > 6 else '')] if tensors else [])
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
                 self.frames - self.start_frames, (self.frames - self.start_frames) / max(elapsed, 1e-9),
                 self._save())

  def interrupted(self, reason='Ctrl-C'):
    """The checkpoint on a stop request or Ctrl-C. Logs the counter, not `frames`: a Ctrl-C may come inside a step,
    after the update (whose values `after_step` has then not checked)."""
    frames = int(self._learner.num_environment_frames.numpy())
    if frames != self.frames and self._learner.nonfinite_variables():
      logging.error('Interrupted at %d environment frames inside a step whose update is non-finite: no checkpoint '
                    'written; the last is %s.', frames, self._manager.latest_checkpoint)
      return
    path = self._save()
    logging.warning('Interrupted at %d environment frames of %d (%s). Checkpoint: %s', frames,
                    self._settings.total_environment_frames, reason, path)

  def close(self):
    if self.summaries is not None:
      self.summaries.close()


def train(logdir, settings, step_hook=None, checkpoint_interval_s=None):
  """Single-machine training (module docstring) until total_environment_frames; resumes from logdir's checkpoint.

  Args:
    logdir: run directory: `model.ckpt-<frames>` checkpoints (every checkpoint_interval_s seconds, at the start and
      at the end) and TensorBoard events.
    settings: `Settings`.
    step_hook: optional callable(actor_threads, metrics dict of NumPy values), called after each learner step (for
      tests: `actor_threads[i].process`, `.num_restarts`).
    checkpoint_interval_s: seconds between checkpoints; None: `settings.checkpoint_interval_s` (the original's
      600).

  Returns:
    int, the environment frames trained on when it stopped (counted over all runs of this logdir): at
    total_environment_frames, or earlier after a stop request (`request_stop`: the checkpoint is written).

  Raises:
    learner.NonFiniteError: the learner's losses or update, or an actor's logits, are non-finite (no checkpoint
      holds them).
    checkpoints.RunDirectoryError: logdir holds checkpoints but none is readable, or a save failed (disk full).
  """
  _check_settings(settings)
  tf.random.set_seed(settings.seed)
  os.makedirs(logdir, exist_ok=True)
  levels = actor_levels(settings.level_name, settings.num_actors)
  agent, learner = make_agent_and_learner(settings, levels[0])
  manager = checkpoints.make_checkpoint_manager(logdir, agent, learner.optimizer, learner.num_environment_frames)
  progress = LearnerProgress(logdir, settings, learner, manager, checkpoint_interval_s)
  frames = progress.start()  # The original also wrote a checkpoint at step 0.
  if progress.done:
    return frames

  @dynamic_batching.batch_fn_with_options(minimum_batch_size=1, maximum_batch_size=settings.num_actors,
                                          timeout_ms=100)
  def inference(last_action, env_output, core_state):
    agent_output, core_state = agent(last_action, env_output, core_state)
    return agent_output, agent_lib.LSTMState(*core_state)

  stop = threading.Event()
  unrolls = queue.Queue(maxsize=1)
  batches = queue.Queue(maxsize=1)
  errors = []
  actor_threads = [_ActorThread(i, level, settings, inference, agent.num_actions, unrolls, stop)
                   for i, level in enumerate(levels)]
  prefetch_thread = threading.Thread(target=_prefetch, args=(unrolls, batches, settings.batch_size, stop, errors),
                                     name='prefetch', daemon=True)
  logging.info('Training to %d environment frames: %d actors (%s); batch %d unrolls of %d agent steps, %d frames '
               'per agent step; a progress line every %d s.', settings.total_environment_frames, settings.num_actors,
               ', '.join(sorted(set(levels))), settings.batch_size, settings.unroll_length,
               settings.num_action_repeats, PROGRESS_INTERVAL_S)
  try:
    with _single_threaded_children():
      py_process.start_all([a.process for a in actor_threads])
    for actor_thread in actor_threads:
      actor_thread.start()
    prefetch_thread.start()

    while not progress.done and not stop_requested():
      batch_and_tensors = _next_batch(batches, actor_threads, errors, prefetch_thread)
      if batch_and_tensors is None:
        break
      batch, tensors = batch_and_tensors
      metrics = {k: v.numpy() for k, v in learner.step(*tensors).items()}
      progress.after_step(metrics, finished_episodes(batch))
      if step_hook is not None:
        step_hook(actor_threads, metrics)
    if stop_requested() and not progress.done:
      progress.interrupted(stop_requested())
    else:
      progress.finish()
    return progress.frames
  except KeyboardInterrupt:
    progress.interrupted()
    raise
  finally:
    clear_stop_request()
    stop.set()
    inference.close()  # Actors waiting for inference get CancelledError and stop.
    py_process.close_all([a.process for a in actor_threads])
    for actor_thread in actor_threads:
      if actor_thread.thread.is_alive():
        actor_thread.thread.join(timeout=10.)
    if prefetch_thread.is_alive():
      prefetch_thread.join(timeout=10.)
    progress.close()


def _next_batch(batches, actor_threads, errors, prefetch_thread):
  """The next prefetched batch, or None when a stop was requested (`request_stop`) while waiting; raises the error
  of an actor or of the prefetch thread if one failed."""
  while True:
    for actor_thread in actor_threads:
      if isinstance(actor_thread.error, learner_lib.NonFiniteError):
        raise learner_lib.NonFiniteError(f'actor {actor_thread.index}: {actor_thread.error}') from None
      if actor_thread.error is not None:
        raise RuntimeError(f'actor {actor_thread.index} ({actor_thread.level_name}) failed: '
                           f'{actor_thread.error!r}') from actor_thread.error
    if stop_requested():
      return None
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
  """Test mode (reference impala.md section 10): the latest checkpoint of logdir, test_num_episodes per test level.

  Levels run one after the other, each in one environment process (is_test=True, seed 1), with the training
  policy (sampled actions) and the LSTM state carried across episodes (reset by `done`), in unrolls of
  unroll_length; an episode counts where done[1:] (step 0 overlaps the previous unroll).

  Writes `<logdir>/test_results-<frames>.json` (frames: the checkpoint's frame counter), and TensorBoard scalars of
  its means in `<logdir>/test/` at step frames (`_write_test_summaries`):
    {'checkpoint': path, 'num_environment_frames': int, 'test_num_episodes': int,
     'levels': {level: {'mean_return': float, 'returns': [float, ...]}},
     'mean_return': mean over the levels of their mean returns,
     and for dmlab30 'human_normalized_score': {'no_cap': %, 'cap_100': %}}.

  Returns:
    That dict.

  Test mode runs on this machine whatever task / job_name say.

  Raises:
    MissingCheckpointError (a FileNotFoundError): logdir holds no readable checkpoint.
  """
  _check_settings(settings, mode='test')
  tf.random.set_seed(settings.seed)
  levels = test_levels(settings.level_name)
  agent = make_agent(settings, levels[0])
  num_environment_frames = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_environment_frames')
  manager = checkpoints.make_checkpoint_manager(logdir, agent, num_environment_frames=num_environment_frames)
  path, unreadable, _ = checkpoints.newest_readable(logdir)  # the files, not only the index file
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

  @tf.function
  def policy(last_action, env_output, core_state):
    agent_output, core_state = agent(last_action, env_output, core_state)
    return agent_output, agent_lib.LSTMState(*core_state)

  def numpy_policy(last_action, env_output, core_state):
    return tf.nest.map_structure(lambda t: t.numpy(), policy(last_action, env_output, core_state))

  level_returns = collections.OrderedDict()
  for level_name in levels:
    process = _environment_process(settings, level_name, seed=1, is_test=True)
    with _single_threaded_children():
      process.start()
    try:
      actor = Actor(level_name, environments.FlowEnvironment(process.proxy), numpy_policy, settings.unroll_length,
                    initial_agent_state(), initial_agent_output(agent.num_actions))
      returns = []
      while len(returns) < settings.test_num_episodes:
        output = actor.unroll()
        done = output.env_outputs.done[1:]
        returns.extend(float(r) for r in output.env_outputs.info.episode_return[1:][done])
    finally:
      process.close()
    level_returns[level_name] = returns[:settings.test_num_episodes]
    logging.info('Level: %s Mean episode return: %f', level_name, np.mean(level_returns[level_name]))

  results = {'checkpoint': path, 'num_environment_frames': frames, 'test_num_episodes': settings.test_num_episodes,
             'levels': {name: {'mean_return': float(np.mean(r)), 'returns': r} for name, r in level_returns.items()},
             'mean_return': float(np.mean([np.mean(r) for r in level_returns.values()]))}
  if settings.level_name == 'dmlab30':
    no_cap = float(dmlab30.compute_human_normalized_score(level_returns, per_level_cap=None))
    cap_100 = float(dmlab30.compute_human_normalized_score(level_returns, per_level_cap=100))
    logging.info('No cap.: %f Cap 100: %f', no_cap, cap_100)
    results['human_normalized_score'] = {'no_cap': no_cap, 'cap_100': cap_100}
  logging.info('Mean episode return over %d level(s): %f', len(levels), results['mean_return'])
  _write_test_summaries(os.path.join(logdir, TEST_SUMMARY_DIR), results)
  results_path = os.path.join(logdir, f'test_results-{frames}.json')
  with open(results_path, 'w') as f:
    json.dump(results, f, indent=2)
  logging.info('Test results: %s', results_path)
  return results


def _write_test_summaries(directory, results):
  """TensorBoard scalars of a test-mode `results` dict in `directory`, at step = the checkpoint's frames:
  `<level>/test_mean_return` per level, `test_mean_return`, and for dmlab30 `dmlab30/test_no_cap` and
  `dmlab30/test_cap_100`."""
  step = results['num_environment_frames']
  writer = tf.summary.create_file_writer(directory)
  with writer.as_default():
    for level_name, level in results['levels'].items():
      tf.summary.scalar(level_name + '/test_mean_return', level['mean_return'], step=step)
    tf.summary.scalar('test_mean_return', results['mean_return'], step=step)
    for name, value in results.get('human_normalized_score', {}).items():
      tf.summary.scalar(f'dmlab30/test_{name}', value, step=step)
  writer.close()
