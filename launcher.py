"""Command-line front end shared by `run_train.py` and `run_eval.py`.

The scripts stay thin: they define the flags below and hand over to `main`. The work here is, in order,

1. resolve the gin files (positional arguments, or HIRO's original `--config_file` flags; with neither, IMPALA's
   original flags alone select IMPALA's defaults, as the original `experiment.py` needed no config file);
2. turn every flag the user gave into a gin binding (`--gin_param`, HIRO's `--params`, IMPALA's `--level_name` ...);
3. parse and validate all of it with gin, before any heavy work;
4. decide from the configuration which system runs (HIRO / `uvf` or IMPALA / `scalable_agent`);
5. check what that configuration needs (an optional dependency such as DeepMind Lab);
6. guard the output directory: a run directory belongs to one configuration (`run.json` records it), and a
   directory holding another run, or anything that is not a run, is refused; nothing is ever overwritten. A rerun
   that changes only the run's length or its logging and checkpoint intervals (`CONTINUATION_PARAMS`) continues it;
7. hold the directory: one writer per run directory (`RunLock`, the file `run.lock`, held for the life of the
   process), so that a second training started on it is refused;
8. run the system, or stop with a clear "not implemented yet" message while its issue is open; SIGINT / SIGTERM / SIGHUP ask
   the system to stop at its next safe point and write its checkpoint (`StopSignals`).

Every user error ends with one short message and a non-zero exit status (`EXIT_*`), never a traceback.
docs/reliability.md gives the guarantees (what a kill can lose, disk needed, lock semantics).
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import errno
import fcntl
import importlib
import json
import os
import shutil
import signal
import socket
import sys
import tempfile
import tokenize
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags

import console

REPO_ROOT = Path(__file__).resolve().parent
CONFIG_DIR = REPO_ROOT / 'configs'
# Where a relative config path is looked for when it is not found from the current directory. `configs/uvf` mirrors
# the original efficient-hrl layout, so the original `--config_file configs/base_uvf.gin` and
# `--config_file context/configs/ant_maze.gin` arguments resolve unchanged.
CONFIG_SEARCH_ROOTS = (CONFIG_DIR, CONFIG_DIR / 'uvf')
# IMPALA's original command line had no config file: its flags alone, over these defaults.
IMPALA_DEFAULT_CONFIG = CONFIG_DIR / 'scalable_agent' / 'experiment.gin'
MANIFEST = 'run.json'
LOCK = 'run.lock'
PROGRAMS = ('train', 'eval')
# Files the launcher itself writes into a run directory.
LAUNCHER_FILES = (MANIFEST, 'config.gin', LOCK)

# Exit statuses.
EXIT_USAGE = 2  # bad command line, config, binding or output directory
EXIT_UNAVAILABLE = 3  # a missing optional dependency, or a system that is not implemented yet
# The run directory cannot be used now: another process holds it, it holds checkpoints but none is readable, or the
# disk is full (at the start or during a save). The systems' errors of that kind carry this `exit_code`.
EXIT_RUN_DIR = 4
EXIT_DIVERGED = 5  # training produced non-finite values (IMPALA's learner or actors); no checkpoint holds them
# Stopped by SIGINT / SIGTERM / SIGHUP (after writing the checkpoint, or at once on a second signal): 128 + the signal
# number (130, 143, 129), as a shell reports a process killed by that signal, so that a scheduler sees an unfinished run.
EXIT_SIGNAL_BASE = 128


class LaunchError(Exception):
  """A user-facing error: printed as one message, then the program exits with `exit_code`."""

  def __init__(self, message: str, exit_code: int = EXIT_USAGE):
    super().__init__(message)
    self.exit_code = exit_code


# --------------------------------------------------------------------------------------------------------------------
# Flags.

# HIRO's original train_utils/train.py flags that become gin bindings of `train_uvf`.
_HIRO_TRAIN_FLAGS = ('goal_sample_strategy', 'save_interval_secs', 'save_summaries_secs', 'summarize_gradients')
# run_eval flags that become gin bindings of HIRO's `evaluate`.
_HIRO_EVAL_FLAGS = ('checkpoint_path',)
# Parameters of HIRO's `evaluate` that choose which checkpoints to evaluate, when, and whether to film them, not how
# results are computed: an eval directory accepts runs that differ only in them (evaluating checkpoint 100, then
# 200, into the same directory).
_EVAL_SELECTION_PARAMS = ('checkpoint_path', 'checkpoint_range', 'eval_interval_secs', 'max_number_of_evaluations',
                          'checkpoint_timeout', 'generate_videos', 'num_episodes_videos', 'video_settings',
                          'num_threads', 'videos_optional')
# IMPALA's original experiment.py flags (reference impala.md section 2): each is the gin parameter
# `experiment.<flag>` of the same name and default.
IMPALA_FLAGS = ('mode', 'test_num_episodes', 'task', 'job_name', 'total_environment_frames', 'num_actors',
                 'batch_size', 'unroll_length', 'num_action_repeats', 'seed', 'entropy_cost', 'baseline_cost',
                 'discounting', 'reward_clipping', 'dataset_path', 'level_name', 'width', 'height', 'learning_rate',
                 'decay', 'momentum', 'epsilon')
# Flags of multi-machine IMPALA (issue #8, not in the original), also `experiment.<flag>` bindings:
# scalable_agent/distributed.py, docs/impala_distributed.md.
_IMPALA_DISTRIBUTED_FLAGS = ('learner_address', 'reverb_port')


def prepare_process() -> None:
  """What a program of this repository does first, before TensorFlow loads: TensorFlow's native log lines off unless
  the user set TF_CPP_MIN_LOG_LEVEL (`console.default_native_log_level`). Importing this module changes nothing."""
  console.default_native_log_level()


def define_flags(fv: flags.FlagValues = flags.FLAGS) -> None:
  """Defines the flags of both scripts on `fv` (tests pass a fresh `FlagValues`)."""
  d = dict(flag_values=fv)
  flags.DEFINE_multi_string('gin_param', [], 'A gin binding, e.g. "train_uvf.batch_size = 64". Repeatable; '
                            'applied after the config files, in order.', **d)
  flags.DEFINE_string('train_dir', None, 'Run directory (checkpoints, summaries, run.json). Default: '
                      'runs/<config name> under the current directory.', **d)
  flags.DEFINE_string('eval_dir', None, 'run_eval: where evaluation results go. Default: <train_dir>/eval.', **d)
  # HIRO (efficient-hrl) original flags.
  flags.DEFINE_multi_string('config_file', [], 'HIRO original: a gin file (repeatable), same as a positional '
                            'argument.', **d)
  flags.DEFINE_multi_string('params', [], 'HIRO original: a gin binding (repeatable), same as --gin_param.', **d)
  flags.DEFINE_string('checkpoint_dir', None, 'HIRO original (run_eval): the training directory to evaluate; '
                      'same as --train_dir.', **d)
  flags.DEFINE_string('checkpoint_path', None, 'run_eval (HIRO): evaluate this one policy checkpoint, relative to '
                      '<train_dir>/policy (e.g. model.ckpt-300000) or a path (evaluate.checkpoint_path). Default: '
                      'every policy checkpoint as training writes it.', **d)
  flags.DEFINE_enum('goal_sample_strategy', 'sample', ['sample', 'FuN', 'None'],
                    'HIRO original: off-policy correction of meta goals (train_uvf.goal_sample_strategy).', **d)
  flags.DEFINE_string('master', 'local', 'HIRO original: TF1 session master; only local training exists.', **d)
  flags.DEFINE_integer('save_interval_secs', 300, 'HIRO original: seconds between full checkpoints '
                       '(train_uvf.save_interval_secs).', **d)
  flags.DEFINE_integer('save_summaries_secs', 30, 'HIRO original: seconds between summaries '
                       '(train_uvf.save_summaries_secs).', **d)
  flags.DEFINE_boolean('summarize_gradients', False, 'HIRO original: gradient summaries '
                       '(train_uvf.summarize_gradients).', **d)
  # IMPALA (scalable_agent experiment.py) original flags, original defaults; each maps to experiment.<name>.
  flags.DEFINE_string('logdir', None, 'IMPALA original: TensorFlow log and checkpoint directory; same as '
                      '--train_dir. (Original default /tmp/agent; here runs/<config name>.)', **d)
  flags.DEFINE_enum('mode', 'train', ['train', 'test'], 'IMPALA original: training or test mode.', **d)
  flags.DEFINE_integer('test_num_episodes', 10, 'IMPALA original: number of episodes per level in test mode.', **d)
  flags.DEFINE_integer('task', -1, 'IMPALA original: task id; -1 for local (single-machine) training.', **d)
  flags.DEFINE_enum('job_name', 'learner', ['learner', 'actor'], 'IMPALA original: job name; ignored when task '
                    'is -1.', **d)
  flags.DEFINE_integer('total_environment_frames', int(1e9), 'IMPALA original: total environment frames to train '
                       'for.', **d)
  flags.DEFINE_integer('num_actors', 4, 'IMPALA original: number of actors.', **d)
  flags.DEFINE_integer('batch_size', 2, 'IMPALA original: batch size for training.', **d)
  flags.DEFINE_integer('unroll_length', 100, 'IMPALA original: unroll length in agent steps.', **d)
  flags.DEFINE_integer('num_action_repeats', 4, 'IMPALA original: number of action repeats.', **d)
  flags.DEFINE_integer('seed', 1, 'IMPALA original: random seed.', **d)
  flags.DEFINE_float('entropy_cost', 0.00025, 'IMPALA original: entropy cost/multiplier.', **d)
  flags.DEFINE_float('baseline_cost', .5, 'IMPALA original: baseline cost/multiplier.', **d)
  flags.DEFINE_float('discounting', .99, 'IMPALA original: discounting factor.', **d)
  flags.DEFINE_enum('reward_clipping', 'abs_one', ['abs_one', 'soft_asymmetric'], 'IMPALA original: reward '
                    'clipping.', **d)
  flags.DEFINE_string('dataset_path', '', 'IMPALA original: path to the dataset needed for psychlab_* levels.', **d)
  flags.DEFINE_string('level_name', 'explore_goal_locations_small', 'IMPALA original: level name, or "dmlab30" '
                      'for the full DMLab-30 suite.', **d)
  flags.DEFINE_integer('width', 96, 'IMPALA original: observation width.', **d)
  flags.DEFINE_integer('height', 72, 'IMPALA original: observation height.', **d)
  flags.DEFINE_float('learning_rate', 0.00048, 'IMPALA original: learning rate.', **d)
  flags.DEFINE_float('decay', .99, 'IMPALA original: RMSProp optimizer decay.', **d)
  flags.DEFINE_float('momentum', 0., 'IMPALA original: RMSProp momentum.', **d)
  flags.DEFINE_float('epsilon', .1, 'IMPALA original: RMSProp epsilon.', **d)
  # IMPALA multi-machine training (docs/impala_distributed.md).
  flags.DEFINE_string('learner_address', '', 'IMPALA actor jobs (--job_name=actor --task=i): HOST:PORT of the '
                      'learner\'s Reverb server (experiment.learner_address).', **d)
  flags.DEFINE_integer('reverb_port', 8000, 'IMPALA learner job (--job_name=learner --task=0): port of its Reverb '
                       'server; 0 picks a free one (experiment.reverb_port).', **d)


def _present(fv: flags.FlagValues, name: str) -> bool:
  return bool(fv[name].present)


# --------------------------------------------------------------------------------------------------------------------
# Systems.

@dataclasses.dataclass(frozen=True)
class System:
  """One of the two systems the launcher can run.

  Attributes:
    key: package name.
    title: for messages.
    gin_modules: modules to import so that every gin name of the system is registered.
    markers: configurables whose bindings identify a configuration of this system.
    entry: `program -> 'module:function'`, the function `run` calls; a placeholder carries `not_implemented`.
    preflight: optional `'module:function'` that checks what the bound configuration needs, before anything is
      written: it raises `ImportError` for a missing optional dependency and `ValueError` for a bad value, each
      with a message that names the problem and the fix.
    stop: `program -> 'module:function'` called with the signal's name ('SIGINT', 'SIGTERM') on the first such
      signal: it asks the running program to stop at its next safe point, write its checkpoint and return, and
      returns True, or returns False when the program has nothing to save (an IMPALA actor job). Without one, or
      on False, the program stops at once (KeyboardInterrupt).
  """
  key: str
  title: str
  gin_modules: Tuple[str, ...]
  markers: Tuple[str, ...]
  entry: Dict[str, str]
  preflight: Optional[str] = None
  stop: Dict[str, str] = dataclasses.field(default_factory=dict)


SYSTEMS: Dict[str, System] = {
    'uvf': System(
        key='uvf', title='HIRO (uvf)',
        gin_modules=('uvf.configurables',),
        markers=('train_uvf', 'evaluate'),
        entry={'train': 'uvf.train:train_uvf', 'eval': 'uvf.eval:evaluate'},
        preflight='uvf.train:preflight',
        stop={'train': 'uvf.train:request_stop'}),
    'scalable_agent': System(
        key='scalable_agent', title='IMPALA (scalable_agent)',
        gin_modules=('scalable_agent.experiment',),
        markers=('experiment',),
        entry={'train': 'scalable_agent.experiment:experiment', 'eval': 'scalable_agent.experiment:experiment'},
        preflight='scalable_agent.experiment:preflight',
        stop={'train': 'scalable_agent.progress:request_stop'}),
}


def _load(spec: str) -> Callable:
  module, name = spec.split(':')
  return getattr(importlib.import_module(module), name)


def register_configurables() -> None:
  """Imports every system's gin modules, so that any gin name of either system parses."""
  for system in SYSTEMS.values():
    for module in system.gin_modules:
      importlib.import_module(module)


