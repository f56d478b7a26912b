"""Runs a Python object (an environment) in a separate process and calls its methods from this one.

The original ran each DeepMind Lab environment in a forked child so that environments step in parallel, outside the
learner's GIL, with every method call a `tf.py_func` op. Forking a process that has TensorFlow loaded hangs (the
original's py_process_test.py does under Python 3.6 + TF 1.9: the forked child is stuck in TensorFlow), so here the
child is started with the `spawn` method: a fresh interpreter that imports the object's class by its module path and
never imports TensorFlow unless that module does. Calls are plain Python calls (NumPy in, NumPy out);
`PyProcess.tf_proxy` optionally wraps them as `tf.numpy_function` ops, as the original did.

Protocol over one duplex pipe (one round trip per call):
  child -> parent, once: ('ready', None) after constructing the object, or ('error', (exception, traceback text));
  parent -> child, per call: (method name, args);  child -> parent: ('ok', result) or ('error', ...);
  parent -> child: None asks the child to call the object's `close()` (if it has one) and exit.
After an error in a method the child calls the object's `close()` and exits: later calls raise ProcessClosedError.

Example (the class must be importable by module path, i.e. defined at the top level of a module):

  p = PyProcess(environments.PyProcessDmLab, level, config, num_action_repeats, seed)
  p.start()
  frame = p.proxy.initial()
  p.close()
"""

import inspect
import logging
import multiprocessing
from multiprocessing import resource_tracker
import multiprocessing.pool
import os
import pickle
import signal
import threading
import traceback
from typing import Any

_CONTEXT = multiprocessing.get_context('spawn')
# How often a caller waiting for a reply checks whether `close()` was called meanwhile (seconds).
_POLL_INTERVAL_S = 0.05


class ProcessClosedError(EOFError):
  """The child process is not running: closed by `close()`, stopped after an error, or died (end of stream).

  The TensorFlow wrapper (`PyProcess.tf_proxy`) turns it into `tf.errors.OutOfRangeError`, as the original did.
  """


def _portable_exception(e):
  """`e` if it survives pickling (so the parent re-raises the same type), else a RuntimeError with its text."""
  try:
    pickle.loads(pickle.dumps(e))
    return e
  except Exception:  # pylint: disable=broad-except
    return RuntimeError(f'{type(e).__module__}.{type(e).__qualname__}: {e}')


def _close_quietly(obj):
  if hasattr(obj, 'close'):
    try:
      obj.close()
    except Exception:  # pylint: disable=broad-except
      logging.exception('close() of %s failed after an earlier error', type(obj).__name__)


# The stop signals that a child ignores (`_worker`).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def _worker(environment, constructor, conn):
  """The child's main loop (module level, so that `spawn` can import it).

  `environment` (dict str -> str) goes into the child's own `os.environ` before `constructor` (the pickled class,
  args and kwargs) is unpickled, i.e. before the class's module (and NumPy, e.g. OPENBLAS_NUM_THREADS) is imported.
  """
  # Ctrl-C reaches the whole process group: the parent decides when the child closes (or dies, which ends the loop
  # below with end of stream), so that the object's close() runs once, in order. The same for SIGTERM, which
  # `timeout`, schedulers and `docker stop` send to every process of the job, and SIGHUP, which a closed terminal
  # sends to its processes: the parent stops after its checkpoint and closes the child.
  for signum in STOP_SIGNALS:
    signal.signal(signum, signal.SIG_IGN)
  signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked by `PyProcess.start` until now
  os.environ.update(environment)
  type_, args, kwargs = pickle.loads(constructor)  # Fails (the child exits, start() says so) if not importable.
  try:
    obj = type_(*args, **kwargs)
  except Exception as e:  # pylint: disable=broad-except
    conn.send(('error', (_portable_exception(e), traceback.format_exc())))
    conn.close()
    return
  conn.send(('ready', None))
  while True:
    try:
      request = conn.recv()
    except (EOFError, OSError):  # The parent went away without closing: clean up all the same.
      _close_quietly(obj)
      return
    if request is None:
      if hasattr(obj, 'close'):
        obj.close()  # An error here is printed by multiprocessing and gives exit code 1.
      conn.close()
      return
    method_name, method_args = request
    try:
      result = getattr(obj, method_name)(*method_args)
    except Exception as e:  # pylint: disable=broad-except
      _close_quietly(obj)
      conn.send(('error', (_portable_exception(e), traceback.format_exc())))
      conn.close()
      return
    conn.send(('ok', result))


