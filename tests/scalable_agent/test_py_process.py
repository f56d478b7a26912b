"""Tests of scalable_agent.py_process: every behaviour of the original py_process_test.py, with `spawn` children.

The classes run in the children live in py_process_fixtures.py (a child imports them by module path).
"""

import os
import signal
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from scalable_agent import py_process
from tests.scalable_agent import py_process_fixtures as fixtures


@pytest.fixture
def started():
  """started(type_, *args) -> a started PyProcess, closed after the test."""
  processes = []

  def start(type_, *args, **kwargs):
    p = py_process.PyProcess(type_, *args, **kwargs)
    processes.append(p)
    p.start()
    return p

  yield start
  py_process.close_all(processes)


def test_small(started):
  p = started(fixtures.Example, 1)
  assert p.proxy.inc() is None
  result = p.proxy.compute(2)
  assert result.shape == () and result.dtype == np.int32 and result == 4
  assert p.proxy.compute(tf.constant(3)) == 5  # A tensor argument travels as a NumPy array.


def test_small_tf_proxy(started):
  p = started(fixtures.Example, 1)
  assert p.tf_proxy.inc() is None  # `_tensor_specs` returned (): no outputs.
  compute = p.tf_proxy.compute(2)
  assert compute.shape == [] and compute.dtype == tf.int32 and int(compute) == 4

  @tf.function
  def inc_and_compute(b):
    p.tf_proxy.inc()
    return p.tf_proxy.compute(b)

  assert int(inc_and_compute(tf.constant(2))) == 5  # The op without outputs still runs, in order.


def test_threading(started):
  """A call waiting for its reply when the process is closed ends with an end-of-stream error, not a hang."""
  p = started(fixtures.Sleeper)
  errors = []

  def run():
    try:
      p.proxy.wait(1.)
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  t = threading.Thread(target=run)
  t.start()
  time.sleep(.1)
  p.close()
  t.join(10.)
  assert not t.is_alive()
  assert len(errors) == 1 and isinstance(errors[0], py_process.ProcessClosedError), errors
  assert isinstance(errors[0], EOFError)
  with pytest.raises(py_process.ProcessClosedError, match='closed'):
    p.proxy.wait(0.)


def test_closed_process_raises_out_of_range_through_tf_proxy(started):
  p = started(fixtures.Sleeper)
  p.close()
  with pytest.raises(tf.errors.OutOfRangeError, match='closed'):
    p.tf_proxy.wait(0.)
  with pytest.raises(tf.errors.OutOfRangeError, match='closed'):
    tf.function(lambda: p.tf_proxy.wait(0.))()


def test_args(started):
  p = started(fixtures.Zeros, 1)
  np.testing.assert_array_equal(p.proxy.compute(2), np.zeros([1, 2], np.int32))
  assert p.constructor_kwargs == {'dim0': 1}  # Positional constructor arguments are named, as the original.
  result = p.tf_proxy.compute(2)  # `_tensor_specs` sees kwargs {'dim1': 2} and constructor_kwargs {'dim0': 1}.
  assert result.shape == [1, 2]
  np.testing.assert_array_equal(result, [[0, 0]])


def test_bad_constructor_arguments_fail_in_the_caller():
  with pytest.raises(TypeError):
    py_process.PyProcess(fixtures.Zeros, 1, 2)


def test_class_must_be_importable_by_the_child():

  class Local:
    pass

  with pytest.raises(ValueError, match='top level of an importable module'):
    py_process.PyProcess(Local)


def test_error_handling_constructor():
  p = py_process.PyProcess(fixtures.FailingConstructor, 1)
  with pytest.raises(ValueError, match='foo') as info:
    p.start()
  assert any('py_process_fixtures.py' in note for note in info.value.__notes__)  # The child's traceback.
  with pytest.raises(py_process.ProcessClosedError, match='constructor'):
    p.proxy.something()
  p.close()


def test_error_handling_constructor_in_start_all():
  processes = [py_process.PyProcess(fixtures.Example, 1), py_process.PyProcess(fixtures.FailingConstructor)]
  with pytest.raises(ValueError, match='foo'):
    py_process.start_all(processes)
  assert processes[0].exitcode == 0  # The one that started is closed again.


def test_error_handling_method(started, tmp_path):
  p = started(fixtures.Recorder, str(tmp_path / 'closed'))
  with pytest.raises(ValueError, match='foo'):
    p.proxy.fail()
  with pytest.raises(py_process.ProcessClosedError, match=r'exception in fail\(\)'):  # The child has stopped.
    p.proxy.echo(1)


@pytest.mark.parametrize('kind, error_type, message', [('custom', fixtures.CustomError, 'bar'),
                                                       ('unpicklable', RuntimeError, 'Unpicklable: x and y')])
def test_error_type_is_kept_when_it_can_be(started, tmp_path, kind, error_type, message):
  p = started(fixtures.Recorder, str(tmp_path / 'closed'))
  with pytest.raises(error_type, match=message):
    p.proxy.fail(kind)


def test_close(tmp_path):
  filename = tmp_path / 'closed'
  p = py_process.PyProcess(fixtures.Recorder, str(filename))
  p.start()
  np.testing.assert_array_equal(p.proxy.echo(np.arange(3), 'a')[0], np.arange(3))
  p.close()
  assert filename.read_text() == 'was_closed'
  assert p.exitcode == 0
  p.close()  # Idempotent.
  with pytest.raises(py_process.ProcessClosedError, match='was closed'):
    p.proxy.echo(1)


def test_close_on_error(tmp_path):
  filename = tmp_path / 'closed'
  with py_process.PyProcess(fixtures.Recorder, filename=str(filename)) as p:
    with pytest.raises(ValueError, match='foo'):
      p.proxy.fail()
    assert filename.read_text() == 'was_closed'  # Before the error reached the caller.


def test_dead_child_gives_a_clear_error(started):
  p = started(fixtures.Frames)
  os.kill(p.pid, signal.SIGKILL)
  with pytest.raises(py_process.ProcessClosedError, match=r'died \(exit code -9\)'):
    p.proxy.compute(0)
  assert p.exitcode == -signal.SIGKILL


def test_start_all_starts_many_concurrently():
  processes = [py_process.PyProcess(fixtures.Frames, seed=i) for i in range(6)]
  try:
    py_process.start_all(processes)
    frames = [p.proxy.compute(0) for p in processes]
    assert all(f.shape == (72, 96, 3) and f.dtype == np.uint8 for f in frames)
    assert len({p.pid for p in processes}) == 6
  finally:
    py_process.close_all(processes)
  assert [p.exitcode for p in processes] == [0] * 6


def test_start_sets_the_environment_of_the_child_alone():
  """The variables reach the child's environment before the class's module (and NumPy) is imported; this process's
  environment is never changed (threads may be reading it)."""
  name = 'PY_PROCESS_TEST_VARIABLE'
  assert name not in os.environ
  processes = [py_process.PyProcess(fixtures.EnvironmentAtImport) for _ in range(2)]
  try:
    processes[0].start({name: 'child'})
    py_process.start_all(processes[1:], environment={name: 'all'})
    assert name not in os.environ
    assert [p.proxy.get(name) for p in processes] == ['child', 'all']
    with py_process.PyProcess(fixtures.EnvironmentAtImport) as plain:
      assert plain.proxy.get(name) is None
  finally:
    py_process.close_all(processes)


def test_unknown_method_is_refused_in_the_caller(started):
  p = started(fixtures.Example, 1)
  with pytest.raises(AttributeError, match='no method'):
    p.proxy.missing()