# --------------------------------------------------------------------------------------------------------------------
# Config files.

def available_configs() -> List[str]:
  """The ready-to-run top-level configs, as paths relative to the repository root."""
  return sorted(str(p.relative_to(REPO_ROOT)) for p in CONFIG_DIR.glob('*.gin'))


def resolve_config_path(path: str) -> Path:
  """Finds a gin file: as given (from the current directory), else under each of `CONFIG_SEARCH_ROOTS`.

  Raises:
    LaunchError: naming the path and listing the available configs.
  """
  candidates = [Path(path)]
  if not os.path.isabs(path):
    candidates += [root / path for root in CONFIG_SEARCH_ROOTS]
    # `configs/ant_maze.gin` typed from another directory.
    if Path(path).parts[:1] == ('configs',):
      candidates.append(REPO_ROOT / path)
  for candidate in candidates:
    if candidate.is_file():
      return candidate.resolve()
  listing = '\n'.join('  ' + c for c in available_configs())
  raise LaunchError(f'config file not found: {path}\nAvailable configs:\n{listing}\n'
                    f'(The original efficient-hrl pieces are under configs/uvf/, e.g. configs/base_uvf.gin and '
                    f'context/configs/ant_maze.gin resolve there.)')


def config_name(paths: Sequence[Path]) -> str:
  """Name of a configuration, for the default run directory: the file stems joined by '+'."""
  return '+'.join(p.stem for p in paths)


