"""The two systems the launcher runs, HIRO (`uvf`) and IMPALA (`scalable_agent`), and which one a configuration is.

The launcher reaches a system only through the `'module:function'` names of its `System` record (imported when
needed, `load`), so that importing the launcher imports neither system.
"""

import dataclasses
import importlib
from typing import Any, Callable, Dict, Optional, Sequence, Tuple

from launcher import errors
from launcher import gin_config


@dataclasses.dataclass(frozen=True)
class System:
  """One of the two systems the launcher can run.

  Attributes:
    key: package name.
    title: for messages.
    gin_modules: modules to import so that every gin name of the system is registered.
    markers: configurables whose bindings identify a configuration of this system.
    entry: `program -> 'module:function'`, the function `run` calls.
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
    'uvf':
        System(key='uvf', title='HIRO (uvf)', gin_modules=('uvf.configurables',), markers=('train_uvf', 'evaluate'),
               entry={
                   'train': 'uvf.train:train_uvf',
                   'eval': 'uvf.eval:evaluate'
               }, preflight='uvf.train:preflight', stop={'train': 'uvf.run_loop:request_stop'}),
    'scalable_agent':
        System(key='scalable_agent', title='IMPALA (scalable_agent)', gin_modules=('scalable_agent.experiment',),
               markers=('experiment',), entry={
                   'train': 'scalable_agent.experiment:experiment',
                   'eval': 'scalable_agent.experiment:experiment'
               }, preflight='scalable_agent.experiment:preflight',
               stop={'train': 'scalable_agent.progress:request_stop'}),
}


def load(spec: str) -> Callable[..., Any]:
  """The function a `'module:function'` name names (its module imported)."""
  module, name = spec.split(':')
  function: Callable[..., Any] = getattr(importlib.import_module(module), name)
  return function


def register_configurables() -> None:
  """Imports every system's gin modules, so that any gin name of either system parses."""
  for system in SYSTEMS.values():
    for module in system.gin_modules:
      importlib.import_module(module)


def bound_configurables() -> Dict[str, bool]:
  """For each system key, whether the parsed configuration binds one of its marker configurables."""
  import gin  # pylint: disable=g-import-not-at-top
  found = {}
  for key, system in SYSTEMS.items():
    # resolve_references=False: resolving would call `@create_maze_env()` and the like.
    found[key] = any(gin.get_bindings(marker, resolve_references=False) for marker in system.markers)
  return found


def select_system(hiro_flags: Sequence[str], impala_flags: Sequence[str]) -> System:
  """Decides which system the parsed configuration runs; errors on a mixed or empty configuration.

  Args:
    hiro_flags: the gin bindings of the HIRO flags the user gave (`gin_config.flag_bindings`).
    impala_flags: those of the IMPALA flags.
  """
  found = [key for key, bound in bound_configurables().items() if bound]
  if len(found) > 1:
    raise errors.LaunchError('the configuration binds both HIRO (train_uvf / evaluate) and IMPALA (experiment) '
                             'parameters; a run is one system: use one top-level config.')
  if not found:
    raise errors.LaunchError('the configuration does not say which system to run: it binds no train_uvf / evaluate '
                             '(HIRO) nor experiment (IMPALA) parameter. Start from a top-level config:\n' +
                             '\n'.join('  ' + c for c in gin_config.available_configs()))
  system = SYSTEMS[found[0]]
  if system.key == 'uvf' and impala_flags:
    raise errors.LaunchError(f'IMPALA flags ({_flag_names(impala_flags)}) given with a HIRO configuration; HIRO '
                             f'settings are gin bindings: --gin_param "train_uvf.batch_size = 64".')
  if system.key == 'scalable_agent' and hiro_flags:
    raise errors.LaunchError(f'HIRO flags ({_flag_names(hiro_flags)}) given with an IMPALA configuration.')
  return system


def _flag_names(bindings: Sequence[str]) -> str:
  return ', '.join('--' + b.split('=')[0].split('.')[-1].strip() for b in bindings)
