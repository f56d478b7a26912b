"""Actor and critic networks of the DDPG / TD3 agents (issue #5)."""

import gin
import tensorflow as tf

from uvf.placeholders import placeholder

_ISSUE = 5


@gin.configurable('ddpg_critic_net')
@placeholder('the DDPG critic network', _ISSUE)
def critic_net(states, actions,
               for_critic_loss=False,
               num_reward_dims=1,
               states_hidden_layers=(400,),
               actions_hidden_layers=None,
               joint_hidden_layers=(300,),
               weight_decay=0.0001,
               normalizer_fn=None,
               activation_fn=tf.nn.relu,
               zero_obs=False,
               images=False):
  """Critic Q(s, a): fully connected layers over the state and action, one linear output (issue #5)."""


@gin.configurable('ddpg_actor_net')
@placeholder('the DDPG actor network', _ISSUE)
def actor_net(states, action_spec,
              hidden_layers=(400, 300),
              normalizer_fn=None,
              activation_fn=tf.nn.relu,
              zero_obs=False,
              images=False):
  """Deterministic actor: fully connected layers, tanh-scaled to the action bounds (issue #5)."""
