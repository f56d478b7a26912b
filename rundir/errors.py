"""Exit statuses of the project's programs, and the errors that carry them to the launcher.

An exception with `user_error = True` is printed by the launcher as its message alone (no traceback), and the
program exits with its `exit_code`.
"""

EXIT_OK = 0
EXIT_FAILURE = 1  # an unexpected error: the traceback is printed
EXIT_USAGE = 2  # bad command line, config, binding or output directory
EXIT_UNAVAILABLE = 3  # a missing optional dependency, or a system that is not available here
EXIT_RUN_DIR = 4  # the run directory cannot be used now: held by another process, unreadable checkpoints, disk full
EXIT_DIVERGED = 5  # training produced non-finite values; no checkpoint holds them
EXIT_SIGNAL_BASE = 128  # a run stopped by signal N exits 128 + N, as a shell reports it (SIGINT: 130, SIGTERM: 143)


class UserError(Exception):
  """An error the user can fix; the message says what and how. Printed alone, exit status `exit_code`."""
  user_error = True
  exit_code = EXIT_USAGE


class UnavailableError(UserError):
  """A missing optional dependency (e.g. MuJoCo rendering, DeepMind Lab)."""
  exit_code = EXIT_UNAVAILABLE


class RunDirectoryError(UserError, ValueError):
  """The run directory cannot be used now: another process holds it, its checkpoints are unreadable or of an
  unsupported kind, or the disk is full (at the start or during a save). The message names the files, the sizes
  and the fix."""
  exit_code = EXIT_RUN_DIR


class DivergedError(UserError, ValueError):
  """Training produced non-finite values (losses, an update, an actor's logits): the run stops before any checkpoint
  holds them."""
  exit_code = EXIT_DIVERGED


def signal_exit_code(signum: int) -> int:
  """The exit status of a program stopped by signal `signum` (130 for SIGINT, 143 for SIGTERM, 129 for SIGHUP)."""
  return EXIT_SIGNAL_BASE + int(signum)
