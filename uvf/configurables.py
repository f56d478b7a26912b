"""Registers every gin configurable of HIRO: the launcher imports this module before it parses HIRO's gin files.

Importing it registers all 62 names of the original efficient-hrl code, with their original parameters. It does not
import `gin.tf.external_configurables` (`tf.losses.huber_loss`, `tf.nn.relu`, `AdamOptimizer`): as in the original,
configs/base_uvf.gin imports that itself.
"""

# Every import is for its side effect, the gin registration of its configurables.
# ruff: noqa: F401
# pylint: disable=unused-import
from uvf import agent
from uvf import cond_fn
from uvf import eval  # pylint: disable=redefined-builtin
from uvf import representation
from uvf import train
from uvf.agents import circular_buffer
from uvf.agents import ddpg_agent
from uvf.agents import ddpg_networks
from uvf.agents import td3_update
from uvf.context import context
from uvf.context import context_transition_functions
from uvf.context import gin_utils
from uvf.context import rewards_functions
from uvf.context import samplers
from uvf.environments import create_maze_env
# pylint: enable=unused-import
