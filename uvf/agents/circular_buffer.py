"""Replay buffer of HIRO: a ring of `tf.Variable`s holding elements that are lists of tensors.

Port of tensorflow/models `research/efficient-hrl/agents/circular_buffer.py`. An element is a list/tuple of
tensors (keys '0', '1', ... as the original) or a dict (keys sorted); e.g. the low-level element
[s [O], a [A], r [], discount [], s' [O], g [G], g' [G]]. A namedtuple element (HIRO's `collect.LowTransition` and
`collect.MetaTransition`) is stored as a tuple, under the same keys, and whole elements are read back as that
namedtuple. Slot k is the variable `<scope>/BufferVariable_<k>` of shape
[buffer_size] + element_k.shape; the counter is `<scope>/num_adds` (int64), the original's names.

The storage variables are created from the first added element, as the original (call `add` once eagerly, or pass
`specs` to create them at construction); everything else works inside `tf.function` and XLA: `add` / `maybe_add` are
one scatter per slot, `get_random_batch` one uniform draw and one gather per slot. The original's `CriticalSection`
is not needed (a `tf.function` orders its variable accesses). Sampling uses the buffer's own `tf.random.Generator`
(`rng`), so that a checkpoint of the buffer restores its sampling sequence too.
"""

import collections

import gin
import numpy as np
import tensorflow as tf