class _Proxy:
  """`proxy.method(*args)` runs `method(*args)` on the object in the child and returns its result."""

  def __init__(self, process):
    self._process = process

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError(name)
    if not callable(getattr(self._process.type, name, None)):
      raise AttributeError(f'{self._process.type.__name__} has no method {name!r}')
    process = self._process

    def call(*args):
      # Tensors go as NumPy arrays: a pickled tensor would make the child import TensorFlow.
      args = tuple(a.numpy() if hasattr(a, 'numpy') else a for a in args)
      return process._call(name, args)  # pylint: disable=protected-access

    return call


class _TFProxy:
  """`tf_proxy.method(*args)` is `tf.numpy_function` around the call, typed by the class's `_tensor_specs`."""

  def __init__(self, process):
    self._process = process

  def __getattr__(self, name):
    if name.startswith('__'):
      raise AttributeError(name)
    import tensorflow as tf  # pylint: disable=g-import-not-at-top  (the child never needs TensorFlow)
    process = self._process
    type_ = process.type
    if not hasattr(type_, '_tensor_specs'):
      raise ValueError(f'{type_.__name__} has no static method _tensor_specs(method_name, kwargs, '
                       'constructor_kwargs), which tf_proxy needs for the output dtypes and shapes')

    def call(*args):
      kwargs = inspect.signature(getattr(type_, name)).bind(None, *args).arguments
      kwargs.pop(next(iter(kwargs)))  # self
      specs = type_._tensor_specs(name, kwargs, process.constructor_kwargs)  # pylint: disable=protected-access
      if specs is None:
        raise ValueError(f'No tensor specifications were provided for: {name}')
      flat_specs = tf.nest.flatten(specs)

      eager = tf.executing_eagerly()

      def py_call(*inputs):
        try:
          result = process._call(name, inputs)  # pylint: disable=protected-access
        except ProcessClosedError as e:  # End of stream: tf.errors.OutOfRangeError, as the original.
          if eager:
            raise tf.errors.OutOfRangeError(None, None, str(e)) from e
          raise StopIteration(str(e)) from e  # The graph's py_func kernel maps StopIteration to OutOfRange.
        return [] if result is None else tf.nest.flatten(result)

      outputs = tf.numpy_function(py_call, list(args), [s.dtype for s in flat_specs], name=name)
      if not flat_specs:
        return None
      if not isinstance(outputs, (list, tuple)):  # One output comes back unwrapped.
        outputs = [outputs]
      for t, s in zip(outputs, flat_specs):
        t.set_shape(s.shape)
      return tf.nest.pack_sequence_as(specs, outputs)

    return call


