"""Reward functions of contexts.

Each is called as `reward_fn(states, actions, rewards, next_states, contexts)` and returns `(rewards, discounts)`,
two float32 [B] tensors (or [B, D] where a function is asked for a vectorised form). `contexts` is the list of the
level's context tensors, each [B, C]. HIRO uses two of them: `negative_distance` (the low-level reward under the gin
scope `uvf/`, the task reward under `task/`) and, in other setups, `plain_rewards`. The others remain placeholders.
"""

from typing import Any, Dict

import gin
import tensorflow as tf

from uvf.placeholders import placeholder


def index_states(states, indices):
  """`states[:, indices]`, or `states` itself when `indices` is None.

  Args:
    states: [B, D] tensor.
    indices: None, an integer, or a sequence of integers (dimensions of `states`).

  Returns:
    [B, len(indices)] tensor ([B] for an integer index, as the original's `tf.gather`).
  """
  if indices is None:
    return states
  return tf.gather(states, tf.constant(indices, dtype=tf.int32), axis=1)


def _record_tensor(tensor, indices, stats, name):
  """Adds the columns `indices` (all if None) of the [B, D] `tensor` to `stats` as '<name>_<index>'."""
  if indices is None:
    indices = range(tensor.shape[1])
  for index in indices:
    stats[f'{name}_{index:02d}'] = tensor[:, index]


def _summarize_stats(stats):
  """Writes mean / max / min / std scalars and a histogram of each [B] tensor in `stats` (the original's names)."""
  for name, stat in stats.items():
    mean = tf.reduce_mean(stat)
    tf.summary.scalar(f'mean_{name}', mean)
    tf.summary.scalar(f'max_{name}', tf.reduce_max(stat))
    tf.summary.scalar(f'min_{name}', tf.reduce_min(stat))
    tf.summary.scalar(f'std_{name}', tf.sqrt(tf.reduce_mean(tf.square(stat)) - tf.square(mean) + 1e-10))
    tf.summary.histogram(name, stat)


def _can_summarize():
  """True when a TF2 summary would be written: a default writer is set and it has a step."""
  return tf.summary.experimental.get_step() is not None


def _as(value, dtype):
  """`value` (a number, list, array or tensor) as a tensor of `dtype`."""
  return tf.cast(value, dtype)


@gin.configurable
@placeholder('rewards_functions.potential_rewards')
def potential_rewards(states, actions, rewards, next_states, contexts, gamma=1.0, reward_fn=None):
  """Potential-based shaping of `reward_fn`: gamma * r(next_states) - r(states) (not ported)."""


@gin.configurable
@placeholder('rewards_functions.timed_rewards')
def timed_rewards(states, actions, rewards, next_states, contexts, reward_fn=None, dense=False, timer_index=-1):
  """`reward_fn`, given (unless `dense`) and terminating only when the timer context runs out (not ported)."""


@gin.configurable
@placeholder('rewards_functions.reset_rewards')
def reset_rewards(states, actions, rewards, next_states, contexts, reset_index=0, reset_state=None,
                  reset_reward_function=None, include_forward_rewards=True, include_reset_rewards=True):
  """Rewards of a forward / reset agent: the reset reward towards `reset_state`, or the plain reward (not ported)."""


@gin.configurable
@placeholder('rewards_functions.tanh_similarity')
def tanh_similarity(states, actions, rewards, next_states, contexts, mse_scale=1.0, state_scales=1.0, goal_scales=1.0,
                    summarize=False):
  """1 - tanh(mse_scale * MSE(next_states, goal)) (not ported)."""


@gin.configurable
@placeholder('rewards_functions.negative_mse')
def negative_mse(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0, summarize=False):
  """-MSE(next_states, goal) (not ported)."""


