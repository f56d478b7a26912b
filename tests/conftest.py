"""Shared test setup."""

# As in the programs, TF_CPP_MIN_LOG_LEVEL defaults to 3 before TensorFlow loads (launcher.prepare_process); `uvf`
# imports mujoco without an OpenGL back end, before any test module imports it: rendering tests pick theirs when they
# render (uvf/environments/rendering.py), as the programs do.
import launcher  # pylint: disable=g-import-not-at-top

launcher.prepare_process()
import uvf  # noqa: F401,E402  pylint: disable=unused-import,g-import-not-at-top,wrong-import-position

import gin  # pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # pylint: disable=g-import-not-at-top,wrong-import-position


@pytest.fixture(autouse=True)
def _unlock_gin_after_test():
  """A launcher run finalizes (locks) gin; unlock it after each test so later tests can parse their bindings.
  (`gin.unlock_config` restores, on exit, the state it found: the unlocked one of the test's start.)"""
  with gin.unlock_config():
    yield

