"""Command-line front end shared by `run_train.py` and `run_eval.py`.

The scripts stay thin: they define the flags below and hand over to `main`. The work here is, in order,

1. resolve the gin files (positional arguments, or HIRO's original `--config_file` flags; with neither, IMPALA's
   original flags alone select IMPALA's defaults, as the original `experiment.py` needed no config file);
2. turn every flag the user gave into a gin binding (`--gin_param`, HIRO's `--params`, IMPALA's `--level_name` ...);
3. parse and validate all of it with gin, before any heavy work;
4. decide from the configuration which system runs (HIRO / `uvf` or IMPALA / `scalable_agent`);
5. check what that configuration needs (an optional dependency such as DeepMind Lab);
6. guard the output directory: a run directory belongs to one configuration (`run.json` records it), and a
   directory holding another run, or anything that is not a run, is refused; nothing is ever overwritten;
7. run the system, or stop with a clear "not implemented yet" message while its issue is open.

Every user error ends with one short message and a non-zero exit status, never a traceback.
"""

from __future__ import annotations

import dataclasses
import datetime
import difflib
import importlib
import json
import os
import sys
import tokenize
from pathlib import Path
from typing import Callable, Dict, List, Optional, Sequence, Tuple

from absl import flags

import console  # sets TF_CPP_MIN_LOG_LEVEL before TensorFlow loads (console.py)

REPO_ROOT = Path(__file__).resolve().parent
CONFIG_DIR = REPO_ROOT / 'configs'
# Where a relative config path is looked for when it is not found from the current directory. `configs/uvf` mirrors
# the original efficient-hrl layout, so the original `--config_file configs/base_uvf.gin` and
# `--config_file context/configs/ant_maze.gin` arguments resolve unchanged.
CONFIG_SEARCH_ROOTS = (CONFIG_DIR, CONFIG_DIR / 'uvf')
# IMPALA's original command line had no config file: its flags alone, over these defaults.
IMPALA_DEFAULT_CONFIG = CONFIG_DIR / 'scalable_agent' / 'experiment.gin'
MANIFEST = 'run.json'
PROGRAMS = ('train', 'eval')

# Exit statuses.
EXIT_USAGE = 2  # bad command line, config or binding
EXIT_UNAVAILABLE = 3  # a missing optional dependency, or a system that is not implemented yet


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
_IMPALA_FLAGS = ('mode', 'test_num_episodes', 'task', 'job_name', 'total_environment_frames', 'num_actors',
                 'batch_size', 'unroll_length', 'num_action_repeats', 'seed', 'entropy_cost', 'baseline_cost',
                 'discounting', 'reward_clipping', 'dataset_path', 'level_name', 'width', 'height', 'learning_rate',
                 'decay', 'momentum', 'epsilon')
