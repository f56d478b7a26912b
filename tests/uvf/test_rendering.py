"""uvf/environments/rendering.py: the OpenGL back end is picked at the first frame, in the documented order, from
real probes (subprocesses that render a frame); a real frame through EGL in this process.

"Nothing loads" is a real failure: EGL pointed (through glvnd's __EGL_VENDOR_LIBRARY_FILENAMES) at a vendor library
that does not exist, and GLFW without a display. The test suite runs with MUJOCO_GL unset and no display, as CI does,
with Mesa's EGL installed (CI: apt-get install libegl1).
"""

import json

import numpy as np
import pytest

from uvf.environments import create_maze_env
from uvf.environments import rendering

HEADLESS = {}  # an environment without MUJOCO_GL, PYOPENGL_PLATFORM or a display


@pytest.fixture(name='broken_egl')
def _broken_egl(tmp_path):
  """An environment whose EGL loads a vendor library that does not exist."""
  vendor = tmp_path / 'missing_vendor.json'
  vendor.write_text(
      json.dumps({
          'file_format_version': '1.0.0',
          'ICD': {
              'library_path': str(tmp_path / 'libEGL_missing.so.0')
          }
      }))
  return {'__EGL_VENDOR_LIBRARY_FILENAMES': str(vendor)}


def with_base(extra):
  """os.environ's PATH and library paths (the probe needs the same Python), plus `extra`; nothing about GL."""
  import os  # pylint: disable=import-outside-toplevel
  base = {
      key: value
      for key, value in os.environ.items()
      if key not in ('MUJOCO_GL', 'PYOPENGL_PLATFORM', 'DISPLAY', 'WAYLAND_DISPLAY')
  }
  return dict(base, **extra)


def test_candidate_order():
  assert rendering.candidates(HEADLESS) == ['egl', 'osmesa']
  assert rendering.candidates({'DISPLAY': ':0'}) == ['egl', 'osmesa', 'glfw']
  assert rendering.candidates({'MUJOCO_GL': 'osmesa'}) == ['osmesa', 'egl']
  assert rendering.candidates({'MUJOCO_GL': 'OSMesa', 'PYOPENGL_PLATFORM': 'egl'}) == ['osmesa', 'egl']
  assert rendering.candidates({'PYOPENGL_PLATFORM': 'osmesa'}) == ['osmesa', 'egl']
  assert rendering.candidates({'MUJOCO_GL': 'glx', 'DISPLAY': ':0'}) == ['glfw', 'egl', 'osmesa']
  assert rendering.candidates({'MUJOCO_GL': 'glfw'}) == ['glfw', 'egl', 'osmesa']  # asked for: tried first anyway


def test_an_explicit_request_is_tried_first_then_egl():
  # (Without a request EGL comes first: test_a_frame_through_egl_in_this_process.) An explicit back end that cannot
  # work here (GLFW without a display) is tried first, then EGL.
  assert rendering.select(environ=with_base({'MUJOCO_GL': 'glfw'})) == 'egl'
  assert rendering.probe('glfw', with_base({'MUJOCO_GL': 'glfw'})).startswith('no display')
  assert rendering.probe('bogus').startswith('not a MuJoCo back end')


def test_osmesa_is_tried_after_a_failing_egl(broken_egl):
  try:
    name = rendering.select(environ=with_base(broken_egl))
  except rendering.RenderingUnavailableError as e:  # a machine without libosmesa6
    assert [n for n, _ in e.attempts] == ['egl', 'osmesa']
  else:  # CI installs libosmesa6
    assert name == 'osmesa'


def test_nothing_loads_one_screen_message(broken_egl):
  with pytest.raises(rendering.RenderingUnavailableError) as error:
    rendering.select(['egl', 'glfw'], environ=with_base(broken_egl))
  message = str(error.value)
  assert [name for name, _ in error.value.attempts] == ['egl', 'glfw']
  lines = message.splitlines()
  assert len(lines) <= 6
  assert lines[1].startswith('  MUJOCO_GL=egl') and 'libEGL.so.1' in lines[1]
  assert 'Cannot initialize a EGL device display' in lines[1]
  assert lines[2].startswith('  MUJOCO_GL=glfw') and 'no display' in lines[2]
  assert 'apt-get install libosmesa6' in message
  assert 'Training, and evaluation without videos, need no OpenGL library.' in message


def test_rendering_turned_off_is_said_so():
  with pytest.raises(rendering.RenderingUnavailableError, match='is off: MUJOCO_GL=disable'):
    rendering.select(environ=with_base({'MUJOCO_GL': 'disable'}))


def test_a_frame_through_egl_in_this_process():
  assert rendering.backend() == 'egl'
  env = create_maze_env.create_maze_env('AntMaze')
  try:
    frame = env.render(height=120, width=160)
  finally:
    env.close()
  assert frame.shape == (120, 160, 3) and frame.dtype == np.uint8
  # The camera looks down at the maze's centre, the middle wall block of AntMaze's U (grey, lit from above); the
  # free cells around it are the white floor, and the walls' sides facing the camera are dark.
  grey = frame.mean(axis=2)
  assert 100 < grey[60, 80] < 200
  assert (grey > 230).mean() > 0.1 and (grey < 40).mean() > 0.01
