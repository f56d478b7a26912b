"""Shared test setup."""

import os

# Quiet TensorFlow's C++ start-up messages in tests and in the scripts they start.
os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '2')

# Headless MuJoCo rendering (tests/uvf/test_maze_env.py). `mujoco` chooses its OpenGL back end when it is first
# imported, and any test module may import it first, so the choice is made here: EGL where an NVIDIA GPU is present,
# else OSMesa (Debian's libosmesa6). An explicit MUJOCO_GL / PYOPENGL_PLATFORM, or a display, wins.
if not os.environ.get('DISPLAY'):
  _GL = 'egl' if os.path.exists('/dev/nvidiactl') else 'osmesa'
  os.environ.setdefault('MUJOCO_GL', _GL)
  os.environ.setdefault('PYOPENGL_PLATFORM', _GL)


import gin  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position


@pytest.fixture(autouse=True)
def _unlock_gin_after_test():
  """A launcher run finalizes (locks) gin; unlock it after each test so later tests can parse their bindings."""
  yield
  gin.config._set_config_is_locked(False)  # pylint: disable=protected-access
