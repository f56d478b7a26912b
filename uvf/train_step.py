"""The compiled training step of HIRO (the original's `TrainStep`, tensorflow/models research/efficient-hrl
train_utils.py).

Job: `HiroTrainer` holds a run's agents, replay buffers, TD3 updates and counters, and runs many iterations of the
loop (collection, low-level and meta updates) inside one `tf.function` (`run_steps`); `make_strategy` picks its
`tf.distribute` strategy. Built by `uvf.train.train_uvf` from `train_settings.UpdateSettings`; driven between compiled
calls by `uvf.run_loop.TrainingLoop`.
"""

from typing import Any

import tensorflow as tf

from uvf import build
from uvf import collect
from uvf import off_policy_correction
from uvf import representation
from uvf.agents import td3_update

DISTRIBUTION_STRATEGIES = ('default', 'one_device', 'mirrored')
# The TD3 optimizers of the two levels, by their names in the full checkpoint (`HiroTrainer.full_checkpoint`).
OPTIMIZER_NAMES = ('critic', 'actor', 'meta_critic', 'meta_actor')


def make_strategy(name):
  """The `tf.distribute` strategy for the updates: 'default' (no strategy), 'one_device' (the first GPU, else the
  CPU) or 'mirrored' (all local GPUs, else the CPU)."""
  if name == 'default':
    return tf.distribute.get_strategy()
  if name == 'one_device':
    device = '/gpu:0' if tf.config.list_logical_devices('GPU') else '/cpu:0'
    return tf.distribute.OneDeviceStrategy(device)
  if name == 'mirrored':
    return tf.distribute.MirroredStrategy()
  raise ValueError(f'Unknown distribution_strategy {name!r}; valid: {", ".join(DISTRIBUTION_STRATEGIES)} '
                   '(train_uvf.distribution_strategy).')


def _create_optimizer_slots(optimizer, variables):
  """Creates an optimizer's slots (and Adam's beta powers) now, without a step, so that the compiled update creates
  no variables and a checkpoint restores into existing slots.

  `tf.compat.v1.train.Optimizer` has no public way to do this: its slots are created inside `apply_gradients`,
  which would also step the variables and Adam's beta powers (a zero-gradient Adam step still moves
  beta1_power / beta2_power, so the first real step would differ from the original's). `_create_slots(var_list)`
  is the hook its subclasses implement for exactly this purpose (and `apply_gradients` calls it, under
  `init_scope`, with the same argument); this is its only use in the project. Keras optimizers have the public
  `build(var_list)`."""
  with tf.init_scope():
    if isinstance(optimizer, tf.compat.v1.train.Optimizer):
      optimizer._create_slots(variables)  # pylint: disable=protected-access  (no public equivalent: docstring)
    elif hasattr(optimizer, 'build'):
      optimizer.build(variables)


def _first_local(strategy, value):
  """A per-replica result as one tensor (the first replica's)."""
  return tf.nest.map_structure(lambda v: strategy.experimental_local_results(v)[0], value)


