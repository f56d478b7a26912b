"""The two HIRO levels: the goal-conditioned low-level agent (UVF) and the meta agent that sets its goals (issue #5).

As in the original, `UvfAgent` and `MetaAgent` take `*args, **kwargs` and forward them, so gin accepts any parameter
for them (e.g. `UvfAgent.actor_net`, which reaches the TD3 base agent). The methods the original registered under
their own gin names (`uvf_add_noise_fn`, `uvf_critic_function`, `meta_add_noise_fn`) are module-level placeholders
here, `self` first, until the agents exist.
"""

import gin

from uvf import cond_fn
from uvf.agents import ddpg_agent
from uvf.placeholders import not_built
from uvf.placeholders import placeholder

_ISSUE = 5


def _not_built(agent):
  return NotImplementedError(not_built(f'the HIRO agent {type(agent).__name__}', _ISSUE))


@gin.configurable
class UvfAgentCore(object):
  """Goal-conditioned (UVF) agent core: states merged with contexts, over a base RL agent (issue #5)."""

  def __init__(self,
               observation_spec,
               action_spec,
               tf_env,
               tf_context,
               step_cond_fn=cond_fn.env_transition,
               reset_episode_cond_fn=cond_fn.env_restart,
               reset_env_cond_fn=cond_fn.false_fn,
               metrics=None,
               **base_agent_kwargs):
    del observation_spec, action_spec, tf_env, tf_context, step_cond_fn, reset_episode_cond_fn
    del reset_env_cond_fn, metrics, base_agent_kwargs
    raise _not_built(self)


@gin.configurable('uvf_add_noise_fn')
@placeholder('UvfAgentCore.add_noise_fn', _ISSUE)
def uvf_add_noise_fn(self, action_fn, stddev=1.0, debug=False, clip=True, global_step=None):
  """UvfAgentCore.add_noise_fn: `action_fn` with Gaussian exploration noise, clipped to the spec (issue #5)."""


@gin.configurable('uvf_critic_function')
@placeholder('UvfAgentCore.critic_function', _ISSUE)
def uvf_critic_function(self, critic_vals, states, critic_fn=None):
  """UvfAgentCore.critic_function: Q values from critic outputs, optionally through `critic_fn` (issue #5)."""


@gin.configurable
class MetaAgentCore(UvfAgentCore):
  """Meta agent core: its actions are the goals (`sub_context`) of the low-level agent (issue #5)."""

  def __init__(self,
               observation_spec,
               action_spec,
               tf_env,
               tf_context,
               sub_context,
               step_cond_fn=cond_fn.env_transition,
               reset_episode_cond_fn=cond_fn.env_restart,
               reset_env_cond_fn=cond_fn.false_fn,
               metrics=None,
               actions_reg=0.,
               k=2,
               **base_agent_kwargs):
    del observation_spec, action_spec, tf_env, tf_context, sub_context, step_cond_fn, reset_episode_cond_fn
    del reset_env_cond_fn, metrics, actions_reg, k, base_agent_kwargs
    raise _not_built(self)


@gin.configurable('meta_add_noise_fn')
@placeholder('MetaAgentCore.add_noise_fn', _ISSUE)
def meta_add_noise_fn(self, action_fn, stddev=1.0, debug=False, global_step=None):
  """MetaAgentCore.add_noise_fn: `action_fn` with Gaussian noise on the goals, clipped (issue #5)."""


@gin.configurable
class UvfAgent(UvfAgentCore, ddpg_agent.TD3Agent):
  """HIRO's low-level agent: UvfAgentCore over TD3 (issue #5)."""

  def __init__(self, *args, **kwargs):
    del args, kwargs
    raise _not_built(self)


@gin.configurable
class MetaAgent(MetaAgentCore, ddpg_agent.TD3Agent):
  """HIRO's high-level agent: MetaAgentCore over TD3 (issue #5)."""

  def __init__(self, *args, **kwargs):
    del args, kwargs
    raise _not_built(self)
