"""CircularBuffer: layout and names, wrap-around, sampling bounds and replacement, use inside tf.function."""

import collections

import numpy as np
import pytest
import tensorflow as tf

from uvf.agents import circular_buffer


def element(i, obs_dim=3):
  """A low-level-like element [s [O], a [2], r [], discount [], index (int64)] whose entries all encode i."""
  return [
      tf.fill([obs_dim], float(i)),
      tf.fill([2], -float(i)),
      tf.constant(float(i)),
      tf.constant(1.0),
      tf.constant(i, tf.int64)
  ]


def test_names_shapes_and_dtypes_are_the_originals():
  buffer = circular_buffer.CircularBuffer(buffer_size=4, scope='agent')
  buffer.add(element(0))
  names = {k: (v.shape.as_list(), v.dtype) for k, v in buffer.variables_by_tf1_name().items()}
  assert names == {
      'agent/num_adds': ([], tf.int64),
      'agent/BufferVariable_0': ([4, 3], tf.float32),
      'agent/BufferVariable_1': ([4, 2], tf.float32),
      'agent/BufferVariable_2': ([4], tf.float32),
      'agent/BufferVariable_3': ([4], tf.float32),
      'agent/BufferVariable_4': ([4], tf.int64)
  }
  for name, variable in buffer.variables_by_tf1_name().items():
    assert variable.name == name + ':0' and not variable.trainable


def test_eager_creation_from_specs():
  specs = [tf.TensorSpec([3], tf.float32), tf.TensorSpec([10, 2], tf.float32)]
  buffer = circular_buffer.CircularBuffer(buffer_size=6, scope='meta', specs=specs)
  assert buffer.get_num_tensors() == 2
  assert buffer.variables_by_tf1_name()['meta/BufferVariable_1'].shape == [6, 10, 2]


def test_add_wraps_around():
  buffer = circular_buffer.CircularBuffer(buffer_size=3, scope='wrap')
  assert buffer.get_position().numpy() == -1
  for i in range(5):
    buffer.add(element(i))
  assert buffer.get_num_adds().numpy() == 5
  assert buffer.get_position().numpy() == 1  # the 5th element went to slot (5 - 1) mod 3
  stored = buffer.gather([0, 1, 2])
  np.testing.assert_array_equal(stored[4].numpy(), [3, 4, 2])
  np.testing.assert_array_equal(stored[0].numpy(), [[3] * 3, [4] * 3, [2] * 3])
  np.testing.assert_array_equal(stored[1].numpy(), [[-3] * 2, [-4] * 2, [-2] * 2])


def test_sampling_stays_within_the_added_elements_with_replacement():
  buffer = circular_buffer.CircularBuffer(buffer_size=5, scope='s', seed=0)
  buffer.add(element(0))
  buffer.add(element(1))
  (indices,) = buffer.get_random_batch(400, keys=[4])
  counts = np.bincount(indices.numpy(), minlength=2)
  assert counts.sum() == 400 and len(counts) == 2  # only slots 0 and 1 were filled
  assert abs(counts[0] - 200) < 60  # uniform
  for i in range(2, 8):
    buffer.add(element(i))
  batch = buffer.get_random_batch(50)
  values = batch[4].numpy()
  assert set(values) <= {3, 4, 5, 6, 7} and len(set(values)) == 5  # the last 5 adds, each seen
  assert len(values) > len(set(values))  # with replacement
  np.testing.assert_array_equal(batch[0].numpy(), np.repeat(values[:, None].astype(np.float32), 3, 1))
  assert batch[2].dtype == tf.float32 and batch[2].shape == [50]


def test_add_and_sample_inside_tf_function_without_retracing():
  buffer = circular_buffer.CircularBuffer(buffer_size=4, scope='fn', seed=1)

  @tf.function
  def step(i, keep):
    buffer.maybe_add([tf.fill([3], tf.cast(i, tf.float32)), tf.cast(i, tf.int64)], keep)
    return buffer.get_num_adds()

  step(tf.constant(0), tf.constant(True))  # creates the storage from the first element's specs
  traces = step.experimental_get_tracing_count()
  for i in range(1, 7):
    step(tf.constant(i), tf.constant(i % 3 != 0))  # i = 3 and 6 are not added
  assert step.experimental_get_tracing_count() == traces
  assert buffer.get_num_adds().numpy() == 5
  np.testing.assert_array_equal(buffer.gather(tf.range(4))[1].numpy(), [5, 1, 2, 4])  # adds 0 1 2 4 5

  @tf.function
  def sample():
    return buffer.get_random_batch(8)

  assert set(sample()[1].numpy()) <= {1, 2, 4, 5}


def test_dict_elements_use_sorted_keys():
  buffer = circular_buffer.CircularBuffer(buffer_size=2, scope='d')
  buffer.add({'b': tf.constant([1.0]), 'a': tf.constant(2.0)})
  assert list(buffer.variables_by_tf1_name()) == ['d/num_adds', 'd/BufferVariable_a', 'd/BufferVariable_b']
  a, b = buffer.gather([0])
  assert a.numpy().tolist() == [2.0] and b.numpy().tolist() == [[1.0]]


def test_errors():
  with pytest.raises(ValueError, match='buffer_size'):
    circular_buffer.CircularBuffer(buffer_size=0)
  buffer = circular_buffer.CircularBuffer(buffer_size=3, scope='e')
  with pytest.raises(ValueError, match='empty'):
    buffer.get_random_batch(2)
  buffer.add(element(0))
  with pytest.raises(ValueError, match='shape'):
    buffer.add(element(1, obs_dim=4))
  with pytest.raises(ValueError, match='dtype'):
    buffer.add(element(1)[:4] + [tf.constant(1.0)])
  with pytest.raises(ValueError, match='keys'):
    buffer.add(element(1)[:4])
  with pytest.raises(ValueError, match='num_steps'):
    buffer.get_random_batch(2, num_steps=2)
  with pytest.raises(tf.errors.InvalidArgumentError, match='out of bounds'):
    buffer.gather([1])  # only slot 0 holds an element


def test_namedtuple_elements_keep_the_original_keys_and_come_back_named():
  pair = collections.namedtuple('Pair', ['first', 'second'])
  buffer = circular_buffer.CircularBuffer(buffer_size=4, scope='named')
  buffer.create_storage(pair(first=tf.TensorSpec([2], tf.float32), second=tf.TensorSpec([], tf.int64)))
  assert list(buffer.variables_by_tf1_name()) == ['named/num_adds', 'named/BufferVariable_0', 'named/BufferVariable_1']
  for i in range(3):
    buffer.add(pair(first=tf.fill([2], float(i)), second=tf.constant(10 * i, tf.int64)))
  whole = buffer.gather([2, 0])
  assert isinstance(whole, pair)
  np.testing.assert_array_equal(whole.first.numpy(), [[2, 2], [0, 0]])
  np.testing.assert_array_equal(whole.second.numpy(), [20, 0])
  batch = buffer.get_random_batch(5)
  assert isinstance(batch, pair) and batch.first.shape == (5, 2)
  np.testing.assert_array_equal(batch.second.numpy(), 10 * batch.first.numpy()[:, 0])
  (seconds,) = buffer.get_random_batch(5, keys=[1])  # a choice of entries stays a list
  assert not isinstance(buffer.gather([1], keys=[1]), pair) and seconds.shape == (5,)
