"""The launch plan: everything decided before a run starts, and checked before anything is written (`plan`).

In order: resolve the gin files (positional arguments, or HIRO's original `--config_file` flags; with neither,
IMPALA's original flags alone select IMPALA's defaults, as the original `experiment.py` needed no config file); turn
every flag the user gave into a gin binding; parse and validate all of it with gin; decide which system runs; check
what that configuration needs (the system's pre-flight: an optional dependency such as DeepMind Lab, a bad value);
choose the output directory and check that it may receive this run (`manifest.check_run_dir`).
"""

import dataclasses
import os
from pathlib import Path
from typing import Any, Dict, List, Optional, Sequence

from absl import flags

from launcher import errors
from launcher import flags as launcher_flags
from launcher import gin_config
from launcher import manifest as manifest_lib
from launcher import systems

PROGRAMS = ('train', 'eval')


@dataclasses.dataclass
class Plan:
  """Everything decided before a run starts."""
  program: str
  system: systems.System
  config_paths: List[Path]
  bindings: List[str]
  config_name: str
  train_dir: Path
  eval_dir: Optional[Path]
  output_dir: Optional[Path]  # the directory this program writes and guards
  manifest: Dict[str, Any]
  resumes: bool
  continues: List[str] = dataclasses.field(default_factory=list)  # changed CONTINUATION_PARAMS, 'name: old -> new'
  wrote_manifest: bool = False  # set by `manifest.hold_run_dir`


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
      raise errors.LaunchError(f'unknown flag {arg}; see --help.')
  hiro_flags, impala_flags = gin_config.flag_bindings(fv)
  config_args = positional + list(fv.config_file)
  if config_args:
    config_paths = [gin_config.resolve_config_path(p) for p in config_args]
  elif impala_flags or launcher_flags.present(fv, 'logdir'):
    config_paths = [gin_config.IMPALA_DEFAULT_CONFIG]
  else:
    listing = '\n'.join('  ' + c for c in gin_config.available_configs())
    raise errors.LaunchError(f'no config given. Usage: python run_{program}.py CONFIG.gin [--gin_param ...]\n'
                             f'Available configs:\n{listing}')
  name = 'impala' if config_paths == [gin_config.IMPALA_DEFAULT_CONFIG] else gin_config.config_name(config_paths)

  if program == 'eval' and launcher_flags.present(fv, 'mode') and fv.mode != 'test':
    raise errors.LaunchError('run_eval runs IMPALA in --mode=test; use run_train.py for --mode=train.')
  if program == 'train' and launcher_flags.present(fv, 'checkpoint_path'):
    raise errors.LaunchError('--checkpoint_path is run_eval\'s flag (the policy checkpoint to evaluate).')
  user_bindings = list(fv.params) + list(fv.gin_param)

  systems.register_configurables()
  # The system is decided by the config files and the explicit gin bindings; the original flags are then checked
  # against it, and only then become bindings (a HIRO flag on an IMPALA config is a usage error, not a mixed config).
  gin_config.parse_gin(config_paths, user_bindings)
  system = systems.select_system(hiro_flags, impala_flags)
  flag_values = hiro_flags if system.key == 'uvf' else impala_flags
  if system.key == 'scalable_agent' and program == 'eval' and not launcher_flags.present(fv, 'mode'):
    flag_values = flag_values + ["experiment.mode = 'test'"]
  bindings = flag_values + user_bindings
  if flag_values:
    gin_config.parse_gin(config_paths, bindings)
  _check_flag_compatibility(system, fv)

  effective = 'eval' if system.key == 'scalable_agent' and _impala_mode() == 'test' else program
  if system.preflight:
    try:
      systems.load(system.preflight)(effective)
    except ImportError as e:  # a missing optional dependency: the message says what to install
      raise errors.LaunchError(str(e), exit_code=errors.EXIT_UNAVAILABLE) from None
    except NotImplementedError as e:  # a setting of the original that is not ported
      raise errors.LaunchError(str(e), exit_code=errors.EXIT_UNAVAILABLE) from None
    except (ValueError, TypeError) as e:  # a bound value the system rejects (an unknown level, a count < 1, ...)
      raise errors.LaunchError(str(e)) from None

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
  resumes = manifest_lib.check_run_dir(output_dir, manifest) if output_dir is not None else False
  old = manifest_lib.read_manifest(output_dir) if resumes and output_dir is not None else None
  continues = manifest_lib.continued_settings(old, manifest) if old is not None else []
  return Plan(program=effective, system=system, config_paths=config_paths, bindings=bindings, config_name=name,
              train_dir=train_dir, eval_dir=eval_dir, output_dir=output_dir, manifest=manifest, resumes=resumes,
              continues=continues)


def _impala_mode() -> str:
  import gin  # pylint: disable=g-import-not-at-top
  try:
    mode: str = gin.query_parameter('experiment.mode')
    return mode
  except ValueError:  # not bound: the original default
    return 'train'


def _impala_actor_job() -> bool:
  """Whether the parsed configuration is an IMPALA actor job of multi-machine training (task >= 0)."""
  from scalable_agent import experiment  # pylint: disable=g-import-not-at-top
  actor_job: bool = experiment.bound_value('task') >= 0 and experiment.bound_value('job_name') == 'actor'
  return actor_job


def _choose_dir(fv: flags.FlagValues, names: Sequence[str], default: Path) -> Path:
  given: Dict[str, Any] = {n: fv[n].value for n in names if fv[n].value}
  values = set(os.path.abspath(v) for v in given.values())
  if len(values) > 1:
    raise errors.LaunchError('conflicting run directories: ' + ', '.join(f'--{n}={v}' for n, v in given.items()) +
                             '; give one.')
  return Path(next(iter(given.values()))) if given else default


def _check_flag_compatibility(system: systems.System, fv: flags.FlagValues) -> None:
  if system.key == 'uvf':
    if launcher_flags.present(fv, 'master') and fv.master not in ('', 'local'):
      raise errors.LaunchError(f'--master={fv.master}: the TF1 distributed runtime does not exist in TF2; HIRO '
                               f'trains locally (use --master=local or leave it out).')
    if launcher_flags.present(fv, 'logdir'):
      raise errors.LaunchError('--logdir is IMPALA\'s flag; HIRO uses --train_dir.')
  elif launcher_flags.present(fv, 'checkpoint_dir') or launcher_flags.present(fv, 'eval_dir'):
    raise errors.LaunchError('--checkpoint_dir / --eval_dir are HIRO\'s flags; IMPALA reads and writes --logdir '
                             '(or --train_dir).')
