"""Gin: where config files are found, the original flags as bindings, and the parse with its errors as messages.

A config file and the files it includes are looked up under configs/ first, then from the current directory, so that
a file of the same relative name in the current directory never shadows the repository's. gin's own search puts the
current directory first, and its public API can only append to its search path (`gin.add_config_file_search_path`):
so the launcher reads each config file itself and hands gin its text with every include named by the file it
resolves to (`_parse_config_file`). An include of an included file (none in configs/) is gin's to find: from the
current directory, then under configs/ (appended to gin's search path).

configs/ (`CONFIG_DIR`) is the checkout's; an installed wheel carries the same tree inside the `launcher` package,
so that `configs/ant_maze.gin` and `ant_maze.gin` name the same file from any directory.
"""

import io
import os
from pathlib import Path
import re
import tokenize
from typing import Callable, List, Optional, Sequence, Tuple, Union

from absl import flags

from launcher import errors
from launcher import flags as launcher_flags

# The folder that holds the `launcher` package: the checkout of the repository (also under an editable install), or
# the site-packages folder of an installed wheel.
REPO_ROOT = Path(__file__).resolve().parents[1]
# A wheel carries the repository's configs/ tree inside the package, as the folder `configs` of `launcher` (a checkout
# never has that folder); a checkout, or an editable install, reads its own configs/.
PACKAGE_CONFIG_DIR = Path(__file__).resolve().parent / 'configs'
CONFIG_DIR = PACKAGE_CONFIG_DIR if PACKAGE_CONFIG_DIR.is_dir() else REPO_ROOT / 'configs'
# Where a relative config path is looked for when it is not found from the current directory. `configs/uvf` mirrors
# the original efficient-hrl layout, so the original `--config_file configs/base_uvf.gin` and
# `--config_file context/configs/ant_maze.gin` arguments resolve unchanged.
CONFIG_SEARCH_ROOTS = (CONFIG_DIR, CONFIG_DIR / 'uvf')
# IMPALA's original command line had no config file: its flags alone, over these defaults.
IMPALA_DEFAULT_CONFIG = CONFIG_DIR / 'scalable_agent' / 'experiment.gin'

# An include statement of a gin file: `include 'uvf/configs/base_uvf.gin'` (a string without quotes or escapes).
_INCLUDE = re.compile(r'''^(?P<head>\s*include\s+)(?P<quote>['"])(?P<name>[^'"\\\n]+)(?P=quote)''', re.MULTILINE)
_SEARCH_PATH_ADDED: List[bool] = []  # [True] once configs/ is on gin's search path

# --------------------------------------------------------------------------------------------------------------------
# Config files.


def available_configs() -> List[str]:
  """The ready-to-run top-level configs as users type them, `configs/<name>.gin`: relative to the repository root in a
  checkout, and accepted from any directory (`resolve_config_path`)."""
  return sorted(str(p.relative_to(CONFIG_DIR.parent)) for p in CONFIG_DIR.glob('*.gin'))


def includes(path: Union[str, os.PathLike[str]]) -> List[str]:
  """The names the include statements of the gin file `path` give (its own, not those of the files it includes), as
  written (e.g. 'uvf/configs/base_uvf.gin')."""
  with open(path, encoding='utf-8') as f:
    return [m['name'] for m in _INCLUDE.finditer(f.read())]


def resolve_config_path(path: str) -> Path:
  """Finds a gin file: as given (from the current directory), else under each of `CONFIG_SEARCH_ROOTS`.

  Raises:
    LaunchError: naming the path and listing the available configs.
  """
  candidates = [Path(path)]
  if not os.path.isabs(path):
    candidates += [root / path for root in CONFIG_SEARCH_ROOTS]
    # `configs/ant_maze.gin` typed from another directory (in a checkout: relative to the repository root).
    if Path(path).parts[:1] == ('configs',):
      candidates.append(CONFIG_DIR.parent / path)
  for candidate in candidates:
    if candidate.is_file():
      return candidate.resolve()
  listing = '\n'.join('  ' + c for c in available_configs())
  raise errors.LaunchError(f'config file not found: {path}\nAvailable configs:\n{listing}\n'
                           f'(The original efficient-hrl pieces are under configs/uvf/, e.g. configs/base_uvf.gin '
                           f'and context/configs/ant_maze.gin resolve there.)')


