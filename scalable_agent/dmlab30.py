"""The DMLab-30 suite: its levels, human and random reference scores, and the human-normalised score.

Values are the original's (deepmind/scalable_agent dmlab30.py). Scores are keyed by *test*
level name; `LEVEL_MAPPING` maps each training level to its test level (they differ for two levels only).

The human scores are the code's, which the README's results were computed with. The paper's Table B.1 (Espeholt et
al. 2018) swaps the labels of the four lasertag rows: it gives one_opponent_large 12.7, three_opponents_large 18.6,
one_opponent_small 18.6 and three_opponents_small 31.5.
"""

import collections
import logging

import numpy as np

# Training level -> test level, in the original's order (the order in which `dmlab30` assigns levels to actors).
LEVEL_MAPPING = collections.OrderedDict([
    ('rooms_collect_good_objects_train', 'rooms_collect_good_objects_test'),
    ('rooms_exploit_deferred_effects_train', 'rooms_exploit_deferred_effects_test'),
    ('rooms_select_nonmatching_object', 'rooms_select_nonmatching_object'),
    ('rooms_watermaze', 'rooms_watermaze'),
    ('rooms_keys_doors_puzzle', 'rooms_keys_doors_puzzle'),
    ('language_select_described_object', 'language_select_described_object'),
    ('language_select_located_object', 'language_select_located_object'),
    ('language_execute_random_task', 'language_execute_random_task'),
    ('language_answer_quantitative_question', 'language_answer_quantitative_question'),
    ('lasertag_one_opponent_small', 'lasertag_one_opponent_small'),
    ('lasertag_three_opponents_small', 'lasertag_three_opponents_small'),
    ('lasertag_one_opponent_large', 'lasertag_one_opponent_large'),
    ('lasertag_three_opponents_large', 'lasertag_three_opponents_large'),
    ('natlab_fixed_large_map', 'natlab_fixed_large_map'),
    ('natlab_varying_map_regrowth', 'natlab_varying_map_regrowth'),
    ('natlab_varying_map_randomized', 'natlab_varying_map_randomized'),
    ('skymaze_irreversible_path_hard', 'skymaze_irreversible_path_hard'),
    ('skymaze_irreversible_path_varied', 'skymaze_irreversible_path_varied'),
    ('psychlab_arbitrary_visuomotor_mapping', 'psychlab_arbitrary_visuomotor_mapping'),
    ('psychlab_continuous_recognition', 'psychlab_continuous_recognition'),
    ('psychlab_sequential_comparison', 'psychlab_sequential_comparison'),
    ('psychlab_visual_search', 'psychlab_visual_search'),
    ('explore_object_locations_small', 'explore_object_locations_small'),
    ('explore_object_locations_large', 'explore_object_locations_large'),
    ('explore_obstructed_goals_small', 'explore_obstructed_goals_small'),
    ('explore_obstructed_goals_large', 'explore_obstructed_goals_large'),
    ('explore_goal_locations_small', 'explore_goal_locations_small'),
    ('explore_goal_locations_large', 'explore_goal_locations_large'),
    ('explore_object_rewards_few', 'explore_object_rewards_few'),
    ('explore_object_rewards_many', 'explore_object_rewards_many'),
])

# Mean episode return of a human player, per test level.
HUMAN_SCORES = {
    'rooms_collect_good_objects_test': 10,
    'rooms_exploit_deferred_effects_test': 85.65,
    'rooms_select_nonmatching_object': 65.9,
    'rooms_watermaze': 54,
    'rooms_keys_doors_puzzle': 53.8,
    'language_select_described_object': 389.5,
    'language_select_located_object': 280.7,
    'language_execute_random_task': 254.05,
    'language_answer_quantitative_question': 184.5,
    'lasertag_one_opponent_small': 12.65,
    'lasertag_three_opponents_small': 18.55,
    'lasertag_one_opponent_large': 18.6,
    'lasertag_three_opponents_large': 31.5,
    'natlab_fixed_large_map': 36.9,
    'natlab_varying_map_regrowth': 24.45,
    'natlab_varying_map_randomized': 42.35,
    'skymaze_irreversible_path_hard': 100,
    'skymaze_irreversible_path_varied': 100,
    'psychlab_arbitrary_visuomotor_mapping': 58.75,
    'psychlab_continuous_recognition': 58.3,
    'psychlab_sequential_comparison': 39.5,
    'psychlab_visual_search': 78.5,
    'explore_object_locations_small': 74.45,
    'explore_object_locations_large': 65.65,
    'explore_obstructed_goals_small': 206,
    'explore_obstructed_goals_large': 119.5,
    'explore_goal_locations_small': 267.5,
    'explore_goal_locations_large': 194.5,
    'explore_object_rewards_few': 77.7,
    'explore_object_rewards_many': 106.7,
}