# --------------------------------------------------------------------------------------------------------------------
# Flags to gin bindings.

def flag_bindings(fv: flags.FlagValues) -> Tuple[List[str], List[str]]:
  """Gin bindings for the original flags the user gave explicitly.

  Returns:
    (hiro_bindings, impala_bindings); flags left at their defaults give no binding (gin's values apply).
  """
  hiro = []
  for name in _HIRO_TRAIN_FLAGS:
    if _present(fv, name):
      hiro.append(f'train_uvf.{name} = {fv[name].value!r}')
  for name in _HIRO_EVAL_FLAGS:
    if _present(fv, name):
      hiro.append(f'evaluate.{name} = {fv[name].value!r}')
  impala = [f'experiment.{name} = {fv[name].value!r}' for name in IMPALA_FLAGS + _IMPALA_DISTRIBUTED_FLAGS
            if _present(fv, name)]
  return hiro, impala


# --------------------------------------------------------------------------------------------------------------------
# Gin.

def parse_gin(config_paths: Sequence[Path], bindings: Sequence[str]) -> None:
  """Clears gin, then parses the gin files and the bindings, in order; errors become `LaunchError`s."""
  import gin  # pylint: disable=g-import-not-at-top
  with gin.unlock_config():  # a previous launch in this process (tests) finalized the config
    gin.clear_config()
    _parse_gin_unlocked(config_paths, bindings)


def _search_configs_first() -> None:
  """Makes gin resolve a relative `include 'uvf/configs/base_uvf.gin'` under configs/ before anywhere else.

  gin's public `gin.add_config_file_search_path` appends to its search path, after the current directory, so that a
  file of the same relative name in the current directory would shadow the repository's. gin has no public way to
  put a path first, so this one function edits gin's list `gin.config._LOCATION_PREFIXES` (gin 0.5;
  tests/test_launcher.py shows a shadowing file in the current directory ignored)."""
  import gin  # pylint: disable=g-import-not-at-top
  prefixes = gin.config._LOCATION_PREFIXES  # pylint: disable=protected-access
  if prefixes[:1] != [str(CONFIG_DIR)]:  # first, even when someone appended it (gin.add_config_file_search_path)
    while str(CONFIG_DIR) in prefixes:
      prefixes.remove(str(CONFIG_DIR))
    prefixes.insert(0, str(CONFIG_DIR))


