"""dmlab30.py: the level lists and scores typed from the original (deepmind/scalable_agent dmlab30.py), and the
normalised score worked out by hand."""

import numpy as np
import pytest

from scalable_agent import dmlab30


def test_level_mapping_has_the_30_levels_in_order_and_two_renamed():
  assert len(dmlab30.LEVEL_MAPPING) == 30
  keys = list(dmlab30.LEVEL_MAPPING)
  assert keys[:3] == [
      'rooms_collect_good_objects_train', 'rooms_exploit_deferred_effects_train', 'rooms_select_nonmatching_object'
  ]
  assert keys[9] == 'lasertag_one_opponent_small'
  assert keys[-1] == 'explore_object_rewards_many'
  renamed = {train: test for train, test in dmlab30.LEVEL_MAPPING.items() if train != test}
  assert renamed == {
      'rooms_collect_good_objects_train': 'rooms_collect_good_objects_test',
      'rooms_exploit_deferred_effects_train': 'rooms_exploit_deferred_effects_test'
  }
  assert len(dmlab30.ALL_LEVELS) == 32
  assert dmlab30.ALL_LEVELS == set(dmlab30.LEVEL_MAPPING) | set(dmlab30.LEVEL_MAPPING.values())


def test_scores_are_keyed_by_test_level():
  assert set(dmlab30.HUMAN_SCORES) == set(dmlab30.LEVEL_MAPPING.values()) == set(dmlab30.RANDOM_SCORES)


@pytest.mark.parametrize(
    'level, human, random',
    [
        ('rooms_collect_good_objects_test', 10, 0.073),
        ('rooms_watermaze', 54, 4.065),
        ('language_execute_random_task', 254.05, -5.913),
        ('lasertag_one_opponent_small', 12.65, -0.224),  # The code's value (the paper's table swaps the lasertag rows).
        ('lasertag_three_opponents_large', 31.5, -0.102),
        ('skymaze_irreversible_path_varied', 100, 14.4),
        ('explore_goal_locations_small', 267.5, 7.66),
    ])
def test_scores_from_the_reference(level, human, random):
  assert dmlab30.HUMAN_SCORES[level] == human
  assert dmlab30.RANDOM_SCORES[level] == random


def _returns_at(percent_by_level):
  """Per training level, returns whose mean scores `percent_by_level.get(test level, 50)` percent."""
  level_returns = {}
  for train, test in dmlab30.LEVEL_MAPPING.items():
    human, random = dmlab30.HUMAN_SCORES[test], dmlab30.RANDOM_SCORES[test]
    target = random + (human - random) * percent_by_level.get(test, 50) / 100
    level_returns[train] = [target - 1., target + 1.]  # Mean = target.
  return level_returns


def test_human_normalized_score_by_hand():
  # 28 levels at 50 %, rooms_watermaze at 150 %, the renamed rooms_collect_good_objects at 10 %.
  returns = _returns_at({'rooms_watermaze': 150, 'rooms_collect_good_objects_test': 10})
  no_cap = (28 * 50 + 150 + 10) / 30  # 52.0
  cap_100 = (28 * 50 + 100 + 10) / 30  # 50.333...
  assert dmlab30.compute_human_normalized_score(returns, per_level_cap=None) == pytest.approx(no_cap)
  assert dmlab30.compute_human_normalized_score(returns, per_level_cap=100) == pytest.approx(cap_100)
  # rooms_watermaze alone: returns 4.065 and 103.935 -> mean 54 = human -> 100 %.
  returns['rooms_watermaze'] = np.array([4.065, 103.935])
  assert dmlab30.compute_human_normalized_score(returns, None) == pytest.approx((28 * 50 + 100 + 10) / 30)


def test_test_level_names_and_extra_levels():
  returns = _returns_at({})
  returns['rooms_collect_good_objects_test'] = returns.pop('rooms_collect_good_objects_train')
  returns['seekavoid_arena_01'] = [1000.]  # Not in DMLab-30: ignored.
  assert dmlab30.compute_human_normalized_score(returns, per_level_cap=100) == pytest.approx(50)


def test_missing_level_or_returns():
  returns = _returns_at({})
  del returns['rooms_watermaze']
  with pytest.raises(ValueError, match="Missing levels: \\['rooms_watermaze'\\]"):
    dmlab30.compute_human_normalized_score(returns, None)
  returns = _returns_at({})
  returns['rooms_exploit_deferred_effects_train'] = []
  with pytest.raises(ValueError, match="Missing returns for level: 'rooms_exploit_deferred_effects_test'"):
    dmlab30.compute_human_normalized_score(returns, None)
