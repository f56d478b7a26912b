"""Shared test setup, and the guard that keeps the suite out of the checkout.

The guard: tests never read or write the user's run directories (`runs/`) or any other path of the checkout; each
works under its own temporary directory. At the start of the session the checkout's state is recorded (`git status`
with ignored files, untracked files listed one by one, and every file under `runs/` with its size and modification
time); at the end a test session that changed it fails, naming what changed. `.ci/run` runs the suite with `runs/`
already holding real runs of other configurations, as a user who trained first has.
"""

import os
from pathlib import Path
import subprocess

# As in the programs, TF_CPP_MIN_LOG_LEVEL defaults to 3 before TensorFlow loads (launcher.prepare_process); `uvf`
# imports mujoco without an OpenGL back end, before any test module imports it: rendering tests pick theirs when they
# render (uvf/environments/rendering.py), as the programs do.
import launcher  # pylint: disable=g-import-not-at-top

launcher.prepare_process()
import gin  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position
import pytest  # noqa: E402  pylint: disable=g-import-not-at-top,wrong-import-position

import uvf  # noqa: F401,E402  pylint: disable=unused-import,g-import-not-at-top,wrong-import-position

REPO = Path(__file__).resolve().parents[1]
# What the interpreter and pytest themselves leave in a checkout: not the tests' doing.
_CACHES = ('__pycache__/', '.pyc', '.pytest_cache/')


def checkout_state():
  """The checkout's files as a test could change them: {'git': set of `git status --porcelain --ignored` lines
  (untracked files one by one; ignored directories as one line), 'runs': {path under runs/: (size, mtime_ns)}};
  None outside a git checkout (e.g. the tests of an installed copy)."""
  status = subprocess.run(['git', 'status', '--porcelain', '--ignored'], cwd=REPO, capture_output=True, text=True,
                          check=False)
  if status.returncode:
    return None
  untracked = subprocess.run(['git', 'status', '--porcelain', '--untracked-files=all'], cwd=REPO, capture_output=True,
                             text=True, check=False)
  lines = {
      line for line in status.stdout.splitlines() + untracked.stdout.splitlines()
      if not any(cache in line for cache in _CACHES)
  }
  runs = {}
  for root, _, files in os.walk(REPO / 'runs'):
    for name in files:
      path = Path(root) / name
      try:
        stat = path.stat()
      except OSError:
        continue
      runs[str(path.relative_to(REPO))] = (stat.st_size, stat.st_mtime_ns)
  return {'git': lines, 'runs': runs}


def state_changes(before, after):
  """The lines that say how the checkout changed between two `checkout_state()`s (empty: unchanged)."""
  changes = [f'git status: new {line!r}' for line in sorted(after['git'] - before['git'])]
  changes += [f'git status: gone {line!r}' for line in sorted(before['git'] - after['git'])]
  for path in sorted(set(before['runs']) | set(after['runs'])):
    if before['runs'].get(path) != after['runs'].get(path):
      what = 'created' if path not in before['runs'] else 'deleted' if path not in after['runs'] else 'changed'
      changes.append(f'{path}: {what}')
  return changes


def pytest_sessionstart(session):
  session.config.stash[_STATE] = checkout_state()


def pytest_sessionfinish(session, exitstatus):
  before = session.config.stash.get(_STATE, None)
  after = checkout_state() if before is not None else None
  if before is None or after is None:
    return
  changes = state_changes(before, after)
  if changes:
    reporter = session.config.pluginmanager.get_plugin('terminalreporter')
    lines = ['the tests changed the checkout (they must work under their own temporary directories):'] + [
        '  ' + c for c in changes[:40]
    ] + ([f'  ... and {len(changes) - 40} more'] if len(changes) > 40 else [])
    if reporter is not None:
      reporter.ensure_newline()
      reporter.write_line('\n'.join(lines), red=True)
    if exitstatus == 0:
      session.exitstatus = pytest.ExitCode.TESTS_FAILED


_STATE = pytest.StashKey()


@pytest.fixture(autouse=True)
def _unlock_gin_after_test():
  """A launcher run finalizes (locks) gin; unlock it after each test so later tests can parse their bindings.
  (`gin.unlock_config` restores, on exit, the state it found: the unlocked one of the test's start.)"""
  with gin.unlock_config():
    yield