def _parse_gin_unlocked(config_paths: Sequence[Path], bindings: Sequence[str]) -> None:
  import gin  # pylint: disable=g-import-not-at-top
  _search_configs_first()
  for path in config_paths:
    _gin_call(lambda: gin.parse_config_file(str(path)), f'{_display(path)} (or a file it includes)')
  if bindings:
    _gin_call(lambda: gin.parse_config(list(bindings)), 'the --gin_param / flag bindings ' + repr(list(bindings)))


def _gin_call(fn: Callable[[], object], where: str) -> None:
  try:
    fn()
  except (ValueError, TypeError, SyntaxError, KeyError) as e:
    raise LaunchError(f'invalid gin configuration in {where}:\n{_indent(str(e))}') from None
  except tokenize.TokenError as e:
    raise LaunchError(f'gin syntax error in {where}: {e.args[0]} (line {e.args[1][0]})') from None
  except (IOError, OSError) as e:
    raise LaunchError(f'gin could not read a file in {where}:\n{_indent(str(e))}') from None
  except ImportError as e:
    raise LaunchError(f'an import statement in {where} failed: {e}') from None


def _indent(text: str) -> str:
  return '\n'.join('  ' + line for line in text.splitlines())


def _display(path: Path) -> str:
  try:
    return str(path.relative_to(Path.cwd()))
  except ValueError:
    return str(path)


def bound_configurables() -> Dict[str, bool]:
  """For each system key, whether the parsed configuration binds one of its marker configurables."""
  import gin  # pylint: disable=g-import-not-at-top
  found = {}
  for key, system in SYSTEMS.items():
    # resolve_references=False: resolving would call `@create_maze_env()` and the like.
    found[key] = any(gin.get_bindings(marker, resolve_references=False) for marker in system.markers)
  return found


def select_system(hiro_flags: Sequence[str], impala_flags: Sequence[str]) -> System:
  """Decides which system the parsed configuration runs; errors on a mixed or empty configuration."""
  found = [key for key, bound in bound_configurables().items() if bound]
  if len(found) > 1:
    raise LaunchError('the configuration binds both HIRO (train_uvf / evaluate) and IMPALA (experiment) '
                      'parameters; a run is one system: use one top-level config.')
  if not found:
    raise LaunchError('the configuration does not say which system to run: it binds no train_uvf / evaluate '
                      '(HIRO) nor experiment (IMPALA) parameter. Start from a top-level config:\n' +
                      '\n'.join('  ' + c for c in available_configs()))
  system = SYSTEMS[found[0]]
  if system.key == 'uvf' and impala_flags:
    raise LaunchError(f'IMPALA flags ({_flag_names(impala_flags)}) given with a HIRO configuration; HIRO settings '
                      f'are gin bindings: --gin_param "train_uvf.batch_size = 64".')
  if system.key == 'scalable_agent' and hiro_flags:
    raise LaunchError(f'HIRO flags ({_flag_names(hiro_flags)}) given with an IMPALA configuration.')
  return system


def _flag_names(bindings: Sequence[str]) -> str:
  return ', '.join('--' + b.split('=')[0].split('.')[-1].strip() for b in bindings)


# --------------------------------------------------------------------------------------------------------------------
# Run directories.

# Settings that change how long a run trains, or how often it logs and writes checkpoints, not what it computes: a
# rerun that differs from the run directory's `run.json` only in them continues the run, and says so. Any other
# difference is another configuration (refused).
CONTINUATION_PARAMS = (
    'train_uvf.num_episodes_train', 'train_uvf.save_interval_secs', 'train_uvf.save_summaries_secs',
    'train_uvf.log_every_n_steps', 'train_uvf.save_policy_every_n_steps', 'train_uvf.save_policy_interval_secs',
    'experiment.total_environment_frames', 'experiment.checkpoint_interval_s')
# IMPALA's learning rate decays linearly to 0 at total_environment_frames: a new total changes the decay's horizon.
_DECAY_HORIZON_PARAM = 'experiment.total_environment_frames'
# Bindings that do not make another configuration.
_NOT_CONFIGURATION = frozenset({f'evaluate.{name}' for name in _EVAL_SELECTION_PARAMS} | set(CONTINUATION_PARAMS))


def _bindings(manifest: dict) -> List[Tuple[str, str]]:
  """The bindings of a manifest's gin config (`gin.config_str()`) as (name, value) pairs, without its section
  comments; a long value that gin continued on indented lines is joined into one."""
  bindings = []
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


def _config_lines(manifest: dict) -> List[str]:
  """The bindings of a manifest's gin config, one 'name = value' line each."""
  return [f'{name} = {value}' for name, value in _bindings(manifest)]


def _binding_name(line: str) -> str:
  return line.split('=', 1)[0].strip()


def _manifest_key(manifest: dict) -> Tuple[str, str]:
  config = '\n'.join(f'{name} = {value}' for name, value in _bindings(manifest) if name not in _NOT_CONFIGURATION)
  return manifest.get('system', ''), config


def continued_settings(old: dict, new: dict) -> List[str]:
  """The `CONTINUATION_PARAMS` whose values differ between two manifests, as 'name: old -> new' lines."""
  before, after = dict(_bindings(old)), dict(_bindings(new))
  changes = []
  for name in CONTINUATION_PARAMS:
    if before.get(name) != after.get(name):
      changes.append(f'{name}: {before.get(name, "(default)")} -> {after.get(name, "(default)")}')
  return changes


