"""The IMPALA learner (Espeholt et al. 2018, Section 4.2): V-trace losses, TF1 RMSProp, one compiled train step.

One step, as the original `build_learner` (deepmind/scalable_agent experiment.py L312-415):
  1. Unroll the agent over all T + 1 steps of the batch from the stored core state, feeding the actors' actions as
     the "last action" input (`agent_outputs.action[t]` led to `env_outputs[t]`).
  2. Bootstrap from the learner's baseline at the last step, then shift: behaviour logits and actions <-
     agent_outputs[1:], rewards / infos / done <- env_outputs[1:], learner outputs <- [:-1]. Index t then pairs
     pi(.|o_t), V(o_t) and mu(.|o_t) with a_t and with the reward and `done` that followed a_t.
  3. Clip the rewards, discounts = (1 - done) * discounting, V-trace (`vtrace.from_logits`, default clips).
  4. Loss = pg + baseline_cost * baseline + entropy_cost * entropy, each a SUM over T and B (not a mean).
  5. One RMSProp step with TF1 semantics (`RMSProp` below) at lr(f) = learning_rate * (1 - min(f, F) / F), f the
     environment frames so far and F = total_environment_frames. No gradient clipping, as the original code; with
     `gradient_clipping` = c > 0 (gin `learner.gradient_clipping`; the paper's Atari experts: 40, Table G.1) the
     gradients are first scaled by c / max(c, n), n their global norm (`tf.clip_by_global_norm`).
  6. num_environment_frames += B * T * num_action_repeats (environment frames, not agent steps).

Under a `tf.distribute` strategy (`make_strategy`; docs/impala/distributed_learner.md) the variables are mirrored,
each replica runs 1-4 on its B / R columns of the batch, the gradients are all-reduced with SUM (the loss is a sum
over T and B, so the sum of the shards' gradients is the whole batch's gradient), every replica applies the same
update 5 to its copy, and 6 runs once, by the whole batch's frames. Without a strategy (or with the default one)
the step is the single-device one, op for op. Gradient clipping, when on, acts on the all-reduced (whole-batch)
gradients.
"""

import contextlib
from typing import Any, Callable, Dict, Iterable, List, Optional, Sequence, Tuple, Union

import gin
import tensorflow as tf

from rundir import errors
from scalable_agent import vtrace

REWARD_CLIPPING_MODES = ('abs_one', 'soft_asymmetric')
STRATEGIES = ('default', 'mirrored', 'tpu')
LOSS_NAMES = ('total_loss', 'pg_loss', 'baseline_loss', 'entropy_loss')  # the losses `Learner.train_step` returns


class NonFiniteError(errors.DivergedError):
  """Training produced non-finite values (the learner's losses or update, an actor's logits): the run stops before
  any checkpoint holds them. A `rundir.errors.DivergedError` (a ValueError): the launcher prints the message alone,
  exit status `errors.EXIT_DIVERGED`."""


