"""Context samplers.

A sampler is built as `sampler(context_spec=spec)` (its other arguments from gin) and called as
`sampler(batch_size, **kwargs)`, returning `(contexts, next_contexts)`, two [B, C] tensors of the spec's dtype. As in
the original, the subclasses forward `*args, **kwargs` to `BaseSampler`, so gin accepts `context_range`, `k` and
`scope` for every sampler. `seed` (new, default None) seeds the sampler's own `tf.random.Generator`; None draws a
non-deterministic seed. The samplers are `tf.Module`s, so a checkpoint holding them restores their random state.

`BinarySampler`, `ScheduledSampler`, `ReplaySampler` and `TimeSampler` remain placeholders (no HIRO config uses
them; the original `ReplaySampler` calls a replay method that does not exist).
"""

import gin
import numpy as np
import tensorflow as tf

from uvf.placeholders import not_built


def _generator(seed):
  """A `tf.random.Generator` from `seed` (an int), or from a non-deterministic state when `seed` is None."""
  if seed is None:
    return tf.random.Generator.from_non_deterministic_state()
  return tf.random.Generator.from_seed(seed)


def range_bounds(context_range, shape):
  """The (minimum, maximum) float64 arrays of `shape` given by `context_range`.

  Args:
    context_range: (minval, maxval), each a number or a sequence with one entry per context dimension.
    shape: the context shape, e.g. [C].

  Returns:
    Two float64 NumPy arrays of `shape`.

  Raises:
    ValueError: if the range is not a pair, or its entries do not broadcast to `shape`.
  """
  if context_range is None or len(context_range) != 2:
    raise ValueError(f'context_range must be a pair (minval, maxval), got {context_range!r} (bind '
                     '<scope>/<Sampler>.context_range in gin).')
  try:
    return tuple(np.broadcast_to(np.asarray(bound, np.float64), shape).copy() for bound in context_range)
  except ValueError as error:
    raise ValueError(f'context_range {context_range!r} does not fit the context shape {list(shape)}.') from error


@gin.configurable
class BaseSampler(tf.Module):
  """Base of the samplers: holds the context spec, range, `k`, scope and a random generator.

  Args:
    context_spec: `tf.TensorSpec` of one context, [C].
    context_range: None or (minval, maxval), numbers or [C] sequences.
    k: number of leading context dimensions that are relative to the state (`DirectionSampler`).
    scope: a name (kept from the original).
    seed: None or an int seeding this sampler's random numbers.
  """

  def __init__(self, context_spec, context_range=None, k=2, scope='sampler', seed=None):
    super().__init__()
    self._context_spec = context_spec
    self._context_range = context_range
    self._k = k
    self._scope = scope
    self._rng = _generator(seed)

  @property
  def rng(self):
    """This sampler's `tf.random.Generator` (its state is checkpointed; a run's seed resets it)."""
    return self._rng

  def __call__(self, batch_size, **kwargs):
    raise NotImplementedError(f'{type(self).__name__} does not sample.')

  def set_replay(self, replay=None):
    """Does nothing (only a replay sampler uses the replay buffer)."""
    del replay

  def _shape(self, batch_size):
    return [batch_size] + self._context_spec.shape.as_list()

  def _validate_contexts(self, contexts):
    """Raises ValueError unless the [B, C] `contexts` match the spec's shape and dtype."""
    if contexts.shape[1:] != self._context_spec.shape:
      raise ValueError(f'contexts have shape {contexts.shape[1:]} per element; the spec wants '
                       f'{self._context_spec.shape}.')
    if contexts.dtype != self._context_spec.dtype:
      raise ValueError(f'contexts have dtype {contexts.dtype}; the spec wants {self._context_spec.dtype}.')


@gin.configurable
class ZeroSampler(BaseSampler):
  """All-zero contexts."""

  def __call__(self, batch_size, **kwargs):
    """Returns two [batch_size, C] zero tensors (the same tensor twice)."""
    contexts = tf.zeros(self._shape(batch_size), dtype=self._context_spec.dtype)
    return contexts, contexts


@gin.configurable
class BinarySampler(BaseSampler):
  """Samples 0/1 contexts, 1 with probability 1 - `probs` (not ported)."""

  def __init__(self, probs=0.5, *args, **kwargs):
    del probs, args, kwargs
    raise NotImplementedError(not_built('the context sampler BinarySampler'))


