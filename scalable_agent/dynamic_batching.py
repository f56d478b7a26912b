"""Dynamic batching: concurrent batch-size-1 calls from many threads become one call of a batched function.

The original (deepmind/scalable_agent `dynamic_batching.py` + the C++ ops of `batcher.cc`) batched the actors'
one-step agent calls inside a TF1 graph: each call site enqueued its inputs and blocked, and a QueueRunner looped
get_inputs -> function -> set_outputs. This port keeps that design and its semantics in Python (the SEED RL style):
`Batcher` is the C++ resource (same operations, checks and error messages), and `batch_fn` / `batch_fn_with_options`
wrap a function so that a daemon thread feeds it batches through one `tf.function` traced once, with a batch
dimension of None.

  @dynamic_batching.batch_fn
  def step(last_action, env_output, core_state):  # Arguments: nests of [B, ...]; returns nests of [B, ...].
    return agent(last_action, env_output, core_state)

  # From any number of actor threads, with arguments of batch size 1 (NumPy arrays or tensors):
  agent_output, core_state = step(last_action, env_output, core_state)  # NumPy arrays [1, ...].

Errors are the original's `tf.errors` types: a bad batch or a failing function closes the batcher; every waiting
call raises `tf.errors.CancelledError` ('Compute was cancelled', followed by the cause), later calls raise
`CancelledError('Batcher is closed')`, and the batching thread's error is re-raised by `join()`.
"""

import collections
import functools
import threading
import time
from typing import Any, Deque, Dict, List

import numpy as np
import tensorflow as tf


def _cancelled(message):
  return tf.errors.CancelledError(None, None, message)


def _invalid_argument(message):
  return tf.errors.InvalidArgumentError(None, None, message)


class _Input:
  """One pending `compute` call: its flat inputs, and a slot for its flat outputs or its error."""

  __slots__ = ('inputs', 'arrival', 'outputs', 'error', 'done')

  def __init__(self, inputs):
    self.inputs = inputs
    self.arrival = time.monotonic()
    self.outputs = None
    self.error = None
    self.done = threading.Event()

  def finish(self, outputs=None, error=None):
    if not self.done.is_set():  # The first of outputs / cancellation wins.
      self.outputs, self.error = outputs, error
      self.done.set()


