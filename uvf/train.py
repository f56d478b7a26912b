"""HIRO training: `train_uvf` (issue #5).

Its parameters are the original's, in order, with the original defaults; the original's command-line flags
`--goal_sample_strategy`, `--save_interval_secs` and `--save_summaries_secs` are three extra keyword parameters at
the end (the launcher turns those flags into these bindings).
"""

import gin

from uvf.placeholders import placeholder

LOAD_PATH = None  # The original's module constant: the default of `load_path`.


@gin.configurable
@placeholder('HIRO training', 5)
def train_uvf(train_dir,
              environment=None,
              num_bin_actions=3,
              agent_class=None,
              meta_agent_class=None,
              state_preprocess_class=None,
              inverse_dynamics_class=None,
              exp_action_wrapper=None,
              replay_buffer=None,
              meta_replay_buffer=None,
              replay_num_steps=1,
              meta_replay_num_steps=1,
              critic_optimizer=None,
              actor_optimizer=None,
              meta_critic_optimizer=None,
              meta_actor_optimizer=None,
              repr_optimizer=None,
              relabel_contexts=False,
              meta_relabel_contexts=False,
              batch_size=64,
              repeat_size=0,
              num_episodes_train=2000,
              initial_episodes=2,
              initial_steps=None,
              num_updates_per_observation=1,
              num_collect_per_update=1,
              num_collect_per_meta_update=1,
              gamma=1.0,
              meta_gamma=1.0,
              reward_scale_factor=1.0,
              target_update_period=1,
              should_stop_early=None,
              clip_gradient_norm=0.0,
              summarize_gradients=False,
              debug_summaries=False,
              log_every_n_steps=100,
              prefetch_queue_capacity=2,
              policy_save_dir='policy',
              save_policy_every_n_steps=1000,
              save_policy_interval_secs=0,
              replay_context_ratio=0.0,
              next_state_as_context_ratio=0.0,
              state_index=0,
              zero_timer_ratio=0.0,
              timer_index=-1,
              debug=False,
              max_policies_to_save=None,
              max_steps_per_episode=None,
              load_path=LOAD_PATH,
              goal_sample_strategy='sample',
              save_interval_secs=300,
              save_summaries_secs=30):
  """Trains the meta and low-level agents of HIRO, writing checkpoints and summaries to `train_dir` (issue #5)."""