@gin.configurable
class RandomSampler(BaseSampler):
  """Contexts uniform in `context_range`: U[minval, maxval) per dimension (the meta level's task targets)."""

  def _uniform(self, batch_size):
    """[batch_size, C] uniform samples of the spec's dtype in the range."""
    spec = self._context_spec
    minimum, maximum = range_bounds(self._context_range, spec.shape.as_list())
    minimum, maximum = tf.constant(minimum, spec.dtype), tf.constant(maximum, spec.dtype)
    unit = self._rng.uniform(self._shape(batch_size), dtype=spec.dtype)
    contexts = minimum + (maximum - minimum) * unit
    self._validate_contexts(contexts)
    return contexts

  def __call__(self, batch_size, **kwargs):
    """Returns (contexts, contexts), [batch_size, C] uniform in the range; `state` / `next_state` are ignored."""
    contexts = self._uniform(batch_size)
    return contexts, contexts


@gin.configurable
class ScheduledSampler(BaseSampler):
  """Cycles through a list of context `values` (not ported)."""

  def __init__(self, scope='default', values=None, scheduler='cycle', scheduler_params=None, *args, **kwargs):
    del scope, values, scheduler, scheduler_params, args, kwargs
    raise NotImplementedError(not_built('the context sampler ScheduledSampler'))


@gin.configurable
class ReplaySampler(BaseSampler):
  """Samples contexts from next states in the replay buffer (not ported)."""

  def __init__(self, prefetch_queue_capacity=2, override_indices=None, state_indices=None, *args, **kwargs):
    del prefetch_queue_capacity, override_indices, state_indices, args, kwargs
    raise NotImplementedError(not_built('the context sampler ReplaySampler'))


@gin.configurable
class TimeSampler(BaseSampler):
  """Samples an integer timer context in [minval, maxval) (not ported)."""

  def __init__(self, minval=0, maxval=1, timestep=-1, *args, **kwargs):
    del minval, maxval, timestep, args, kwargs
    raise NotImplementedError(not_built('the context sampler TimeSampler'))


@gin.configurable
class ConstantSampler(BaseSampler):
  """Always the context `value`: the evaluation targets (`eval1/ConstantSampler.value = [16, 0]`, ...).

  Args:
    value: a number or a [C] sequence.
    *args, **kwargs: `BaseSampler`'s arguments.
  """

  def __init__(self, value=None, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self._value = value

  def __call__(self, batch_size, **kwargs):
    """Returns (contexts, contexts), `value` repeated to [batch_size, C]."""
    if self._value is None:
      raise ValueError('ConstantSampler has no value: bind <scope>/ConstantSampler.value in gin.')
    spec = self._context_spec
    value = tf.constant(self._value, shape=spec.shape, dtype=spec.dtype)
    contexts = tf.tile(tf.expand_dims(value, 0), [batch_size] + [1] * spec.shape.ndims)
    self._validate_contexts(contexts)
    return contexts, contexts


@gin.configurable
class DirectionSampler(RandomSampler):
  """HIRO's low-level goal sampler (`train/DirectionSampler`): relative goals towards other states of the batch.

  Without states it samples like `RandomSampler`. Given the batch's `state` and `next_state` [B, D], as the original:
    contexts[:, :k] = 0.1 * half_range[:k] * N(0, 1) + shuffle(state)[:, :k] - state[:, :k]
    contexts[:, k:] = the uniform sample's (or, when a `sampler_fn` keyword is given, sampler_fn()'s) [:, k:]
  where shuffle permutes the batch and half_range = (maxval - minval) / 2; next_contexts = contexts (the original
  computes the relative next goal and then overwrites it).
  """

  def __call__(self, batch_size, **kwargs):
    """Returns (contexts, next_contexts), [batch_size, C] each, with gradients stopped.

    Args:
      batch_size: B.
      **kwargs: `state` and `next_state` ([B, D] tensors of the spec's dtype, or None); `sampler_fn`, optional.
    """
    spec = self._context_spec
    contexts = self._uniform(batch_size)
    other_contexts = kwargs['sampler_fn']() if 'sampler_fn' in kwargs else contexts
    state, next_state = kwargs.get('state'), kwargs.get('next_state')
    if state is not None and next_state is not None:
      k = self._k
      minimum, maximum = range_bounds(self._context_range, spec.shape.as_list())
      half_range = tf.constant(((maximum - minimum) / 2)[:k], dtype=state.dtype)
      noise = self._rng.normal(tf.shape(state[:, :k]), dtype=state.dtype)
      permutation = tf.argsort(self._rng.uniform(tf.shape(state)[:1]))
      shuffled = tf.gather(state[:, :k], permutation)
      contexts = tf.concat([0.1 * half_range * noise + shuffled - state[:, :k], other_contexts[:, k:]], 1)
    return tf.stop_gradient(contexts), tf.stop_gradient(contexts)