def make_strategy(name: str, devices: Optional[Sequence[str]] = None,
                  tpu: Optional[str] = None) -> tf.distribute.Strategy:
  """A `tf.distribute.Strategy` for the learner, by name.

  Args:
    name: 'default': the default strategy (one device, no replication: the single-device learner).
      'mirrored': `tf.distribute.MirroredStrategy` (synchronous data parallelism on one machine) over `devices`, or
      over all local GPUs, or, when there is no GPU, over all logical CPU devices (split the CPU with
      `tf.config.set_logical_device_configuration` before TensorFlow initialises its devices to get several).
      'tpu': `tf.distribute.TPUStrategy` on the TPU found by `TPUClusterResolver(tpu)` (the TPU system is
      initialised here).
    devices: 'mirrored' only: optional list of device names, e.g. ['/gpu:0', '/gpu:1'] or ['/cpu:0', '/cpu:1'].
    tpu: 'tpu' only: the TPU name or grpc:// address given to `TPUClusterResolver` ('local' on a TPU VM); None:
      `TPUClusterResolver`'s own discovery (the TPU_NAME environment variable, Cloud TPU metadata).

  Returns:
    the strategy. Build the `Agent` and the `Learner` under its `scope()`: the learner runs under it.

  Raises:
    ValueError: an unknown name (the message lists the choices), `devices` given for another strategy than
      'mirrored', or 'default' asked for inside another strategy's scope.
    RuntimeError: 'tpu' when no TPU can be reached (the resolver's or TPU initialisation's error is chained).
  """
  if name not in STRATEGIES:
    raise ValueError(f'unknown strategy {name!r}; the choices are {", ".join(STRATEGIES)}.')
  if devices is not None and name != 'mirrored':
    raise ValueError(f'devices are only for the mirrored strategy, not {name!r}.')
  if name == 'default':
    if tf.distribute.has_strategy():
      raise ValueError('make_strategy("default") inside another strategy\'s scope: call it outside any scope.')
    return tf.distribute.get_strategy()
  if name == 'mirrored':
    if devices is None:
      devices = [d.name for d in tf.config.list_logical_devices('GPU')
                ] or [d.name for d in tf.config.list_logical_devices('CPU')]
    # Without GPUs MirroredStrategy picks ReductionToOneDevice for the all-reduce itself; with GPUs, NCCL.
    return tf.distribute.MirroredStrategy(devices=list(devices))
  try:
    resolver = tf.distribute.cluster_resolver.TPUClusterResolver(tpu=tpu)
    tf.config.experimental_connect_to_cluster(resolver)
    tf.tpu.experimental.initialize_tpu_system(resolver)
  except (ValueError, RuntimeError, tf.errors.OpError) as e:
    raise RuntimeError(f'no TPU reachable for the tpu strategy (tpu={tpu!r}): {type(e).__name__}: '
                       f'{str(e).strip().splitlines()[0]} Give the TPU name or grpc:// address (tpu=..., \'local\' '
                       'on a TPU VM), or use the default or mirrored strategy.') from e
  return tf.distribute.TPUStrategy(resolver)


def clip_rewards(rewards: tf.types.experimental.TensorLike, reward_clipping: str) -> tf.Tensor:
  """The learner's reward clipping (the agent's own reward input is always clipped to [-1, 1] separately).

  Args:
    rewards: float32 [T, B], rewards per agent step.
    reward_clipping: 'abs_one': clip to [-1, 1]. 'soft_asymmetric': 5 tanh(r / 5) for r >= 0 and
      0.3 * 5 tanh(r / 5) = 1.5 tanh(r / 5) for r < 0, as the original code does (its paper's Fig. D.1 caption
      gives another formula; scalable_agent issue #53).

  Returns:
    float32 [T, B].

  Raises:
    ValueError: an unknown reward_clipping (the message lists the valid ones).
  """
  _check_reward_clipping(reward_clipping)
  rewards = tf.convert_to_tensor(rewards, tf.float32)
  if reward_clipping == 'abs_one':
    return tf.clip_by_value(rewards, -1., 1.)
  squeezed = tf.tanh(rewards / 5.0)
  # Negative rewards are given less weight than positive rewards.
  return tf.where(rewards < 0, .3 * squeezed, squeezed) * 5.


def _check_reward_clipping(reward_clipping: str) -> None:
  if reward_clipping not in REWARD_CLIPPING_MODES:
    raise ValueError(f'reward_clipping must be one of {", ".join(REWARD_CLIPPING_MODES)}; got {reward_clipping!r}.')