class PyProcess:
  """A Python object living in a child process started with `spawn`.

  Args:
    type_: the object's class. It must be importable by module path in the child (defined at the top level of a
      module on `sys.path`, not inside a function or in an interactive `__main__`).
    *constructor_args, **constructor_kwargs: the constructor's arguments, which must be picklable. Positional
      arguments are named from the signature of `type_` (see `constructor_kwargs`).
  """

  def __init__(self, type_, *constructor_args, **constructor_kwargs):
    try:
      pickle.dumps(type_)
    except Exception as e:  # pylint: disable=broad-except
      raise ValueError(f'PyProcess needs a class that the child process can import by module path; {type_!r} is '
                       f'not ({e}). Define it at the top level of an importable module.') from None
    bound = inspect.signature(type_).bind(*constructor_args, **constructor_kwargs)  # TypeError on bad arguments.
    self.type = type_
    self.constructor_kwargs = dict(bound.arguments)
    self._args, self._kwargs = constructor_args, constructor_kwargs
    self._conn: Any = None
    self._process = None
    self._closed = False
    self._stop_reason = None  # Why calls fail, once the child has stopped.
    self._call_lock = threading.Lock()  # One call in flight at a time.
    self._send_lock = threading.Lock()  # `close()` sends while a call may be waiting for its reply.
    self.proxy = _Proxy(self)
    self.tf_proxy = _TFProxy(self)

  def __repr__(self):
    return f'PyProcess({self.type.__name__}, pid={self._process.pid if self._process else None})'

  @property
  def pid(self):
    """The child's process id; None before `start()`."""
    return self._process.pid if self._process is not None else None

  def start(self, environment=None):
    """Starts the child and waits until the object is constructed.

    Args:
      environment: optional dict of environment variables (str -> str) set in the child's own environment before
        the object's module is imported (e.g. {'OPENBLAS_NUM_THREADS': '1'}); this process's is not touched.

    Raises:
      The constructor's exception (same type and message; a note carries the child's traceback).
      ProcessClosedError: the child died before it was ready (e.g. it could not import the class).
    """
    if self._process is not None:
      raise RuntimeError(f'{self!r} was already started')
    self._conn, child_conn = _CONTEXT.Pipe()
    constructor = pickle.dumps((self.type, self._args, self._kwargs))
    self._process = _CONTEXT.Process(target=_worker, args=(dict(environment or {}), constructor, child_conn),
                                     name=f'PyProcess-{self.type.__name__}', daemon=True)
    # The child inherits this thread's signal mask (through fork and exec): with the stop signals blocked until
    # `_worker` ignores them, a stop signal sent to the process group while the child starts does not kill it.
    # (multiprocessing's resource tracker, when it has to be started again, unblocks SIGINT and SIGTERM in the
    # calling thread after it started: it is made sure of first.)
    resource_tracker.ensure_running()
    mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
    try:
      self._process.start()
    finally:
      signal.pthread_sigmask(signal.SIG_SETMASK, mask)
    child_conn.close()  # So that the child's death reads as end of stream here.
    try:
      status, payload = self._conn.recv()
    except (EOFError, OSError):
      self._process.join()
      self._stop(f'the child process exited with code {self._process.exitcode} before {self.type.__name__} was '
                 'constructed (its traceback is on stderr)')
      raise ProcessClosedError(self._stop_reason) from None
    if status == 'error':
      self._process.join()
      self._stop(f'the constructor of {self.type.__name__} raised an exception')
      raise self._remote_error(payload, '__init__')

  def _stop(self, reason):
    self._stop_reason = self._stop_reason or reason
    self._closed = True
    if self._conn is not None:
      self._conn.close()

  @staticmethod
  def _remote_error(payload, method_name):
    error, child_traceback = payload
    error.add_note(f'Raised in the PyProcess child, in {method_name}(); its traceback:\n{child_traceback}')
    return error

  def _call(self, method_name, args):
    """Sends (method_name, args) to the child and returns its result, or raises its exception."""
    with self._call_lock:
      if self._closed or self._process is None:
        raise ProcessClosedError(f'{self!r}: cannot call {method_name}(): ' +
                                 (self._stop_reason or 'the process was not started'))
      conn = self._conn
      try:
        with self._send_lock:
          conn.send((method_name, args))
        while not conn.poll(_POLL_INTERVAL_S):
          if self._closed:
            break
        if self._closed:  # `close()` ends every call in flight (the original: end of stream).
          raise ProcessClosedError(f'{self!r}: {method_name}() interrupted: {self._stop_reason}')
        status, payload = conn.recv()
      except (EOFError, OSError, BrokenPipeError):
        self._process.join(timeout=1.)
        self._stop(f'the child process died (exit code {self._process.exitcode})')
        raise ProcessClosedError(f'{self!r}: {method_name}() failed: {self._stop_reason}') from None
      if status == 'error':
        self._process.join(timeout=10.)
        self._stop(f'the child stopped after an exception in {method_name}()')
        raise self._remote_error(payload, method_name)
      return payload

  def close(self, timeout=30.):
    """Asks the child to call the object's `close()` and exit; waits up to `timeout` s, then kills it (SIGKILL: the
    child ignores the stop signals).

    Idempotent. A call waiting for its reply at that moment raises ProcessClosedError.
    """
    if self._process is None:
      self._closed = True
      return
    if not self._closed:
      self._stop_reason = self._stop_reason or 'the process was closed'
      self._closed = True
      try:
        with self._send_lock:
          self._conn.send(None)
      except (OSError, ValueError):  # The child is gone already.
        pass
    self._process.join(timeout)
    if self._process.is_alive():
      logging.warning('%r did not exit within %s s of close(); killing it', self, timeout)
      self._process.kill()
      self._process.join()
    with self._call_lock:  # No call is using the connection any more.
      self._conn.close()

  @property
  def exitcode(self):
    """The child's exit code; None while it runs or before `start()` (negative: killed by that signal)."""
    return self._process.exitcode if self._process is not None else None

  def __enter__(self):
    self.start()
    return self

  def __exit__(self, *unused_exc_info):
    self.close()


def _map_in_threads(fn, processes):
  with multiprocessing.pool.ThreadPool(max(1, min(len(processes), 64))) as pool:
    return pool.map(lambda p: _capture(fn, p), processes)


def _capture(fn, p):
  try:
    fn(p)
    return None
  except Exception as e:  # pylint: disable=broad-except
    return e


def start_all(processes, environment=None):
  """Starts `processes` concurrently (the original's `PyProcessHook.begin`); `environment`: see `PyProcess.start`.

  If any fails, all of them are closed and the first error (in list order) is raised.
  """
  processes = list(processes)
  errors = [e for e in _map_in_threads(lambda p: p.start(environment), processes) if e is not None]
  if errors:
    close_all(processes)
    raise errors[0]


def close_all(processes):
  """Closes `processes` concurrently (the original's `PyProcessHook.end`); errors are logged, not raised."""
  processes = list(processes)
  for p, e in zip(processes, _map_in_threads(PyProcess.close, processes)):
    if e is not None:
      logging.warning('closing %r failed: %s', p, e)