class Batcher:
  """Collects the inputs of concurrent `compute` calls into batches; the C++ `Batcher` resource of the original.

  A consumer loops `get_inputs()` -> compute the batch -> `set_outputs(outputs, computation_id)`; several batches
  may be in flight and their outputs may be set in any order.

  Args:
    minimum_batch_size: `get_inputs` waits until this many inputs are pending (or the timeout has passed).
    maximum_batch_size: `get_inputs` takes at most this many inputs, oldest first.
    timeout_ms: once the oldest pending input has waited this many milliseconds, `get_inputs` takes whatever is
      pending even if that is fewer than `minimum_batch_size`; None: no timeout. (The C++ op counted it from the
      start of each wait of the consumer instead; see docs/design/deviations.md.)
  """

  def __init__(self, minimum_batch_size=1, maximum_batch_size=1024, timeout_ms=100):
    if not 1 <= minimum_batch_size <= maximum_batch_size:
      raise ValueError(f'need 1 <= minimum_batch_size <= maximum_batch_size, got {minimum_batch_size} and '
                       f'{maximum_batch_size}')
    if timeout_ms is not None and timeout_ms <= 0:
      raise ValueError(f'timeout_ms must be None (no timeout) or > 0, got {timeout_ms!r} (the original read 0 as '
                       'no timeout; pass None for that)')
    self.minimum_batch_size = minimum_batch_size
    self.maximum_batch_size = maximum_batch_size
    self.timeout_ms = timeout_ms
    self._timeout_s = None if timeout_ms is None else timeout_ms / 1000.
    self._cond = threading.Condition(threading.Lock())
    self._inputs: Deque[Any] = collections.deque()  # Pending `_Input`s, oldest first.
    self._being_computed = {}  # computation id -> list of `_Input`s, in batch-row order.
    self._next_computation_id = 0
    self._closed = False

  @property
  def name(self):
    return 'batcher'

  @property
  def is_closed(self):
    return self._closed

  @property
  def num_pending(self):
    """How many `compute` calls wait for `get_inputs` to take them."""
    with self._cond:
      return len(self._inputs)

  @property
  def num_batches_being_computed(self):
    """How many batches `get_inputs` handed out whose outputs are not yet set."""
    with self._cond:
      return len(self._being_computed)

  def compute(self, flat_inputs):
    """Adds one input and blocks until its outputs are set.

    Args:
      flat_inputs: list of NumPy arrays (or anything `np.asarray` takes), each of shape [1, ...].

    Returns:
      List of NumPy arrays [1, ...]: row j of each output of the batch this input was row j of.

    Raises:
      tf.errors.CancelledError: the batcher is closed, or was closed (by `close()` or an error) before the outputs
        were set.
    """
    item = _Input([np.asarray(x) for x in flat_inputs])
    with self._cond:
      if self._closed:
        raise _cancelled('Batcher is closed')
      self._inputs.append(item)
      # Wake the consumer when the batch is big enough, or when its timeout starts to count.
      if len(self._inputs) >= self.minimum_batch_size or (len(self._inputs) == 1 and self._timeout_s is not None):
        self._cond.notify()
    item.done.wait()
    if item.error is not None:
      raise item.error
    return item.outputs

  def get_inputs(self):
    """Waits for a batch of inputs (see the class docstring) and takes it.

    Returns:
      (flat_batch, computation_id): list of NumPy arrays [B, ...], input i of the B calls stacked in arrival order;
      an int to pass to `set_outputs`.

    Raises:
      tf.errors.CancelledError: 'Batcher is closed' (also when closed while waiting).
      tf.errors.InvalidArgumentError: an input has a batch size other than 1, or the inputs' shapes differ. The
        batcher is then closed.
    """
    with self._cond:
      while not self._closed and len(self._inputs) < self.minimum_batch_size:
        if self._inputs and self._timeout_s is not None:
          remaining = self._inputs[0].arrival + self._timeout_s - time.monotonic()
          if remaining <= 0:
            break  # The oldest input has waited timeout_ms: take what is there.
          self._cond.wait(remaining)
        else:
          self._cond.wait()
      if self._closed:
        raise _cancelled('Batcher is closed')
      batch = [self._inputs.popleft() for _ in range(min(len(self._inputs), self.maximum_batch_size))]
      computation_id = self._next_computation_id
      self._next_computation_id += 1
      self._being_computed[computation_id] = batch
    # Stacked outside the lock, so that callers adding their inputs meanwhile do not wait for the copies.
    try:
      return _stack(batch), computation_id
    except tf.errors.InvalidArgumentError as e:
      with self._cond:
        self._cancel_and_close(e)  # This batch is cancelled with the rest.
      raise

  def set_outputs(self, flat_outputs, computation_id):
    """Gives row j of each output to the j-th caller of batch `computation_id`, and wakes them up.

    Args:
      flat_outputs: list of arrays or tensors [B, ...], B the size of that batch.
      computation_id: from `get_inputs`.

    Raises:
      tf.errors.CancelledError: 'Batcher is closed'.
      tf.errors.InvalidArgumentError: an unknown computation id, an output without a batch dimension, or one whose
        batch dimension is not B. The batcher is then closed.
    """
    flat_outputs = [np.asarray(x) for x in flat_outputs]
    with self._cond:
      if self._closed:
        raise _cancelled('Batcher is closed')
      try:
        batch = self._being_computed.get(computation_id)
        if batch is None:
          raise _invalid_argument(f'Invalid computation id. Id: {computation_id}')
        for output in flat_outputs:
          if output.ndim == 0:
            raise _invalid_argument(f'Output shape must have a batch dimension. Shape observed: {list(output.shape)}')
          if output.shape[0] != len(batch):
            raise _invalid_argument('Output shape must have the same batch dimension as the input batch size. '
                                    f'Expected: {len(batch)} Observed: {output.shape[0]}')
      except tf.errors.InvalidArgumentError as e:
        self._cancel_and_close(e)
        raise
      del self._being_computed[computation_id]
    if len(batch) == 1:
      batch[0].finish(outputs=flat_outputs)
    else:
      for j, item in enumerate(batch):
        item.finish(outputs=[output[j:j + 1] for output in flat_outputs])

  def close(self, cause=None):
    """Closes the batcher: waiting and later `compute` calls raise CancelledError, a waiting `get_inputs` too.

    Args:
      cause: optional exception that made the caller close it; its text is appended to the cancellation message.
    """
    with self._cond:
      self._cancel_and_close(cause)
      self._cond.notify_all()

  def _cancel_and_close(self, cause):
    if self._closed:
      return
    self._closed = True
    message = 'Compute was cancelled' + (f': {type(cause).__name__}: {_message(cause)}' if cause else '')
    pending = list(self._inputs) + [item for batch in self._being_computed.values() for item in batch]
    self._inputs.clear()
    self._being_computed.clear()
    for item in pending:
      error = _cancelled(message)
      error.__cause__ = cause
      item.finish(error=error)
    self._cond.notify_all()


