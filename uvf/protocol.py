"""HIRO's evaluation and run-length rules as plain constants, without TensorFlow (tools such as the reproduction kit
import them without loading it).

Success (the original's `last_meta_reward > -5`, efficient-hrl eval.py): the final distance to the target is below
`SUCCESS_DISTANCE`. Evaluation writes its rows to `RESULTS_JSON` / `RESULTS_CSV` in its eval_dir. Training stops at
num_episodes_train x max_steps_per_episode + `EXTRA_STEPS` environment steps (efficient-hrl train_utils.py).
"""

SUCCESS_DISTANCE = 5.0  # environment distance units
RESULTS_JSON = 'results.json'
RESULTS_CSV = 'results.csv'
# The columns of results.csv (results.json rows also hold the per-episode lists `episodes`).
CSV_FIELDS = ('step', 'mode', 'goal', 'num_episodes', 'episode_steps', 'success_rate', 'mean_reward', 'last_reward',
              'mean_meta_reward', 'last_meta_reward', 'mean_final_distance', 'wall_time_s', 'checkpoint',
              'evaluated_at')
EXTRA_STEPS = 100  # environment steps
