"""Building a run's agents in the original's order and TF1 scopes, and the map of their policy variables by original TF1
name (as tensorflow/models research/efficient-hrl train.py names them); shared by training, evaluation and the
checkpoint tools."""

import tensorflow as tf

from uvf import checkpoints
from uvf.environments import create_maze_env


def build_agents(environment, agent_class, meta_agent_class, state_preprocess_class, inverse_dynamics_class,
                 strategy=None, debug_summaries=False):
  """Builds the agents in the original's order and TF1 scopes (efficient-hrl train.py), as training and evaluation do.

  Args:
    environment: the maze `PyEnvironment`.
    agent_class, meta_agent_class, state_preprocess_class, inverse_dynamics_class: the gin-bound classes.
    strategy: the `tf.distribute` strategy the agents' variables live under (None: the default).
    debug_summaries: passed to the agents.

  Returns:
    (meta_agent, uvf_agent, state_preprocess, inverse_dynamics).
  """
  strategy = strategy or tf.distribute.get_strategy()
  tf_env = create_maze_env.TFPyEnvironment(environment)
  observation_spec, action_spec = [tf_env.observation_spec()], [tf_env.action_spec()]
  with strategy.scope():
    with tf.name_scope('meta_agent'):
      meta_agent = meta_agent_class(observation_spec, action_spec, tf_env, debug_summaries=debug_summaries)
    with tf.name_scope('uvf_agent'):
      uvf_agent = agent_class(observation_spec, action_spec, tf_env, debug_summaries=debug_summaries)
      uvf_agent.set_meta_agent(agent=meta_agent)
  with tf.name_scope('state_preprocess'):
    state_preprocess = state_preprocess_class()
    # hiro_repr: phi on observations [O], psi on the c low-level actions [c * A] and the observation.
    state_preprocess.build(observation_spec[0].shape[0], action_spec[0].shape[0],
                           uvf_agent.tf_context.meta_action_every_n)
  with tf.name_scope('inverse_dynamics'):
    inverse_dynamics = inverse_dynamics_class(meta_agent.sub_context_as_action_specs[0])
  return meta_agent, uvf_agent, state_preprocess, inverse_dynamics


def policy_variables_by_tf1_name(uvf_agent, meta_agent, state_preprocess, global_step, num_episodes, num_resets):
  """{original TF1 name: variable} of the original's policy checkpoint (`<train_dir>/policy/model.ckpt-<step>`): both
  agents' actors and critics (not the targets), the counters, the current contexts and the trainable representation's
  variables."""
  names = {}
  for agent in (uvf_agent, meta_agent):
    for name, variable in agent.variables_by_tf1_name().items():
      if '/target_' not in name:
        names[name] = variable
  names['global_step'] = global_step
  names['num_episodes'] = num_episodes
  names['num_resets'] = num_resets
  for agent, scope in ((uvf_agent, 'uvf_agent'), (meta_agent, 'meta_agent')):
    for i, variable in enumerate(agent.context_vars):
      names[f'{scope}/action_context_{i}'] = variable
  names.update(state_preprocess.variables_by_tf1_name())
  return names


def restore_policy_from_full_checkpoint(path, uvf_agent, meta_agent, state_preprocess, global_step, num_episodes,
                                        num_resets):
  """Restores the policy variables (`policy_variables_by_tf1_name` of the same arguments) from a full training
  checkpoint `<train_dir>/model.ckpt-<step>` of this port (`HiroTrainer.full_checkpoint`): the agents (networks,
  targets, contexts), the counters and with hiro_repr the representation; the rest of it (replay buffers,
  optimizers, ...) is not read.

  Raises:
    checkpoints.CheckpointMismatchError: the checkpoint's agents are not these (another configuration).
  """
  objects = dict(uvf_agent=uvf_agent, meta_agent=meta_agent, global_step=global_step, num_episodes=num_episodes,
                 num_resets=num_resets)
  if state_preprocess.trainable:
    objects['state_preprocess'] = state_preprocess
  try:
    tf.train.Checkpoint(**objects).restore(path).expect_partial().assert_existing_objects_matched()
  except (AssertionError, ValueError) as e:
    raise checkpoints.CheckpointMismatchError(
        f'the full training checkpoint {path} does not match the policy of this configuration: '
        f'{str(e).strip().splitlines()[0]}') from None
  return path
