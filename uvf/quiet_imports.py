"""Quiet imports for library users: TensorFlow and tf-agents loaded without their start-up noise.

`run_train.py` and `run_eval.py` keep the screen to the project's lines (`launcher.console`). A library user of
`uvf.pretrained` gets no launcher, so without this module the first import would print, before anything of theirs,
about ten native lines of TensorFlow (on a machine without CUDA: "Unable to register cuDNN / cuFFT / cuBLAS factory",
"Could not find cuda drivers", the CPU-feature note, "TF-TRT Warning: Could not find TensorRT", the oneDNN note) and
the "Gym has been unmaintained since 2022" banner of `gym`, which tf-agents imports (the project does not use gym).

`load()` imports both quietly, once, and changes no setting the user made:

* TensorFlow, if it is not imported yet and TF_CPP_MIN_LOG_LEVEL is not set: the variable is 3 while TensorFlow loads
  and removed again after, so that the processes the user starts see their own environment. TensorFlow reads it once,
  at its first native log line, so its native INFO, WARNING and ERROR lines stay off in this process (Python
  exceptions are unaffected). A TF_CPP_MIN_LOG_LEVEL the user set is kept as it is, and TensorFlow imported before
  `uvf.pretrained` has printed what it prints already.
* gym, if it is installed and not imported yet: imported with what it writes to sys.stderr while it loads discarded.
"""

import contextlib
import importlib
import importlib.util
import io
import os
import sys

TF_LOG_LEVEL = 'TF_CPP_MIN_LOG_LEVEL'


def load() -> None:
  """Imports TensorFlow and gym quietly (module docstring). Idempotent."""
  if 'tensorflow' not in sys.modules and TF_LOG_LEVEL not in os.environ:
    os.environ[TF_LOG_LEVEL] = '3'
    try:
      importlib.import_module('tensorflow')
    finally:
      os.environ.pop(TF_LOG_LEVEL, None)
  if 'gym' not in sys.modules and importlib.util.find_spec('gym') is not None:
    try:
      with contextlib.redirect_stderr(io.StringIO()):
        importlib.import_module('gym')
    except ImportError:
      pass  # a broken install: its importer (tf-agents) reports it, with the traceback
