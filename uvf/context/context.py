"""The context (goal) of a HIRO level.

A `Context` owns the current context of one level as variables (the meta level's task target, or the low level's
relative goal), its specs, a sampler per mode, the reward function and the goal transitions. Its methods take and
return tensors and only assign variables, so the collection step can call them inside one `tf.function`:

  meta_context.reset(mode)                      # or, for both levels: low_context.reset(mode, meta_context)
  low_context.step(mode, meta_context=meta_context, state=s, next_state=s_next, state_repr=r, next_state_repr=r_next,
                   meta_action=lambda: noisy_meta_actor(s_next))
  rewards, discounts = low_context.compute_rewards(state_reprs, actions, env_rewards, next_state_reprs, [goals])

Timer semantics (as the original efficient-hrl context/context.py): `reset` sets both timers t to 0 and the low-level
goal to 0, so the first action of an episode sees g = 0. Each `step` (after the environment step) first steps the meta
context, then sets g <- meta action if t mod c == 0 else g <- g + s_repr[:k] - s'_repr[:k], then t <- t + 1. Hence the
goal is chosen after the 1st, 11th, 21st, ... step of an episode (t = 0, 10, 20, ...).
"""

import gin
import numpy as np
import tensorflow as tf
from tf_agents.specs import tensor_spec

from uvf.context import samplers as samplers_lib