def read_manifest(run_dir: Path) -> Optional[dict]:
  """The `run.json` of `run_dir`, or None if it has none.

  Raises:
    LaunchError: it cannot be read.
  """
  existing = run_dir / MANIFEST
  if not existing.is_file():
    return None
  try:
    return json.loads(existing.read_text())
  except (OSError, ValueError) as e:
    raise LaunchError(f'{existing} cannot be read ({e}); the directory is left untouched: choose another '
                      f'directory.') from None


def check_run_dir(run_dir: Path, manifest: dict) -> bool:
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
    raise LaunchError(f'{run_dir} exists and is not a directory; choose another --train_dir.')
  old = read_manifest(run_dir)
  if old is None:
    if any(p.name != LOCK for p in run_dir.iterdir()):
      raise LaunchError(f'{run_dir} is not empty and holds no {MANIFEST}: it is not a run directory of this '
                        f'project. Its files are left untouched; choose another --train_dir / --eval_dir.')
    return False
  if _manifest_key(old) == _manifest_key(manifest):
    return True
  if old.get('system') != manifest.get('system'):
    detail = f'it holds a {old.get("system")} run, this is a {manifest.get("system")} run'
  else:
    diff = list(difflib.unified_diff(_config_lines(old), _config_lines(manifest), 'existing run', 'this run', n=0,
                                     lineterm=''))
    shown = [line for line in diff if line[:1] in '+-' and line[:3] not in ('+++', '---')
             and _binding_name(line[1:]) not in _NOT_CONFIGURATION]
    more = f'\n  ... and {len(shown) - 12} more lines' if len(shown) > 12 else ''
    detail = 'its configuration differs:\n' + '\n'.join('  ' + line for line in shown[:12]) + more
  raise LaunchError(f'{run_dir} holds a run of another configuration ({old.get("config_name", "?")}); {detail}\n'
                    f'Nothing was changed. Use another --train_dir, or rerun with exactly that run\'s configuration '
                    f'to resume it (only its length and its logging and checkpoint intervals may differ: '
                    f'launcher.CONTINUATION_PARAMS).')


def write_manifest(run_dir: Path, manifest: dict) -> bool:
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


def _withdraw_manifest(run_dir: Path) -> None:
  """Removes the `run.json` and `config.gin` this process just wrote, if the run wrote nothing else: a fresh start
  that failed at once (e.g. an error the system raises while building) leaves the directory free for the corrected
  command."""
  try:
    if all(p.name in LAUNCHER_FILES for p in run_dir.iterdir()):
      for name in (MANIFEST, 'config.gin'):
        (run_dir / name).unlink(missing_ok=True)
  except OSError:
    pass


class RunLock:
  """One writer per run directory: the file `<run_dir>/run.lock`, locked (`flock`) for the life of the process.

  The file names its holder (host, PID, start time, command) while it is held and is emptied when released. The
  operating system releases the lock of a process that dies, even by kill -9: a lock file that still names a
  holder when the lock is free was left by a process that stopped without releasing it, and is taken over with a
  warning (`stale`). On a file system without locks (`flock` unsupported) the holder's PID is checked instead (on
  the same host; a holder on another host is trusted). The file is never deleted: deleting a lock file lets two
  processes hold locks on two different files.
  """

  def __init__(self, run_dir: Path):
    self.run_dir = run_dir
    self.path = run_dir / LOCK
    self.stale: Optional[dict] = None  # the holder named by a stale lock this process took over
    self._fd: Optional[int] = None

  @staticmethod
  def describe(holder: dict) -> str:
    command = ' '.join(holder.get('command', [])) or '?'
    return (f'PID {holder.get("pid", "?")} on host {holder.get("host", "?")}, started {holder.get("started", "?")}: '
            f'{command if len(command) <= 160 else command[:157] + "..."}')

  def _holder(self, fd: int) -> Optional[dict]:
    os.lseek(fd, 0, os.SEEK_SET)
    text = os.read(fd, 65536).decode(errors='replace').strip()
    if not text:
      return None
    try:
      holder = json.loads(text)
      return holder if isinstance(holder, dict) else {'text': text}
    except ValueError:
      return {'command': [text]}

  def _busy(self, holder: Optional[dict]) -> LaunchError:
    who = self.describe(holder) if holder else 'a process that has not written its name yet'
    return LaunchError(f'{self.run_dir} is in use by another process ({who}); one process writes a run directory '
                       f'at a time. Wait for it to stop (or stop it: it writes its checkpoint), or use another '
                       f'--train_dir.', exit_code=EXIT_RUN_DIR)

  def acquire(self) -> None:
    """Takes the lock, or raises `LaunchError` (EXIT_RUN_DIR) naming the process that holds it."""
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
      try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        locked = True
      except BlockingIOError:
        raise self._busy(self._holder(fd)) from None
      except OSError as e:
        if e.errno not in (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL):
          raise
        locked = False
      previous = self._holder(fd)
      if previous and not locked and _holder_alive(previous):
        raise self._busy(previous)
      if previous and previous.get('pid') != os.getpid():
        self.stale = previous
      me = {'host': socket.gethostname(), 'pid': os.getpid(),
            'started': datetime.datetime.now().isoformat(timespec='seconds'), 'command': list(sys.argv)}
      os.ftruncate(fd, 0)
      os.pwrite(fd, (json.dumps(me) + '\n').encode(), 0)
      os.fsync(fd)
    except BaseException:
      os.close(fd)
      raise
    self._fd = fd

  def release(self) -> None:
    """Empties the file (no holder) and releases the lock."""
    if self._fd is None:
      return
    try:
      os.ftruncate(self._fd, 0)
    except OSError:
      pass
    os.close(self._fd)  # closing releases the flock
    self._fd = None