def config_name(paths: Sequence[Path]) -> str:
  """Name of a configuration, for the default run directory: the file stems joined by '+'."""
  return '+'.join(p.stem for p in paths)


def display_path(path: Path) -> str:
  """`path` relative to the current directory when it is below it, else as it is."""
  try:
    return str(path.relative_to(Path.cwd()))
  except ValueError:
    return str(path)


# --------------------------------------------------------------------------------------------------------------------
# Flags to gin bindings.


def flag_bindings(fv: flags.FlagValues) -> Tuple[List[str], List[str]]:
  """Gin bindings for the original flags the user gave explicitly.

  Returns:
    (hiro_bindings, impala_bindings); flags left at their defaults give no binding (gin's values apply).
  """
  hiro = []
  for name in launcher_flags.HIRO_TRAIN_FLAGS:
    if launcher_flags.present(fv, name):
      hiro.append(f'train_uvf.{name} = {fv[name].value!r}')
  for name in launcher_flags.HIRO_EVAL_FLAGS:
    if launcher_flags.present(fv, name):
      hiro.append(f'evaluate.{name} = {fv[name].value!r}')
  impala = [
      f'experiment.{name} = {fv[name].value!r}' for name in launcher_flags.IMPALA_FLAGS +
      launcher_flags.IMPALA_DISTRIBUTED_FLAGS if launcher_flags.present(fv, name)
  ]
  return hiro, impala


# --------------------------------------------------------------------------------------------------------------------
# The parse.


def parse_gin(config_paths: Sequence[Path], bindings: Sequence[str]) -> None:
  """Clears gin, then parses the gin files and the bindings, in order; errors become `LaunchError`s."""
  import gin  # pylint: disable=g-import-not-at-top
  if not _SEARCH_PATH_ADDED:
    gin.add_config_file_search_path(str(CONFIG_DIR))
    _SEARCH_PATH_ADDED.append(True)
  with gin.unlock_config():  # a previous launch in this process (tests) finalized the config
    gin.clear_config()
    for path in config_paths:
      # noqa reason: called within this iteration.
      _gin_call(lambda: _parse_config_file(str(path)), f'{display_path(path)} (or a file it includes)')  # noqa: B023
    if bindings:
      _gin_call(lambda: gin.parse_config(list(bindings)), 'the --gin_param / flag bindings ' + repr(list(bindings)))


def _parse_config_file(name: str) -> None:
  """Parses the gin file `name` (`_find`), each of its includes named by the file it resolves to (`_find`; as
  written when it resolves to none: gin then looks for it on its search path and reports it missing). The text keeps
  its line numbers and the file its path: gin's messages name the file and line of a mistake."""
  import gin  # pylint: disable=g-import-not-at-top
  path = _find(name)
  if path is None:
    gin.parse_config_file(name)  # gin's search, and its message: the file is missing
    return
  with open(path) as f:
    text = f.read()
  stream = io.StringIO(_INCLUDE.sub(lambda m: m['head'] + repr(_find(m['name']) or m['name']), text))
  stream.name = path
  gin.parse_config(stream)


def _find(name: str) -> Optional[str]:
  """The file a config file name (a path, or an include as written) resolves to: an absolute path as it is, a
  relative one under configs/, else from the current directory; None if there is no such file."""
  candidates = [name] if os.path.isabs(name) else [str(CONFIG_DIR / name), os.path.abspath(name)]
  return next((candidate for candidate in candidates if os.path.isfile(candidate)), None)


def _gin_call(fn: Callable[[], object], where: str) -> None:
  try:
    fn()
  except (ValueError, TypeError, SyntaxError, KeyError) as e:
    raise errors.LaunchError(f'invalid gin configuration in {where}:\n{_indent(str(e))}') from None
  except tokenize.TokenError as e:
    raise errors.LaunchError(f'gin syntax error in {where}: {e.args[0]} (line {e.args[1][0]})') from None
  except (IOError, OSError) as e:
    raise errors.LaunchError(f'gin could not read a file in {where}:\n{_indent(str(e))}') from None
  except ImportError as e:
    raise errors.LaunchError(f'an import statement in {where} failed: {e}') from None


def _indent(text: str) -> str:
  return '\n'.join('  ' + line for line in text.splitlines())
