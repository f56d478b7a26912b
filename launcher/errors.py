"""The launcher's user error, and the exit statuses of run_train.py / run_eval.py (those of `rundir.errors`)."""

# Re-exported: the exit statuses are defined once, in rundir.errors.
from rundir.errors import EXIT_DIVERGED
from rundir.errors import EXIT_RUN_DIR
from rundir.errors import EXIT_SIGNAL_BASE
from rundir.errors import EXIT_UNAVAILABLE
from rundir.errors import EXIT_USAGE
from rundir.errors import UserError

__all__ = [
    'EXIT_DIVERGED', 'EXIT_RUN_DIR', 'EXIT_SIGNAL_BASE', 'EXIT_UNAVAILABLE', 'EXIT_USAGE', 'LaunchError', 'UserError'
]


class LaunchError(UserError):
  """A user-facing error of the launcher (command line, config, binding, output directory): printed as one message,
  then the program exits with `exit_code` (default EXIT_USAGE)."""

  def __init__(self, message: str, exit_code: int = EXIT_USAGE):
    super().__init__(message)
    self.exit_code = exit_code
