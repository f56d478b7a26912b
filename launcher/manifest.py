"""The run-directory guard: `run.json`, the record of the configuration a run directory belongs to.

A run directory belongs to one configuration: a directory holding another run, or anything that is not a run, is
refused, and nothing is ever overwritten. A rerun that changes only the run's length or its logging and checkpoint
intervals (`CONTINUATION_PARAMS`) continues the run. `hold_run_dir` takes the directory for the life of the process
(`rundir.lock.RunLock`: one writer per run directory) and records the configuration in it.
"""

import datetime
import difflib
import json
import os
from pathlib import Path
import sys
import tempfile
from typing import Any, Dict, List, Optional, Protocol, Tuple

from launcher import errors
from rundir import formatting
from rundir import lock as lock_lib
from rundir import storage

MANIFEST = 'run.json'
LOCK = lock_lib.LOCK_FILE
# Files the launcher itself writes into a run directory.
LAUNCHER_FILES = (MANIFEST, 'config.gin', LOCK)

# Parameters of HIRO's `evaluate` that choose which checkpoints to evaluate, when, and whether to film them, not how
# results are computed: an eval directory accepts runs that differ only in them (evaluating checkpoint 100, then
# 200, into the same directory).
EVAL_SELECTION_PARAMS = ('checkpoint_path', 'checkpoint_range', 'eval_interval_secs', 'max_number_of_evaluations',
                         'checkpoint_timeout', 'generate_videos', 'num_episodes_videos', 'video_settings',
                         'num_threads', 'videos_optional')
# Settings that change how long a run trains, or how often it logs and writes checkpoints, not what it computes: a
# rerun that differs from the run directory's `run.json` only in them continues the run, and says so. Any other
# difference is another configuration (refused).
CONTINUATION_PARAMS = ('train_uvf.num_episodes_train', 'train_uvf.save_interval_secs', 'train_uvf.save_summaries_secs',
                       'train_uvf.log_every_n_steps', 'train_uvf.save_policy_every_n_steps',
                       'train_uvf.save_policy_interval_secs', 'experiment.total_environment_frames',
                       'experiment.checkpoint_interval_s', 'experiment.checkpoint_keep_every_frames')
# IMPALA's learning rate decays linearly to 0 at total_environment_frames: a new total changes the decay's horizon.
DECAY_HORIZON_PARAM = 'experiment.total_environment_frames'
# Bindings that do not make another configuration.
_NOT_CONFIGURATION = frozenset({f'evaluate.{name}' for name in EVAL_SELECTION_PARAMS} | set(CONTINUATION_PARAMS))


def _bindings(manifest: Dict[str, Any]) -> List[Tuple[str, str]]:
  """The bindings of a manifest's gin config (`gin.config_str()`) as (name, value) pairs, without its section
  comments; a long value that gin continued on indented lines is joined into one."""
  bindings: List[Tuple[str, str]] = []
  for line in manifest.get('gin_config', '').splitlines():
    if not line.strip() or line.startswith('#'):
      continue
    if line[:1].isspace() and bindings:  # the continuation of the previous binding's value
      name, value = bindings[-1]
      bindings[-1] = (name, (value.rstrip('\\').rstrip() + ' ' + line.strip()).strip())
    else:
      name, _, value = line.partition('=')
      bindings.append((name.strip(), value.strip()))
  return bindings


def _config_lines(manifest: Dict[str, Any]) -> List[str]:
  """The bindings of a manifest's gin config, one 'name = value' line each."""
  return [f'{name} = {value}' for name, value in _bindings(manifest)]


def _binding_name(line: str) -> str:
  return line.split('=', 1)[0].strip()


def _manifest_key(manifest: Dict[str, Any]) -> Tuple[str, str]:
  config = '\n'.join(f'{name} = {value}' for name, value in _bindings(manifest) if name not in _NOT_CONFIGURATION)
  return manifest.get('system', ''), config


def continued_settings(old: Dict[str, Any], new: Dict[str, Any]) -> List[str]:
  """The `CONTINUATION_PARAMS` whose values differ between two manifests, as 'name: old -> new' lines."""
  before, after = dict(_bindings(old)), dict(_bindings(new))
  changes = []
  for name in CONTINUATION_PARAMS:
    if before.get(name) != after.get(name):
      changes.append(f'{name}: {before.get(name, "(default)")} -> {after.get(name, "(default)")}')
  return changes


def read_manifest(run_dir: Path) -> Optional[Dict[str, Any]]:
  """The `run.json` of `run_dir`, or None if it has none.

  Raises:
    LaunchError: it cannot be read.
  """
  existing = run_dir / MANIFEST
  if not existing.is_file():
    return None
  try:
    manifest: Dict[str, Any] = json.loads(existing.read_text())
    return manifest
  except (OSError, ValueError) as e:
    raise errors.LaunchError(f'{existing} cannot be read ({e}); the directory is left untouched: choose another '
                             f'directory.') from None