def _holder_alive(holder: dict) -> bool:
  """Without file locks: whether the holder named in a lock file still runs (a holder on another host: assumed)."""
  if holder.get('host') != socket.gethostname():
    return True
  try:
    os.kill(int(holder.get('pid', -1)), 0)
  except (ProcessLookupError, ValueError, TypeError):
    return False
  except PermissionError:
    return True
  return True


def _free_space(path: Path) -> Optional[int]:
  """Free bytes on the file system of `path` (or of its nearest existing parent), None if unknown."""
  for candidate in [path, *path.absolute().parents]:
    if candidate.exists():
      try:
        return shutil.disk_usage(candidate).free
      except OSError:
        return None
  return None


def _format_bytes(n: Optional[int]) -> str:
  if n is None:
    return '? bytes'
  for unit in ('bytes', 'KB', 'MB', 'GB', 'TB'):
    if n < 1000 or unit == 'TB':
      return f'{n:.0f} {unit}' if unit == 'bytes' else f'{n:.1f} {unit}'
    n /= 1000.


def hold_run_dir(p: 'Plan') -> Optional[RunLock]:
  """Creates the plan's output directory, takes its lock and writes its `run.json` (unless it has one).

  Checks the directory again under the lock (another process may have started a run in it since `plan` looked).

  Returns:
    the held `RunLock` (release it when the program ends), or None when the program writes no directory.

  Raises:
    LaunchError: the directory cannot be created or written (exit 2), another process holds it, or the disk is full
      (EXIT_RUN_DIR).
  """
  if p.output_dir is None:
    return None
  run_dir = p.output_dir
  lock = RunLock(run_dir)
  try:
    run_dir.mkdir(parents=True, exist_ok=True)
    lock.acquire()
  except OSError as e:
    raise _write_error(run_dir, e) from None
  try:
    p.resumes = check_run_dir(run_dir, p.manifest)
    p.manifest['created'] = datetime.datetime.now().isoformat(timespec='seconds')
    p.manifest['command'] = sys.argv
    p.wrote_manifest = write_manifest(run_dir, p.manifest)
  except OSError as e:
    lock.release()
    raise _write_error(run_dir, e) from None
  except BaseException:
    lock.release()
    raise
  return lock


def _write_error(run_dir: Path, error: OSError) -> LaunchError:
  if error.errno in (errno.ENOSPC, errno.EDQUOT):
    return LaunchError(f'cannot write {run_dir}: the disk is full ({error.strerror}; {_format_bytes(_free_space(run_dir))} '
                       f'free). Free some space or use another --train_dir.', exit_code=EXIT_RUN_DIR)
  return LaunchError(f'cannot write the run directory {run_dir}: {error.strerror or error}'
                     f'{f" ({error.filename})" if error.filename else ""}. Choose a directory you can write '
                     f'(--train_dir / --logdir / --eval_dir).')


class StopSignals:
  """SIGINT / SIGTERM / SIGHUP (Ctrl-C; `timeout`, schedulers, `docker stop`; a closed terminal) while a program runs.

  The first asks the program to stop at its next safe point and write its checkpoint (`System.stop`; HIRO: the next
  episode end, IMPALA: after the current learner step) and says so on stderr; the program then returns as usual. A
  second signal, or the first for a program without a stop entry, raises KeyboardInterrupt at once (the program's
  last checkpoint stays the one to resume from). A signal ignored by the parent (SIGINT of a background job) stays
  ignored. `received` is the name of the first signal, None if none came.
  """
  SIGNALS = ('SIGINT', 'SIGTERM', 'SIGHUP')

  def __init__(self, program: str, request_stop: Optional[Callable[[str], None]]):
    self._program = program
    self._request_stop = request_stop
    self._count = 0
    self.received: Optional[str] = None
    self.signum: Optional[int] = None
    self._previous = {}

  def __enter__(self):
    for name in self.SIGNALS:
      signum = getattr(signal, name)
      previous = signal.getsignal(signum)
      if previous == signal.SIG_IGN:
        continue
      self._previous[signum] = previous
      signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc):
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    return False

  def _handle(self, signum, frame):
    del frame
    name = signal.Signals(signum).name
    self._count += 1
    if self._count == 1:
      self.received, self.signum = name, signum
    if self._count == 1 and self._request_stop is not None and self._request_stop(name):
      # os.write: a print here could interrupt a print of the main thread (reentrant call). A closed terminal
      # (SIGHUP) makes it fail: the stop goes on.
      try:
        os.write(2, f'run_{self._program}: {name} received: stopping at the next safe point and writing a '
                    f'checkpoint (send {name} again to stop at once, without one).\n'.encode())
      except OSError:
        pass
      return
    raise KeyboardInterrupt(name)


# --------------------------------------------------------------------------------------------------------------------
# The launch plan.

@dataclasses.dataclass
class Plan:
  """Everything decided before a run starts."""
  program: str
  system: System
  config_paths: List[Path]
  bindings: List[str]
  config_name: str
  train_dir: Path
  eval_dir: Optional[Path]
  output_dir: Optional[Path]  # the directory this program writes and guards
  manifest: dict
  resumes: bool
  continues: List[str] = dataclasses.field(default_factory=list)  # changed CONTINUATION_PARAMS, 'name: old -> new'
  wrote_manifest: bool = False  # set by `hold_run_dir`