def linear_decay_learning_rate(initial_learning_rate: float, num_environment_frames: tf.types.experimental.TensorLike,
                               total_environment_frames: int) -> tf.Tensor:
  """lr(f) = initial_learning_rate * (1 - min(f, F) / F): TF1 `polynomial_decay` to 0, power 1, no cycling.

  Computed in float32 as TF1 does (the frame count is cast to float32 first).

  Args:
    initial_learning_rate: float, the learning rate at frame 0.
    num_environment_frames: int64 scalar, f, environment frames trained on so far (action repeats included).
    total_environment_frames: int, F, the frame at which the learning rate reaches 0.

  Returns:
    float32 scalar.
  """
  frames = tf.minimum(tf.cast(num_environment_frames, tf.float32), float(total_environment_frames))
  return initial_learning_rate * (1. - frames / float(total_environment_frames))


class RMSProp(tf.Module):
  """RMSProp with the semantics of TF1 `tf.train.RMSPropOptimizer` (not centered), which the original trains with.

  Per variable, with a mean-square slot `ms` initialised to 1.0 and a momentum slot `mom` initialised to 0:
    ms <- ms + (g^2 - ms) * (1 - decay)        (= decay * ms + (1 - decay) * g^2)
    mom <- momentum * mom + lr * g / sqrt(ms + epsilon)     (epsilon inside the square root)
    var <- var - mom
  The update runs TF's own `ResourceApplyRMSProp` kernel, the one TF1 ran. Gradients that are `tf.IndexedSlices`
  (embedding lookups) get TF1's sparse update: duplicate indices summed, then `ResourceSparseApplyRMSProp`, which
  leaves the slots of untouched rows unchanged.

  Keras' RMSprop differs (accumulator starting at 0, and in Keras 2 epsilon outside the square root); with
  epsilon = 0.1 the first steps differ a lot (one step from var = 1, g = 1, lr = 0.1, decay 0.99: 0.90465 with TF1,
  0.69849 with Keras 3).

  The slots are created eagerly by `create_slots` (outside any `tf.function`); `slots_for(variable)` returns them.
  They are named like TF1's: `<variable>/RMSProp` (ms) and `<variable>/RMSProp_1` (mom).
  """

  def __init__(self, learning_rate: Union[float, Callable[[], tf.Tensor]], decay: float = 0.9, momentum: float = 0.0,
               epsilon: float = 1e-10, name: str = 'RMSProp') -> None:
    """Args (defaults are TF1's; the learner passes the original flags):
      learning_rate: float, or a callable without arguments returning a float32 scalar, read at each update.
      decay: discounting factor of the mean square (rho).
      momentum: momentum factor.
      epsilon: added to the mean square inside the square root.
    """
    super().__init__(name=name)
    self._learning_rate = learning_rate
    self.decay = decay
    self.momentum = momentum
    self.epsilon = epsilon
    # Lists (not dicts keyed by variable) keep the slots checkpointable by tf.train.Checkpoint.
    self._ms_slots: List[tf.Variable] = []
    self._mom_slots: List[tf.Variable] = []
    self._slot_index: Dict[Any, int] = {}  # variable.ref() -> position in the slot lists.

  def learning_rate(self) -> tf.Tensor:
    """The current learning rate, float32 scalar."""
    lr = self._learning_rate() if callable(self._learning_rate) else self._learning_rate
    return tf.cast(lr, tf.float32)

  def create_slots(self, variables: Iterable[tf.Variable]) -> None:
    """Creates the slots of `variables` that have none yet (ms = 1, mom = 0, same shape and dtype)."""
    with tf.init_scope():
      for variable in variables:
        if variable.ref() in self._slot_index:
          continue
        name = variable.name[:-2] if variable.name.endswith(':0') else variable.name
        self._slot_index[variable.ref()] = len(self._ms_slots)
        self._ms_slots.append(
            tf.Variable(tf.ones(variable.shape, variable.dtype), trainable=False, name=name + '/RMSProp'))
        self._mom_slots.append(
            tf.Variable(tf.zeros(variable.shape, variable.dtype), trainable=False, name=name + '/RMSProp_1'))

  def slots_for(self, variable: tf.Variable) -> Tuple[tf.Variable, tf.Variable]:
    """(ms, mom) slot variables of `variable`, as TF1's `V/RMSProp` and `V/RMSProp_1`."""
    try:
      index = self._slot_index[variable.ref()]
    except KeyError:
      raise KeyError(f'RMSProp has no slots for {variable.name}; call create_slots([...]) on it first.') from None
    return self._ms_slots[index], self._mom_slots[index]

  def apply_gradients(self, grads_and_vars: Iterable[Tuple[Any, tf.Variable]]) -> None:
    """One update of each variable whose gradient is not None (as TF1's `minimize`). Returns nothing."""
    lr = self.learning_rate()
    decay, momentum, epsilon = (tf.constant(x, tf.float32) for x in (self.decay, self.momentum, self.epsilon))
    for grad, variable in grads_and_vars:
      if grad is None:
        continue
      ms, mom = self.slots_for(variable)
      if isinstance(grad, tf.IndexedSlices):
        unique_indices, positions = tf.unique(grad.indices)
        summed = tf.math.unsorted_segment_sum(grad.values, positions, tf.shape(unique_indices)[0])
        tf.raw_ops.ResourceSparseApplyRMSProp(var=variable.handle, ms=ms.handle, mom=mom.handle, lr=lr, rho=decay,
                                              momentum=momentum, epsilon=epsilon, grad=summed, indices=unique_indices)
      else:
        tf.raw_ops.ResourceApplyRMSProp(var=variable.handle, ms=ms.handle, mom=mom.handle, lr=lr, rho=decay,
                                        momentum=momentum, epsilon=epsilon, grad=grad)


