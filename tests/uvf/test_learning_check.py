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
  next_states = np.array(
      [
          [1.6, 1.8, .5],  # moved 1 along the goal: progress 1, cosine 1
          [0.2, 1.6, .9],  # moved (-0.8, 0.6), perpendicular: 0, 0 (z ignored)
          [-2., -3., .5],  # moved 5 away: -5, -1
          [7., 7., .5]
      ],
      np.float32)  # zero (x, y) goal: counts 0
  progress, cosine, length = hiro_learning_check.goal_progress(states, goals, next_states)
  np.testing.assert_allclose(progress, [1., 0., -5., 0.], atol=1e-6)
  np.testing.assert_allclose(cosine, [1., 0., -1., 0.], atol=1e-6)
  np.testing.assert_allclose(length, [1., 1., 5., np.hypot(7., 7.)], atol=1e-6)


def test_binned_means():
  x = np.array([0., 10., 24., 25., 99.])
  starts, means = hiro_learning_check.binned(x, np.array([1., 2., 3., 10., 7.]), 25)
  np.testing.assert_array_equal(starts, [0., 25., 75.])
  np.testing.assert_allclose(means, [2., 10., 7.])


def test_the_chart_shows_each_measure_against_its_baseline(tmp_path):
  from figures import curves  # pylint: disable=g-import-not-at-top
  xs = np.array([12500., 37500.])
  panels = hiro_learning_check.figure_panels(
      str(tmp_path / 'my_run'), 25000, {
          'progress': (xs, np.array([0.05, 0.4])),
          'cosine': (xs, np.array([0.1, 0.7])),
          'distance': (xs, np.array([13.0, 9.5]))
      }, base_progress=0.02, random_final_distance=13.6,
      eval_curves={'eval1': ([16, 0], [(50000, 0.25), (100000, 1.0)])})
  drawn = curves.draw(str(tmp_path / 'chart.png'), panels, 'check', 'environment steps', width=900)
  assert [p['title'].split(',')[0] for p in drawn['panels']
         ] == ['my_run: low level', 'low level', 'meta level', 'evaluation (run_eval.py): success rate']
  assert [[(h['value'], h['label']) for h in p['hlines']] for p in drawn['panels'][:3]] == [[
      (0.02, 'untrained policies: +0.020')
  ], [(0.0, 'a goal-blind policy: 0')], [(13.6, 'random policy: 13.6')]]
  distance = drawn['panels'][2]['series'][0]
  assert (distance['points'], distance['x'], distance['y']) == (2, [12500.0, 37500.0], [9.5, 13.0])
  assert drawn['panels'][3]['series'][0]['label'] == 'eval1 (16, 0)'
  success = drawn['panels'][3]['series'][0]
  assert (success['points'], success['x'], success['y']) == (2, [50000.0, 100000.0], [0.25, 1.0])
  assert curves.read_png(str(tmp_path / 'chart.png'))['size'] == drawn['size']