def plan(program: str, argv: Sequence[str], fv: flags.FlagValues) -> Plan:
  """Resolves configs and flags, parses and validates gin, selects the system and checks the run directory.

  Writes nothing; raises `LaunchError` for any problem. `argv` is the positional remainder after flag parsing
  (argv[0] is the program).
  """
  if program not in PROGRAMS:
    raise ValueError(f'program must be one of {PROGRAMS}, got {program!r}')
  positional = list(argv[1:])
  for arg in positional:
    if arg.startswith('-'):
      raise LaunchError(f'unknown flag {arg}; see --help.')
  hiro_flags, impala_flags = flag_bindings(fv)
  config_args = positional + list(fv.config_file)
  if config_args:
    config_paths = [resolve_config_path(p) for p in config_args]
  elif impala_flags or _present(fv, 'logdir'):
    config_paths = [IMPALA_DEFAULT_CONFIG]
  else:
    listing = '\n'.join('  ' + c for c in available_configs())
    raise LaunchError(f'no config given. Usage: python run_{program}.py CONFIG.gin [--gin_param ...]\n'
                      f'Available configs:\n{listing}')
  name = 'impala' if config_paths == [IMPALA_DEFAULT_CONFIG] else config_name(config_paths)

  if program == 'eval' and _present(fv, 'mode') and fv.mode != 'test':
    raise LaunchError('run_eval runs IMPALA in --mode=test; use run_train.py for --mode=train.')
  if program == 'train' and _present(fv, 'checkpoint_path'):
    raise LaunchError('--checkpoint_path is run_eval\'s flag (the policy checkpoint to evaluate).')
  user_bindings = list(fv.params) + list(fv.gin_param)

  register_configurables()
  # The system is decided by the config files and the explicit gin bindings; the original flags are then checked
  # against it, and only then become bindings (a HIRO flag on an IMPALA config is a usage error, not a mixed config).
  parse_gin(config_paths, user_bindings)
  system = select_system(hiro_flags, impala_flags)
  flag_values = hiro_flags if system.key == 'uvf' else impala_flags
  if system.key == 'scalable_agent' and program == 'eval' and not _present(fv, 'mode'):
    flag_values = flag_values + ["experiment.mode = 'test'"]
  bindings = flag_values + user_bindings
  if flag_values:
    parse_gin(config_paths, bindings)
  _check_flag_compatibility(system, fv)

  effective = 'eval' if system.key == 'scalable_agent' and _impala_mode() == 'test' else program
  if system.preflight:
    try:
      _load(system.preflight)(effective)
    except ImportError as e:  # a missing optional dependency: the message says what to install
      raise LaunchError(str(e), exit_code=EXIT_UNAVAILABLE) from None
    except NotImplementedError as e:  # a setting of the original that is not ported
      raise LaunchError(str(e), exit_code=EXIT_UNAVAILABLE) from None
    except (ValueError, TypeError) as e:  # a bound value the system rejects (an unknown level, a count < 1, ...)
      raise LaunchError(str(e)) from None

  train_dir = _choose_dir(fv, ('train_dir', 'logdir', 'checkpoint_dir'), Path('runs') / name)
  eval_dir = None
  if system.key == 'uvf' and program == 'eval':
    eval_dir = Path(fv.eval_dir) if fv.eval_dir else train_dir / 'eval'
  output_dir = train_dir if effective == 'train' else eval_dir
  if system.key == 'scalable_agent' and effective == 'train' and _impala_actor_job():
    output_dir = None  # A multi-machine actor writes nothing: the learner owns the run directory.

  import gin  # pylint: disable=g-import-not-at-top
  manifest = {
      'system': system.key,
      'program': effective,
      'config_name': name,
      'config_files': [str(p) for p in config_paths],
      'bindings': bindings,
      'gin_config': gin.config_str(),
  }
  resumes = check_run_dir(output_dir, manifest) if output_dir is not None else False
  continues = continued_settings(read_manifest(output_dir), manifest) if resumes else []
  return Plan(program=effective, system=system, config_paths=config_paths, bindings=bindings, config_name=name,
              train_dir=train_dir, eval_dir=eval_dir, output_dir=output_dir, manifest=manifest, resumes=resumes,
              continues=continues)


def _impala_mode() -> str:
  import gin  # pylint: disable=g-import-not-at-top
  try:
    return gin.query_parameter('experiment.mode')
  except ValueError:  # not bound: the original default
    return 'train'


def _impala_actor_job() -> bool:
  """Whether the parsed configuration is an IMPALA actor job of multi-machine training (task >= 0)."""
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  return experiment.bound_value('task') >= 0 and experiment.bound_value('job_name') == 'actor'


def _choose_dir(fv: flags.FlagValues, names: Sequence[str], default: Path) -> Path:
  given = {n: fv[n].value for n in names if fv[n].value}
  values = set(os.path.abspath(v) for v in given.values())
  if len(values) > 1:
    raise LaunchError('conflicting run directories: ' + ', '.join(f'--{n}={v}' for n, v in given.items()) +
                      '; give one.')
  return Path(next(iter(given.values()))) if given else default


def _check_flag_compatibility(system: System, fv: flags.FlagValues) -> None:
  if system.key == 'uvf':
    if _present(fv, 'master') and fv.master not in ('', 'local'):
      raise LaunchError(f'--master={fv.master}: the TF1 distributed runtime does not exist in TF2; HIRO trains '
                        f'locally (use --master=local or leave it out).')
    if _present(fv, 'logdir'):
      raise LaunchError('--logdir is IMPALA\'s flag; HIRO uses --train_dir.')
  elif _present(fv, 'checkpoint_dir') or _present(fv, 'eval_dir'):
    raise LaunchError('--checkpoint_dir / --eval_dir are HIRO\'s flags; IMPALA reads and writes --logdir '
                      '(or --train_dir).')


def check_implemented(p: Plan) -> None:
  """Raises `LaunchError` if the program the plan runs is still a placeholder (its issue is open)."""
  missing = getattr(_load(p.system.entry[p.program]), 'not_implemented', None)
  if missing:
    raise LaunchError(f'{p.system.title}: {missing} is not implemented yet. The configuration is valid; nothing '
                      f'was written.', exit_code=EXIT_UNAVAILABLE)