@gin.configurable
def negative_distance(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0,
                      reward_scales=1.0, weight_index=None, weight_vector=None, summarize=False,
                      termination_epsilon=1e-4, state_indices=None, goal_indices=None, vectorize=False,
                      relative_context=False, diff=False, norm='L2', epsilon=1e-10, bonus_epsilon=0., offset=0.0):
  """Negative distance of `next_states` to the goal: HIRO's low-level reward and its task (meta) reward.

  With s = states[:, state_indices], s' = next_states[:, state_indices], g = contexts[0][:, goal_indices] (all
  columns where the indices are None), and the goal made absolute as s + g when `relative_context`:
    d_j = (state_scales * s'_j - goal_scales * g_j)^2 (times `weight_vector`, times |contexts[0][:, weight_index]|),
    'L2': dist = sqrt(sum_j d_j + epsilon)   ('L2' with `vectorize`: sqrt(d_j + epsilon) per dimension),
    'L1': dist = sum_j sqrt(d_j + epsilon)   (no sum with `vectorize`),
    rewards = 1[dist < bonus_epsilon] + offset - reward_scales * dist
  (with `diff`: + reward_scales * (old_dist - dist) in place of - reward_scales * dist, old_dist being the same
  distance from `states`), discounts = 1[dist > termination_epsilon]. The bonus and the discounts use the distance
  before `reward_scales`.

  HIRO: low level (`uvf/`, `relative_context=True`, states are the state representations s_repr [B, G]):
  r = -sqrt(||s_repr + g - s'_repr||^2 + 1e-10). Task (`task/`, `state_indices=[0, 1]`, `relative_context=False`):
  r = -sqrt(||s'[:2] - target||^2 + 1e-10).

  Args:
    states: float [B, D] states before the step (MuJoCo length units for positions).
    actions: unused.
    rewards: unused (the environment's rewards).
    next_states: float [B, D] states after the step, same units.
    contexts: list of context tensors, contexts[0] the goal [B, G] in the units of the states.
    state_scales: multiplies the (next) states; a number or a vector broadcastable to [len(state_indices)].
    goal_scales: multiplies the goals; a number or a vector broadcastable to the goal dimensions.
    reward_scales: multiplies the distances; a number or a vector broadcastable to the reward dimensions.
    weight_index: None, or index (or indices) of contexts[0] whose absolute values weight the squared differences.
    weight_vector: None, or weights broadcastable to the squared differences.
    summarize: write summaries (mean / histogram of the distances, stats of next_states and squared differences)
      when a default summary writer with a step is set.
    termination_epsilon: the discount is 0 where the distance is at most this (same units), else 1.
    state_indices: None or the list of state dimensions compared with the goal.
    goal_indices: None or the list of goal dimensions used.
    vectorize: return [B, D] rewards and discounts, one per dimension, instead of [B].
    relative_context: the goal is relative to `states`: the target point is states + goal.
    diff: reward the decrease of the distance from states to next_states instead of minus the distance.
    norm: 'L2' (Euclidean) or 'L1'.
    epsilon: added under the square root (keeps the gradient finite at the goal).
    bonus_epsilon: reward bonus of 1 where the distance is below this.
    offset: added to the rewards.

  Returns:
    (rewards, discounts): float32 [B] each ([B, D] with `vectorize`); rewards <= 0 with the default arguments.

  Raises:
    ValueError: if `norm` is not 'L2' or 'L1'.
  """
  del actions, rewards  # Unused, as in the original.
  if norm not in ('L2', 'L1'):
    raise ValueError(f"negative_distance: unknown norm {norm!r}; valid norms are 'L2' and 'L1'.")
  stats: Dict[str, Any] = {}
  if summarize:
    _record_tensor(next_states, state_indices, stats, 'next_states')
  states = index_states(states, state_indices)
  next_states = index_states(next_states, state_indices)
  goals = index_states(contexts[0], goal_indices)
  if relative_context:
    goals = states + goals
  dtype = next_states.dtype
  sq_dists = tf.math.squared_difference(next_states * _as(state_scales, dtype), goals * _as(goal_scales, dtype))
  old_sq_dists = tf.math.squared_difference(states * _as(state_scales, dtype), goals * _as(goal_scales, dtype))
  if summarize:
    _record_tensor(sq_dists, None, stats, 'sq_dists')
  if weight_vector is not None:
    sq_dists *= _as(weight_vector, dtype)
    old_sq_dists *= _as(weight_vector, dtype)
  if weight_index is not None:
    # As the original: the weights are columns of contexts[0] (not contexts[weight_index]).
    weights = tf.abs(index_states(contexts[0], weight_index))
    sq_dists *= weights
    old_sq_dists *= weights
  if norm == 'L1':
    dist = tf.sqrt(sq_dists + epsilon)
    old_dist = tf.sqrt(old_sq_dists + epsilon)
    if not vectorize:
      dist = tf.reduce_sum(dist, -1)
      old_dist = tf.reduce_sum(old_dist, -1)
  else:
    if vectorize:
      dist, old_dist = sq_dists, old_sq_dists
    else:
      dist = tf.reduce_sum(sq_dists, -1)
      old_dist = tf.reduce_sum(old_sq_dists, -1)
    dist = tf.sqrt(dist + epsilon)
    old_dist = tf.sqrt(old_dist + epsilon)
  discounts = dist > termination_epsilon
  if summarize and _can_summarize():
    with tf.name_scope('RewardFn'):
      tf.summary.scalar('mean_dist', tf.reduce_mean(dist))
      tf.summary.histogram('dist', dist)
      _summarize_stats(stats)
  bonus = tf.cast(dist < bonus_epsilon, tf.float32)
  dist *= _as(reward_scales, dtype)
  old_dist *= _as(reward_scales, dtype)
  if diff:
    return bonus + offset + tf.cast(old_dist - dist, tf.float32), tf.cast(discounts, tf.float32)
  return bonus + offset + tf.cast(-dist, tf.float32), tf.cast(discounts, tf.float32)


