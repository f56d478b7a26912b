"""MuJoCo's OpenGL back end, chosen when the first frame is requested (`env.render()`, evaluation videos).

`mujoco` picks its OpenGL back end from MUJOCO_GL when it is first imported, and a back end whose library is missing
breaks the import itself (MUJOCO_GL=osmesa without libosmesa6 raises inside PyOpenGL). Training, evaluation without
videos and IMPALA render nothing, so `uvf` imports `mujoco` with no back end (`import_mujoco_without_opengl`, run by
`uvf/__init__.py` before any other `uvf` module imports it) and no OpenGL library is loaded until `renderer()` is
first called. Then the back end is the first of these that renders a frame:

  1. an explicit MUJOCO_GL (or, without it, PYOPENGL_PLATFORM=egl|osmesa);
  2. EGL: headless, through the NVIDIA driver on a GPU or Mesa on the CPU (libEGL.so.1);
  3. OSMesa: headless software rendering (libOSMesa, Debian's libosmesa6);
  4. GLFW, when a display exists (DISPLAY or WAYLAND_DISPLAY).

PyOpenGL fixes its platform at its first import in a process, so each candidate is tried in a short subprocess that
renders one frame (`probe`); the winner is then bound in this process: PYOPENGL_PLATFORM, then
`mujoco.rendering.classic.gl_context.GLContext`, which `mujoco.Renderer` reads when it is constructed. When none
renders, `RenderingUnavailableError` lists what was tried and the package that fixes it.
"""

import dataclasses
import importlib
import os
import subprocess
import sys
import threading
from typing import Dict, List, Mapping, Optional, Sequence, Tuple, Union

from absl import logging

from rundir import errors

# MUJOCO_GL values that turn mujoco's rendering off, and those that mean GLFW (mujoco's gl_context).
_OFF = ('disable', 'disabled', 'off', 'false', '0')
_GLFW_ALIASES = ('glfw', 'glx', 'enable', 'enabled', 'on', 'true', '1')
DEFAULT_ORDER = ('egl', 'osmesa', 'glfw')
# The package that makes rendering work on a headless Debian / Ubuntu machine (OSMesa needs nothing else).
FIX_PACKAGE = 'libosmesa6'
PROBE_TIMEOUT_S = 120


@dataclasses.dataclass(frozen=True)
class Backend:
  name: str  # the MUJOCO_GL value
  library: str  # what it loads, for messages
  ctypes_name: Optional[str]  # the library's ctypes.util.find_library name, checked first by the probe


BACKENDS: Dict[str, Backend] = {
    'egl': Backend('egl', 'libEGL.so.1 (headless; NVIDIA driver or Mesa)', 'EGL'),
    'osmesa': Backend('osmesa', 'libOSMesa (headless software rendering; Debian: libosmesa6)', 'OSMesa'),
    'glfw': Backend('glfw', 'libglfw (bundled with the glfw wheel) and a display', None),
}


class RenderingUnavailableError(errors.UnavailableError, RuntimeError):
  """No OpenGL back end renders here. The message lists each one tried and why it failed, and the fix.

  A `rundir.errors.UnavailableError` (a missing optional dependency): the launcher prints the message alone and
  exits with status `errors.EXIT_UNAVAILABLE` (3).
  """

  def __init__(self, message: str, attempts: Sequence[tuple] = ()):
    super().__init__(message)
    self.attempts = list(attempts)  # [(back end, reason it failed)], in the order tried


def import_mujoco_without_opengl() -> None:
  """Imports `mujoco` with MUJOCO_GL=disable, then restores the environment: no OpenGL module is imported and a
  MUJOCO_GL naming a missing library cannot break the import. A no-op if `mujoco` is already imported."""
  if 'mujoco' in sys.modules:
    return
  saved = os.environ.get('MUJOCO_GL')
  os.environ['MUJOCO_GL'] = 'disable'
  try:
    import mujoco  # noqa: F401  pylint: disable=g-import-not-at-top,unused-import,import-outside-toplevel
  finally:
    if saved is None:
      del os.environ['MUJOCO_GL']
    else:
      os.environ['MUJOCO_GL'] = saved


def has_display(environ: Mapping[str, str] = os.environ) -> bool:
  return bool(environ.get('DISPLAY') or environ.get('WAYLAND_DISPLAY'))


