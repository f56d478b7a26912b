r"""Bytes that stay allocated for every EagerTensor TensorFlow creates, in this interpreter.

  python benchmarks/eager_tensor_leak.py [--tensors 400000]

TensorFlow 2.15 on Python 3.11 keeps a block for every EagerTensor it ever created (the values array of the
object's managed `__dict__`, which its deallocator does not free; tensorflow/tensorflow#62551): 16 bytes in a bare
process, 48 in an IMPALA training process. Nothing in this
project can release them: a long IMPALA run creates about 2 tensors per agent step at the inference boundary (the
batch's inputs and the function's outputs, one tensor per dtype; 4.7 before 598ea3a), so its resident memory grows
by about 0.3 GB an hour (docs/impala/atari.md, "Memory"). Run this after a change of Python or TensorFlow to see whether the leak is gone:
it prints the resident and the tracemalloc-traced growth per tensor for `tf.convert_to_tensor` of a small array,
measured over `--tensors` conversions after a warm-up. Measured (2026-12-02, this repository's stack): Python
3.11.7 + TF 2.15.1: 16 bytes per tensor (traced) and ~16 resident; Python 3.10.13 + TF 2.15.1: 0.
"""

import argparse
import gc
import os
import sys
import tracemalloc

import numpy as np
import tensorflow as tf


def _resident_bytes():
  with open('/proc/self/statm') as f:
    return int(f.read().split()[1]) * os.sysconf('SC_PAGE_SIZE')


def main():
  parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
  parser.add_argument('--tensors', type=int, default=400000, help='conversions measured (default 400000)')
  args = parser.parse_args()
  x = np.ones([4], np.float32)
  for _ in range(1000):
    tf.convert_to_tensor(x)

  def grown(measure):
    gc.collect()
    before = measure()
    for _ in range(args.tensors):
      tf.convert_to_tensor(x)
    gc.collect()
    return (measure() - before) / args.tensors

  resident = grown(_resident_bytes)  # First, without tracemalloc (whose own records are resident memory).
  tracemalloc.start()
  traced = grown(lambda: tracemalloc.get_traced_memory()[0])
  tracemalloc.stop()
  print(f'Python {sys.version.split()[0]}, TensorFlow {tf.__version__}: {traced:.1f} bytes traced and {resident:.1f} '
        f'resident per EagerTensor, over {args.tensors} tensors.')


if __name__ == '__main__':
  main()
