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