@gin.configurable
class CircularBuffer(tf.Module):
  """Fixed-size circular buffer of elements (lists of tensors), sampled uniformly with replacement."""

  def __init__(self, buffer_size=1000, scope='replay_buffer', specs=None, seed=None):
    """Creates the counter (and the storage, if `specs` is given).

    Args:
      buffer_size: int > 0, the number of elements kept; older ones are overwritten (HIRO: 200000 per level).
      scope: name prefix of the variables ('agent' and 'meta' in HIRO's gin).
      specs: None (storage created at the first `add`) or a list/tuple/dict of `tf.TensorSpec`s (or anything with
        `shape` and `dtype`) of one element.
      seed: int seed of the sampling generator; None: non-deterministic.

    Raises:
      ValueError: if buffer_size is not a positive int.
    """
    if not isinstance(buffer_size, (int, np.integer)) or buffer_size <= 0:
      raise ValueError(f'buffer_size must be a positive int, got {buffer_size!r}.')
    super().__init__(name=str(scope).replace('/', '_') + '_buffer')
    self._buffer_size = int(buffer_size)
    self._scope = str(scope).strip('/')
    self._tensors = collections.OrderedDict()  # key -> storage variable
    self._is_dict = None
    self._element_type = None  # the namedtuple class of the elements, if they are namedtuples
    with tf.name_scope(self._scope + '/'):
      self._num_adds = tf.Variable(0, dtype=tf.int64, trainable=False, name='num_adds')
    if seed is None:
      self._rng = tf.random.Generator.from_non_deterministic_state()
    else:
      self._rng = tf.random.Generator.from_seed(seed)
    if specs is not None:
      self._create_variables(self._as_ordered_dict(specs))

  def create_storage(self, specs):
    """Creates the storage variables from `specs` (list/tuple/dict of specs of one element) if they do not exist yet,
    so that a `tf.function` can add to the buffer from its first trace; a no-op if they exist with this layout.

    Raises:
      ValueError: if the storage exists with another layout.
    """
    specs = self._as_ordered_dict(specs)
    if not self._tensors:
      self._create_variables(specs)
      return
    layout = [(k, tf.TensorShape(s.shape).as_list(), tf.as_dtype(s.dtype)) for k, s in specs.items()]
    existing = [(k, v.shape.as_list()[1:], v.dtype) for k, v in self._tensors.items()]
    if layout != existing:
      raise ValueError(f'The buffer already holds elements {existing}, not {layout}.')

  @property
  def buffer_size(self):
    return self._buffer_size

  @property
  def scope(self):
    return self._scope

  @property
  def num_adds(self):
    """int64 [] variable: elements added so far (also those since overwritten)."""
    return self._num_adds

  @property
  def rng(self):
    """The `tf.random.Generator` behind `get_random_batch`."""
    return self._rng

  def _as_ordered_dict(self, tensors):
    is_dict = isinstance(tensors, dict)
    if is_dict:
      items = sorted(tensors.items(), key=lambda kv: kv[0])
    elif isinstance(tensors, (list, tuple)):
      items = [(str(i), t) for i, t in enumerate(tensors)]
    else:
      raise ValueError(f'An element must be a list, tuple or dict of tensors, got {type(tensors).__name__}.')
    if not items:
      raise ValueError('An element must hold at least one tensor.')
    if self._is_dict is not None and is_dict != self._is_dict:
      raise ValueError('Elements must all be dicts or all be lists/tuples, as the first one.')
    self._is_dict = is_dict
    if self._element_type is None and hasattr(tensors, '_fields'):
      self._element_type = type(tensors)
    return collections.OrderedDict(items)

  def _create_variables(self, specs):
    with tf.init_scope(), tf.name_scope(self._scope + '/'):
      for key, spec in specs.items():
        shape = [self._buffer_size] + tf.TensorShape(spec.shape).as_list()
        if None in shape:
          raise ValueError(f'Element entry {key} must have a fully defined shape, got {spec.shape}.')
        self._tensors[key] = tf.Variable(tf.zeros(shape, tf.as_dtype(spec.dtype)), trainable=False,
                                         name='BufferVariable_' + key)

  def _validate(self, tensors):
    if list(tensors.keys()) != list(self._tensors.keys()):
      raise ValueError(f'Element keys {list(tensors.keys())} differ from the buffer\'s {list(self._tensors.keys())} '
                       f'(an element has {len(self._tensors)} entries).')
    converted = collections.OrderedDict()
    for key, tensor in tensors.items():
      variable = self._tensors[key]
      tensor = tf.convert_to_tensor(tensor, dtype_hint=variable.dtype)
      if tensor.shape.as_list() != variable.shape.as_list()[1:]:
        raise ValueError(f'Element entry {key} has shape {tensor.shape}, the buffer holds {variable.shape[1:]}.')
      if tensor.dtype != variable.dtype:
        raise ValueError(f'Element entry {key} has dtype {tensor.dtype.name}, the buffer holds '
                         f'{variable.dtype.name}.')
      converted[key] = tensor
    return converted

  def _prepare(self, tensors):
    tensors = self._as_ordered_dict(tensors)
    if not self._tensors:
      specs = collections.OrderedDict(
          (key, tf.TensorSpec.from_tensor(tf.convert_to_tensor(t))) for key, t in tensors.items())
      self._create_variables(specs)
    return self._validate(tensors)

  def add(self, tensors):
    """Adds one element at position num_adds mod buffer_size, then num_adds += 1.

    Args:
      tensors: list/tuple/dict of tensors, the same keys, shapes and dtypes on every call.

    Raises:
      ValueError: if the element does not match the buffer's layout.
    """
    self.maybe_add(tensors, True)

  def maybe_add(self, tensors, condition):
    """Adds `tensors` (as `add`) if `condition` (Python bool or bool [] tensor) holds."""
    tensors = self._prepare(tensors)

    def _add():
      position = self._num_adds % self._buffer_size
      for key, tensor in tensors.items():
        self._tensors[key].scatter_nd_update([[position]], tensor[None])
      self._num_adds.assign_add(1)
      return tf.constant(True)

    if isinstance(condition, (bool, np.bool_)):
      if condition:
        _add()
      return
    tf.cond(tf.convert_to_tensor(condition, tf.bool), _add, lambda: tf.constant(False))

  def get_num_adds(self):
    """int64 []: the number of elements added so far."""
    return self._num_adds.read_value()

  def get_num_tensors(self):
    """int: the number of entries of an element (0 before the first add)."""
    return len(self._tensors)

  def get_position(self):
    """int64 []: the position of the last added element, or -1 if none was added."""
    num_adds = self.get_num_adds()
    return tf.where(num_adds < 1, num_adds - 1, (num_adds - 1) % self._buffer_size)

  def _keys(self, keys):
    if not self._tensors:
      raise ValueError('The buffer is empty: call add() (or pass specs) before reading from it.')
    if keys is None:
      return list(self._tensors.keys())
    keys = [str(k) for k in keys]
    unknown = [k for k in keys if k not in self._tensors]
    if unknown:
      raise ValueError(f'Unknown keys {unknown}; the buffer holds {list(self._tensors.keys())}.')
    return keys

  def get_random_batch(self, batch_size, keys=None, num_steps=1):
    """Samples batch_size elements uniformly from [0, min(num_adds, buffer_size)), with replacement.

    Args:
      batch_size: int, the number of elements B.
      keys: the entries to return (default all, in order).
      num_steps: must be 1 (HIRO's `replay_num_steps`); the original's n-step trajectories are not ported.

    Returns:
      List of tensors [B] + entry shape, one per key (the elements' namedtuple for all keys, if they are
      namedtuples).

    Raises:
      ValueError: if nothing was ever added (the storage does not exist yet), or num_steps != 1.
      tf.errors.InvalidArgumentError: at run time, if num_adds is 0.
    """
    if num_steps != 1:
      raise ValueError(f'num_steps={num_steps!r} is not supported by this port; HIRO samples single steps (1).')
    whole = keys is None
    keys = self._keys(keys)
    num_adds = self.get_num_adds()
    assert_op = tf.debugging.assert_positive(num_adds, message='The buffer is empty: nothing has been added yet.')
    with tf.control_dependencies([assert_op]):
      max_index = tf.minimum(num_adds, self._buffer_size)
    indices = self._rng.uniform([batch_size], minval=0, maxval=max_index, dtype=tf.int64)
    return self._gather(indices, keys, whole)

  def gather(self, indices, keys=None):
    """The elements at `indices` (int [N], each in [0, min(num_adds, buffer_size))): list of [N] + entry shape (the
    elements' namedtuple for all keys, if they are namedtuples)."""
    whole = keys is None
    keys = self._keys(keys)
    indices = tf.convert_to_tensor(indices)
    assert_op = tf.debugging.assert_less(tf.cast(indices, tf.int64), tf.minimum(self.get_num_adds(), self._buffer_size),
                                         message='Index out of bounds: at or beyond min(num_adds, buffer_size).')
    with tf.control_dependencies([assert_op]):
      indices = tf.identity(indices)
    return self._gather(indices, keys, whole)

  def _gather(self, indices, keys, whole):
    values = [tf.gather(self._tensors[key], indices) for key in keys]
    return self._element_type(*values) if whole and self._element_type is not None else values

  def variables_by_tf1_name(self):
    """OrderedDict {original TF1 name: variable}: '<scope>/num_adds', '<scope>/BufferVariable_<k>', ..."""
    names = collections.OrderedDict([(f'{self._scope}/num_adds', self._num_adds)])
    for key, variable in self._tensors.items():
      names[f'{self._scope}/BufferVariable_{key}'] = variable
    return names