def _message(error):
  return error.message if isinstance(error, tf.errors.OpError) else str(error)


def _stack(batch):
  """Input i of every `_Input` of `batch`, stacked along dim 0, after the original's checks."""
  first = batch[0].inputs
  for x in first:
    if x.ndim == 0 or x.shape[0] != 1:
      raise _invalid_argument(f'Batcher requires batch size 1 but was {x.shape[0] if x.ndim else "a scalar"} '
                              f'(input shape {list(x.shape)})')
  for item in batch[1:]:
    if len(item.inputs) != len(first):
      raise _invalid_argument(f'Calls must have the same number of inputs: {len(first)} and {len(item.inputs)}')
    for x, y in zip(first, item.inputs):
      if x.shape != y.shape:
        raise _invalid_argument(f'Shapes of inputs must be equal. Shapes observed: {list(x.shape)}, '
                                f'{list(y.shape)}')
  if len(batch) == 1:
    return list(first)
  return [np.concatenate(column) for column in zip(*(item.inputs for item in batch))]


def as_array(x):
  """NumPy array of `x`; strings become object arrays, so that strings of different lengths batch together."""
  x = np.asarray(x)
  return x.astype(object) if x.dtype.kind in 'US' else x


class DtypeLayout:
  """How arrays [B, ...] of fixed shapes after the batch dimension travel as one array [B, n] per dtype.

  Every tensor created at the batching thread's boundary costs time, and on Python 3.11 TensorFlow 2.15 never frees
  a small block of each (docs/impala/atari.md, "Memory"), so the inputs of a batch, and the outputs of the function,
  cross it as one tensor per dtype: the agent's step takes 5 instead of 9 inputs and returns 2 instead of 5 outputs.
  """

  def __init__(self, shapes, dtypes):
    """shapes: each array's shape after the batch dimension (fully defined); dtypes: their NumPy / TF dtypes."""
    self.shapes = [tuple(int(d) for d in shape) for shape in shapes]
    self.sizes = [int(np.prod(shape, dtype=np.int64)) for shape in self.shapes]
    self.groups: Dict[Any, List[int]] = collections.OrderedDict()  # dtype -> indices of its arrays, in order.
    for i, dtype in enumerate(dtypes):
      self.groups.setdefault(tf.as_dtype(dtype), []).append(i)

  @staticmethod
  def of_tensors(tensors):
    """The layout of traced tensors, or None when one lacks a batch dimension or a fully defined shape after it."""
    if any(t.shape.rank is None or t.shape.rank == 0 or not t.shape[1:].is_fully_defined() for t in tensors):
      return None
    return DtypeLayout([t.shape[1:] for t in tensors], [t.dtype for t in tensors])

  def specs(self, batch_size):
    return [
        tf.TensorSpec([batch_size, sum(self.sizes[i]
                                       for i in indices)], dtype)
        for dtype, indices in self.groups.items()
    ]

  def pack_arrays(self, arrays):
    """NumPy arrays [B, ...] in order -> one array [B, n] per dtype."""
    batch_size = arrays[0].shape[0]
    packed = []
    for indices in self.groups.values():
      columns = [arrays[i].reshape(batch_size, self.sizes[i]) for i in indices]
      packed.append(columns[0] if len(columns) == 1 else np.concatenate(columns, axis=1))
    return packed

  def unpack_arrays(self, packed):
    """`pack_arrays` undone: views of the arrays [B, n] (NumPy) as arrays [B, ...] in order."""
    arrays: List[Any] = [None] * len(self.shapes)
    for group, indices in zip(packed, self.groups.values()):
      group = np.asarray(group)
      offset = 0
      for i in indices:
        arrays[i] = group[:, offset:offset + self.sizes[i]].reshape((group.shape[0],) + self.shapes[i])
        offset += self.sizes[i]
    return arrays

  def pack_tensors(self, tensors):
    """Traced tensors [B, ...] in order -> one tensor [B, n] per dtype (B of each tensor its own)."""
    packed = []
    for indices in self.groups.values():
      columns = [tf.reshape(tensors[i], [tf.shape(tensors[i])[0], self.sizes[i]]) for i in indices]
      packed.append(columns[0] if len(columns) == 1 else tf.concat(columns, axis=1))
    return packed

  def unpack_tensors(self, packed, batch_size):
    """Traced tensors [B, n] -> tensors [B, ...] in order (B static when `batch_size` is an int)."""
    tensors = [None] * len(self.shapes)
    for group, indices in zip(packed, self.groups.values()):
      columns = [group] if len(indices) == 1 else tf.split(group, [self.sizes[i] for i in indices], axis=1)
      rows = tf.shape(group)[0] if batch_size is None else batch_size  # Not -1: arrays may be empty.
      for i, column in zip(indices, columns):
        tensors[i] = tf.reshape(column, [rows, *self.shapes[i]])
    return tensors


