"""What `run_train.py` / `run_eval.py` print: the project's own lines first, third-party noise only on request.

Without `--verbosity` (absl's flag), `quiet()` keeps the screen to the project's messages:

- TensorFlow's native (C++) log lines are off: TF_CPP_MIN_LOG_LEVEL=3 (set by `default_native_log_level()`, which
  the programs call first, before TensorFlow loads; on a CPU machine it hides the three "Unable to register cuDNN /
  cuFFT / cuBLAS factory" errors), and the few lines
  that TF_CPP_MIN_LOG_LEVEL does not reach (XLA's "Compiled cluster using XLA!", absl's notice before it) are dropped
  by a small relay process that file descriptor 2 goes through (`filter_native_stderr`). The relay cannot cost a run
  its checkpoint: no stop signal reaches it, and if it dies anyway the program restores descriptor 2 and goes on;
- INFO records of other libraries are dropped (their warnings stay, marked with the library's name), and the
  project's own records are printed as plain lines, without absl's "I1201 14:06:11.342287 140243 file.py:658]"
  prefix;
- `gym` (pulled in by tf-agents, not used here) is imported with its "Gym has been unmaintained" notice discarded.

`protect_streams()` makes sys.stdout and sys.stderr writes that cannot raise (a closed terminal, a dead relay), so
that the lines a stop prints never interrupt the checkpoint it writes.

With `--verbosity=N` nothing is hidden: absl's usual format, every library's records at that level, and
TensorFlow's native lines from the matching severity (`verbose`). An explicit TF_CPP_MIN_LOG_LEVEL is always kept
(below 3, it also keeps the native lines that the relay would drop).
"""

import atexit
import contextlib
import importlib
import importlib.util
import io
import logging
import os
from pathlib import Path
import re
import select
import signal
import sys
import threading
from typing import Any, Callable, List, Optional, TextIO

# The folder that holds the `launcher` package: the checkout (also under an editable install), or the site-packages
# folder of an installed wheel, where only the project's own packages (`PACKAGES`) are the project's files.
REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ('launcher', 'rundir', 'scalable_agent', 'uvf')
_INSTALL_DIRS = {'site-packages', 'dist-packages'}
# TF_CPP_MIN_LOG_LEVEL as the user set it (None: not set), recorded by `default_native_log_level` before it sets its
# default.
USER_TF_LOG_LEVEL: Optional[str] = None
_NATIVE_DEFAULT_SET: List[bool] = []  # [True] once default_native_log_level has run in this process


def default_native_log_level() -> None:
  """Records the user's TF_CPP_MIN_LOG_LEVEL (`USER_TF_LOG_LEVEL`) and sets it to 3 when unset: TensorFlow's native
  log lines off by default. Call it first in a program, before TensorFlow is imported; later calls do nothing."""
  global USER_TF_LOG_LEVEL  # noqa: PLW0603  (module state, set once)  pylint: disable=global-statement
  if _NATIVE_DEFAULT_SET:
    return
  _NATIVE_DEFAULT_SET.append(True)
  USER_TF_LOG_LEVEL = os.environ.get('TF_CPP_MIN_LOG_LEVEL')
  os.environ.setdefault('TF_CPP_MIN_LOG_LEVEL', '3')


# A native log line: absl C++ ("I1201 14:08:10.071630    6939 device_compiler.h:186] ...", or before absl is
# initialised "I0000 00:00:1796135024.047210 ..."; a C/C++ source file tells it from absl Python's same prefix),
# TensorFlow's own ("2026-12-01 14:05:15.510119: E external/...cc:9261] ..."), or absl's notice before its first
# line. Severity I, W or E only: fatal (F) lines always pass.
NATIVE_LOG_LINE = re.compile(
    rb'^(?:[IWE]\d{4} \d\d:\d\d:\d+\.\d{6}\s+\d+ [\w.+-]+\.(?:cc|h|hpp|cpp|c):\d+\] '
    rb'|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: [IWE] \S+:\d+\] '
    rb'|WARNING: All log messages before absl::InitializeLog\(\) is called are written to STDERR$)')
# The start of a line that may become a native log line: a partial line like this waits for its newline.
_MAYBE_NATIVE = re.compile(rb'^(?:[IWE]\d|\d{4}-\d|WARNING: All )')
# How long another partial line (no newline yet) waits before the relay passes it on.
_PARTIAL_LINE_WAIT_S = 0.1
_RELAY_EXIT_WAIT_S = 2.0


def is_project_file(path: str) -> bool:
  """Whether `path` (a log record's source file) belongs to this project, not to another library: a file of the
  checkout outside a virtual environment, or, installed as a package, a file of the project's packages."""
  try:
    relative = Path(path).resolve().relative_to(REPO_ROOT)
  except (ValueError, OSError):
    return False
  if relative.parts[:1] and relative.parts[0] in PACKAGES:
    return True
  if REPO_ROOT.name in _INSTALL_DIRS:  # installed: the other libraries share the folder
    return False
  return not (_INSTALL_DIRS | {'.venv'}) & set(relative.parts)


