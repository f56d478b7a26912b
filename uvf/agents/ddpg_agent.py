"""DDPG and TD3 agents: the learner of each HIRO level (issue #5).

The methods the original registered under their own gin names (`ddpg_sample_action`, `ddpg_critic_function`,
`ddpg_update_targets`, `td3_update_targets`) are module-level placeholders here, `self` first, until the agents exist.
"""

import gin
import tensorflow as tf

from uvf.agents import ddpg_networks as networks
from uvf.placeholders import not_built
from uvf.placeholders import placeholder

_ISSUE = 5


@gin.configurable
class DdpgAgent(object):
  """DDPG agent for one level: actor, critic and their target networks (issue #5)."""

  def __init__(self,
               observation_spec,
               action_spec,
               actor_net=networks.actor_net,
               critic_net=networks.critic_net,
               td_errors_loss=tf.compat.v1.losses.huber_loss,
               dqda_clipping=0.,
               actions_regularizer=0.,
               target_q_clipping=None,
               residual_phi=0.0,
               debug_summaries=False):
    del observation_spec, action_spec, actor_net, critic_net, td_errors_loss, dqda_clipping
    del actions_regularizer, target_q_clipping, residual_phi, debug_summaries
    raise NotImplementedError(not_built(f'the RL agent {type(self).__name__}', _ISSUE))


@gin.configurable('ddpg_sample_action')
@placeholder('DdpgAgent.sample_action', _ISSUE)
def ddpg_sample_action(self, state, stddev=1.0):
  """DdpgAgent.sample_action: the actor's action plus Gaussian noise of `stddev` (issue #5)."""


@gin.configurable('ddpg_critic_function')
@placeholder('DdpgAgent.critic_function', _ISSUE)
def ddpg_critic_function(self, critic_values, states, weights=None):
  """DdpgAgent.critic_function: reduces (optionally weighted) critic values to one Q value (issue #5)."""


@gin.configurable('ddpg_update_targets')
@placeholder('DdpgAgent.update_targets', _ISSUE)
def ddpg_update_targets(self, tau=1.0):
  """DdpgAgent.update_targets: soft update of the target networks with rate `tau` (issue #5)."""


@gin.configurable
class TD3Agent(DdpgAgent):
  """TD3 agent for one level: twin critics, min of the two targets, clipped noise on target actions (issue #5)."""

  def __init__(self,
               observation_spec,
               action_spec,
               actor_net=networks.actor_net,
               critic_net=networks.critic_net,
               td_errors_loss=tf.compat.v1.losses.huber_loss,
               dqda_clipping=0.,
               actions_regularizer=0.,
               target_q_clipping=None,
               residual_phi=0.0,
               debug_summaries=False):
    del observation_spec, action_spec, actor_net, critic_net, td_errors_loss, dqda_clipping
    del actions_regularizer, target_q_clipping, residual_phi, debug_summaries
    raise NotImplementedError(not_built(f'the RL agent {type(self).__name__}', _ISSUE))


@gin.configurable('td3_update_targets')
@placeholder('TD3Agent.update_targets', _ISSUE)
def td3_update_targets(self, tau=1.0):
  """TD3Agent.update_targets: soft update of the target actor and critics with rate `tau` (issue #5)."""