def check_run_dir(run_dir: Path, manifest: Dict[str, Any]) -> bool:
  """Checks that `run_dir` may receive the run described by `manifest`; writes nothing.

  Returns:
    True if `run_dir` already holds a run of the same configuration, up to `CONTINUATION_PARAMS` (the run resumes
    there), False if it does not exist or is empty (the launcher's own lock file aside).

  Raises:
    LaunchError: `run_dir` is a file, holds a run of another configuration, or holds files but no `run.json`.
  """
  if not run_dir.exists():
    return False
  if not run_dir.is_dir():
    raise errors.LaunchError(f'{run_dir} exists and is not a directory; choose another --train_dir.')
  old = read_manifest(run_dir)
  if old is None:
    if any(p.name != LOCK for p in run_dir.iterdir()):
      raise errors.LaunchError(f'{run_dir} is not empty and holds no {MANIFEST}: it is not a run directory of this '
                               f'project. Its files are left untouched; choose another --train_dir / --eval_dir.')
    return False
  if _manifest_key(old) == _manifest_key(manifest):
    return True
  if old.get('system') != manifest.get('system'):
    detail = f'it holds a {old.get("system")} run, this is a {manifest.get("system")} run'
  else:
    diff = list(
        difflib.unified_diff(_config_lines(old), _config_lines(manifest), 'existing run', 'this run', n=0, lineterm=''))
    shown = [
        line for line in diff
        if line[:1] in '+-' and line[:3] not in ('+++', '---') and _binding_name(line[1:]) not in _NOT_CONFIGURATION
    ]
    more = f'\n  ... and {len(shown) - 12} more lines' if len(shown) > 12 else ''
    detail = 'its configuration differs:\n' + '\n'.join('  ' + line for line in shown[:12]) + more
  raise errors.LaunchError(f'{run_dir} holds a run of another configuration ({old.get("config_name", "?")}); '
                           f'{detail}\nNothing was changed. Use another --train_dir, or rerun with exactly that '
                           f'run\'s configuration to resume it (only its length and its logging and checkpoint '
                           f'intervals may differ: launcher.CONTINUATION_PARAMS).')


def write_manifest(run_dir: Path, manifest: Dict[str, Any]) -> bool:
  """Creates `run_dir` and records the configuration it belongs to (`run.json` and `config.gin`), unless it already
  holds a `run.json`, which is never rewritten.

  Returns:
    True if this call wrote them.
  """
  run_dir.mkdir(parents=True, exist_ok=True)
  if (run_dir / MANIFEST).exists():
    return False
  (run_dir / 'config.gin').write_text(manifest['gin_config'])
  # A private temporary name, so that no two writers share one; then one rename makes run.json appear whole.
  fd, tmp = tempfile.mkstemp(dir=run_dir, prefix=f'.{MANIFEST}.', suffix='.tmp')
  with os.fdopen(fd, 'w') as f:
    f.write(json.dumps(manifest, indent=2) + '\n')
  os.replace(tmp, run_dir / MANIFEST)
  return True


def withdraw_manifest(run_dir: Path) -> None:
  """Removes the `run.json` and `config.gin` this process just wrote, if the run wrote nothing else: a fresh start
  that failed at once (e.g. an error the system raises while building) leaves the directory free for the corrected
  command."""
  try:
    if all(p.name in LAUNCHER_FILES for p in run_dir.iterdir()):
      for name in (MANIFEST, 'config.gin'):
        (run_dir / name).unlink(missing_ok=True)
  except OSError:
    pass


class _Plan(Protocol):
  """What `hold_run_dir` reads and sets of a `planning.Plan` (which imports this module)."""
  output_dir: Optional[Path]
  manifest: Dict[str, Any]
  resumes: bool
  wrote_manifest: bool


def hold_run_dir(p: _Plan) -> Optional[lock_lib.RunLock]:
  """Creates the output directory of the plan `p` (a `planning.Plan`), takes its lock and writes its `run.json`
  (unless it has one); sets `p.resumes` and `p.wrote_manifest`.

  Checks the directory again under the lock (another process may have started a run in it since `plan` looked).

  Returns:
    the held `RunLock` (release it when the program ends), or None when the program writes no directory.

  Raises:
    LaunchError: the directory cannot be created or written (exit 2), or the disk is full (EXIT_RUN_DIR).
    rundir.errors.RunDirectoryError: another process holds it (EXIT_RUN_DIR).
  """
  if p.output_dir is None:
    return None
  run_dir = p.output_dir
  lock = lock_lib.RunLock(run_dir)
  try:
    run_dir.mkdir(parents=True, exist_ok=True)
    lock.acquire()
  except OSError as e:
    raise write_error(run_dir, e) from None
  try:
    p.resumes = check_run_dir(run_dir, p.manifest)
    p.manifest['created'] = datetime.datetime.now().isoformat(timespec='seconds')
    p.manifest['command'] = sys.argv
    p.wrote_manifest = write_manifest(run_dir, p.manifest)
  except OSError as e:
    lock.release()
    raise write_error(run_dir, e) from None
  except BaseException:
    lock.release()
    raise
  return lock


def write_error(run_dir: Path, error: OSError) -> errors.LaunchError:
  """The `LaunchError` of a failed write into `run_dir`: EXIT_RUN_DIR for a full disk (with the free space), else
  EXIT_USAGE (a directory the user cannot write)."""
  if storage.is_disk_full(error):
    return errors.LaunchError(
        f'cannot write {run_dir}: the disk is full ({error.strerror}; '
        f'{formatting.format_bytes(storage.free_bytes(run_dir))} free). Free some space or use '
        f'another --train_dir.', exit_code=errors.EXIT_RUN_DIR)
  return errors.LaunchError(f'cannot write the run directory {run_dir}: {error.strerror or error}'
                            f'{f" ({error.filename})" if error.filename else ""}. Choose a directory you can write '
                            f'(--train_dir / --logdir / --eval_dir).')
