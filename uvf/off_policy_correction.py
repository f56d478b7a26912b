"""HIRO's off-policy correction: relabelling the goals of a meta batch (Nachum et al. 2018, Section 3.3).

The meta transition stores the goal g the meta policy chose at s_t, and the c low-level states s_t..s_{t+c-1} and
actions a_t..a_{t+c-1} taken under it. Since the low-level policy has changed since, g is replaced by the goal that
makes the stored actions most likely under the current low-level actor (`--goal_sample_strategy`):

  'None':   keep g.
  'FuN':    one sample of N(loc, (0.1 * half_range)^2), not clipped; loc = s_repr_{t+c} - s_repr_t.
  'sample': 10 candidates (8 samples of N(loc, (0.5 * half_range)^2), loc, g), each clipped to the goal range, scored
            by log p(g~) = -sum_i sum_j (a_i - mu(s_i, g~_i))_j^2 / half_range_action_j^2 over the c stored steps,
            with g~_i = g~ + s_repr_0[:k] - s_repr_i[:k] (the relative goal along the stored states); the argmax wins.

half_range is the goal range's half-width ((max - min) / 2), half_range_action the action range's. The original
(train.py `sample_best_meta_actions`, agent.py `InverseDynamics.sample` and `UvfAgentCore.log_probs`) scores in
float64. Everything here is vectorised: one actor call on [K * B * c, ...] rows, ordered candidate-major like the
original's tiling, or (`candidate_actor_fn`, the training loop's path) one call on the B * c stored states and the
[K, B * c, G] goals, which computes the states' part of the first layer once for the K candidates.
"""

import functools

import gin
import numpy as np
import tensorflow as tf

from uvf.agents import ddpg_networks
from uvf.context import context_transition_functions

GOAL_SAMPLE_STRATEGIES = ('None', 'FuN', 'sample')


def check_compute_dtype_bindings():
  """Raises ValueError (naming the binding and the valid values) if a gin-bound `compute_dtype` of `ddpg_actor_net`,
  `ddpg_critic_net` or `GoalRelabeler`, unscoped or in HIRO's scopes `agent/` and `meta/`, is not one of
  `ddpg_networks.COMPUTE_DTYPES`; checked before a run writes anything (`uvf.train.preflight`)."""
  for name in ('ddpg_actor_net', 'ddpg_critic_net', 'GoalRelabeler'):
    for scope in ('', 'agent/', 'meta/'):
      value = gin.get_bindings(scope + name).get('compute_dtype', 'float32')
      if value not in ddpg_networks.COMPUTE_DTYPES:
        raise ValueError(f'{scope}{name}.compute_dtype = {value!r} is not a valid compute dtype; use one of '
                         f'{", ".join(repr(d) for d in ddpg_networks.COMPUTE_DTYPES)}.')


def _half_range(minimum, maximum, size, dtype):
  """(maximum - minimum) / 2 as a [size] tensor of `dtype` (bounds: numbers or [size] sequences)."""
  half = (np.asarray(maximum, np.float64) - np.asarray(minimum, np.float64)) / 2
  return tf.constant(np.broadcast_to(half, [size]), dtype=dtype)