class BatchedFunction:
  """`fn` batched across concurrent callers; made by `batch_fn` / `batch_fn_with_options` (see them).

  On the first call it wraps `fn` in a `tf.function` traced once whatever the batch sizes, and starts the batching
  thread. `fn` sees that call's dtypes and shapes with a batch dimension of None (or of `minimum_batch_size` when it
  equals `maximum_batch_size` and `timeout_ms` is None, as the original's static shape); the traced function itself
  takes the batch as one tensor per dtype and returns its outputs the same way when their shapes after the batch
  dimension are static (`DtypeLayout`), unpacked on both sides.
  """

  def __init__(self, fn, minimum_batch_size=1, maximum_batch_size=1024, timeout_ms=100):
    self._fn = fn
    self.batcher = Batcher(minimum_batch_size, maximum_batch_size, timeout_ms)
    self._static_batch_size = minimum_batch_size if minimum_batch_size == maximum_batch_size and timeout_ms is None \
        else None
    self._lock = threading.Lock()
    self._thread = None
    self._compiled = None
    self._concrete: Any = None
    self._signature: Any = None  # Flat (shape[1:], dtype) of the first call.
    self._args_structure = None
    self._output_structure = None
    self._input_layout: Any = None
    self._output_layout: Any = None
    self._error = None
    functools.update_wrapper(self, fn)

  def __call__(self, *args):
    """Runs `fn` on these arguments batched with other callers' and returns this call's rows.

    Args:
      *args: nests of arrays or tensors, each of shape [1, ...]; every call has the nest structure, dtypes and
        shapes of the first call.

    Returns:
      `fn`'s output nest, as NumPy arrays of shape [1, ...].

    Raises:
      tf.errors.CancelledError: the batcher is closed or was closed while this call waited (the message gives the
        cause).
    """
    flat_args = [as_array(x) for x in tf.nest.flatten(args)]
    if self._thread is None:
      self._start(args, flat_args)
    if len(flat_args) != len(self._signature):
      raise ValueError(f'{getattr(self, "__name__", "the batched function")} takes nests of {len(self._signature)} '
                       f'arrays in all (as its first call), got {len(flat_args)}')
    flat_outputs = self.batcher.compute(flat_args)
    return tf.nest.pack_sequence_as(self._output_structure, flat_outputs)

  def _start(self, args, flat_args):
    with self._lock:
      if self._thread is not None:
        return
      self._args_structure = args
      self._signature = [(x.shape[1:], x.dtype) for x in flat_args]
      fn, structure = self._fn, self._args_structure
      # The inputs cross into the function as one tensor per dtype, and so do its outputs when their shapes after
      # the batch dimension are static (`DtypeLayout`).
      self._input_layout = DtypeLayout([shape for shape, _ in self._signature], [dtype for _, dtype in self._signature])
      batch_size = self._static_batch_size

      def packed_fn(*packed_inputs):
        flat = self._input_layout.unpack_tensors(packed_inputs, batch_size)
        outputs = fn(*tf.nest.pack_sequence_as(structure, flat))
        flat_outputs = [tf.convert_to_tensor(o) for o in tf.nest.flatten(outputs)]
        self._output_layout = DtypeLayout.of_tensors(flat_outputs)
        self._output_structure = tf.nest.map_structure(lambda _: None, outputs)
        return flat_outputs if self._output_layout is None else self._output_layout.pack_tensors(flat_outputs)

      # Traced here, in the first caller (an error in `fn` reaches it directly, as the original built the graph on
      # the first call). The concrete function is called with tensors: about 3x less overhead per batch than calling
      # the tf.function with NumPy arrays.
      self._compiled = tf.function(packed_fn)
      self._concrete = self._compiled.get_concrete_function(*self._input_layout.specs(batch_size))
      self._thread = threading.Thread(target=self._loop, name=f'batch_fn-{getattr(self._fn, "__name__", "fn")}',
                                      daemon=True)
      self._thread.start()

  def _loop(self):
    """The original's QueueRunner: get_inputs -> fn -> set_outputs until the batcher closes."""
    batcher = self.batcher
    while True:
      try:
        flat_batch, computation_id = batcher.get_inputs()
      except tf.errors.CancelledError:
        return  # Closed: a clean stop (or an error already recorded).
      except Exception as e:  # pylint: disable=broad-except
        self._error = e
        return
      try:
        for x, (shape, dtype) in zip(flat_batch, self._signature):
          if x.shape[1:] != shape or x.dtype != dtype:
            raise _invalid_argument(f'Inputs must have the shapes and dtypes of the first call: {[shape, dtype]} '
                                    f'(without the batch dimension), got {[x.shape[1:], x.dtype]}')
        result = self._concrete(*[tf.convert_to_tensor(x) for x in self._input_layout.pack_arrays(flat_batch)])
        flat_outputs = (self._output_layout.unpack_arrays(result)
                        if self._output_layout is not None else [np.asarray(x) for x in result])
        batcher.set_outputs(flat_outputs, computation_id)
      except Exception as e:  # pylint: disable=broad-except
        self._error = e
        batcher.close(cause=e)
        return

  @property
  def is_running(self):
    """Whether the batching thread is running (it starts at the first call and stops when the batcher closes)."""
    return self._thread is not None and self._thread.is_alive()

  @property
  def error(self):
    """The exception that stopped the batching thread, or None."""
    return self._error

  def join(self, timeout=None):
    """Waits for the batching thread to stop (it stops when the batcher closes) and re-raises its error, if any.

    The original's `coord.join()`: after an error, callers get CancelledError and `join` gives the cause.
    """
    if self._thread is not None:
      self._thread.join(timeout)
    if self._error is not None:
      raise self._error

  def close(self):
    """Closes the batcher (waiting callers get CancelledError) and waits for the batching thread; never raises."""
    self.batcher.close()
    if self._thread is not None and self._thread is not threading.current_thread():
      self._thread.join()