def requested(environ: Mapping[str, str] = os.environ) -> str:
  """The back end the user asked for: MUJOCO_GL (lower case, GLFW aliases as 'glfw'), else PYOPENGL_PLATFORM when it
  is egl or osmesa, else ''."""
  value = environ.get('MUJOCO_GL', '').strip().lower()
  if not value:
    platform = environ.get('PYOPENGL_PLATFORM', '').strip().lower()
    return platform if platform in ('egl', 'osmesa') else ''
  return 'glfw' if value in _GLFW_ALIASES else value


def candidates(environ: Mapping[str, str] = os.environ) -> List[str]:
  """The back ends to try, in order: the requested one, then EGL, OSMesa, and GLFW when a display exists."""
  first = requested(environ)
  order = [first] if first else []
  order += [name for name in DEFAULT_ORDER if name not in order and (name != 'glfw' or has_display(environ))]
  return order


_PROBE = r'''
import ctypes.util, sys
name, library = sys.argv[1], sys.argv[2]
if library:
  path = ctypes.util.find_library(library)
  if not path:
    print(f'lib{library} not found'); sys.exit(1)
  try:
    ctypes.CDLL(path)
  except OSError as e:
    print(f'{path} does not load ({e})'); sys.exit(1)
try:
  import mujoco
  model = mujoco.MjModel.from_xml_string(
      '<mujoco><worldbody><light pos="0 0 3"/><geom type="sphere" size=".2" rgba="1 0 0 1"/></worldbody></mujoco>')
  data = mujoco.MjData(model)
  mujoco.mj_forward(model, data)
  renderer = mujoco.Renderer(model, 16, 16)
  try:
    renderer.update_scene(data)
    frame = renderer.render()
  finally:
    renderer.close()
except Exception as e:  # pylint: disable=broad-except
  print((f'{type(e).__name__}: {e}'.strip().splitlines() or ['?'])[0][:300]); sys.exit(1)
if frame.shape != (16, 16, 3) or frame.max() == 0:
  print('it rendered a blank frame'); sys.exit(1)
'''


def probe_environment(name: str, environ: Mapping[str, str] = os.environ) -> Dict[str, str]:
  """The environment in which `mujoco` uses back end `name`: MUJOCO_GL, and PYOPENGL_PLATFORM to match."""
  env = dict(environ, MUJOCO_GL=name)
  if name in ('egl', 'osmesa'):
    env['PYOPENGL_PLATFORM'] = name
  else:
    env.pop('PYOPENGL_PLATFORM', None)
  return env


def probe(name: str, environ: Mapping[str, str] = os.environ) -> Optional[str]:
  """Renders one 16 x 16 frame with back end `name` in a fresh Python process with `environ`.

  Returns:
    None if it rendered a non-blank frame, else why not (one line).
  """
  if name in _OFF:
    return f'MUJOCO_GL={name} turns MuJoCo rendering off'
  if name not in BACKENDS:
    return f'not a MuJoCo back end on Linux (use one of {", ".join(DEFAULT_ORDER)})'
  if name == 'glfw' and not has_display(environ):
    return 'no display (DISPLAY and WAYLAND_DISPLAY are unset)'
  try:
    result = subprocess.run([sys.executable, '-c', _PROBE, name, BACKENDS[name].ctypes_name or ''],
                            env=probe_environment(name, environ), capture_output=True, text=True,
                            timeout=PROBE_TIMEOUT_S, check=False)
  except subprocess.TimeoutExpired:
    return f'rendering one frame took over {PROBE_TIMEOUT_S} s'
  if result.returncode == 0:
    return None
  lines = result.stdout.strip().splitlines()
  return lines[-1] if lines else f'the test process died (exit status {result.returncode})'


def unavailable_message(attempts: Sequence[tuple]) -> str:
  """The one-screen message for back ends that all failed: [(name, reason)] in the order tried."""
  if len(attempts) == 1 and attempts[0][0] in _OFF:
    return (f'MuJoCo rendering (evaluation videos, env.render()) is off: MUJOCO_GL={attempts[0][0]}. Unset MUJOCO_GL '
            f'(or set it to one of {", ".join(DEFAULT_ORDER)}) to render.')
  lines = [
      'MuJoCo rendering (evaluation videos, env.render()) needs an OpenGL back end, and none works here. '
      'Tried, in order:'
  ]
  for name, reason in attempts:
    library = BACKENDS[name].library if name in BACKENDS else 'MUJOCO_GL'
    lines.append(f'  MUJOCO_GL={name:<7} {library}: {reason}')
  lines.append(f'Fix: apt-get install {FIX_PACKAGE} (Debian / Ubuntu: OSMesa renders on the CPU; it is tried '
               'automatically), or set MUJOCO_GL to a back end that works here.')
  lines.append('Training, and evaluation without videos, need no OpenGL library.')
  return '\n'.join(lines)