def candidate_goals(state_reprs, next_state_reprs, goals, goal_minimum, goal_maximum, num_samples=10, scale=0.5,
                    rng=None):
  """The candidate goals of `InverseDynamics.sample`.

  Args:
    state_reprs: [B, D >= G] representations of the meta transitions' first states s_t.
    next_state_reprs: [B, D] representations of their last states s_{t+c}.
    goals: [B, G] stored goals (the meta actions).
    goal_minimum, goal_maximum: the goal range's bounds, numbers or [G] sequences (goal units).
    num_samples: K. With K == 1: one Gaussian sample, not clipped ('FuN'). With K >= 3: K - 2 Gaussian samples,
      then loc, then the stored goals, all clipped to the range ('sample').
    scale: the Gaussian's standard deviation in units of the goal range's half-width.
    rng: the `tf.random.Generator` to draw from (default: the global generator).

  Returns:
    float32 [B, G] for K == 1, else float32 [K, B, G].

  Raises:
    ValueError: if K is 2 or less than 1.
  """
  if num_samples == 2 or num_samples < 1:
    raise ValueError(f'num_samples must be 1 or at least 3 (got {num_samples}).')
  rng = rng if rng is not None else tf.random.get_global_generator()
  goals = tf.convert_to_tensor(goals, tf.float32)
  goal_dim = goals.shape[-1]
  loc = tf.cast(next_state_reprs - state_reprs, tf.float32)[:, :goal_dim]
  std = scale * _half_range(goal_minimum, goal_maximum, goal_dim, tf.float32)
  if num_samples == 1:
    return loc + std * rng.normal(tf.shape(loc), dtype=tf.float32)
  noise = rng.normal(tf.concat([[num_samples - 2], tf.shape(loc)], 0), dtype=tf.float32)
  samples = tf.concat([loc + std * noise, loc[None], goals[None]], 0)
  return clip_goals(samples, goal_minimum, goal_maximum)


def clip_goals(goals, goal_minimum, goal_maximum):
  """`goals` [..., G] clipped to the goal range (bounds: numbers or [G] sequences)."""
  minimum = tf.constant(np.asarray(goal_minimum, np.float32))
  maximum = tf.constant(np.asarray(goal_maximum, np.float32))
  return tf.clip_by_value(goals, tf.cast(minimum, goals.dtype), tf.cast(maximum, goals.dtype))


def candidate_log_probs(candidates, low_states, low_actions, low_state_reprs, actor_fn, action_minimum, action_maximum,
                        multi_transition_fn=None, candidate_actor_fn=None):
  """The log-likelihood (up to constants) of the stored low-level actions under each candidate goal.

  Args:
    candidates: [K, B, G] candidate goals.
    low_states: [B, c, O] the c stored low-level observations of each meta transition.
    low_actions: [B, c, A] the c stored low-level actions.
    low_state_reprs: [B, c, D] their representations (hiro_orig: low_states[..., :15]).
    actor_fn: the deterministic low-level actor, fn(states [N, O], goals [N, G]) -> actions [N, A], called once
      with N = K * B * c.
    action_minimum, action_maximum: the action range's bounds, numbers or [A] sequences (Ant: -30, 30).
    multi_transition_fn: fn(contexts=[goals [N, G]], states=[N, c, D]) -> [[N, c, G]], the goal along the stored
      states (the low `Context.context_multi_transition_fn`); default: the relative transition with k = G.
    candidate_actor_fn: None, or the same actor as fn(states [B * c, O], goals [K, B * c, G]) -> [K, B * c, A],
      used instead of `actor_fn` (the states, the same for every candidate, are then neither tiled nor passed
      through the first layer K times: `ActorNetwork.shared_input_actions`).

  Returns:
    float64 [K, B]: -sum_i sum_j (a_i - mu(s_i, g~_i))_j^2 / half_range_action_j^2.
  """
  candidates, low_states, low_actions, low_state_reprs = (
      tf.convert_to_tensor(x) for x in (candidates, low_states, low_actions, low_state_reprs))
  num_candidates, batch_size, goal_dim = candidates.shape[0], tf.shape(candidates)[1], candidates.shape[-1]
  if multi_transition_fn is None:
    multi_transition_fn = functools.partial(_relative_multi_transition, k=goal_dim)
  steps, obs_dim, action_dim = low_states.shape[1], low_states.shape[-1], low_actions.shape[-1]

  def tile(x):  # [B, ...] -> [K * B, ...], candidate-major.
    return tf.tile(x, [num_candidates] + [1] * (x.shape.ndims - 1))

  flat_goals = tf.reshape(candidates, [-1, goal_dim])
  step_goals = multi_transition_fn([flat_goals], states=tf.cast(tile(low_state_reprs), flat_goals.dtype))[0]
  if candidate_actor_fn is not None:
    states = tf.reshape(low_states, [-1, obs_dim])
    step_goals = tf.reshape(tf.cast(step_goals, states.dtype), [num_candidates, -1, goal_dim])
    predicted = candidate_actor_fn(states, step_goals)
  else:
    states = tf.reshape(tile(low_states), [-1, obs_dim])
    step_goals = tf.reshape(tf.cast(step_goals, states.dtype), [-1, goal_dim])
    predicted = actor_fn(states, step_goals)
  predicted = tf.reshape(predicted, [num_candidates, batch_size, steps, action_dim])
  half_range = _half_range(action_minimum, action_maximum, action_dim, tf.float64)
  error = tf.square(tf.cast(low_actions, tf.float64)[None] - tf.cast(predicted, tf.float64)) / tf.square(half_range)
  return -tf.reduce_sum(error, [2, 3])