class ProjectFormatter(logging.Formatter):
  """The project's records as plain lines ('warning: ' / 'error: ' before warnings and errors); other libraries'
  records (only warnings and errors reach it, see `ThirdPartyInfoFilter`) as 'warning (library): ...'."""

  def format(self, record: logging.LogRecord) -> str:
    text = super().format(record)
    level = record.levelname.lower()
    if is_project_file(record.pathname):
      return text if record.levelno < logging.WARNING else f'{level}: {text}'
    source = record.name if record.name not in ('absl', 'root') else Path(record.pathname).stem
    return f'{level} ({source}): {text}'


class ThirdPartyInfoFilter(logging.Filter):
  """Drops the INFO (and DEBUG) records of other libraries."""

  def filter(self, record: logging.LogRecord) -> bool:
    return record.levelno >= logging.WARNING or is_project_file(record.pathname)


def verbose(verbosity: int) -> None:
  """`--verbosity` was given: TensorFlow's native log lines from the matching severity (INFO at 0 or more, WARNING
  at -1, ERROR at -2), unless TF_CPP_MIN_LOG_LEVEL was set by the user. Call before TensorFlow is imported."""
  if USER_TF_LOG_LEVEL is None:
    os.environ['TF_CPP_MIN_LOG_LEVEL'] = str(min(3, max(0, -verbosity)))


def quiet() -> None:
  """No `--verbosity`: the project's lines only (module docstring). Call once, at the start of the program, after
  absl has installed its log handler (in `app.run`'s main) and before TensorFlow is imported."""
  from absl import logging as absl_logging  # pylint: disable=g-import-not-at-top,import-outside-toplevel
  handler = absl_logging.get_absl_handler()
  handler.addFilter(ThirdPartyInfoFilter())
  handler.setFormatter(ProjectFormatter())
  import_quietly('gym')
  if not native_lines_requested():
    filter_native_stderr()


def native_lines_requested() -> bool:
  """Whether the user's TF_CPP_MIN_LOG_LEVEL asks for TensorFlow's native INFO, WARNING or ERROR lines (below 3).
  (The 3 this module sets is inherited by the processes a run starts: that asks for nothing.)"""
  try:
    return USER_TF_LOG_LEVEL is not None and int(USER_TF_LOG_LEVEL) < 3
  except (TypeError, ValueError):
    return False


def import_quietly(module: str) -> None:
  """Imports `module` (if installed) with what it prints to stderr discarded (gym's deprecation notice)."""
  if importlib.util.find_spec(module) is None:
    return
  try:
    with contextlib.redirect_stderr(io.StringIO()):
      importlib.import_module(module)
  except ImportError:
    pass  # a broken install: its importer (tf-agents) reports it, with the traceback


def relay(read_fd: int, write_fd: int) -> None:
  """Copies what arrives on `read_fd` to `write_fd` until end of file, without the `NATIVE_LOG_LINE` lines.

  Lines are passed on whole; a partial line is passed on once nothing more arrived for 0.1 s, unless it may be the
  start of a native log line (then it waits for its newline). If `write_fd` fails (a closed terminal: EIO; a closed
  pipe: EPIPE), what arrives is read and dropped until end of file, so that the writers never block or fail.
  """
  pending = b''
  sink = [write_fd]  # emptied when write_fd fails

  def write(data: bytes) -> None:
    if sink and data:
      try:
        _write_all(sink[0], data)
      except OSError:
        sink.clear()

  while True:
    ready, _, _ = select.select([read_fd], [], [], _PARTIAL_LINE_WAIT_S if pending else None)
    if not ready:
      if not _MAYBE_NATIVE.match(pending):
        write(pending)
        pending = b''
      continue
    chunk = os.read(read_fd, 1 << 16)
    if not chunk:
      break
    *lines, pending = (pending + chunk).split(b'\n')
    write(b''.join(line + b'\n' for line in lines if not NATIVE_LOG_LINE.match(line)))
  if pending and not NATIVE_LOG_LINE.match(pending):
    write(pending)


def _write_all(fd: int, data: bytes) -> None:
  while data:
    data = data[os.write(fd, data):]


# The signals the relay ignores: every stop signal a run handles (SIGINT, SIGTERM, SIGHUP), and those a terminal or a
# closed pipe sends. It is also in a process group of its own, so that a signal sent to the run's group (`timeout`,
# a scheduler, a closed terminal) does not reach it at all; it ends only when the last writer closes the pipe.
RELAY_IGNORED_SIGNALS = ('SIGINT', 'SIGTERM', 'SIGHUP', 'SIGQUIT', 'SIGPIPE', 'SIGTTOU')