def select(names: Optional[Sequence[str]] = None, environ: Mapping[str, str] = os.environ) -> str:
  """Probes `names` (default: `candidates(environ)`) in order and returns the first that renders; binds nothing.

  Raises:
    RenderingUnavailableError: none renders (or MUJOCO_GL turns rendering off).
  """
  name, attempts = _first_that_renders(names, environ)
  if name is None:
    raise RenderingUnavailableError(unavailable_message(attempts), attempts)
  return name


def _first_that_renders(names, environ):
  """(the first of `names` that renders or None, [(name, reason)] of those that failed before it)."""
  if requested(environ) in _OFF:
    names = [requested(environ)]  # the user turned rendering off: nothing else is tried
  attempts: List[Tuple[str, str]] = []
  for name in candidates(environ) if names is None else names:
    reason = probe(name, environ)
    if reason is None:
      return name, attempts
    attempts.append((name, reason))
  return None, attempts


def _pyopengl_platform() -> Optional[str]:
  """The back end whose platform PyOpenGL already loaded in this process (it cannot change), or None."""
  module = sys.modules.get('OpenGL.platform')
  platform = type(getattr(module, 'PLATFORM', None)).__name__
  return {'EGLPlatform': 'egl', 'OSMesaPlatform': 'osmesa', 'GLXPlatform': 'glfw'}.get(platform)


def _bind(name: str) -> None:
  """Makes `mujoco.Renderer` use back end `name` in this process."""
  if 'OpenGL' not in sys.modules:
    if name in ('egl', 'osmesa'):
      os.environ['PYOPENGL_PLATFORM'] = name
    else:
      os.environ.pop('PYOPENGL_PLATFORM', None)
  context_class = importlib.import_module(f'mujoco.{name}').GLContext
  import mujoco  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  from mujoco.rendering.classic import gl_context  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  gl_context.GLContext = context_class
  mujoco.GLContext = context_class


_lock = threading.Lock()
# (requested back end, display present) -> the back end chosen for it, or the RenderingUnavailableError.
_chosen: Dict[tuple, Union[str, RenderingUnavailableError]] = {}


def backend() -> str:
  """The back end of this process: selected and bound on the first call, then the same (or the same error) while
  MUJOCO_GL / PYOPENGL_PLATFORM and the display stay the same.

  Raises:
    RenderingUnavailableError: no back end renders.
  """
  key = (requested(), has_display())
  with _lock:
    if key not in _chosen:
      names = candidates()
      loaded = _pyopengl_platform()
      if loaded is not None and requested() not in _OFF:  # PyOpenGL's platform is fixed: only that one can work
        names = [loaded]
      name, attempts = _first_that_renders(names, os.environ)
      if name is None:
        _chosen[key] = RenderingUnavailableError(unavailable_message(attempts), attempts)
      else:
        if attempts and requested():
          logging.warning('MuJoCo rendering: MUJOCO_GL=%s does not work here (%s); using MUJOCO_GL=%s.', attempts[0][0],
                          attempts[0][1], name)
        _bind(name)
        _chosen[key] = name
    chosen = _chosen[key]
  if isinstance(chosen, RenderingUnavailableError):
    raise chosen
  return chosen


def renderer(model, height: int, width: int):
  """A `mujoco.Renderer` of `model` for frames of `height` x `width` pixels, on the back end of `backend()`.

  Raises:
    RenderingUnavailableError: no back end renders, or the chosen one fails in this process.
  """
  name = backend()
  import mujoco  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  try:
    return mujoco.Renderer(model, height=height, width=width)
  except ValueError:  # a frame larger than the model's offscreen buffer: the caller's error
    raise
  except Exception as e:  # pylint: disable=broad-except  (mujoco.FatalError, PyOpenGL errors)
    raise RenderingUnavailableError(
        f'MuJoCo rendering through MUJOCO_GL={name} rendered a test frame in a separate process but fails here '
        f'({type(e).__name__}: {e}). Set MUJOCO_GL to another back end (egl, osmesa, glfw) and retry.',
        [(name, str(e))]) from e