def compute_baseline_loss(advantages: tf.Tensor) -> tf.Tensor:
  """0.5 * sum of squares (d loss / d baseline = -advantage). advantages: float32 [T, B] -> scalar."""
  return .5 * tf.reduce_sum(tf.square(advantages))


def compute_entropy_loss(logits: tf.Tensor) -> tf.Tensor:
  """Negative entropy summed over T and B: sum pi log pi. logits: float32 [T, B, A] -> scalar."""
  policy = tf.nn.softmax(logits)
  log_policy = tf.nn.log_softmax(logits)
  entropy_per_timestep = tf.reduce_sum(-policy * log_policy, axis=-1)
  return -tf.reduce_sum(entropy_per_timestep)


def compute_policy_gradient_loss(logits: tf.Tensor, actions: tf.Tensor, advantages: tf.Tensor) -> tf.Tensor:
  """sum_{t,b} -log pi(a_t | x_t) * stop_gradient(advantage_t).

  Args:
    logits: float32 [T, B, A], the learner's policy logits.
    actions: int32 [T, B].
    advantages: float32 [T, B], V-trace pg_advantages.

  Returns:
    float32 scalar.
  """
  cross_entropy = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=actions, logits=logits)
  return tf.reduce_sum(cross_entropy * tf.stop_gradient(advantages))