# Mean episode return of a uniformly random policy, per test level.
RANDOM_SCORES = {
    'rooms_collect_good_objects_test': 0.073,
    'rooms_exploit_deferred_effects_test': 8.501,
    'rooms_select_nonmatching_object': 0.312,
    'rooms_watermaze': 4.065,
    'rooms_keys_doors_puzzle': 4.135,
    'language_select_described_object': -0.07,
    'language_select_located_object': 1.929,
    'language_execute_random_task': -5.913,
    'language_answer_quantitative_question': -0.33,
    'lasertag_one_opponent_small': -0.224,
    'lasertag_three_opponents_small': -0.214,
    'lasertag_one_opponent_large': -0.083,
    'lasertag_three_opponents_large': -0.102,
    'natlab_fixed_large_map': 2.173,
    'natlab_varying_map_regrowth': 2.989,
    'natlab_varying_map_randomized': 7.346,
    'skymaze_irreversible_path_hard': 0.1,
    'skymaze_irreversible_path_varied': 14.4,
    'psychlab_arbitrary_visuomotor_mapping': 0.163,
    'psychlab_continuous_recognition': 0.224,
    'psychlab_sequential_comparison': 0.129,
    'psychlab_visual_search': 0.085,
    'explore_object_locations_small': 3.575,
    'explore_object_locations_large': 4.673,
    'explore_obstructed_goals_small': 6.76,
    'explore_obstructed_goals_large': 2.61,
    'explore_goal_locations_small': 7.66,
    'explore_goal_locations_large': 3.14,
    'explore_object_rewards_few': 2.073,
    'explore_object_rewards_many': 2.438,
}

# Every DMLab-30 level name, training and test (32 names); these live under 'contributed/dmlab30/' in DeepMind Lab.
ALL_LEVELS = frozenset(list(LEVEL_MAPPING.keys()) + list(LEVEL_MAPPING.values()))


def _transform_level_returns(level_returns):
  """Renames training levels to their test levels and checks that every test level has returns.

  Args:
    level_returns: dict level name -> sequence of episode returns.

  Returns:
    dict test level name (or the given name, for levels outside DMLab-30) -> returns.

  Raises:
    ValueError: a DMLab-30 test level is missing or has no returns.
  """
  new_level_returns = {LEVEL_MAPPING.get(name, name): returns for name, returns in level_returns.items()}
  test_set = set(LEVEL_MAPPING.values())
  missing = test_set - set(new_level_returns)
  if missing:
    raise ValueError(f'Missing levels: {sorted(missing)}')
  for name, returns in new_level_returns.items():
    if name in test_set:
      if not len(returns):  # pylint: disable=g-explicit-length-test  (lists and arrays alike)
        raise ValueError(f'Missing returns for level: {name!r}')
    else:
      logging.info('Skipping level %s for calculation.', name)
  return new_level_returns


def compute_human_normalized_score(level_returns, per_level_cap):
  """Mean over the 30 DMLab-30 levels of the human-normalised score, in percent.

  Per level: 100 * (mean(returns) - random) / (human - random), then min(., per_level_cap) when a cap is given.
  `per_level_cap=100` gives the paper's "mean capped human normalised score".

  Args:
    level_returns: dict level name (training or test name) -> non-empty sequence of episode returns. Levels outside
      DMLab-30 are ignored (logged).
    per_level_cap: None (no cap) or the largest per-level score, in percent.

  Returns:
    float, the mean of the per-level scores, in percent.

  Raises:
    ValueError: a DMLab-30 level is missing or has no returns.
  """
  new_level_returns = _transform_level_returns(level_returns)

  def human_normalized_score(level_name, returns):
    human = HUMAN_SCORES[level_name]
    random = RANDOM_SCORES[level_name]
    score = (np.mean(returns) - random) / (human - random) * 100
    if per_level_cap is not None:
      score = min(score, per_level_cap)
    return score

  return np.mean(
      [human_normalized_score(name, returns) for name, returns in new_level_returns.items() if name in HUMAN_SCORES])
