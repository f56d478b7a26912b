"""Context transition functions: the contexts after an environment step.

Each is called as `fn(contexts, timer, sampler_fn, ...)` with `contexts` the list of the level's current contexts
(each [C], or [B, C] where stated), `timer` the level's int32 step counter and `sampler_fn` a callable returning a
fresh list of contexts (or None), and returns the new list of contexts. The relative ones are HIRO's goal transition
h(s, g, s') = s + g - s' on the first `k` dimensions.
"""

import gin
import tensorflow as tf


@gin.configurable
def periodic_context_fn(contexts, timer, sampler_fn, period=1):
  """New contexts from `sampler_fn` on the steps where timer mod `period` == 0, else the contexts unchanged.

  Args:
    contexts: list of [C] context tensors.
    timer: int32 scalar tensor, the level's step counter.
    sampler_fn: callable returning a list of [C] tensors like `contexts`.
    period: steps between two samples.

  Returns:
    List of [C] tensors.
  """
  contexts = list(contexts)
  return tf.cond(tf.equal(tf.math.floormod(timer, period), 0), sampler_fn, lambda: contexts)


@gin.configurable
def timer_context_fn(contexts, timer, sampler_fn, period=1, timer_index=-1, debug=False):
  """Counts the timer context `contexts[timer_index]` down; at 0, new contexts with the timer set to `period`.

  The actual period is therefore `period` + 1 steps.

  Args:
    contexts: list of [C] context tensors; contexts[timer_index] is the timer, its first entry is tested.
    timer: unused (kept for the common signature; printed with `debug`).
    sampler_fn: callable returning a list of [C] tensors like `contexts`.
    period: value the timer restarts from.
    timer_index: index of the timer in `contexts`.
    debug: print the new contexts and the timer.

  Returns:
    List of [C] tensors.
  """
  contexts = list(contexts)

  def reset():
    new_contexts = list(sampler_fn())
    new_contexts[timer_index] = tf.zeros_like(contexts[timer_index]) + period
    return new_contexts

  def update():
    updated = list(contexts)
    updated[timer_index] = contexts[timer_index] - 1
    return updated

  values = tf.cond(tf.equal(contexts[timer_index][0], 0), reset, update)
  if debug:
    tf.print('timer_context_fn', values, timer)
  return values


def _the_goal(contexts, fn_name):
  """The single goal tensor of `contexts` (a list); ValueError naming `fn_name` otherwise."""
  contexts = list(contexts)
  if len(contexts) != 1:
    raise ValueError(f'{fn_name} takes exactly one context, got {len(contexts)}.')
  return contexts[0]


@gin.configurable
def relative_context_transition_fn(contexts, timer, sampler_fn, k=2, state=None, next_state=None, **kwargs):
  """One step of the relative goal: g' = g + s - s' on the first `k` dimensions, the others unchanged.

  Args:
    contexts: a list of one goal tensor, [G] (or [B, G]).
    timer: unused.
    sampler_fn: unused.
    k: number of leading goal dimensions that are relative to the state.
    state: [D >= k] state before the step (for the low level: its representation s_repr), same units as the goal.
    next_state: [D >= k] state after the step.
    **kwargs: ignored (the context passes the raw states and their representations together).

  Returns:
    A list of one [G] tensor: concat(g[:k] + state[:k] - next_state[:k], g[k:]).

  Raises:
    ValueError: if `contexts` does not hold exactly one tensor.
  """
  del timer, sampler_fn, kwargs
  goal = _the_goal(contexts, 'relative_context_transition_fn')
  return [tf.concat([goal[..., :k] + state[..., :k] - next_state[..., :k], goal[..., k:]], -1)]


@gin.configurable
def relative_context_multi_transition_fn(contexts, timer, sampler_fn, k=2, states=None, **kwargs):
  """The relative goal along c stored states, from the goal at the first: g_i = g + s_0 - s_i on the first `k` dims.

  Args:
    contexts: a list of one goal tensor [B, G], the goal at states[:, 0].
    timer: unused.
    sampler_fn: unused.
    k: number of leading goal dimensions that are relative to the state.
    states: [B, c, D >= k] states (for the low level: their representations), same units as the goal.
    **kwargs: ignored.

  Returns:
    A list of one [B, c, G] tensor: g_i[:k] = g[:k] + states[:, 0, :k] - states[:, i, :k] and g_i[k:] = g[k:].

  Raises:
    ValueError: if `contexts` does not hold exactly one tensor.
  """
  del timer, sampler_fn, kwargs
  goal = _the_goal(contexts, 'relative_context_multi_transition_fn')
  relative = tf.expand_dims(goal[:, :k] + states[:, 0, :k], 1) - states[:, :, :k]
  rest = goal[:, None, k:] * tf.ones_like(states[:, :, :1])
  return [tf.concat([relative, rest], -1)]
