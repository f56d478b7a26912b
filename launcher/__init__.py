"""Command-line front end shared by `run_train.py` and `run_eval.py` (installed as a package: the commands
`hiro-impala-train` and `hiro-impala-eval`).

The scripts stay thin: they call `programs.script_main`, which calls `prepare_process()`, defines the flags below
(`define_flags`) and hands over to `run`. The work is, in order,

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
8. run the system; SIGINT / SIGTERM / SIGHUP ask it to stop at its next safe point and write its checkpoint
   (`StopSignals`).

Every user error ends with one short message and a non-zero exit status (`EXIT_*`), never a traceback.
docs/design/reliability.md gives the guarantees (what a kill can lose, disk needed, lock semantics).

Modules, one job each, in import order: each imports only modules above it (in brackets), never a name of this
`__init__`, so the package has no import cycle (tests/test_architecture.py checks it):

  console     what reaches the screen: the native-stderr relay, `protect_streams`, logging setup (imports nothing
              of the project)
  errors      `LaunchError`, the exit statuses (`rundir.errors`)
  flags       the flags of both scripts (defaults of IMPALA's from `scalable_agent.original_flags`),
              `prepare_process`                                                      [console]
  gin_config  config paths and their resolution, flags to bindings, the gin parse   [errors, flags]
  systems     the two systems (`SYSTEMS`), loading their entries, which one a configuration is
                                                                                     [errors, gin_config]
  manifest    `run.json`: read / check / write / withdraw, continuations, `hold_run_dir` (the guard and the lock)
                                                                                     [errors]
  signals     `StopSignals`                                                          (nothing)
  planning    `Plan`, `plan`                                 [errors, flags, gin_config, systems, manifest]
  entry       `execute`, `first_screen`, `run`, `main`       [console, errors, gin_config, manifest, planning,
                                                              signals, systems]
  programs    the usage texts, `script_main` (the scripts), `train_main` / `eval_main` (the installed commands)
                                                                                     [entry, flags]

Public API (re-exported here):
  programs     prepare_process, define_flags, run, main, plan, Plan, execute, first_screen, script_main,
               train_main, eval_main
  gin          parse_gin, register_configurables, resolve_config_path, available_configs, config_name, includes,
               bound_configurables, select_system, CONFIG_DIR, REPO_ROOT
  systems      SYSTEMS, System, IMPALA_FLAGS
  run dirs     check_run_dir, write_manifest, read_manifest, continued_settings, CONTINUATION_PARAMS, RunLock
               (`rundir.lock.RunLock`), StopSignals
  errors       LaunchError, EXIT_USAGE, EXIT_UNAVAILABLE, EXIT_RUN_DIR, EXIT_DIVERGED, EXIT_SIGNAL_BASE
               (`rundir.errors`)
  console      the module `launcher.console`

Importing the launcher imports no TensorFlow and no code of either system (of `scalable_agent` only
`original_flags`, which imports nothing), and changes no environment variable.
"""

from launcher import console
from launcher.entry import execute
from launcher.entry import first_screen
from launcher.entry import main
from launcher.entry import run
from launcher.errors import LaunchError
from launcher.flags import define_flags
from launcher.flags import IMPALA_FLAGS
from launcher.flags import prepare_process
from launcher.gin_config import available_configs
from launcher.gin_config import CONFIG_DIR
from launcher.gin_config import config_name
from launcher.gin_config import includes
from launcher.gin_config import parse_gin
from launcher.gin_config import REPO_ROOT
from launcher.gin_config import resolve_config_path
from launcher.manifest import check_run_dir
from launcher.manifest import CONTINUATION_PARAMS
from launcher.manifest import continued_settings
from launcher.manifest import read_manifest
from launcher.manifest import write_manifest
from launcher.planning import Plan
from launcher.planning import plan
from launcher.programs import eval_main
from launcher.programs import script_main
from launcher.programs import train_main
from launcher.signals import StopSignals
from launcher.systems import bound_configurables
from launcher.systems import register_configurables
from launcher.systems import select_system
from launcher.systems import System
from launcher.systems import SYSTEMS
from rundir.errors import EXIT_DIVERGED
from rundir.errors import EXIT_RUN_DIR
from rundir.errors import EXIT_SIGNAL_BASE
from rundir.errors import EXIT_UNAVAILABLE
from rundir.errors import EXIT_USAGE
from rundir.lock import RunLock

__all__ = [
    'available_configs',
    'bound_configurables',
    'check_run_dir',
    'CONFIG_DIR',
    'config_name',
    'console',
    'CONTINUATION_PARAMS',
    'continued_settings',
    'define_flags',
    'eval_main',
    'execute',
    'EXIT_DIVERGED',
    'EXIT_RUN_DIR',
    'EXIT_SIGNAL_BASE',
    'EXIT_UNAVAILABLE',
    'EXIT_USAGE',
    'first_screen',
    'IMPALA_FLAGS',
    'includes',
    'LaunchError',
    'main',
    'parse_gin',
    'Plan',
    'plan',
    'prepare_process',
    'read_manifest',
    'register_configurables',
    'REPO_ROOT',
    'resolve_config_path',
    'run',
    'RunLock',
    'script_main',
    'select_system',
    'StopSignals',
    'System',
    'SYSTEMS',
    'train_main',
    'write_manifest',
]
