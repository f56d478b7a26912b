"""Shared test setup."""

# Quiet TensorFlow's C++ start-up messages, and choose MuJoCo's headless OpenGL back end (EGL with an NVIDIA GPU,
# else OSMesa), in tests and in the scripts they start: the launcher does both at import, before any test module
# imports mujoco (which reads the choice when first imported).
import launcher  # noqa: F401  pylint: disable=unused-import,g-import-not-at-top


import gin  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position


@pytest.fixture(autouse=True)
def _unlock_gin_after_test():
  """A launcher run finalizes (locks) gin; unlock it after each test so later tests can parse their bindings."""
  yield
  gin.config._set_config_is_locked(False)  # pylint: disable=protected-access
