"""IMPALA's actor: unrolls of one environment under the agent's policy, and the environment process it runs in.

An `Actor` (deepmind/scalable_agent experiment.py `build_actor`) makes `ActorOutput`s of unroll_length agent steps;
`batch_unrolls` stacks B of them time-major for the learner, and `finished_episodes` reads the episodes that ended in a
batch. An `EnvironmentProcess` is one level's environment in a `py_process` child (restarted when it dies);
`numpy_policy` turns the agent into the NumPy policy an `Actor` calls, and `actor_policies` makes single-machine
training's policies (`experiment.actor_inference`: batched TensorFlow calls or `numpy_agent`). Single-machine
training (`experiment.train`), test mode (`experiment.test`) and the multi-machine actor job
(`distributed.run_actor`) all use these.

Units: "frames" are environment frames (agent steps x num_action_repeats); an unroll has unroll_length agent steps
and carries unroll_length + 1 (the first overlaps the previous unroll).
"""

import collections
import contextlib

from absl import logging
import numpy as np
import tensorflow as tf

from scalable_agent import agent as agent_lib
from scalable_agent import dynamic_batching
from scalable_agent import environments
from scalable_agent import learner as learner_lib
from scalable_agent import numpy_agent
from scalable_agent import py_process
from scalable_agent import settings as settings_lib

# The queue element of the original (deepmind/scalable_agent experiment.py L94-97, L228-309). For one unroll
# (`Actor.unroll`):
#   level_name: str, the actor's level (for dmlab30 its training level name);
#   agent_state: LSTMState(c, h), float32 [256] each, the core state before env_outputs[0];
#   env_outputs: StepOutput of [T + 1, ...] arrays; [0] is the last step of the previous unroll;
#   agent_outputs: AgentOutput(action int32 [T + 1], policy_logits float32 [T + 1, A], baseline float32 [T + 1]);
#     agent_outputs[t].action led to env_outputs[t] (t >= 1).
# Batched by the learner: agent_state [B, 256], the outputs time-major [T + 1, B, ...].
ActorOutput = collections.namedtuple('ActorOutput', ['level_name', 'agent_state', 'env_outputs', 'agent_outputs'])


def _stack(values, axis=0):
  """np.stack; strings become object arrays (strings of any length, and what tf.constant takes as tf.string)."""
  stacked = np.stack([np.asarray(v) for v in values], axis=axis)
  return stacked.astype(object) if stacked.dtype.kind in 'US' else stacked


def _map_nest(fn, nest):
  """`tf.nest.map_structure(fn, nest)` for the nests an actor passes each step (namedtuples, tuples, lists, dicts of
  arrays), in a fraction of its time: this runs twice per agent step in every actor thread."""
  if isinstance(nest, tuple):
    values = [_map_nest(fn, x) for x in nest]
    return type(nest)(*values) if hasattr(nest, '_fields') else tuple(values)
  if isinstance(nest, list):
    return [_map_nest(fn, x) for x in nest]
  if isinstance(nest, dict):
    return type(nest)((k, _map_nest(fn, v)) for k, v in nest.items())
  return fn(nest)


def _with_batch_dimension(x):
  """x as an array [1, ...] (a view, not a copy); strings as an object array, as `_stack`."""
  x = np.asarray(x)[np.newaxis]
  return x.astype(object) if x.dtype.kind in 'US' else x


def _add_batch_dimension(nest):
  return _map_nest(_with_batch_dimension, nest)


def _remove_batch_dimension(nest):
  return _map_nest(lambda x: np.asarray(x)[0], nest)


