"""uvf.context.gin_utils on hand-worked cases."""

import numpy as np

from uvf.context import gin_utils


def test_gin_sparse_array():
  np.testing.assert_array_equal(gin_utils.gin_sparse_array(5, [1, 2], [0, 3], fill_value=-1), [1, -1, -1, 2, -1])
  np.testing.assert_array_equal(gin_utils.gin_sparse_array(3, 7.5, 1), [0, 7.5, 0])


def test_gin_sum_leaves_its_argument_unchanged():
  first = np.array([1.0, 2.0])
  values = [first, np.array([10.0, 20.0]), np.array([100.0, 200.0])]
  np.testing.assert_array_equal(gin_utils.gin_sum(values), [111.0, 222.0])
  np.testing.assert_array_equal(first, [1.0, 2.0])
  assert gin_utils.gin_sum([(1,), (2, 3)]) == (1, 2, 3)


def test_gin_range():
  assert gin_utils.gin_range(4) == [0, 1, 2, 3]
  assert gin_utils.gin_range(0) == []
