"""State representation and goal inverse dynamics of HIRO (issue #7).

`StatePreprocess` is the learned state embedding of "Near-Optimal Representation Learning for Hierarchical RL"
(Nachum et al. 2019; the `hiro_repr` setting); `InverseDynamics` samples goals for the off-policy correction. In the
original these lived in agent.py.
"""

import gin
import tensorflow as tf

from uvf.placeholders import not_built
from uvf.placeholders import placeholder

_ISSUE = 7


@gin.configurable()
@placeholder('the state representation network state_preprocess_net', _ISSUE)
def state_preprocess_net(states,
                         num_output_dims=2,
                         states_hidden_layers=(100,),
                         normalizer_fn=None,
                         activation_fn=tf.nn.relu,
                         zero_time=True,
                         images=False):
  """Feed-forward embedding of states into `num_output_dims` goal dimensions (issue #7)."""


@gin.configurable()
@placeholder('the action embedding network action_embed_net', _ISSUE)
def action_embed_net(actions,
                     states=None,
                     num_output_dims=2,
                     hidden_layers=(400, 300),
                     normalizer_fn=None,
                     activation_fn=tf.nn.relu,
                     zero_time=True,
                     images=False):
  """Feed-forward embedding of a low-level action sequence (and optionally states) (issue #7)."""


@gin.configurable()
class StatePreprocess(object):
  """State embedding used for goals, trained (if `trainable`) with the representation loss (issue #7)."""

  def __init__(self, trainable=False,
               state_preprocess_net=lambda states: states,
               action_embed_net=lambda actions, *args, **kwargs: actions,
               ndims=None):
    del trainable, state_preprocess_net, action_embed_net, ndims
    raise NotImplementedError(not_built('the state representation StatePreprocess', _ISSUE))


@gin.configurable()
class InverseDynamics(object):
  """Samples candidate goals around next_state - state for the goal relabelling of `spec` (issue #7)."""

  def __init__(self, spec):
    del spec
    raise NotImplementedError(not_built('the goal sampler InverseDynamics', _ISSUE))