def execute(p: Plan) -> None:
  """Runs a plan: records the configuration in the output directory (unless `hold_run_dir` did), then runs the
  system. User errors of the system (exceptions with a true `user_error`) become `LaunchError`s with their
  `exit_code` (default EXIT_USAGE)."""
  entry = _load(p.system.entry[p.program])
  if p.output_dir is not None and not (p.output_dir / MANIFEST).exists():
    p.manifest.setdefault('created', datetime.datetime.now().isoformat(timespec='seconds'))
    p.manifest.setdefault('command', sys.argv)
    try:
      p.wrote_manifest = write_manifest(p.output_dir, p.manifest) or p.wrote_manifest
    except OSError as e:
      raise _write_error(p.output_dir, e) from None
  import gin  # pylint: disable=g-import-not-at-top
  if not gin.config_is_locked():
    gin.finalize()
  try:
    if p.system.key == 'uvf':
      if p.program == 'train':
        entry(str(p.train_dir))
      else:
        entry(str(p.train_dir), str(p.eval_dir))
    else:
      entry(logdir=str(p.train_dir))
  except Exception as e:  # pylint: disable=broad-except
    if p.wrote_manifest:
      _withdraw_manifest(p.output_dir)
    if getattr(e, 'user_error', False):  # e.g. uvf.eval.EvalError: a message that names the problem and the fix
      # gin appends "In call to configurable '...'" lines to exceptions raised inside a configurable: not news here.
      message = '\n'.join(line for line in str(e).splitlines()
                          if not line.strip().startswith('In call to configurable'))
      raise LaunchError(message.rstrip(), exit_code=getattr(e, 'exit_code', EXIT_USAGE)) from None
    raise


def first_screen(program: str, p: Plan) -> str:
  """The lines a run starts with: what runs, where it writes, where TensorBoard reads. (The system's own first
  lines follow: the steps or frames planned, then progress.)"""
  configs = ', '.join(_display(path) for path in p.config_paths)
  lines = [f'run_{program}: {p.system.title}, config {p.config_name} ({configs})']
  state = 'resuming the run there' if p.resumes else 'a new run'
  if p.system.key == 'uvf' and p.program == 'eval':
    lines.append(f'  evaluating the policy checkpoints of {p.train_dir}; results in {p.eval_dir} ({state})')
  elif p.program == 'eval':  # IMPALA's test mode
    lines.append(f'  testing the newest checkpoint of {p.train_dir}; results in {p.train_dir}/test_results-*.json')
  elif p.output_dir is None:  # a multi-machine IMPALA actor
    lines.append('  actor job: nothing is written here (the learner owns the run directory)')
  else:
    lines.append(f'  run directory {p.output_dir} ({state})')
  if p.output_dir is not None:
    lines.append(f'  TensorBoard: tensorboard --logdir {p.output_dir}')
  return '\n'.join(lines)


def run(program: str) -> None:
  """Runs `main` as an absl app for `run_<program>.py`; `--help` exits with status 0 (absl's exits with 1)."""
  from absl import app  # pylint: disable=g-import-not-at-top

  def app_main(argv):
    console.protect_streams()
    if flags.FLAGS['verbosity'].present:  # absl's flag: third-party output at that level too
      console.verbose(flags.FLAGS.verbosity)
    else:
      console.quiet()
    sys.exit(main(program, argv))

  try:
    app.run(app_main)
  except SystemExit as e:
    asked_help = any(a in ('--help', '-h', '-?', '--helpshort', '--helpfull') for a in sys.argv[1:])
    if asked_help and e.code == 1:
      sys.exit(0)
    raise


def main(program: str, argv: Sequence[str], fv: flags.FlagValues = flags.FLAGS) -> int:
  """Entry point of run_train.py / run_eval.py; returns the exit status."""
  lock = None
  signals = None
  try:
    p = plan(program, argv, fv)
    check_implemented(p)
    lock = hold_run_dir(p)
    print(first_screen(program, p), flush=True)
    if p.continues:
      what = 'continuing the run with ' + '; '.join(p.continues)
      if any(change.startswith(_DECAY_HORIZON_PARAM) for change in p.continues):
        what += (' (the learning rate decays linearly to 0 at total_environment_frames: from here it follows the '
                 'new horizon)')
      print(f'  {what}', flush=True)
    if lock is not None and lock.stale:
      print(f'run_{program}: warning: took over the lock of {lock.run_dir} from a process that stopped without '
            f'releasing it ({RunLock.describe(lock.stale)}); it was killed or crashed, and its run resumes from its '
            f'last checkpoint.', file=sys.stderr, flush=True)
    stop = p.system.stop.get(p.program)
    with StopSignals(program, _load(stop) if stop else None) as signals:
      execute(p)
  except LaunchError as e:
    print(f'run_{program}: error: {e}', file=sys.stderr, flush=True)
    return e.exit_code
  except KeyboardInterrupt:
    name = signals.received if signals is not None and signals.received else 'SIGINT'
    resume = ('; the run resumes from its last checkpoint with the same command' if lock is not None and
              p.program == 'train' else '')
    print(f'run_{program}: stopped at once by {name}{resume}.', file=sys.stderr, flush=True)
    return EXIT_SIGNAL_BASE + getattr(signal, name)
  finally:
    if lock is not None:
      lock.release()
  if signals is not None and signals.received:
    print(f'run_{program}: stopped by {signals.received} after writing the checkpoint; the same command resumes '
          f'the run.', file=sys.stderr, flush=True)
    return EXIT_SIGNAL_BASE + signals.signum
  return 0