# Flags of multi-machine IMPALA (issue #8, not in the original), also `experiment.<flag>` bindings:
# scalable_agent/distributed.py, docs/impala_distributed.md.
_IMPALA_DISTRIBUTED_FLAGS = ('learner_address', 'reverb_port')


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
  """
  key: str
  title: str
  gin_modules: Tuple[str, ...]
  markers: Tuple[str, ...]
  entry: Dict[str, str]
  preflight: Optional[str] = None


SYSTEMS: Dict[str, System] = {
    'uvf': System(
        key='uvf', title='HIRO (uvf)',
        gin_modules=('uvf.configurables',),
        markers=('train_uvf', 'evaluate'),
        entry={'train': 'uvf.train:train_uvf', 'eval': 'uvf.eval:evaluate'}),
    'scalable_agent': System(
        key='scalable_agent', title='IMPALA (scalable_agent)',
        gin_modules=('scalable_agent.experiment',),
        markers=('experiment',),
        entry={'train': 'scalable_agent.experiment:experiment', 'eval': 'scalable_agent.experiment:experiment'},
        preflight='scalable_agent.experiment:preflight'),
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
  impala = [f'experiment.{name} = {fv[name].value!r}' for name in _IMPALA_FLAGS + _IMPALA_DISTRIBUTED_FLAGS
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


def _parse_gin_unlocked(config_paths: Sequence[Path], bindings: Sequence[str]) -> None:
  import gin  # pylint: disable=g-import-not-at-top
  # `include 'uvf/configs/base_uvf.gin'` resolves under configs/. First in the search path, so that gin does not
  # log a failed lookup in the current directory for every include.
  prefixes = gin.config._LOCATION_PREFIXES  # pylint: disable=protected-access
  if str(CONFIG_DIR) not in prefixes:
    prefixes.insert(0, str(CONFIG_DIR))
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

def _manifest_key(manifest: dict) -> Tuple[str, str]:
  selection = {f'evaluate.{name}' for name in _EVAL_SELECTION_PARAMS}
  config = '\n'.join(line for line in manifest.get('gin_config', '').splitlines()
                     if line.split('=', 1)[0].strip() not in selection)
  return manifest.get('system', ''), config


def check_run_dir(run_dir: Path, manifest: dict) -> bool:
  """Checks that `run_dir` may receive the run described by `manifest`; writes nothing.

  Returns:
    True if `run_dir` already holds a run of the same configuration (the run resumes there), False if it does not
    exist or is empty.

  Raises:
    LaunchError: `run_dir` is a file, holds a run of another configuration, or holds files but no `run.json`.
  """
  if not run_dir.exists():
    return False
  if not run_dir.is_dir():
    raise LaunchError(f'{run_dir} exists and is not a directory; choose another --train_dir.')
  existing = run_dir / MANIFEST
  if not existing.is_file():
    if any(run_dir.iterdir()):
      raise LaunchError(f'{run_dir} is not empty and holds no {MANIFEST}: it is not a run directory of this '
                        f'project. Its files are left untouched; choose another --train_dir / --eval_dir.')
    return False
  try:
    old = json.loads(existing.read_text())
  except (OSError, ValueError) as e:
    raise LaunchError(f'{existing} cannot be read ({e}); the directory is left untouched: choose another '
                      f'directory.') from None
  if _manifest_key(old) == _manifest_key(manifest):
    return True
  if old.get('system') != manifest.get('system'):
    detail = f'it holds a {old.get("system")} run, this is a {manifest.get("system")} run'
  else:
    def bindings(config):  # the binding lines of gin.config_str(), without its section comments
      return [line for line in config.splitlines() if line.strip() and not line.startswith('#')]
    diff = list(difflib.unified_diff(bindings(old.get('gin_config', '')), bindings(manifest['gin_config']),
                                     'existing run', 'this run', n=0, lineterm=''))
    shown = [line for line in diff if line[:1] in '+-' and line[:3] not in ('+++', '---')]
    more = f'\n  ... and {len(shown) - 12} more lines' if len(shown) > 12 else ''
    detail = 'its configuration differs:\n' + '\n'.join('  ' + line for line in shown[:12]) + more
  raise LaunchError(f'{run_dir} holds a run of another configuration ({old.get("config_name", "?")}); {detail}\n'
                    f'Nothing was changed. Use another --train_dir, or rerun with exactly that run\'s configuration '
                    f'to resume it.')


def write_manifest(run_dir: Path, manifest: dict) -> None:
  """Creates `run_dir` and records the configuration it belongs to (`run.json` and `config.gin`)."""
  run_dir.mkdir(parents=True, exist_ok=True)
  if not (run_dir / MANIFEST).exists():
    tmp = run_dir / (MANIFEST + '.tmp')
    tmp.write_text(json.dumps(manifest, indent=2) + '\n')
    tmp.replace(run_dir / MANIFEST)
    (run_dir / 'config.gin').write_text(manifest['gin_config'])


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

  if system.preflight:
    try:
      _load(system.preflight)()
    except ImportError as e:  # a missing optional dependency: the message says what to install
      raise LaunchError(str(e), exit_code=EXIT_UNAVAILABLE) from None
    except ValueError as e:  # a bound value the system rejects (an unknown level, ...)
      raise LaunchError(str(e)) from None

  train_dir = _choose_dir(fv, ('train_dir', 'logdir', 'checkpoint_dir'), Path('runs') / name)
  eval_dir = None
  if system.key == 'uvf' and program == 'eval':
    eval_dir = Path(fv.eval_dir) if fv.eval_dir else train_dir / 'eval'
  effective = 'eval' if system.key == 'scalable_agent' and _impala_mode() == 'test' else program
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
  return Plan(program=effective, system=system, config_paths=config_paths, bindings=bindings, config_name=name,
              train_dir=train_dir, eval_dir=eval_dir, output_dir=output_dir, manifest=manifest, resumes=resumes)


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
  """Runs a plan: records the configuration in the output directory, then runs the system."""
  entry = _load(p.system.entry[p.program])
  p.manifest['created'] = datetime.datetime.now().isoformat(timespec='seconds')
  p.manifest['command'] = sys.argv
  if p.output_dir is not None:
    write_manifest(p.output_dir, p.manifest)
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
  except (ValueError, RuntimeError) as e:
    # e.g. uvf.eval.EvalError, uvf.environments.rendering.RenderingUnavailableError: a message that names the problem
    # and the fix, and optionally the exit status.
    if getattr(e, 'user_error', False):
      # gin appends "In call to configurable '...'" lines to exceptions raised inside a configurable: not news here.
      message = '\n'.join(line for line in str(e).splitlines()
                          if not line.strip().startswith('In call to configurable'))
      raise LaunchError(message.rstrip(), getattr(e, 'exit_code', EXIT_USAGE)) from None
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
  try:
    p = plan(program, argv, fv)
    check_implemented(p)
    print(first_screen(program, p), flush=True)
    execute(p)
  except LaunchError as e:
    print(f'run_{program}: error: {e}', file=sys.stderr, flush=True)
    return e.exit_code
  return 0