class _Relay:
  """The relay process of this process (`filter_native_stderr`), and descriptor 2 as it was before."""

  def __init__(self, pid: int, original_fd: int) -> None:
    self.pid = pid
    self.original_fd = original_fd
    self.ended = threading.Event()  # the relay exited (reaped by `watch`)
    self._lock = threading.Lock()
    self.closing = False  # set at exit, when this process restores descriptor 2 itself

  def restore(self) -> None:
    """Points descriptor 2 at the original stderr again (idempotent)."""
    with self._lock:
      os.dup2(self.original_fd, 2)

  def watch(self) -> None:
    """Waits for the relay to exit; if that happens before this process's exit, restores descriptor 2 so that the
    program goes on (it still prints its lines and writes its checkpoints) and says so once."""
    try:
      _, status = os.waitpid(self.pid, 0)
    except ChildProcessError:  # reaped elsewhere: it is gone all the same
      status = None
    self.ended.set()
    if self.closing:
      return
    self.restore()
    how = (f'killed by {signal.Signals(os.WTERMSIG(status)).name}'
           if status is not None and os.WIFSIGNALED(status) else 'exited')
    try:
      os.write(
          2, f'warning: the console filter of TensorFlow\'s native log lines (PID {self.pid}) {how}; '
          f'its lines are shown from here, the run goes on.\n'.encode())
    except OSError:
      pass


RELAY: Optional[_Relay] = None  # the `_Relay` of this process once `filter_native_stderr` has run


def filter_native_stderr() -> None:
  """Sends this process's file descriptor 2 (and its children's) through `relay`, in a forked process that ignores
  `RELAY_IGNORED_SIGNALS`, runs in a process group of its own and ends when the last writer closes the pipe: no
  stop signal, to this process or to its group, ends it before the run has written its checkpoint and its last
  lines. Should it die anyway (kill -9), a thread of this process notices at once, restores descriptor 2 and the
  run goes on. At exit, descriptor 2 is restored and the relay gets up to 2 s to pass on the last lines. Native fatal
  errors and everything Python prints still arrive."""
  global RELAY  # noqa: PLW0603  (module state, set once)  pylint: disable=global-statement
  if not hasattr(os, 'fork') or RELAY is not None:
    return
  sys.stderr.flush()
  try:
    original = os.dup(2)
  except OSError:  # no descriptor 2 (a daemon): nothing to filter
    return
  read_fd, write_fd = os.pipe()
  # The signals stay blocked from before the fork until the relay ignores them (one that comes meanwhile is then
  # discarded) and has its own process group; in this process they are delivered once the fork is done.
  ignored = {getattr(signal, name) for name in RELAY_IGNORED_SIGNALS}
  mask = signal.pthread_sigmask(signal.SIG_BLOCK, ignored)
  pid = os.fork()
  if pid == 0:  # the relay
    status = 0
    try:
      os.close(write_fd)
      os.setpgid(0, 0)
      for signum in ignored:
        signal.signal(signum, signal.SIG_IGN)
      signal.pthread_sigmask(signal.SIG_SETMASK, mask)
      relay(read_fd, 2)
    except BaseException:  # pylint: disable=broad-except
      status = 1
    finally:
      os._exit(status)  # pylint: disable=protected-access
  try:
    os.setpgid(pid, pid)  # (also done by the relay: whichever runs first)
  except OSError:
    pass
  signal.pthread_sigmask(signal.SIG_SETMASK, mask)
  os.close(read_fd)
  os.dup2(write_fd, 2)
  os.close(write_fd)
  RELAY = _Relay(pid, original)
  threading.Thread(target=RELAY.watch, name='stderr-relay-watch', daemon=True).start()

  @atexit.register
  def _restore() -> None:
    try:
      sys.stdout.flush()
      sys.stderr.flush()
    except (OSError, ValueError):
      pass
    RELAY.closing = True
    RELAY.restore()  # closes this process's end of the pipe
    RELAY.ended.wait(_RELAY_EXIT_WAIT_S)


class SafeStream:
  """A text stream (sys.stdout / sys.stderr) whose writes never raise: a closed terminal (EIO, after SSH drops) or a
  pipe nobody reads (EPIPE) must not end a run that is writing its checkpoint. On such an error, stderr is pointed
  back at its original descriptor if the relay is gone (`_Relay.restore`) and the text written again; otherwise the
  text is dropped. Everything else is the wrapped stream's."""

  def __init__(self, stream: TextIO) -> None:
    self._stream = stream

  def _retry(self, call: Callable[..., Any], *args: Any) -> Any:
    try:
      return call(*args)
    except (OSError, ValueError):
      pass
    try:
      if RELAY is not None and self._stream.fileno() == 2:
        RELAY.restore()
        return call(*args)
    except (OSError, ValueError):
      pass
    return None

  def write(self, text: str) -> int:
    self._retry(self._stream.write, text)
    return len(text)

  def flush(self) -> None:
    self._retry(self._stream.flush)

  def __getattr__(self, name: str) -> Any:
    return getattr(self._stream, name)


def protect_streams() -> None:
  """Wraps sys.stdout and sys.stderr in `SafeStream` (once), so that a print after the terminal closed or the
  console filter died does not raise. Call at the start of a program."""
  for name in ('stdout', 'stderr'):
    stream = getattr(sys, name)
    if stream is not None and not isinstance(stream, SafeStream):
      setattr(sys, name, SafeStream(stream))
