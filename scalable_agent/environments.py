"""Environments for IMPALA: which backend a level runs on, and whether that backend is installed.

Level names (the `level_name` flag / `experiment.level_name` gin parameter):
  * a DeepMind Lab level, e.g. `explore_goal_locations_small`, or `dmlab30` for the DMLab-30 suite (as the original);
  * `atari/<game>` for an Atari game of the Arcade Learning Environment, `<game>` being an ale-py ROM id such as
    `pong` or `space_invaders` (ale-py ships the ROMs).

The environment wrappers themselves arrive with the training-system issue; this module already answers, before any
heavy work, whether a level can run here.
"""

import collections
import importlib

# One environment step, as the original (reference impala.md section 9.3). The field order is the nest order.
#   reward: float32, the reward of the step (unclipped);
#   info: StepOutputInfo(episode_return float32, episode_step int32), running totals of the current episode;
#   done: bool, True on the first observation of a new episode (and on the initial output);
#   observation: (frame uint8 [height, width, 3], instruction tf.string).
# Batched and time-major versions carry leading [B] or [T, B] dimensions on every field.
StepOutputInfo = collections.namedtuple('StepOutputInfo', ['episode_return', 'episode_step'])
StepOutput = collections.namedtuple('StepOutput', ['reward', 'info', 'done', 'observation'])

ATARI_PREFIX = 'atari/'

DMLAB_INSTALL_HELP = (
    'DeepMind Lab is not on a package registry: build its Python package from source '
    '(github.com/google-deepmind/lab: `bazel build -c opt //python/pip_package:build_pip_package`, then '
    '`./bazel-bin/python/pip_package/build_pip_package /tmp/dmlab_pkg` and '
    '`pip install /tmp/dmlab_pkg/deepmind_lab-*.whl`); README.md, section "DeepMind Lab (optional)", has the steps.')


class MissingDependencyError(ImportError):
  """An optional dependency that a configuration needs is not installed; the message says how to install it."""


def level_backend(level_name):
  """Returns 'atari' or 'dmlab' for a level name (see the module docstring)."""
  return 'atari' if level_name.startswith(ATARI_PREFIX) else 'dmlab'


def check_level_available(level_name):
  """Checks, without starting anything, that `level_name` can run on this machine.

  Raises:
    MissingDependencyError: the level needs DeepMind Lab and `deepmind_lab` is not importable.
    ValueError: an Atari level names a game that ale-py does not have (the message lists them).
  """
  if level_backend(level_name) == 'atari':
    from ale_py import roms  # pylint: disable=g-import-not-at-top
    game = level_name[len(ATARI_PREFIX):]
    games = roms.get_all_rom_ids()
    if game not in games:
      raise ValueError(f'unknown Atari level {level_name!r}: ale-py has no ROM {game!r}. Atari levels are '
                       f'{ATARI_PREFIX}<game> with <game> one of: {", ".join(games)}.')
    return
  try:
    importlib.import_module('deepmind_lab')
  except ImportError as e:
    raise MissingDependencyError(
        f'level {level_name!r} runs on DeepMind Lab, but the Python module deepmind_lab cannot be imported '
        f'({e}). {DMLAB_INSTALL_HELP} Atari needs no extra install: configs/impala_atari.gin.') from None
