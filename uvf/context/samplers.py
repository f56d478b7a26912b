"""Context samplers (issue #5).

A sampler is built as `sampler(context_spec=spec)` and called as `sampler(batch_size, **kwargs)`, returning
`(contexts, next_contexts)`. As in the original, the subclasses forward `*args, **kwargs` to `BaseSampler`, so gin
accepts `context_range`, `k` and `scope` for every sampler.
"""

import gin

from uvf.placeholders import not_built

_ISSUE = 5


@gin.configurable
class BaseSampler(object):
  """Base of the samplers: holds the context spec, range, `k` and scope (issue #5)."""

  def __init__(self, context_spec, context_range=None, k=2, scope='sampler'):
    del context_spec, context_range, k, scope
    raise NotImplementedError(not_built(f'the context sampler {type(self).__name__}', _ISSUE))


@gin.configurable
class ZeroSampler(BaseSampler):
  """Samples all-zero contexts (issue #5)."""


@gin.configurable
class BinarySampler(BaseSampler):
  """Samples 0/1 contexts, 1 with probability 1 - `probs` (issue #5)."""

  def __init__(self, probs=0.5, *args, **kwargs):
    del probs
    super().__init__(*args, **kwargs)


@gin.configurable
class RandomSampler(BaseSampler):
  """Samples contexts uniformly in `context_range` (issue #5)."""


@gin.configurable
class ScheduledSampler(BaseSampler):
  """Cycles through a list of context `values` (issue #5)."""

  def __init__(self, scope='default', values=None, scheduler='cycle', scheduler_params=None, *args, **kwargs):
    del scope, values, scheduler, scheduler_params
    super().__init__(*args, **kwargs)


@gin.configurable
class ReplaySampler(BaseSampler):
  """Samples contexts from next states in the replay buffer (issue #5)."""

  def __init__(self, prefetch_queue_capacity=2, override_indices=None, state_indices=None, *args, **kwargs):
    del prefetch_queue_capacity, override_indices, state_indices
    super().__init__(*args, **kwargs)


@gin.configurable
class TimeSampler(BaseSampler):
  """Samples an integer timer context in [minval, maxval) (issue #5)."""

  def __init__(self, minval=0, maxval=1, timestep=-1, *args, **kwargs):
    del minval, maxval, timestep
    super().__init__(*args, **kwargs)


@gin.configurable
class ConstantSampler(BaseSampler):
  """Always the context `value`: the evaluation goals (issue #5)."""

  def __init__(self, value=None, *args, **kwargs):
    del value
    super().__init__(*args, **kwargs)


@gin.configurable
class DirectionSampler(RandomSampler):
  """HIRO's low-level goal sampler: random directions relative to the current state (issue #5)."""
