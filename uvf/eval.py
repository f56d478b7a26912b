"""HIRO evaluation: `evaluate` and `evaluate_checkpoint_repeatedly` (issue #7).

`evaluate_checkpoint_repeatedly` was in the original's utils/eval_utils.py.
"""

import gin

from uvf.placeholders import placeholder


@gin.configurable
@placeholder('HIRO evaluation', 7)
def evaluate(checkpoint_dir,
             eval_dir,
             environment=None,
             num_bin_actions=3,
             agent_class=None,
             meta_agent_class=None,
             state_preprocess_class=None,
             gamma=1.0,
             num_episodes_eval=10,
             eval_interval_secs=60,
             max_number_of_evaluations=None,
             checkpoint_timeout=None,
             timeout_fn=None,
             tuner_hook=None,
             generate_videos=False,
             generate_summaries=True,
             num_episodes_videos=5,
             video_settings=None,
             eval_modes=('eval',),
             eval_model_rollout=False,
             policy_save_dir='policy',
             checkpoint_range=None,
             checkpoint_path=None,
             max_steps_per_episode=None,
             evaluate_nohrl=False):
  """Evaluates the checkpoints of `checkpoint_dir` in each eval mode, writing results to `eval_dir` (issue #7)."""


@gin.configurable
@placeholder('repeated checkpoint evaluation (evaluate_checkpoint_repeatedly)', 7)
def evaluate_checkpoint_repeatedly(checkpoint_dir,
                                   evaluate_checkpoint_fn,
                                   eval_interval_secs=600,
                                   max_number_of_evaluations=None,
                                   checkpoint_timeout=None,
                                   timeout_fn=None):
  """Waits for each new checkpoint in `checkpoint_dir` and runs `evaluate_checkpoint_fn` on it (issue #7)."""
