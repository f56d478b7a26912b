"""State representation and goal inverse dynamics of HIRO (original: agent.py).

`StatePreprocess` maps observations to the space the goals live in. Under `hiro_orig` and `hiro_xy` it is not trained:
the identity followed by the first `ndims` dimensions (s[:15] or s[:2]). The learned embedding of "Near-Optimal
Representation Learning for Hierarchical RL" (Nachum et al. 2019; `hiro_repr`, `StatePreprocess.trainable = True`)
is issue #7. `InverseDynamics` samples candidate goals for the off-policy correction (`uvf/off_policy_correction.py`).
"""

import gin
import numpy as np
import tensorflow as tf

from uvf import off_policy_correction
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
  """The state representation in goal space: s_repr = net(s)[..., :ndims].

  Args:
    trainable: False (hiro_orig, hiro_xy): `net` is the identity and nothing is trained. True (hiro_repr) is the
      learned representation of issue #7 and raises NotImplementedError.
    state_preprocess_net, action_embed_net: the networks of the trainable representation (issue #7); with
      trainable=False, `state_preprocess_net` is applied as given (default the identity).
    ndims: None (all dims) or the number of leading dims kept (gin: %SUBGOAL_DIM).

  Raises:
    NotImplementedError: if trainable (issue #7).
  """

  def __init__(self, trainable=False,
               state_preprocess_net=lambda states: states,
               action_embed_net=lambda actions, *args, **kwargs: actions,
               ndims=None):
    if trainable:
      raise NotImplementedError(
          not_built('the trainable state representation (StatePreprocess.trainable = True, the hiro_repr setting; '
                    'use hiro_orig or hiro_xy)', _ISSUE))
    del action_embed_net
    self.trainable = False
    self._state_preprocess_net = state_preprocess_net
    self._ndims = ndims

  @property
  def ndims(self):
    return self._ndims

  def __call__(self, states):
    """states float32 [..., O] (one state or any batch) -> representations [..., ndims] (same units)."""
    embedded = self._state_preprocess_net(states)
    if self._ndims is not None:
      embedded = embedded[..., :self._ndims]
    return embedded

  def get_trainable_vars(self):
    """The representation's trainable variables: none when not trainable."""
    return []

  def variables_by_tf1_name(self):
    """{original TF1 name: variable} of the representation (hiro.md 4.1; empty when not trainable)."""
    return {}


@gin.configurable()
class InverseDynamics(object):
  """Samples candidate goals around next_state - state for the goal relabelling, within the goal spec `spec`.

  Args:
    spec: the bounded spec of the goals (the meta agent's action spec, [G]).
  """

  def __init__(self, spec):
    self._spec = spec

  def sample(self, states, next_states, num_samples, orig_goals, sc=0.5, rng=None):
    """Candidate goals (see `off_policy_correction.candidate_goals`).

    Args:
      states, next_states: [B, D >= G] state representations at the start and end of the meta transitions.
      num_samples: K; 1: one unclipped Gaussian sample [B, G]; K >= 3: [K, B, G] (K - 2 samples, loc, orig_goals),
        clipped to the spec.
      orig_goals: [B, G] stored goals.
      sc: the Gaussian's standard deviation in units of the spec's half range.
      rng: the `tf.random.Generator` to use (default the global one).
    """
    return off_policy_correction.candidate_goals(
        states, next_states, orig_goals, np.asarray(self._spec.minimum), np.asarray(self._spec.maximum),
        num_samples=num_samples, scale=sc, rng=rng)