class Actor:
  """Produces unrolls from one environment, as the original's `build_actor` (deepmind/scalable_agent experiment.py).

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
      batched_output, agent_state = self._policy(_with_batch_dimension(agent_output.action),
                                                 _add_batch_dimension(env_output), agent_state)
      agent_output = _remove_batch_dimension(batched_output)
      if not np.isfinite(agent_output.policy_logits).all():
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
  return [(str(name), float(ret), int(step)) for name, ret, step in zip(level_names[done],
                                                                        np.asarray(info.episode_return)[1:][done],
                                                                        np.asarray(info.episode_step)[1:][done])]


def actor_policies(settings, agent):
  """The policies of single-machine training's actors, as `settings.actor_inference` says.

  'batched' (the original): one `dynamic_batching` function for all actors: their pending steps in one TensorFlow
  call on the agent's variables. 'numpy': a `numpy_agent.NumpyPolicy` per actor (actor i's generator seeded with
  (seed, i)) on one `ParameterCopy`, with NumPy's BLAS on one thread until `close()`.

  Args:
    settings: `settings.Settings` (num_actors, seed, actor_inference).
    agent: the learner's agent.

  Returns:
    (list of num_actors policies (`Actor`'s policy callable), after_step() to call after each learner step (copies
    the parameters for 'numpy'), close() to call at the end (cancels pending batched calls)).
  """
  if settings.actor_inference == 'numpy':
    parameters = numpy_agent.ParameterCopy(agent)
    resources = contextlib.ExitStack()
    resources.enter_context(numpy_agent.single_threaded_blas())
    policies = [numpy_agent.NumpyPolicy(parameters, seed=(settings.seed, i)) for i in range(settings.num_actors)]
    return policies, parameters.refresh, resources.close

  @dynamic_batching.batch_fn_with_options(minimum_batch_size=1, maximum_batch_size=settings.num_actors, timeout_ms=100)
  def inference(last_action, env_output, core_state):
    agent_output, core_state = agent(last_action, env_output, core_state)
    return agent_output, agent_lib.LSTMState(*core_state)

  return [inference] * settings.num_actors, lambda: None, inference.close


def numpy_policy(agent, device=None):
  """The agent's one-step inference as the NumPy policy an `Actor` calls (one compiled `tf.function`).

  Its inputs enter the function as one tensor per dtype and its outputs leave it the same way (the layout of the
  single-machine batching, `dynamic_batching`): 5 tensors in and 2 out per step instead of 9 and 5, and so less of
  the memory TensorFlow 2.15 on Python 3.11 never frees per tensor (docs/impala/atari.md, "Memory").

  Args:
    agent: an `agent.Agent`.
    device: optional device name (e.g. '/cpu:0') the step runs on; None: TensorFlow's placement.

  Returns:
    callable (last_action int32 [B], env_output StepOutput of [B, ...], core_state (c, h) [B, 256]) ->
    (AgentOutput of NumPy [B, ...] arrays, LSTMState of NumPy [B, 256] arrays).
  """
  compiled = {}

  def build(structure, flat):
    layout = dynamic_batching.DtypeLayout([x.shape[1:] for x in flat], [x.dtype for x in flat])

    def packed_step(*packed_inputs):
      with tf.device(device) if device else contextlib.nullcontext():
        inputs = tf.nest.pack_sequence_as(structure, layout.unpack_tensors(packed_inputs, None))
        agent_output, core_state = agent(*inputs)
        outputs = [tf.convert_to_tensor(o) for o in tf.nest.flatten((agent_output, agent_lib.LSTMState(*core_state)))]
        compiled['outputs'] = dynamic_batching.DtypeLayout.of_tensors(outputs)
        compiled['structure'] = (agent_output, agent_lib.LSTMState(*core_state))
        return compiled['outputs'].pack_tensors(outputs)

    compiled['inputs'] = layout
    compiled['function'] = tf.function(packed_step).get_concrete_function(*layout.specs(None))

  def call(last_action, env_output, core_state):
    structure = (last_action, env_output, core_state)
    flat = [dynamic_batching.as_array(x) for x in tf.nest.flatten(structure)]
    if not compiled:
      build(structure, flat)
    packed = compiled['function'](*compiled['inputs'].pack_arrays(flat))
    flat_outputs = compiled['outputs'].unpack_arrays([t.numpy() for t in packed])
    return tf.nest.pack_sequence_as(compiled['structure'], flat_outputs)

  return call


# ---------------------------------------------------------------------------------------------------------------------
# Environments in processes.

# The environment of each environment process: NumPy in the child uses one thread (many children share a machine).
CHILD_ENVIRONMENT = {'OPENBLAS_NUM_THREADS': '1'}


class EnvironmentProcess:
  """One level's environment in a `py_process` child (spawn), started with `CHILD_ENVIRONMENT`, restarted when it
  dies.

  Usage: `env = EnvironmentProcess(settings, level, seed)`; `flow = env.start()` (or start `env.process` with
  `py_process.start_all(..., environment=CHILD_ENVIRONMENT)` and take `env.flow()`); after a
  `py_process.ProcessClosedError`, `flow = env.restart(error)`; finally `env.close()`.
  """

  def __init__(self, settings, level_name, seed, is_test=False, name=None):
    """Args:
      settings: `settings.Settings` (frame size, action repeats, dataset path).
      level_name: str, the level (`environments.environment_constructor`).
      seed: int, the environment's seed (actor i: i + 1; test mode: 1).
      is_test: test-mode levels (DeepMind Lab's test mixer seed).
      name: str for the log lines, e.g. 'Actor 3'; None: the level name.
    """
    self._constructor = settings_lib.environment_constructor(settings, level_name, seed, is_test=is_test)
    self.level_name = level_name
    self.name = name or level_name
    self.num_restarts = 0
    self.process = self._new_process()

  def _new_process(self):
    return py_process.PyProcess(self._constructor.env_type, **self._constructor.kwargs)

  def flow(self):
    """The `environments.FlowEnvironment` on the (started) process."""
    return environments.FlowEnvironment(self.process.proxy)

  def start(self):
    """Starts the process; returns its `flow()`."""
    self.process.start(CHILD_ENVIRONMENT)
    return self.flow()

  def restart(self, error):
    """Closes the (dead) process and starts a new one; returns its `flow()`."""
    logging.warning('%s (%s): its environment process stopped (%s); starting a new one.', self.name, self.level_name,
                    error)
    self.process.close(timeout=5.)
    self.process = self._new_process()
    flow = self.start()
    self.num_restarts += 1
    logging.info('%s: new environment process started (restart %d).', self.name, self.num_restarts)
    return flow

  def close(self, timeout=30.):
    self.process.close(timeout=timeout)
