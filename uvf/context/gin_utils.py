"""Small gin-configurable helpers for building values inside gin files."""

import gin
import numpy as np


@gin.configurable
def gin_sparse_array(size, values, indices, fill_value=0):
  """A float NumPy array of length `size` holding `fill_value`, with `values` written at `indices`.

  Args:
    size: length of the array.
    values: a value, or one value per index.
    indices: an index or a sequence of indices.
    fill_value: the value everywhere else.

  Returns:
    The `np.float64` array.
  """
  array = np.full(size, fill_value, dtype=np.float64)
  array[indices] = values
  return array


@gin.configurable
def gin_sum(values):
  """`values[0] + values[1] + ...`, left to right (numbers, arrays, or lists / tuples to concatenate).

  Args:
    values: a non-empty sequence.

  Returns:
    The sum; `values` is left unchanged.
  """
  total = values[0]
  for value in values[1:]:
    total = total + value
  return total


@gin.configurable
def gin_range(n):
  """`[0, 1, ..., n - 1]` as a list (the original, written for Python 2, returned `range(n)`, a list there)."""
  return list(range(n))
