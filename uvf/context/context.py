"""The context (goal) of a HIRO level (issue #5)."""

import gin

from uvf.placeholders import not_built


@gin.configurable
class Context(object):
  """Contexts of one level: their specs, samplers per mode, reward function and goal transitions (issue #5)."""

  def __init__(self,
               tf_env,
               context_ranges=None,
               context_shapes=None,
               state_indices=None,
               variable_indices=None,
               gamma_index=None,
               settable_context=False,
               timers=None,
               samplers=None,
               reward_weights=None,
               reward_fn=None,
               random_sampler_mode='random',
               normalizers=None,
               context_transition_fn=None,
               context_multi_transition_fn=None,
               meta_action_every_n=None):
    del tf_env, context_ranges, context_shapes, state_indices, variable_indices, gamma_index, settable_context
    del timers, samplers, reward_weights, reward_fn, random_sampler_mode, normalizers, context_transition_fn
    del context_multi_transition_fn, meta_action_every_n
    raise NotImplementedError(not_built('the context object Context', 5))
