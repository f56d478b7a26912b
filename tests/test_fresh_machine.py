"""The README's first command on a fresh machine: training (HIRO and IMPALA) loads no OpenGL library, even with the GL
back end pointing at a library that does not exist, and the first screen is the project's own lines.

Each run is the real `run_train.py`, in a subprocess, through a wrapper that reports afterwards which OpenGL modules
(PyOpenGL, glfw) the process imported. `.ci/run` runs this file before it installs any rendering library.
"""

import json
import os
from pathlib import Path
import re
import subprocess
import sys

import pytest

from tests.uvf import hiro_fixtures

REPO = Path(__file__).resolve().parent.parent
WRAPPER = r'''
import runpy, sys
script = sys.argv[1]
sys.argv = sys.argv[1:]
sys.path.insert(0, sys.argv.pop(1))
code = 0
try:
  runpy.run_path(script, run_name='__main__')
except SystemExit as e:
  code = e.code
print('OpenGL modules imported:', sorted(m for m in sys.modules if m.split('.')[0] in ('OpenGL', 'glfw')))
sys.exit(code)
'''
# What must not be on the first screen: native log lines (TensorFlow, XLA, absl C++), absl's prefixed lines, other
# libraries' lines (launcher/console.py marks their warnings 'warning (library): '), gym's and PyOpenGL's messages.
NOISE = re.compile(r'^(?:[IWEF]\d{4} \d\d:\d\d:\d+\.\d{6}|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: |WARNING: |warning \(|'
                   r'error \()|Gym has been unmaintained|Unable to register|OpenGL_accelerate')


def run_train(args, cwd, **env):
  """Runs `python run_train.py ARGS` from `cwd` with `env` over a shell's environment without GL settings."""
  environ = {
      k: v
      for k, v in os.environ.items()
      if k not in ('MUJOCO_GL', 'PYOPENGL_PLATFORM', 'TF_CPP_MIN_LOG_LEVEL', 'DISPLAY', 'WAYLAND_DISPLAY')
  }
  environ.update(env)
  command = [sys.executable, '-c', WRAPPER, str(REPO / 'run_train.py'), str(REPO), *args]
  return subprocess.run(command, cwd=cwd, env=environ, capture_output=True, text=True, timeout=600, check=False)


def check_screen(result, first_line):
  out, err = result.stdout.splitlines(), result.stderr.splitlines()
  assert out[0].startswith(first_line), result.stdout
  noise = [line for line in out + err if NOISE.search(line)]
  assert not noise, '\n'.join(noise)
  assert out[-1] == 'OpenGL modules imported: []', result.stdout[-2000:]


@pytest.mark.slow
def test_hiro_trains_without_opengl_with_egl_pointing_at_a_missing_library(tmp_path):
  # EGL (explicitly asked for) is directed by glvnd to a vendor library that does not exist.
  vendor = tmp_path / 'vendor.json'
  vendor.write_text(
      json.dumps({
          'file_format_version': '1.0.0',
          'ICD': {
              'library_path': str(tmp_path / 'libEGL_missing.so.0')
          }
      }))
  args = ['configs/ant_maze.gin', '--train_dir', str(tmp_path / 'run')]
  for binding in hiro_fixtures.small_bindings(
      episodes=1) + ['train_uvf.initial_episodes = 0', 'train_uvf.initial_steps = 20']:
    args += ['--gin_param', binding]
  result = run_train(args, REPO, MUJOCO_GL='egl', PYOPENGL_PLATFORM='egl', __EGL_VENDOR_LIBRARY_FILENAMES=str(vendor))
  assert result.returncode == 0, result.stderr[-3000:]
  check_screen(result, 'run_train: HIRO (uvf), config ant_maze (configs/ant_maze.gin)')
  out = result.stdout.splitlines()
  assert out[1] == f'  run directory {tmp_path / "run"} (a new run)'
  assert out[2] == f'  TensorBoard: tensorboard --logdir {tmp_path / "run"}'
  err = result.stderr.splitlines()
  assert err[0] == ('Training to global step 150 (environment steps), from step 0; a progress line every 100 steps, '
                    'a policy checkpoint every 100 steps.')
  assert 'global step 100 / 150' in result.stdout
  assert err[-1].startswith('Training finished at global step 150')


@pytest.mark.slow
def test_impala_trains_without_opengl_with_osmesa_asked_for(tmp_path):
  # MUJOCO_GL=osmesa used to make `import mujoco` load OSMesa (and crash where libosmesa6 is missing).
  args = [
      'configs/impala_builtin.gin', '--logdir',
      str(tmp_path / 'run'), '--total_environment_frames=40', '--num_actors=2', '--batch_size=2'
  ]
  result = run_train(args, REPO, MUJOCO_GL='osmesa', PYOPENGL_PLATFORM='osmesa')
  assert result.returncode == 0, result.stderr[-3000:]
  check_screen(result, 'run_train: IMPALA (scalable_agent), config impala_builtin (configs/impala_builtin.gin)')
  err = result.stderr.splitlines()
  assert err[0].startswith('Training to 40 environment frames: 2 actors (builtin/find_object)')
  assert err[-1].startswith('Done: 40 environment frames')


@pytest.mark.slow
def test_verbosity_shows_the_other_libraries_output(tmp_path):
  # A run stopped by a bad binding, after TensorFlow, tf-agents and gym are imported.
  result = run_train(['configs/ant_maze.gin', '--gin_param', 'train_uvf.no_such_arg = 1', '--verbosity=0'], tmp_path)
  assert result.returncode == 2
  assert 'Gym has been unmaintained' in result.stderr
  assert 'no_such_arg' in result.stderr and 'Traceback' not in result.stderr