@gin.configurable
@placeholder('rewards_functions.cosine_similarity')
def cosine_similarity(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0,
                      reward_scales=1.0, normalize_states=True, normalize_goals=True, weight_index=None,
                      weight_vector=None, summarize=False, state_indices=None, goal_indices=None, offset=0.0):
  """Cosine similarity of (next_states - states) and the goal (not ported)."""


@gin.configurable
@placeholder('rewards_functions.diff_distance')
def diff_distance(states, actions, rewards, next_states, contexts, state_scales=1.0, goal_scales=1.0, reward_scales=1.0,
                  weight_index=None, weight_vector=None, summarize=False, termination_epsilon=1e-4, state_indices=None,
                  goal_indices=None, norm='L2', epsilon=1e-10):
  """Decrease of the distance to the goal from states to next_states (not ported)."""


@gin.configurable
@placeholder('rewards_functions.binary_indicator')
def binary_indicator(states, actions, rewards, next_states, contexts, termination_epsilon=1e-4, offset=0, epsilon=1e-10,
                     state_indices=None, summarize=False):
  """1 when next_states reach the goal (distance within `termination_epsilon`), else 0 (not ported)."""


@gin.configurable
def plain_rewards(states, actions, rewards, next_states, contexts):
  """The environment's rewards unchanged.

  Args:
    states, actions, next_states, contexts: unused.
    rewards: [B] environment rewards.

  Returns:
    (rewards, discounts): `rewards` itself and ones like it, [B].
  """
  del states, actions, next_states, contexts  # Unused, as in the original.
  return rewards, tf.ones_like(rewards)


@gin.configurable
@placeholder('rewards_functions.ctrl_rewards')
def ctrl_rewards(states, actions, rewards, next_states, contexts, reward_scales=1.0):
  """Negative control cost -||actions||^2 (not ported)."""


@gin.configurable
@placeholder('rewards_functions.diff_rewards')
def diff_rewards(states, actions, rewards, next_states, contexts, state_indices=None, goal_index=0):
  """Vector reward next_states - goal (not ported)."""


@gin.configurable
@placeholder('rewards_functions.state_rewards')
def state_rewards(states, actions, rewards, next_states, contexts, weight_index=None, state_indices=None,
                  weight_vector=1.0, offset_vector=0.0, summarize=False):
  """Linear reward weight_vector . (next_states + offset_vector) (not ported)."""
