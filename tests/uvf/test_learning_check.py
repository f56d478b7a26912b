"""scripts/hiro_learning_check.py: the goal-progress measure on hand-worked transitions, and its binning."""

import os
import sys

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))),
                                'scripts'))

import hiro_learning_check  # pylint: disable=g-import-not-at-top,wrong-import-position


def test_goal_progress_hand_worked():
  # O = 3 (x, y, z), G = 3. Goal (3, 4) from (1, 1): direction (0.6, 0.8).
  states = np.array([[1., 1., .5], [1., 1., .5], [1., 1., .5], [0., 0., .5]], np.float32)
  goals = np.array([[3., 4., 0.], [3., 4., 0.], [3., 4., 0.], [0., 0., 1.]], np.float32)
  next_states = np.array([[1.6, 1.8, .5],    # moved 1 along the goal: progress 1, cosine 1
                          [0.2, 1.6, .9],    # moved (-0.8, 0.6), perpendicular: 0, 0 (z ignored)
                          [-2., -3., .5],    # moved 5 away: -5, -1
                          [7., 7., .5]], np.float32)  # zero (x, y) goal: counts 0
  progress, cosine, length = hiro_learning_check.goal_progress(states, goals, next_states)
  np.testing.assert_allclose(progress, [1., 0., -5., 0.], atol=1e-6)
  np.testing.assert_allclose(cosine, [1., 0., -1., 0.], atol=1e-6)
  np.testing.assert_allclose(length, [1., 1., 5., np.hypot(7., 7.)], atol=1e-6)


def test_binned_means():
  x = np.array([0., 10., 24., 25., 99.])
  starts, means = hiro_learning_check.binned(x, np.array([1., 2., 3., 10., 7.]), 25)
  np.testing.assert_array_equal(starts, [0., 25., 75.])
  np.testing.assert_allclose(means, [2., 10., 7.])