@gin.configurable('learner', module='scalable_agent', allowlist=['gradient_clipping'])
class Learner(tf.Module):
  """Trains an `Agent` on batches of actor unrolls (the original's `build_learner` and its optimizer).

  Usage:
    learner = Learner(agent)                         # hyper-parameters: the original flags and defaults
    metrics = learner.step(agent_state, env_outputs, agent_outputs)   # Python: builds once, then `train_step`

  Under a `tf.distribute` strategy (several GPUs, a TPU), the agent and the learner are built under its scope; the
  learner runs under the strategy of the scope it is built in (as Keras models do):
    strategy = make_strategy('mirrored')
    with strategy.scope():
      agent = Agent(num_actions)
      learner = Learner(agent)
    metrics = learner.step(agent_state, env_outputs, agent_outputs)   # the same whole batch, the same metrics

  `train_step` is the compiled `tf.function`; it is traced once per input shape. `step` creates the optimizer slots
  (eagerly) before its first call, so that `train_step` never creates variables. It is a graph function, not
  `jit_compile=True`: XLA cannot compile the agent's tf.string instruction input and string ops (V-trace inside it is
  XLA-compiled on its own). On 2 CPU cores, batch 32 x unroll 100 runs at about 800 environment frames/s
  (benchmarks/impala_learner.py).
  """

  def __init__(self, agent: Any, entropy_cost: float = 0.00025, baseline_cost: float = .5, discounting: float = .99,
               reward_clipping: str = 'abs_one', learning_rate: float = 0.00048, decay: float = .99,
               momentum: float = 0., epsilon: float = .1, total_environment_frames: int = int(1e9),
               num_action_repeats: int = 4, gradient_clipping: float = 0., name: str = 'learner') -> None:
    """Args (the original flags, same names and defaults, and gradient_clipping):
      agent: an `scalable_agent.agent.Agent` (its variables exist after construction), built under the same
        strategy scope as the learner.
      entropy_cost: weight of the entropy loss.
      baseline_cost: weight of the baseline loss.
      discounting: discount per agent step.
      reward_clipping: 'abs_one' or 'soft_asymmetric' (see `clip_rewards`).
      learning_rate: RMSProp learning rate at frame 0; it decays linearly to 0 at total_environment_frames.
      decay: RMSProp decay.
      momentum: RMSProp momentum.
      epsilon: RMSProp epsilon.
      total_environment_frames: environment frames (agent steps x num_action_repeats) of the whole run; the horizon
        of the learning-rate decay.
      num_action_repeats: environment frames per agent step, for the frame counter.
      gradient_clipping: c > 0: clip the gradients to global norm c before the update (the paper's Atari experts:
        40); 0: no clipping (the original code). Gin: `learner.gradient_clipping`. With it on, the metrics also
        hold `gradient_norm`, the global norm before clipping.
      name: module name.

    The learner runs under `tf.distribute.get_strategy()` at construction: the default strategy outside any scope
    (the single-device step), else the strategy whose `scope()` encloses the construction (`make_strategy`): its
    variables (RMSProp slots, frame counter) are then created under that scope, each batch is split across the
    replicas along the batch axis and the gradients are summed across them.

    Raises:
      ValueError: an unknown reward_clipping, total_environment_frames < 1, gradient_clipping < 0, or agent variables
        that were not created under the learner's strategy scope.
    """
    super().__init__(name=name)
    _check_reward_clipping(reward_clipping)
    if not gradient_clipping >= 0:
      raise ValueError(f'gradient_clipping must be >= 0 (0: off), got {gradient_clipping}.')
    if total_environment_frames < 1:
      raise ValueError(f'total_environment_frames must be >= 1 (the decay horizon), got {total_environment_frames}.')
    self._strategy = tf.distribute.get_strategy()
    self._distributed = tf.distribute.has_strategy()
    if self._distributed:
      outside = [v.name for v in agent.variables if not self._strategy.extended.variable_created_in_scope(v)]
      if outside:
        raise ValueError(f'{len(outside)} agent variables (e.g. {outside[0]}) were not created under the scope of '
                         f'the learner\'s {type(self._strategy).__name__}: build the Agent inside the same '
                         '`with strategy.scope():` as the Learner.')
    elif any(isinstance(v, tf.distribute.DistributedValues) for v in agent.variables):
      raise ValueError('the agent\'s variables are distributed (the Agent was built under a strategy scope) but the '
                       'Learner was not: build the Learner inside the same `with strategy.scope():`.')
    self.agent = agent
    self.entropy_cost = entropy_cost
    self.baseline_cost = baseline_cost
    self.discounting = discounting
    self.reward_clipping = reward_clipping
    self.initial_learning_rate = learning_rate
    self.total_environment_frames = int(total_environment_frames)
    self.num_action_repeats = num_action_repeats
    self.gradient_clipping = float(gradient_clipping)
    # Already in the strategy's scope when distributed: made explicit, since the slots must be created in it.
    with self._strategy.scope() if self._distributed else contextlib.nullcontext():
      # The global step, in environment frames: the original's `num_environment_frames` (int64, not trainable).
      self.num_environment_frames = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_environment_frames')
      self.optimizer = RMSProp(self.learning_rate, decay=decay, momentum=momentum, epsilon=epsilon)
      self.optimizer.create_slots(agent.trainable_variables)
    self._finite_flags: Optional[Callable[
        [], tf.Tensor]] = None  # `nonfinite_variables`' compiled check, made at its first call

  @property
  def strategy(self) -> tf.distribute.Strategy:
    """The `tf.distribute.Strategy` the learner runs under (the default strategy for the single-device learner)."""
    return self._strategy

  @property
  def num_replicas(self) -> int:
    """Replicas the batch is split across (1 for the single-device learner)."""
    return self._strategy.num_replicas_in_sync

  def learning_rate(self) -> tf.Tensor:
    """The learning rate at the current frame count, float32 scalar."""
    return linear_decay_learning_rate(self.initial_learning_rate, self.num_environment_frames,
                                      self.total_environment_frames)

  def step(self, agent_state: Any, env_outputs: Any, agent_outputs: Any) -> Dict[str, tf.Tensor]:
    """One training step (see `train_step`); creates any missing optimizer slots first, eagerly.

    Raises:
      ValueError: under a distributing strategy, a batch size that its number of replicas does not divide.
    """
    if self._distributed:
      self._check_batch_size(agent_outputs.action.shape[1])
      with self._strategy.scope():
        self.optimizer.create_slots(self.agent.trainable_variables)
    else:
      self.optimizer.create_slots(self.agent.trainable_variables)
    return self.train_step(agent_state, env_outputs, agent_outputs)

  def nonfinite_variables(self) -> List[str]:
    """The TF1 names of the agent's variables and RMSProp slots that hold a non-finite value ([] if none): after a
    step whose gradient was non-finite, the update made them so. Reads them in one compiled call, apart from the
    train step (which it leaves unchanged)."""
    names: List[Tuple[str, tf.Variable]] = []
    for name, variable in self.agent.tf1_variables().items():
      mean_square, momentum = self.optimizer.slots_for(variable)
      names += [(name, variable), (name + '/RMSProp', mean_square), (name + '/RMSProp_1', momentum)]
    if self._finite_flags is None:
      self._finite_flags = tf.function(lambda: tf.stack([tf.reduce_all(tf.math.is_finite(v)) for _, v in names]))
    flags = self._finite_flags().numpy()
    return [name for (name, _), finite in zip(names, flags) if not finite]

  def _check_batch_size(self, batch_size: Optional[int]) -> None:
    if batch_size is not None and batch_size % self.num_replicas:
      raise ValueError(f'the batch size {batch_size} is not divisible by the {self.num_replicas} replicas of the '
                       f'{type(self._strategy).__name__}: use a batch size that is a multiple of {self.num_replicas}.')

  @tf.function
  def train_step(self, agent_state: Any, env_outputs: Any, agent_outputs: Any) -> Dict[str, tf.Tensor]:
    """Unroll, V-trace losses, one RMSProp update, frame counter update (module docstring).

    Args:
      agent_state: the agent's core state before step 0, (c, h) float32 [B, 256] each.
      env_outputs: StepOutput(reward float32, info, done bool, observation=(frame uint8 [.., H, W, C],
        instruction tf.string)), every field time-major [T + 1, B, ...]; step 0 is the last step of the previous
        unroll.
      agent_outputs: AgentOutput(action int32, policy_logits float32 [.., A], baseline float32) of the actors,
        time-major [T + 1, B, ...]; action[t] is the action that led to env_outputs[t].

    Under a distributing strategy these are the whole batch too: replica r trains on columns [r B / R, (r + 1) B / R)
    of it (B must be a multiple of the number of replicas R).

    Returns:
      dict of scalars: total_loss, pg_loss, baseline_loss, entropy_loss (unweighted sums over T and B; total_loss
      weights them), learning_rate (the one used by this update), num_environment_frames (int64, after it) and,
      with gradient_clipping on, gradient_norm (the global norm before clipping). Under
      a distributing strategy the losses are summed over the replicas (the whole batch's sums).
    """
    if self._distributed:
      return self._distributed_train_step(agent_state, env_outputs, agent_outputs)
    variables = self.agent.trainable_variables
    with tf.GradientTape() as tape:
      losses = self._losses(agent_state, env_outputs, agent_outputs)
    learning_rate = self.learning_rate()  # Read before the frame counter moves, as the original.
    gradients = tape.gradient(losses['total_loss'], variables)
    gradients, clip_metrics = self._clip(gradients)
    self.optimizer.apply_gradients(zip(gradients, variables))
    # B * T * num_action_repeats; tf.function orders this after the update, like the original's control dependency.
    self.num_environment_frames.assign_add(self._batch_frames(agent_outputs))
    return dict(losses, learning_rate=learning_rate, num_environment_frames=tf.identity(self.num_environment_frames),
                **clip_metrics)

  def _clip(self, gradients: Sequence[Any]) -> Tuple[Sequence[Any], Dict[str, tf.Tensor]]:
    """(gradients scaled to global norm <= gradient_clipping, {'gradient_norm': norm before}) when clipping is on;
    else (gradients, {}). None gradients stay None."""
    if not self.gradient_clipping:
      return gradients, {}
    present = [i for i, g in enumerate(gradients) if g is not None]
    clipped, norm = tf.clip_by_global_norm([gradients[i] for i in present], self.gradient_clipping)
    gradients = list(gradients)
    for i, g in zip(present, clipped):
      gradients[i] = g
    return gradients, {'gradient_norm': norm}

  def _batch_frames(self, agent_outputs: Any) -> tf.Tensor:
    """B * T * num_action_repeats, int64, for a batch of T + 1 steps."""
    actions = agent_outputs.action[1:]
    batch_size, unroll_length = tf.shape(actions, out_type=tf.int64)[1], tf.shape(actions, out_type=tf.int64)[0]
    return batch_size * unroll_length * self.num_action_repeats

  def _losses(self, agent_state: Any, env_outputs: Any, agent_outputs: Any) -> Dict[str, tf.Tensor]:
    """Steps 1-4 of the module docstring on a batch (or a replica's shard): dict of the four scalar loss sums."""
    actions = tf.cast(agent_outputs.action, tf.int32)
    learner_outputs, _ = self.agent.unroll(actions, env_outputs, agent_state)

    # Bootstrap from the last baseline, then shift so that index t pairs x_t with a_t and what followed a_t.
    bootstrap_value = learner_outputs.baseline[-1]
    behaviour_logits = agent_outputs.policy_logits[1:]
    actions = actions[1:]
    rewards, done = env_outputs.reward[1:], env_outputs.done[1:]
    learner_logits, learner_baseline = learner_outputs.policy_logits[:-1], learner_outputs.baseline[:-1]

    clipped_rewards = clip_rewards(rewards, self.reward_clipping)
    discounts = tf.cast(~done, tf.float32) * self.discounting

    # vs and pg_advantages are stop-gradient'ed inside V-trace; stopping the inputs too changes no gradient and
    # spares the tape the backward pass of the compiled V-trace.
    vtrace_returns = vtrace.from_logits(behaviour_policy_logits=behaviour_logits,
                                        target_policy_logits=tf.stop_gradient(learner_logits), actions=actions,
                                        discounts=discounts, rewards=clipped_rewards,
                                        values=tf.stop_gradient(learner_baseline),
                                        bootstrap_value=tf.stop_gradient(bootstrap_value))

    pg_loss = compute_policy_gradient_loss(learner_logits, actions, vtrace_returns.pg_advantages)
    baseline_loss = compute_baseline_loss(vtrace_returns.vs - learner_baseline)
    entropy_loss = compute_entropy_loss(learner_logits)
    total_loss = pg_loss + self.baseline_cost * baseline_loss + self.entropy_cost * entropy_loss
    return {'total_loss': total_loss, 'pg_loss': pg_loss, 'baseline_loss': baseline_loss, 'entropy_loss': entropy_loss}

  def _distributed_train_step(self, agent_state: Any, env_outputs: Any, agent_outputs: Any) -> Dict[str, tf.Tensor]:
    """`train_step` under a distributing strategy (traced inside it): shard, replica steps, reduce, count frames."""
    num_replicas = self.num_replicas
    self._check_batch_size(agent_outputs.action.shape[1])  # The static batch size, at trace time.
    batch_size = tf.shape(agent_outputs.action)[1]
    tf.debugging.assert_equal(batch_size % num_replicas, 0,
                              message=f'the batch size must be a multiple of the {num_replicas} replicas')
    shard_size = batch_size // num_replicas

    def shard(context: Any) -> Tuple[Any, Any]:
      start = context.replica_id_in_sync_group * shard_size
      # agent_state is batch-major [B, ...]; every field of env_outputs and agent_outputs is time-major [T + 1, B, ...].
      return (tf.nest.map_structure(lambda t: t[start:start + shard_size], agent_state),
              tf.nest.map_structure(lambda t: t[:, start:start + shard_size], (env_outputs, agent_outputs)))

    shards = self._strategy.experimental_distribute_values_from_function(shard)
    losses, learning_rate, clip_metrics = self._strategy.run(self._replica_step, args=shards)
    # Sums over T and B of the shards: their sum is the whole batch's.
    losses = {k: self._strategy.reduce(tf.distribute.ReduceOp.SUM, v, axis=None) for k, v in losses.items()}
    learning_rate = self._strategy.experimental_local_results(learning_rate)[0]  # The same on every replica.
    # The norm of the all-reduced gradients: the same on every replica.
    clip_metrics = {k: self._strategy.experimental_local_results(v)[0] for k, v in clip_metrics.items()}
    # Once per step, by the whole batch (cross-replica context: every copy of the counter gets the same update).
    self.num_environment_frames.assign_add(self._batch_frames(agent_outputs))
    return dict(losses, learning_rate=learning_rate, num_environment_frames=tf.identity(self.num_environment_frames),
                **clip_metrics)

  def _replica_step(self, agent_state: Any,
                    shard: Tuple[Any, Any]) -> Tuple[Dict[str, tf.Tensor], tf.Tensor, Dict[str, tf.Tensor]]:
    """One replica's part of the step: its shard's losses and gradients, the SUM all-reduce, the RMSProp update."""
    env_outputs, agent_outputs = shard
    variables = self.agent.trainable_variables
    with tf.GradientTape() as tape:
      losses = self._losses(agent_state, env_outputs, agent_outputs)
    learning_rate = self.learning_rate()  # Read before the frame counter moves, as the original.
    gradients = tape.gradient(losses['total_loss'], variables)
    pairs = [(g, v) for g, v in zip(gradients, variables) if g is not None]
    # The loss is a SUM over T and B, so the whole batch's gradient is the SUM of the shards' gradients (a MEAN
    # would divide the step by the number of replicas). IndexedSlices (the embedding) are gathered, and the
    # optimizer's sparse update sums their duplicate rows as before.
    summed = tf.distribute.get_replica_context().all_reduce(tf.distribute.ReduceOp.SUM, [g for g, _ in pairs])
    summed, clip_metrics = self._clip(summed)
    # Every replica applies the same summed gradient to its own copy of each variable and slot (the handles of
    # mirrored variables in replica context are the local copies), so the copies stay equal.
    self.optimizer.apply_gradients(zip(summed, [v for _, v in pairs]))
    return losses, learning_rate, clip_metrics
