"""One writer per run directory: `<run_dir>/run.lock`, and who holds it."""

import datetime
import errno
import fcntl
import json
import os
from pathlib import Path
import socket
import sys
import time
from typing import Any, Dict, Optional

from rundir import errors
from rundir import storage

LOCK_FILE = 'run.lock'
_UNSUPPORTED = (errno.ENOLCK, errno.EOPNOTSUPP, errno.ENOSYS, errno.EINVAL)


def describe(holder: Dict[str, Any]) -> str:
  """'PID 123 on host h, started 2026-12-05T10:00:00: python run_train.py ...' for a holder record."""
  command = ' '.join(holder.get('command', [])) or '?'
  return (f'PID {holder.get("pid", "?")} on host {holder.get("host", "?")}, started {holder.get("started", "?")}: '
          f'{command if len(command) <= 160 else command[:157] + "..."}')


def _read_holder(fd: int) -> Optional[Dict[str, Any]]:
  os.lseek(fd, 0, os.SEEK_SET)
  text = os.read(fd, 65536).decode(errors='replace').strip()
  if not text:
    return None
  try:
    holder = json.loads(text)
    return holder if isinstance(holder, dict) else {'text': text}
  except ValueError:
    return {'command': [text]}


def holder_alive(holder: Dict[str, Any]) -> bool:
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


def current_holder(run_dir: storage.PathLike) -> Optional[Dict[str, Any]]:
  """The process that holds the lock of `run_dir` now (its record: host, pid, started, command), or None.

  Reads without taking the lock for more than an instant: a free lock (or no lock file) gives None, also when the
  file still names a holder that died without releasing it.
  """
  path = Path(run_dir) / LOCK_FILE
  try:
    fd = os.open(path, os.O_RDONLY | os.O_CLOEXEC)
  except OSError:
    return None
  try:
    holder = _read_holder(fd)
    try:
      fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
      return holder or {}
    except OSError as e:
      if e.errno not in _UNSUPPORTED:
        raise
      return holder if holder and holder_alive(holder) else None
    fcntl.flock(fd, fcntl.LOCK_UN)
    return None
  finally:
    os.close(fd)


def _flock_exclusive(fd: int, attempts: int = 20, wait_s: float = 0.025) -> None:
  """`flock(LOCK_EX | LOCK_NB)`, tried `attempts` times `wait_s` apart: `current_holder` holds a shared lock for an
  instant, which must not read as a second writer. Raises BlockingIOError when the lock stays taken."""
  for attempt in range(attempts):
    try:
      fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
      return
    except BlockingIOError:
      if attempt == attempts - 1:
        raise
      time.sleep(wait_s)


class RunLock:
  """One writer per run directory: the file `<run_dir>/run.lock`, locked (`flock`) for the life of the process.

  The file names its holder (host, PID, start time, command) while it is held and is emptied when released. The
  operating system releases the lock of a process that dies, even by kill -9: a lock file that still names a
  holder when the lock is free was left by a process that stopped without releasing it, and is taken over with a
  warning (`stale`). On a file system without locks (`flock` unsupported) the holder's PID is checked instead (on
  the same host; a holder on another host is trusted). The file is never deleted: deleting a lock file lets two
  processes hold locks on two different files.
  """

  def __init__(self, run_dir: storage.PathLike) -> None:
    self.run_dir = Path(run_dir)
    self.path = self.run_dir / LOCK_FILE
    self.stale: Optional[Dict[str, Any]] = None  # the holder named by a stale lock this process took over
    self._fd: Optional[int] = None

  describe = staticmethod(describe)

  def _busy(self, holder: Optional[Dict[str, Any]]) -> errors.RunDirectoryError:
    who = describe(holder) if holder else 'a process that has not written its name yet'
    return errors.RunDirectoryError(
        f'{self.run_dir} is in use by another process ({who}); one process writes a run directory at a time. Wait '
        f'for it to stop (or stop it: it writes its checkpoint), or use another --train_dir.')

  def acquire(self) -> None:
    """Takes the lock, or raises `errors.RunDirectoryError` (EXIT_RUN_DIR) naming the process that holds it."""
    fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    try:
      try:
        _flock_exclusive(fd)
        locked = True
      except BlockingIOError:
        raise self._busy(_read_holder(fd)) from None
      except OSError as e:
        if e.errno not in _UNSUPPORTED:
          raise
        locked = False
      previous = _read_holder(fd)
      if previous and not locked and holder_alive(previous):
        raise self._busy(previous)
      if previous and previous.get('pid') != os.getpid():
        self.stale = previous
      me = {
          'host': socket.gethostname(),
          'pid': os.getpid(),
          'started': datetime.datetime.now().isoformat(timespec='seconds'),
          'command': list(sys.argv)
      }
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
