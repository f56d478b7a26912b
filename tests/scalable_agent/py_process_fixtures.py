"""Classes that tests run in PyProcess children: `spawn` imports them by module path, so they live here, at the top
level of an importable module, and this module does not import TensorFlow (a child imports only what it needs)."""

import os
import time

# The child's environment when this module (and NumPy, below) was imported.
_ENVIRONMENT_AT_IMPORT = dict(os.environ)

import numpy as np  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position


class Example:
  """The original test_small's object: a counter."""

  def __init__(self, a):
    self._a = a

  def inc(self):
    self._a += 1

  def compute(self, b):
    return np.array(self._a + b, dtype=np.int32)

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, unused_constructor_kwargs):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  (only the parent asks for specs)
    if method_name == 'compute':
      return tf.TensorSpec([], tf.int32)
    if method_name == 'inc':
      return ()
    return None


class Sleeper:
  """wait() sleeps, then returns None (the original test_threading)."""

  def wait(self, seconds):
    time.sleep(seconds)

  @staticmethod
  def _tensor_specs(method_name, unused_kwargs, unused_constructor_kwargs):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if method_name == 'wait':
      return tf.TensorSpec([], tf.int32)
    return None


class Zeros:
  """The original test_args: positional constructor and method arguments name the output shape."""

  def __init__(self, dim0):
    self._dim0 = dim0

  def compute(self, dim1):
    return np.zeros([self._dim0, dim1], dtype=np.int32)

  @staticmethod
  def _tensor_specs(method_name, kwargs, constructor_kwargs):
    import tensorflow as tf  # pylint: disable=g-import-not-at-top
    if method_name == 'compute':
      return tf.TensorSpec([constructor_kwargs['dim0'], kwargs['dim1']], tf.int32)
    return None


class FailingConstructor:

  def __init__(self, unused_arg=None):
    raise ValueError('foo')

  def something(self):
    pass


class CustomError(Exception):
  """An exception type of the user's own, to check that the caller gets the same type back."""


class Unpicklable(Exception):

  def __init__(self, a, b):  # pickle rebuilds exceptions with self.args, which is ('...',) here: it fails.
    super().__init__(f'{a} and {b}')


class Recorder:
  """Writes 'was_closed' to `filename` when closed; `fail()` raises (the original test_close, test_close_on_error)."""

  def __init__(self, filename):
    self._filename = filename

  def fail(self, kind='value'):
    if kind == 'custom':
      raise CustomError('bar')
    if kind == 'unpicklable':
      raise Unpicklable('x', 'y')
    raise ValueError('foo')

  def echo(self, *args):
    return args

  def close(self):
    with open(self._filename, 'w') as f:
      f.write('was_closed')


class Frames:
  """Returns one 72x96x3 uint8 frame per call (the original's process benchmarks)."""

  def __init__(self, seed=0):
    self._frame = np.random.default_rng(seed).integers(0, 256, (72, 96, 3), dtype=np.uint8)

  def compute(self, unused_a):
    return self._frame

  def step(self, action):
    """An environment-like step: a frame in, reward and frame out."""
    return np.float32(action), self._frame


class EnvironmentAtImport:
  """get(name): the child's environment variable `name` when this module was imported (None if unset)."""

  def get(self, name):
    return _ENVIRONMENT_AT_IMPORT.get(name)