@gin.configurable
class Context(tf.Module):
  """Contexts of one level: variables, specs, samplers per mode, reward function and goal transitions.

  Build it as the original agents did, `Context(tf_env=env)` with the rest from gin (`agent/Context`,
  `meta/Context`), inside `tf.name_scope('uvf_agent')` / `tf.name_scope('meta_agent')` so that the variables are
  named like the original's `uvf_agent/action_context_0` and `uvf_agent/num_timer_steps`.

  Args:
    tf_env: the environment; only `tf_env.observation_spec()` (shape [O], dtype) is read.
    context_ranges: list, per context, of (minval, maxval) with numbers or per-dimension sequences, or None.
    context_shapes: list, per context, of its shape (an int or a list); None means the observation's shape.
    state_indices: list, per context, of state indices (kept as the original; unused by HIRO).
    variable_indices: None or a list with one entry per context (kept, unused).
    gamma_index: None, or the index of a context holding per-sample discounts (read by the training step).
    settable_context: must be False (an environment whose context can be set is not ported).
    timers: kept, unused (as in the original).
    samplers: dict mode -> sampler class (or list, one per context), e.g. {'train': [RandomSampler], ...}.
    reward_weights: None or a list of weights, one per reward function.
    reward_fn: a reward function, or a list of them (summed with `reward_weights`; discounts multiplied).
    random_sampler_mode: the mode `sample_random_contexts` uses.
    normalizers: must be None (context normalisers are not ported; no configuration uses them).
    context_transition_fn: None or fn(contexts, timer, sampler_fn, **kwargs) -> contexts, applied by `step`.
    context_multi_transition_fn: None or fn(contexts, timer, sampler_fn, states=...) -> contexts along c states.
    meta_action_every_n: c, the steps between two meta actions (low level only).
    seed: None or an int; seeds the samplers (new; None keeps gin's sampler seeds, default non-deterministic).
  """

  VAR_NAME = 'action'

  def __init__(self, tf_env, context_ranges=None, context_shapes=None, state_indices=None, variable_indices=None,
               gamma_index=None, settable_context=False, timers=None, samplers=None, reward_weights=None,
               reward_fn=None, random_sampler_mode='random', normalizers=None, context_transition_fn=None,
               context_multi_transition_fn=None, meta_action_every_n=None, seed=None):
    super().__init__(name='context')
    if settable_context:
      raise NotImplementedError('Context: settable_context=True (an environment context set from the goal) is not '
                                'ported; no HIRO configuration uses it.')
    if normalizers is not None:
      raise NotImplementedError('Context: context normalizers are not ported; no HIRO configuration uses them.')
    if context_shapes is None:
      raise ValueError('Context needs context_shapes, e.g. agent/Context.context_shapes = [%SUBGOAL_DIM].')
    self._tf_env = tf_env
    self.variable_indices = variable_indices
    self.gamma_index = gamma_index
    self.timers = timers
    self._context_transition_fn = context_transition_fn
    self._context_multi_transition_fn = context_multi_transition_fn
    self._random_sampler_mode = random_sampler_mode
    self.meta_action_every_n = meta_action_every_n

    obs_spec = tf_env.observation_spec()
    shapes = [obs_spec.shape if shape is None else tf.TensorShape(shape) for shape in context_shapes]
    self.context_specs = tuple(tf.TensorSpec(shape=shape, dtype=obs_spec.dtype) for shape in shapes)
    n = len(self.context_specs)
    self.context_ranges = list(context_ranges) if context_ranges is not None else [None] * n
    self.state_indices = list(state_indices) if state_indices is not None else [None] * n
    if variable_indices is not None and len(variable_indices) != n:
      raise ValueError(f'variable_indices ({variable_indices}) must have one entry per context ({n}).')
    if len(self.context_ranges) != n or len(self.state_indices) != n:
      raise ValueError(f'context_ranges ({context_ranges}) and state_indices ({state_indices}) must have one entry '
                       f'per context ({n}).')
    action_dtype = tf.float32 if obs_spec.dtype in (tf.float32, tf.float64) else obs_spec.dtype
    self.context_as_action_specs = tuple(
        tensor_spec.BoundedTensorSpec(shape=spec.shape, dtype=action_dtype, minimum=minimum, maximum=maximum)
        for spec, (minimum, maximum) in zip(self.context_specs, self._bounds()))

    self._reward_fn = self._make_reward_fn(reward_fn, reward_weights or None)

    self._samplers = {}
    for index, (mode, sampler_classes) in enumerate(sorted((samplers or {}).items())):
      if not isinstance(sampler_classes, (list, tuple)):
        sampler_classes = [sampler_classes]
      if len(sampler_classes) != n:
        raise ValueError(f'Context: mode {mode!r} has {len(sampler_classes)} samplers for {n} contexts.')
      built = []
      for i, (spec, sampler_class) in enumerate(zip(self.context_specs, sampler_classes)):
        if isinstance(sampler_class, str):
          raise ValueError(f'Context: sampler {sampler_class!r} of mode {mode!r} names a custom sampler, which the '
                           'base Context does not have; bind a sampler class.')
        kwargs = {} if seed is None else {'seed': int(np.random.SeedSequence([seed, index, i]).generate_state(1)[0])}
        built.append(sampler_class(context_spec=spec, **kwargs))
      self._samplers[mode] = built

    self.context_vars = {
        self.VAR_NAME:
            tuple(
                tf.Variable(tf.zeros(spec.shape, spec.dtype), trainable=False, name=f'{self.VAR_NAME}_context_{i}')
                for i, spec in enumerate(self.context_specs))
    }
    self.t = tf.Variable(0, dtype=tf.int32, trainable=False, name='num_timer_steps')

  # Specs and variables.

  @property
  def n(self):
    """The number of contexts."""
    return len(self.context_specs)

  @property
  def vars(self):
    """Tuple of the current context variables, one [C] variable per context."""
    return self.context_vars[self.VAR_NAME]

  @property
  def tf_env(self):
    return self._tf_env

  @property
  def modes(self):
    """The sampler modes, sorted (e.g. ['eval1', 'eval2', 'eval3', 'explore', 'train'])."""
    return sorted(self._samplers)

  def samplers(self, mode):
    """The samplers of `mode`, one per context (a new list).

    Raises:
      ValueError: if `mode` has no samplers.
    """
    if mode not in self._samplers:
      raise ValueError(f'Context has no sampler for mode {mode!r}; its modes are {self.modes}.')
    return list(self._samplers[mode])

  def _bounds(self):
    """Per context, the (minimum, maximum) of its range as float32 arrays of its shape (dtype limits if None)."""
    bounds = []
    for spec, context_range in zip(self.context_specs, self.context_ranges):
      shape = spec.shape.as_list()
      if context_range is None:
        info = np.finfo(np.float32)
        bounds.append((np.full(shape, info.min, np.float32), np.full(shape, info.max, np.float32)))
      else:
        minimum, maximum = samplers_lib.range_bounds((context_range[0], context_range[-1]), shape)
        bounds.append((minimum.astype(np.float32), maximum.astype(np.float32)))
    return bounds

  def get_clip_fns(self):
    """Per context, fn([..., C] tensor) -> the tensor clipped to the context's range (identity without range)."""
    clip_fns = []
    for context_range in self.context_ranges:

      def clip_fn(value, range_=context_range):
        if range_ is None:
          return tf.identity(value)
        return tf.clip_by_value(value, tf.cast(range_[0], value.dtype), tf.cast(range_[1], value.dtype))

      clip_fns.append(clip_fn)
    return clip_fns

  # Sampling.

  def sample_contexts(self, mode, batch_size, state=None, next_state=None, **kwargs):
    """Samples a batch of contexts with the samplers of `mode`.

    Args:
      mode: a sampler mode, e.g. 'train', 'explore', 'eval1' (a Python string).
      batch_size: B (a Python int or an int scalar tensor).
      state, next_state: None, or [B, O] tensors (`DirectionSampler` uses them).
      **kwargs: passed to the samplers.

    Returns:
      (contexts, next_contexts): two lists of [B, C] tensors, one per context.

    Raises:
      ValueError: if `mode` has no samplers.
    """
    if mode not in self._samplers:
      raise ValueError(f'Context has no sampler for mode {mode!r}; its modes are {self.modes}.')
    pairs = [sampler(batch_size, state=state, next_state=next_state, **kwargs) for sampler in self._samplers[mode]]
    contexts, next_contexts = [pair[0] for pair in pairs], [pair[1] for pair in pairs]
    self._validate_contexts(contexts)
    self._validate_contexts(next_contexts)
    return contexts, next_contexts

  def sample_random_contexts(self, batch_size):
    """The contexts sampled in `random_sampler_mode`: a list of [B, C] tensors."""
    return self.sample_contexts(self._random_sampler_mode, batch_size)[0]

  def _validate_contexts(self, contexts):
    for i, (context, spec) in enumerate(zip(contexts, self.context_specs)):
      if context.shape[1:] != spec.shape:
        raise ValueError(f'contexts[{i}] has shape {context.shape[1:]} per element; the spec wants {spec.shape}.')
      if context.dtype != spec.dtype:
        raise ValueError(f'contexts[{i}] has dtype {context.dtype}; the spec wants {spec.dtype}.')

  # Rewards.

  def _make_reward_fn(self, reward_fns, reward_weights):
    """fn(states, actions, rewards, next_states, contexts) -> (sum_i w_i r_i, prod_i d_i) over the reward fns."""
    if reward_fns is None:
      return None
    if not isinstance(reward_fns, (list, tuple)):
      reward_fns = [reward_fns]
    reward_fns = list(reward_fns)
    if any(isinstance(fn, str) for fn in reward_fns):
      raise ValueError('Context: reward functions given by name are custom reward functions, which the base Context '
                       'does not have; bind a reward function.')
    weights = [1.0] * len(reward_fns) if reward_weights is None else list(reward_weights)
    if len(weights) != len(reward_fns):
      raise ValueError(f'Context: {len(weights)} reward_weights for {len(reward_fns)} reward functions.')

    def reward_fn(*args, **kwargs):
      results = [fn(*args, **kwargs) for fn in reward_fns]
      rewards_list = [result[0] for result in results]
      discounts_list = [result[1] for result in results]
      ndims = max(r.shape.ndims for r in rewards_list)
      if ndims > 1:  # Expand [B] rewards and discounts to broadcast with vectorised ones.
        for i in range(len(rewards_list)):
          for _ in range(ndims - rewards_list[i].shape.ndims):
            rewards_list[i] = tf.expand_dims(rewards_list[i], -1)
          for _ in range(ndims - discounts_list[i].shape.ndims):
            discounts_list[i] = tf.expand_dims(discounts_list[i], -1)
      rewards = tf.add_n([r * tf.cast(w, tf.float32) for r, w in zip(rewards_list, weights)])
      discounts = discounts_list[0]
      for d in discounts_list[1:]:
        discounts *= d
      return rewards, discounts

    return reward_fn

  def compute_rewards(self, states, actions, rewards, next_states, contexts):
    """The context rewards and discounts of a batch of transitions (the original's mode argument is dropped: unused).

    For the low level, pass the state representations (s_repr, s'_repr; hiro_orig: s[:, :15]) and the stored goals:
    negative_distance gives -sqrt(||s_repr + g - s'_repr||^2 + 1e-10). For the meta level, pass the raw states and
    the task targets: -||s'[:, idx] - target||.

    Args:
      states: [B, D] states (or representations) before the step.
      actions: [B, A] actions (unused by negative_distance).
      rewards: [B] environment rewards.
      next_states: [B, D] states after the step.
      contexts: list of [B, C] context tensors (one per context), or a single tensor when there is one context.

    Returns:
      (rewards, discounts): float32 [B] tensors, sum_i w_i r_i and prod_i d_i over the reward functions.

    Raises:
      ValueError: if the context has no reward function.
    """
    if self._reward_fn is None:
      raise ValueError('Context has no reward_fn (bind <scope>/Context.reward_fn in gin).')
    if not isinstance(contexts, (list, tuple)):
      contexts = [contexts]
    return self._reward_fn(states, actions, rewards, next_states, list(contexts))

  # Transitions.

  def context_multi_transition_fn(self, contexts, **kwargs):
    """The contexts along a sequence of states: `context_multi_transition_fn(contexts, None, None, **kwargs)`.

    For HIRO's low level: contexts = [goals [N, G]], states = [N, c, G] representations -> [[N, c, G]].
    """
    if self._context_multi_transition_fn is None:
      raise ValueError('Context has no context_multi_transition_fn (bind it in gin).')
    return self._context_multi_transition_fn(list(contexts), None, None, **kwargs)

  def reset(self, mode, meta_context=None):
    """Starts an episode (the original's `reset`; call it inside or outside a tf.function).

    Without `meta_context` (a meta level, or a level on its own): contexts <- a sample of `mode`'s samplers (batch
    of 1), t <- 0. With `meta_context` (called on the low level): resets `meta_context` first (so the task target is
    sampled), then goal <- 0 and t <- 0 (the original's comment: the meta policy gives no goal before the second
    observation).

    Args:
      mode: a sampler mode of the context that samples (e.g. 'explore', 'train', 'eval1').
      meta_context: None, or the meta level's `Context`.

    Returns:
      The list of this context's new values, [C] tensors.
    """
    if meta_context is not None:
      meta_context.reset(mode)
      values = [tf.zeros_like(var) for var in self.vars]
    else:
      values = [value[0] for value in self.sample_contexts(mode, 1)[0]]
    for var, value in zip(self.vars, values):
      var.assign(value)
    self.t.assign(0)
    return values

  def step(self, mode, meta_context=None, meta_action=None, state=None, next_state=None, state_repr=None,
           next_state_repr=None, **kwargs):
    """Advances the context after an environment step (the original's `step`).

    Without `meta_context` (a meta level): contexts <- context_transition_fn(contexts, t, sampler_fn, state=...,
    next_state=..., state_repr=..., next_state_repr=..., **kwargs) if a transition function is set (HIRO: only in the
    *_img configs, on the raw states), else unchanged; t <- t + 1.

    With `meta_context` (called on the low level): steps `meta_context` as above, then
      g <- meta_action                                             if t mod c == 0,
      g <- context_transition_fn([g], t, None, state=state_repr, next_state=next_state_repr)   otherwise
    (HIRO: g + s_repr[:k] - s'_repr[:k]), and t <- t + 1.

    Args:
      mode: the sampler mode (used by sampling transition functions only).
      meta_context: None, or the meta level's `Context`.
      meta_action: with `meta_context`: the new goal [G], or a zero-argument callable returning it, called only on the
        steps that switch goals (inside `tf.cond`); the original evaluates the noisy meta actor on `next_state` and
        the meta context (already stepped).
      state, next_state: [O] observations before / after the step.
      state_repr, next_state_repr: [G] state representations before / after the step (hiro_orig: state[:15]).
      **kwargs: passed to the meta level's transition function.

    Returns:
      The list of this context's new values, [C] tensors.

    Raises:
      ValueError: with `meta_context`, if this context is not a single goal, has no transition function, no
        `meta_action_every_n`, or no `meta_action` is given.
    """
    if meta_context is None:
      values = list(self.vars)
      if self._context_transition_fn is not None:

        def sampler_fn():
          return [sample[0] for sample in self.sample_contexts(mode, 1)[0]]

        values = self.transition(self.vars, self.t, sampler_fn, state=state, next_state=next_state,
                                 state_repr=state_repr, next_state_repr=next_state_repr, **kwargs)
        for var, value in zip(self.vars, values):
          var.assign(value)
      self.t.assign_add(1)
      return values

    self._check_goal_schedule('Context.step with a meta_context')
    if meta_action is None:
      raise ValueError('Context.step with a meta_context needs meta_action (a [G] tensor or a callable).')
    meta_context.step(mode, state=state, next_state=next_state, state_repr=state_repr, next_state_repr=next_state_repr,
                      **kwargs)
    goal_var = self.vars[0]
    goal = self.next_goal(goal_var, self.t, state_repr, next_state_repr, meta_action)
    goal_var.assign(goal)
    self.t.assign_add(1)
    return [goal]

  def _check_goal_schedule(self, caller):
    if self.n != 1 or self._context_transition_fn is None or not self.meta_action_every_n:
      raise ValueError(f'{caller} needs a single goal context, a context_transition_fn and meta_action_every_n '
                       f'(have {self.n} contexts, {self._context_transition_fn}, {self.meta_action_every_n}); gin: '
                       'agent/Context.meta_action_every_n = 10, agent/Context.context_transition_fn = '
                       '@relative_context_transition_fn.')

  def next_goal(self, goal, timer, state_repr, next_state_repr, meta_action):
    """HIRO's goal schedule, the low level's goal after an environment step: the one function that collection
    (`step`) and the evaluation rollout (uvf/rollout.py) both apply.

      g' = meta_action()                                                   if t mod c == 0,
      g' = context_transition_fn([g], t, None, state=s_repr, next_state=s'_repr)[0]   otherwise
    (HIRO: g + s_repr[:k] - s'_repr[:k]); c = `meta_action_every_n`. Nothing is assigned.

    Args:
      goal: float32 [G] (one episode) or [N, G] (a batch of episodes), the goal g the step was taken for.
      timer: int32 scalar tensor, t: the steps of the episode before this one (0 on its first step).
      state_repr, next_state_repr: float32 [G] or [N, G], the state representations before / after the step.
      meta_action: the new goal(s), shaped like `goal`, or a zero-argument callable returning them, called only on
        the steps that switch goals (inside `tf.cond`).

    Returns:
      float32 tensor shaped like `goal`, g'.

    Raises:
      ValueError: if this context is not a single goal, has no transition function or no `meta_action_every_n`.
    """
    self._check_goal_schedule('Context.next_goal')
    relative = self._context_transition_fn([goal], timer, None, state=state_repr, next_state=next_state_repr)[0]

    def new_goal():
      value = meta_action() if callable(meta_action) else meta_action
      return tf.reshape(tf.cast(value, goal.dtype), goal.shape)

    return tf.cond(tf.equal(tf.math.floormod(timer, self.meta_action_every_n), 0), new_goal,
                   lambda: tf.cast(relative, goal.dtype))

  @property
  def has_transition(self):
    """Whether a context_transition_fn is set (HIRO's meta level: only in the *_img configurations)."""
    return self._context_transition_fn is not None

  def transition(self, contexts, timer, sampler_fn=None, **kwargs):
    """The contexts after an environment step, not assigned: `context_transition_fn(contexts, timer, sampler_fn,
    **kwargs)` (a list of tensors like `contexts`, [C] or [N, C]); `step` applies it to the variables.

    Raises:
      ValueError: if no context_transition_fn is set (see `has_transition`).
    """
    if self._context_transition_fn is None:
      raise ValueError('Context has no context_transition_fn (bind it in gin).')
    return list(self._context_transition_fn(list(contexts), timer, sampler_fn, **kwargs))
