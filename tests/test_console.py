"""launcher/console.py: which lines reach the screen. The native lines below are copied from real runs of
run_train.py on TensorFlow 2.15 (CPU machine); the relay is run on a real pipe."""

import logging
import os
import select
import threading
import time

from launcher import console

# Printed by TensorFlow / XLA / absl C++ on the first screen of `run_train.py configs/impala_builtin.gin`.
NATIVE = [
    b'2026-12-01 14:05:15.510119: E external/local_xla/xla/stream_executor/cuda/cuda_dnn.cc:9261] Unable to register '
    b'cuDNN factory: Attempting to register factory for plugin cuDNN when one has already been registered',
    b'2026-12-01 14:07:56.424403: E tensorflow/core/grappler/optimizers/meta_optimizer.cc:961] remapper failed: '
    b'INVALID_ARGUMENT: Mutation::Apply error',
    b'WARNING: All log messages before absl::InitializeLog() is called are written to STDERR',
    b'I0000 00:00:1796134088.810618    6939 device_compiler.h:186] Compiled cluster using XLA!  This line is logged '
    b'at most once for the lifetime of the process.',
    b'2026-12-01 14:08:08.812307: E external/local_xla/xla/stream_executor/stream_executor_internal.h:177] '
    b'SetPriority unimplemented for this stream.',
    b'W1201 14:08:10.071630  140482 some_kernel.cc:12] a native warning',
]
# Lines that must pass: the project's, absl Python's prefix on a .py file, a native fatal error, a traceback.
KEPT = [
    b'run_train: HIRO (uvf), config ant_maze (configs/ant_maze.gin)',
    b'I1201 14:08:10.071630 140482154392448 experiment.py:535] Level: builtin/find_object Episode return: 1.000000',
    b'F1201 14:08:10.071630  140482 op_kernel.cc:12] Check failed: x == y',
    b'Traceback (most recent call last):',
    b'',
]


def test_native_log_lines_are_recognised():
  assert all(console.NATIVE_LOG_LINE.match(line) for line in NATIVE)
  assert not any(console.NATIVE_LOG_LINE.match(line) for line in KEPT)


def run_relay(chunks):
  """Feeds `chunks` (bytes, written one by one) through `console.relay` on real pipes; returns what came out."""
  in_r, in_w = os.pipe()
  out_r, out_w = os.pipe()
  thread = threading.Thread(target=console.relay, args=(in_r, out_w))
  thread.start()
  for chunk in chunks:
    os.write(in_w, chunk)
  os.close(in_w)
  thread.join(10)
  assert not thread.is_alive()
  os.close(out_w)
  out = b''
  while True:
    data = os.read(out_r, 1 << 16)
    if not data:
      break
    out += data
  os.close(in_r)
  os.close(out_r)
  return out


def test_relay_drops_native_lines_and_passes_the_rest():
  mixed = [NATIVE[0], KEPT[0], NATIVE[2], NATIVE[3], KEPT[1], KEPT[2], NATIVE[4]]
  out = run_relay([b'\n'.join(mixed) + b'\n', b'no newline at the end'])
  assert out == b'\n'.join([KEPT[0], KEPT[1], KEPT[2]]) + b'\nno newline at the end'
  # A line split over several writes is judged whole.
  assert run_relay([NATIVE[3][:10], NATIVE[3][10:] + b'\nkept\n']) == b'kept\n'


def test_relay_passes_a_partial_line_before_its_newline_but_holds_a_native_start():
  in_r, in_w = os.pipe()
  out_r, out_w = os.pipe()
  thread = threading.Thread(target=console.relay, args=(in_r, out_w))
  thread.start()
  os.write(in_w, b'progress 50%')
  assert select.select([out_r], [], [], 5)[0] and os.read(out_r, 100) == b'progress 50%'
  os.write(in_w, b'\n' + NATIVE[3][:12])
  time.sleep(0.3)  # longer than the relay's wait for a partial line
  os.write(in_w, NATIVE[3][12:] + b'\nend\n')
  os.close(in_w)
  thread.join(10)
  os.close(out_w)
  assert os.read(out_r, 1 << 16) == b'\nend\n'
  os.close(in_r)
  os.close(out_r)


def record(pathname, level, name='absl', message='hello %d', args=(1,)):
  return logging.LogRecord(name, level, pathname, 10, message, args, None)


def test_project_records_are_plain_and_other_libraries_info_is_dropped():
  ours = str(console.REPO_ROOT / 'uvf' / 'train.py')
  installed = str(console.REPO_ROOT / '.venv' / 'lib' / 'python3.11' / 'site-packages' / 'OpenGL' / 'ctypesloader.py')
  elsewhere = '/usr/lib/python3/dist-packages/gym/__init__.py'
  keep = console.ThirdPartyInfoFilter().filter
  assert keep(record(ours, logging.INFO)) and keep(record(ours, logging.DEBUG))
  assert not keep(record(installed, logging.INFO)) and not keep(record(elsewhere, logging.INFO))
  assert keep(record(installed, logging.WARNING)) and keep(record(elsewhere, logging.ERROR))
  fmt = console.ProjectFormatter().format
  assert fmt(record(ours, logging.INFO)) == 'hello 1'
  assert fmt(record(ours, logging.WARNING)) == 'warning: hello 1'
  assert fmt(record(installed, logging.WARNING, name='OpenGL.platform')) == 'warning (OpenGL.platform): hello 1'
  assert fmt(record(elsewhere, logging.ERROR)) == 'error (__init__): hello 1'