def _relative_multi_transition(contexts, states, k):
  return context_transition_functions.relative_context_multi_transition_fn(contexts, None, None, k=k, states=states)


def best_goals(candidates, log_probs):
  """The candidate of highest log-probability for each batch element.

  Args:
    candidates: [K, B, G] candidate goals.
    log_probs: [K, B] their scores.

  Returns:
    [B, G]: candidates[argmax_k log_probs[k, b], b] (the first maximum on ties), gradient stopped.
  """
  best = tf.argmax(log_probs, axis=0, output_type=tf.int32)
  chosen = tf.gather(tf.transpose(candidates, [1, 0, 2]), best[:, None], batch_dims=1)[:, 0]
  return tf.stop_gradient(chosen)


@gin.configurable(allowlist=['compute_dtype'])
class GoalRelabeler(tf.Module):
  """Relabels the goals of meta batches with one of the `GOAL_SAMPLE_STRATEGIES`.

  Args:
    strategy: 'sample' (HIRO, the original's default), 'FuN' or 'None'.
    goal_minimum, goal_maximum: the goal range (the low Context's `context_as_action_specs[0]` bounds), numbers or
      [G] sequences.
    action_minimum, action_maximum: the low-level action range, numbers or [A] sequences.
    state_repr_fn: fn(states [N, O]) -> representations [N, D]; default (None) the identity. The first G dimensions
      of the representations are used (hiro_orig / hiro_xy: the identity then [:G] is the original's StatePreprocess;
      hiro_repr passes its learned phi).
    multi_transition_fn: see `candidate_log_probs`; pass the low Context's `context_multi_transition_fn`.
    num_candidates: K for 'sample' (the original: 10).
    seed: None (non-deterministic) or an int seeding the Gaussian samples.
    compute_dtype: 'float32' (the original's precision) or 'bfloat16' (gin `GoalRelabeler.compute_dtype`, a
      deviation for speed, docs/design/deviations.md): the dtype of the low actor's matrix products when scoring the
      candidates through a `candidate_actor_fn`. The scores themselves stay float64.
  """

  def __init__(self, strategy, goal_minimum, goal_maximum, action_minimum, action_maximum, state_repr_fn=None,
               multi_transition_fn=None, num_candidates=10, seed=None, compute_dtype='float32'):
    super().__init__(name='goal_relabeler')
    if strategy not in GOAL_SAMPLE_STRATEGIES:
      raise ValueError(f'Unknown goal_sample_strategy {strategy!r}; valid strategies are '
                       f'{", ".join(repr(s) for s in GOAL_SAMPLE_STRATEGIES)}.')
    if num_candidates < 3:
      raise ValueError(f'num_candidates must be at least 3 (Gaussian samples, loc and the stored goal); got '
                       f'{num_candidates}.')
    if compute_dtype not in ddpg_networks.COMPUTE_DTYPES:
      raise ValueError(f'Unknown GoalRelabeler.compute_dtype {compute_dtype!r}; valid: '
                       f'{", ".join(repr(d) for d in ddpg_networks.COMPUTE_DTYPES)}.')
    self.strategy = strategy
    self.compute_dtype = tf.as_dtype(compute_dtype)
    self._goal_bounds = (np.asarray(goal_minimum, np.float32), np.asarray(goal_maximum, np.float32))
    self._action_bounds = (np.asarray(action_minimum, np.float32), np.asarray(action_maximum, np.float32))
    self._state_repr_fn = state_repr_fn if state_repr_fn is not None else tf.identity
    self._multi_transition_fn = multi_transition_fn
    self.num_candidates = num_candidates
    self._rng = tf.random.Generator.from_seed(seed) if seed is not None else (
        tf.random.Generator.from_non_deterministic_state())

  @property
  def rng(self):
    """The `tf.random.Generator` of the Gaussian candidates ('sample': one draw of [K - 2, B, G] standard normals per
    call; 'FuN': [B, G]); checkpointed with the relabeler."""
    return self._rng

  @property
  def state_repr_fn(self):
    """The state representation the candidates are scored in: `StatePreprocess` with hiro_repr, else identity."""
    return self._state_repr_fn

  def _reprs(self, states, goal_dim):
    """Representations [..., goal_dim] of states [..., O] (any leading dimensions)."""
    flat = tf.reshape(states, [-1, states.shape[-1]])
    reprs = self._state_repr_fn(flat)[:, :goal_dim]
    return tf.reshape(reprs, tf.concat([tf.shape(states)[:-1], [goal_dim]], 0))

  def __call__(self, states, next_states, goals, low_states, low_actions, actor_fn, candidates=None,
               candidate_actor_fn=None):
    """The relabelled goals of a meta batch.

    Args:
      states: [B, O] first states s_t of the meta transitions (raw observations).
      next_states: [B, O] last states s_{t+c}.
      goals: [B, G] stored goals.
      low_states: [B, c, O] the c stored low-level observations.
      low_actions: [B, c, A] the c stored low-level actions.
      actor_fn: the deterministic low-level actor, fn(states [N, O], goals [N, G]) -> actions [N, A].
      candidates: None, or [K, B, G] candidates to score instead of sampling them ('sample' only; for tests).
      candidate_actor_fn: None, or the same actor as fn(states [N, O], goals [K, N, G], compute_dtype) ->
        [K, N, A] (`candidate_log_probs`); called with `compute_dtype`.

    Returns:
      float32 [B, G] goals, gradient stopped.
    """
    goals = tf.convert_to_tensor(goals, tf.float32)
    if self.strategy == 'None':
      return goals
    goal_dim = goals.shape[-1]
    states, next_states = tf.convert_to_tensor(states), tf.convert_to_tensor(next_states)
    state_reprs, next_state_reprs = self._reprs(states, goal_dim), self._reprs(next_states, goal_dim)
    if self.strategy == 'FuN':
      return tf.stop_gradient(
          candidate_goals(state_reprs, next_state_reprs, goals, *self._goal_bounds, num_samples=1, scale=0.1,
                          rng=self._rng))
    if candidates is None:
      candidates = candidate_goals(state_reprs, next_state_reprs, goals, *self._goal_bounds,
                                   num_samples=self.num_candidates, scale=0.5, rng=self._rng)
    candidates = tf.stop_gradient(candidates)
    low_states, low_actions = tf.convert_to_tensor(low_states), tf.convert_to_tensor(low_actions)
    log_probs = candidate_log_probs(
        candidates, low_states, low_actions, self._reprs(low_states, goal_dim), actor_fn, *self._action_bounds,
        multi_transition_fn=self._multi_transition_fn, candidate_actor_fn=None
        if candidate_actor_fn is None else functools.partial(candidate_actor_fn, compute_dtype=self.compute_dtype))
    return best_goals(candidates, log_probs)