def batch_fn_with_options(minimum_batch_size=1, maximum_batch_size=1024, timeout_ms=100):
  """Decorator that batches concurrent calls of a function (the original's options and defaults).

  The decorated function takes nests of tensors [B, ...] and returns nests of tensors [B, ...] (row j of each output
  belongs to row j of the inputs); it must be traceable by `tf.function`. Each call of the result passes nests of
  batch size 1 and gets its row back as NumPy arrays [1, ...]. Gradients do not flow through it (as the original).

  Args:
    minimum_batch_size: the batch size the batching thread waits for before it calls the function.
    maximum_batch_size: the largest batch it passes.
    timeout_ms: milliseconds after which it proceeds with a smaller batch (>= 1); None: no timeout. With
      `minimum_batch_size == maximum_batch_size` and no timeout the function sees a static batch size; otherwise
      the batch dimension is None.

  Returns:
    A decorator returning a `BatchedFunction` (callable; `.close()`, `.join()`, `.error`, `.batcher`).
  """

  def decorator(fn):
    return BatchedFunction(fn, minimum_batch_size, maximum_batch_size, timeout_ms)

  return decorator


def batch_fn(fn):
  """`batch_fn_with_options()` with the defaults: minimum 1, maximum 1024, timeout 100 ms."""
  return batch_fn_with_options()(fn)
