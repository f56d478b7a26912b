"""Context transition functions: the contexts after an environment step (issue #5).

Each is called as `fn(contexts, timer, sampler_fn, ...)` and returns the new list of contexts. The relative ones are
HIRO's goal transition h(s, g, s') = s + g - s' on the first `k` dimensions.
"""

import gin

from uvf.placeholders import placeholder

_ISSUE = 5


@gin.configurable
@placeholder('context_transition_functions.periodic_context_fn', _ISSUE)
def periodic_context_fn(contexts, timer, sampler_fn, period=1):
  """Samples new contexts every `period` steps, else keeps them (issue #5)."""


@gin.configurable
@placeholder('context_transition_functions.timer_context_fn', _ISSUE)
def timer_context_fn(contexts, timer, sampler_fn, period=1, timer_index=-1, debug=False):
  """Counts a timer context down; samples new contexts and resets it to `period` at zero (issue #5)."""


@gin.configurable
@placeholder('context_transition_functions.relative_context_transition_fn', _ISSUE)
def relative_context_transition_fn(contexts, timer, sampler_fn, k=2, state=None, next_state=None, **kwargs):
  """One step of the relative goal: g' = g + s - s' on the first `k` dimensions (issue #5)."""


@gin.configurable
@placeholder('context_transition_functions.relative_context_multi_transition_fn', _ISSUE)
def relative_context_multi_transition_fn(contexts, timer, sampler_fn, k=2, states=None, **kwargs):
  """The relative goal along a sequence of states, from the goal at its first state (issue #5)."""