class HiroTrainer(tf.Module):
  """Holds the agents, buffers, updates and counters of a run, and the compiled loop.

  Built by `train_uvf`, every argument by keyword. `run_steps(n, last_step)` runs n iterations of the loop in one
  call; `collect_steps(n)` n collection steps only (the initial collection). With a trainable `state_preprocess`
  (hiro_repr), `repr_optimizer` trains the representation once per low-level update (`repr_update`).
  `low_level_inputs(batch)` / `meta_level_inputs(batch)` turn a replay batch into what each level's update trains on
  (the loop's own path, public for tests: rewards, discounts and relabelled goals can be checked from a known batch).

  Args:
    py_env: the maze `PyEnvironment` (already reset).
    uvf_agent, meta_agent: the `UvfAgent` and `MetaAgent` (built under `strategy`, `build.build_agents`).
    state_preprocess: `StatePreprocess` (s -> s_repr; trainable with hiro_repr).
    replay_buffer, meta_replay_buffer: the low-level and meta `CircularBuffer`s (storage created by the collector).
    optimizers: dict `OPTIMIZER_NAMES` -> the four TD3 optimizers (critic, actor, meta critic, meta actor).
    strategy: the `tf.distribute` strategy of the updates (`make_strategy`).
    settings: `train_settings.UpdateSettings`.
    repr_optimizer: the representation's optimizer (hiro_repr); unused when `state_preprocess` is not trainable.
  """

  def __init__(self, *, py_env, uvf_agent, meta_agent, state_preprocess, replay_buffer, meta_replay_buffer, optimizers,
               strategy, settings, repr_optimizer=None):
    super().__init__(name='hiro_trainer')
    self.uvf_agent, self.meta_agent = uvf_agent, meta_agent
    self.state_preprocess = state_preprocess
    self.replay_buffer, self.meta_replay_buffer = replay_buffer, meta_replay_buffer
    self.strategy = strategy
    self.settings = settings
    self._batch_size = int(settings.batch_size)
    self._gamma, self._meta_gamma = float(settings.gamma), float(settings.meta_gamma)
    self._reward_scale_factor = float(settings.reward_scale_factor)
    self._num_updates_per_observation = int(settings.num_updates_per_observation)
    self._num_collect_per_update = int(settings.num_collect_per_update)
    self._meta_period = int(settings.num_collect_per_meta_update)
    if set(optimizers) != set(OPTIMIZER_NAMES):
      raise ValueError(f'HiroTrainer needs the optimizers {OPTIMIZER_NAMES}, got {sorted(optimizers)}.')
    self.global_step = tf.Variable(0, dtype=tf.int64, trainable=False, name='global_step')
    self.num_episodes = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_episodes')
    self.num_resets = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_resets')
    self.repr_update: Any = None
    if state_preprocess.trainable:
      # The original built the repr optimizer first (its Adam beta powers are meta_2/beta{1,2}_power). The
      # representation's variables and this optimizer live outside the strategy: it is updated in the loop itself.
      _create_optimizer_slots(repr_optimizer, state_preprocess.get_trainable_vars())
      self.repr_update = representation.RepresentationUpdate(state_preprocess, repr_optimizer, name='repr')
    with strategy.scope():
      self.num_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_updates')
      self.num_meta_updates = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_meta_updates')
      self.optimizers = {name: optimizers[name] for name in OPTIMIZER_NAMES}
      critic_optimizer, actor_optimizer = optimizers['critic'], optimizers['actor']
      meta_critic_optimizer, meta_actor_optimizer = optimizers['meta_critic'], optimizers['meta_actor']
      _create_optimizer_slots(meta_critic_optimizer, meta_agent.get_trainable_critic_vars())
      _create_optimizer_slots(meta_actor_optimizer, meta_agent.get_trainable_actor_vars())
      _create_optimizer_slots(critic_optimizer, uvf_agent.get_trainable_critic_vars())
      _create_optimizer_slots(actor_optimizer, uvf_agent.get_trainable_actor_vars())
      self.low_update = td3_update.Td3Update(uvf_agent, critic_optimizer, actor_optimizer,
                                             target_update_period=settings.target_update_period,
                                             num_updates=self.num_updates,
                                             skip_delayed_actor_step=settings.skip_delayed_actor_step,
                                             jit_compile=settings.jit_compile, name='nometa')
      self.meta_update = td3_update.Td3Update(meta_agent, meta_critic_optimizer, meta_actor_optimizer,
                                              target_update_period=settings.target_update_period,
                                              num_updates=self.num_meta_updates,
                                              skip_delayed_actor_step=settings.skip_delayed_actor_step,
                                              jit_compile=settings.jit_compile, name='meta')
    seed = settings.seed
    self.collector = collect.Collector(py_env, uvf_agent=uvf_agent, meta_agent=meta_agent,
                                       state_preprocess=state_preprocess, replay_buffer=replay_buffer,
                                       meta_replay_buffer=meta_replay_buffer, global_step=self.global_step,
                                       num_episodes=self.num_episodes, num_resets=self.num_resets,
                                       seed=None if seed is None else seed + 1)
    goal_spec = meta_agent.action_spec
    low_spec = uvf_agent.action_spec
    self.relabeler = off_policy_correction.GoalRelabeler(
        settings.goal_sample_strategy, goal_spec.minimum, goal_spec.maximum, low_spec.minimum, low_spec.maximum,
        state_repr_fn=state_preprocess, multi_transition_fn=uvf_agent.tf_context.context_multi_transition_fn,
        seed=None if seed is None else seed + 2)
    # MirroredStrategy cannot synchronise (apply gradients) inside a conditional or a nested tf.function: there the
    # meta update is its own compiled call, made by the Python loop after the step that crosses a meta period.
    # Elsewhere (default, one device) each update is a nested tf.function, as under the default strategy: inlining
    # it into the loop's graph lets Grappler fuse and order its ops differently, and the float rounding differences
    # grow through the contact dynamics (one_device then differed from default by 0.02 after 150 updates; nested, it
    # is bit-identical).
    self.inline_meta_update = not isinstance(strategy, tf.distribute.MirroredStrategy)
    self._nested_updates = self.inline_meta_update
    self.run_steps = tf.function(self._run_steps)
    self.collect_steps = tf.function(self._collect_steps)
    self.meta_step = tf.function(self._meta_level_update)

  # Updates.

  def low_level_inputs(self, batch):
    """The arguments of one low-level update (`low_update`), from a batch of stored low-level transitions.

    Args:
      batch: a `collect.LowTransition` of [B]-batches (or the same 7 entries in that order), as
        `replay_buffer.get_random_batch(batch_size)` returns it: states [B, O], actions [B, A], rewards [B],
        discounts [B] (unused), next_states [B, O], goals [B, G], next_goals [B, G]; B = batch_size.

    Returns:
      (s ⊕ g [B, O+G], actions [B, A], rewards [B] recomputed from (s_repr, g, s'_repr) by the low Context,
      discounts [B] = gamma x the context discounts, s' ⊕ g' [B, O+G], target smoothing noise [B, A] drawn now).
    """
    batch = collect.LowTransition(*batch)
    state_reprs, next_state_reprs = self.state_preprocess(batch.states), self.state_preprocess(batch.next_states)
    context_rewards, context_discounts = self.uvf_agent.compute_rewards(state_reprs, batch.actions,
                                                                        batch.rewards * self._reward_scale_factor,
                                                                        next_state_reprs, [batch.goals])
    discounts = self._discounts(self.uvf_agent, context_discounts, [batch.goals], self._gamma)
    states = self.uvf_agent.merged_states(batch.states, [batch.goals])
    next_states = self.uvf_agent.merged_states(batch.next_states, [batch.next_goals])
    return (states, batch.actions, context_rewards, discounts, next_states,
            self.uvf_agent.target_noise(self._batch_size))

  @property
  def meta_period(self):
    """int: N = num_collect_per_meta_update, the meta update's period in environment steps."""
    return self._meta_period

  def low_level_update(self):
    """One low-level TD3 update on a fresh batch (with hiro_repr then one representation update, 'repr_loss').
    Returns dict of float32 scalars."""
    batch = self.replay_buffer.get_random_batch(self._batch_size)
    args = self.low_level_inputs(batch)
    losses = _first_local(self.strategy, self.strategy.run(self._update_fn(self.low_update), args=args))
    metrics = {
        'critic_loss': losses['critic_loss'],
        'actor_loss': losses['actor_loss'],
        'average_step_reward': tf.reduce_mean(batch.rewards)
    }
    if self.repr_update is not None:
      # The original added its repr train op to the low-level train op: one representation step per low-level
      # update, after it here (the original's graph left them unordered), on a meta batch of its own.
      metrics['repr_loss'] = tf.cond(self.meta_replay_buffer.num_adds > 0, self._representation_update,
                                     lambda: tf.zeros([]))
    return metrics

  def _representation_update(self):
    """One representation update on a fresh meta batch (the original dequeued one for each low-level train op,
    separate from the meta update's). Returns the loss, float32 []."""
    batch = self.meta_replay_buffer.get_random_batch(self._batch_size)
    return self.repr_update(batch.states, batch.next_states, batch.low_actions, batch.low_states)['loss']

  def meta_level_inputs(self, batch):
    """The arguments of one meta update (`meta_update`), from a batch of stored meta transitions.

    Args:
      batch: a `collect.MetaTransition` of [B]-batches (or the same 9 entries in that order), as
        `meta_replay_buffer.get_random_batch(batch_size)` returns it: states [B, O] (s_t), goals [B, G] (the stored
        meta actions), rewards [B] (the stored sums of 0.1 x r_meta), discounts [B] (unused), next_states [B, O]
        (s_{t+c}), low_states [B, c, O], low_actions [B, c, A], contexts [B, M], next_contexts [B, M];
        B = batch_size.

    Returns:
      (s ⊕ T [B, O+M], the goals relabelled by `relabeler` [B, G], rewards [B] = the stored sums x
      reward_scale_factor, discounts [B] = meta_gamma x the meta context discounts, s' ⊕ T' [B, O+M], target
      smoothing noise [B, G] drawn now).
    """
    batch = collect.MetaTransition(*batch)
    rewards = batch.rewards * self._reward_scale_factor
    goals = self.relabeler(batch.states, batch.next_states, batch.goals, batch.low_states, batch.low_actions,
                           self._low_actor, candidate_actor_fn=self._low_actor_candidates)
    _, context_discounts = self.meta_agent.compute_rewards(batch.states, goals, rewards, batch.next_states,
                                                           [batch.contexts])
    discounts = self._discounts(self.meta_agent, context_discounts, [batch.contexts], self._meta_gamma)
    states = self.meta_agent.merged_states(batch.states, [batch.contexts])
    next_states = self.meta_agent.merged_states(batch.next_states, [batch.next_contexts])
    return states, goals, rewards, discounts, next_states, self.meta_agent.target_noise(self._batch_size)

  def _meta_level_update(self):
    """One meta TD3 update on a fresh meta batch with relabelled goals. Returns dict of float32 scalars."""
    batch = self.meta_replay_buffer.get_random_batch(self._batch_size)
    args = self.meta_level_inputs(batch)
    losses = _first_local(self.strategy, self.strategy.run(self._update_fn(self.meta_update), args=args))
    return {
        'critic_loss': losses['critic_loss'],
        'actor_loss': losses['actor_loss'],
        'average_step_reward': tf.reduce_mean(batch.rewards)
    }

  def _update_fn(self, update):
    """The Td3Update itself (a nested tf.function, XLA if asked) without a strategy; its body under one."""
    return update if self._nested_updates else update.step_function.python_function

  def _low_actor(self, states, goals):
    """The deterministic low-level actor on [N, O] states and [N, G] goals (off-policy correction)."""
    return self.uvf_agent.actions(states, [goals])

  def _low_actor_candidates(self, states, goals, compute_dtype=tf.float32):
    """The same actor on [N, O] states and [K, N, G] goals -> [K, N, A]: mu(s_n ⊕ g_kn), the states' part of the
    first layer computed once for the K goals (`ActorNetwork.shared_input_actions`)."""
    actor = self.uvf_agent.networks[self.uvf_agent.ACTOR_NET_SCOPE]
    return actor.shared_input_actions(states, goals, compute_dtype=compute_dtype)

  @staticmethod
  def _discounts(agent, context_discounts, contexts, gamma):
    if agent.gamma_index is not None:
      return context_discounts * tf.cast(tf.reshape(contexts[agent.gamma_index], [-1]), context_discounts.dtype)
    return context_discounts * gamma

  # Compiled loops.

  def _collect_steps(self, num_steps):
    """num_steps (int64 scalar tensor) collection steps."""
    for _ in tf.range(num_steps):
      self.collector.step()

  def _run_steps(self, num_steps, last_step):
    """num_steps iterations of the training loop (`uvf.train`'s module docstring, step 2).

    Args:
      num_steps: int64 scalar tensor, >= 1.
      last_step: int64 scalar tensor, the global step of the previous iteration (0 at the start of a fresh run).

    Returns:
      dict of float32 scalars: the losses and average stored rewards of the last low-level and meta updates
      ('nometa/...', 'meta/...'), with hiro_repr the last representation loss ('repr/loss'), and 'meta_updates'
      (int64, meta updates in this call). Without
      `inline_meta_update` the meta update is left to the caller (`meta_step`).
    """
    zero = tf.zeros([])
    metrics = {
        'nometa/critic_loss': zero,
        'nometa/actor_loss': zero,
        'nometa/average_step_reward': zero,
        'meta/critic_loss': zero,
        'meta/actor_loss': zero,
        'meta/average_step_reward': zero
    }
    if self.repr_update is not None:
      metrics['repr/loss'] = zero
    meta_updates = tf.constant(0, tf.int64)
    for _ in tf.range(num_steps):
      for _ in range(self._num_collect_per_update - 1):
        self.collector.step()
      for _ in range(self._num_updates_per_observation - 1):
        self.low_level_update()
      self.collector.step()
      low = self.low_level_update()  # the buffer holds >= 1 element now
      low = {('repr/loss' if k == 'repr_loss' else 'nometa/' + k): v for k, v in low.items()}
      step = self.global_step.read_value()
      meta = {k: v for k, v in metrics.items() if k.startswith('meta/')}
      if self.inline_meta_update:
        do_meta = tf.logical_and(self.meta_due(last_step, step), self.meta_replay_buffer.num_adds > 0)
        meta = tf.cond(do_meta, lambda: {
            'meta/' + k: v for k, v in self._meta_level_update().items()
        }, lambda: meta)  # noqa: B023  (called within this iteration)
        meta_updates += tf.cast(do_meta, tf.int64)
      metrics = dict(low, **meta)
      last_step = step
    metrics['meta_updates'] = meta_updates
    return metrics

  def meta_due(self, last_step, step):
    """True when global_step // num_collect_per_meta_update changed from `last_step` to `step` (TrainStep)."""
    return tf.not_equal(step // self._meta_period, last_step // self._meta_period)

  # Checkpoints.

  def policy_variables_by_tf1_name(self):
    """{original TF1 name: variable} of the original's policy checkpoint (module function of the same name)."""
    return build.policy_variables_by_tf1_name(self.uvf_agent, self.meta_agent, self.state_preprocess, self.global_step,
                                              self.num_episodes, self.num_resets)

  def full_checkpoint(self):
    """The `tf.train.Checkpoint` of everything a restart needs (with hiro_repr also the representation's networks,
    `all_embed`, its sampling generator and the repr optimizer)."""
    extra = {}
    if self.repr_update is not None:
      extra = {'state_preprocess': self.state_preprocess, 'repr': self.repr_update.optimizer}
    return tf.train.Checkpoint(uvf_agent=self.uvf_agent, meta_agent=self.meta_agent, replay_buffer=self.replay_buffer,
                               meta_replay_buffer=self.meta_replay_buffer, collector=self.collector,
                               relabeler=self.relabeler, low_update=self.low_update, meta_update=self.meta_update,
                               global_step=self.global_step, num_episodes=self.num_episodes, num_resets=self.num_resets,
                               num_updates=self.num_updates, num_meta_updates=self.num_meta_updates, **self.optimizers,
                               **extra)
