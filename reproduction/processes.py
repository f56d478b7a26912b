"""The kit's processes: start them, find them, stop them.

A seed's training or evaluation is found through its directory's lock: the launcher holds `run.lock` in the
directory a program writes (`--train_dir` for run_train.py, the eval dir for run_eval.py) for the life of the
process, and the lock file names its holder (`rundir.lock.current_holder`: pid, host, start time, command). So a
process is found whoever started it (an earlier kit, or a command typed by hand), and a lock that is free means
that nothing writes the directory, also after a kill -9.

The kit records each process it starts in a pid file (pid, command, start time) beside its log: a holder is the
kit's when it has that pid and that command (`started_by_kit`); only those are stopped by `--stop`. A process is
stopped through a pidfd (`stop`), so that no signal can reach another process that reused its pid.
"""

import ctypes
import datetime
import json
import os
import select
import shlex
import signal
import socket
import subprocess
import time
from typing import Any, Dict, List, Optional, Sequence

from rundir import errors
from rundir import lock

SCRIPTS = {'train': 'run_train.py', 'eval': 'run_eval.py', 'heldout': 'run_eval.py'}  # the kit's process kinds
# The signals that stop the kit (Ctrl-C; `timeout`, schedulers; a closed terminal): it stops the processes it
# started (they write their checkpoints) and exits with 128 + the signal's number.
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The exit statuses of a training or evaluation stopped on request (docs/running.md): SIGINT 130, SIGTERM
# 143, SIGHUP 129 (negative: the signal came before its handler).
STOPPED_EXIT_CODES = tuple(errors.signal_exit_code(s) for s in STOP_SIGNALS) + tuple(-s for s in STOP_SIGNALS)
# The exit statuses of a user error (configuration, run directory): restarting the process will not help.
USER_ERROR_EXIT_CODES = (errors.EXIT_USAGE, errors.EXIT_UNAVAILABLE)


class Stopped(str):
  """A seed job's end message when one of its processes was stopped by someone (it is not restarted)."""


def holder(directory: str) -> Optional[Dict[str, Any]]:
  """The process that writes `directory` now: the holder record of its `run.lock` ({'pid', 'host', 'started',
  'command'}; {} while the holder has not written its name yet), or None when nothing holds it."""
  return lock.current_holder(directory)


def local_pid(record: Optional[Dict[str, Any]]) -> Optional[int]:
  """The pid of a holder record when the holder runs on this host (so that it can be signalled), else None."""
  if not record or record.get('host', socket.gethostname()) != socket.gethostname():
    return None
  try:
    return int(record['pid'])
  except (KeyError, TypeError, ValueError):
    return None


def describe(record: Optional[Dict[str, Any]]) -> str:
  """'pid 123' ('pid 123 on host h' for another host; 'a starting process' before it has written its name)."""
  if not record:
    return 'a starting process'
  host = record.get('host')
  where = f' on host {host}' if host and host != socket.gethostname() else ''
  return f'pid {record.get("pid", "?")}{where}'


def read_record(pid_file: str) -> Optional[Dict[str, Any]]:
  """The kit's record of the process it started ({'pid', 'command', 'started'}), or None."""
  try:
    with open(pid_file, encoding='utf-8') as f:
      record = json.load(f)
  except (OSError, ValueError):
    return None
  return record if isinstance(record, dict) else None


def started_by_kit(pid_file: str, record: Dict[str, Any]) -> bool:
  """Whether the holder `record` (`holder`) is the process the kit recorded in `pid_file`: the same pid on this
  host and, where the holder names its command, the same command (the kit's, less the interpreter)."""
  pid = local_pid(record)
  started = read_record(pid_file)
  if pid is None or not started or started.get('pid') != pid:
    return False
  command = record.get('command')
  return not command or list(command) == list(started.get('command', []))[1:]


def _die_with_parent() -> None:
  """preexec_fn: the child gets SIGTERM when its parent dies (Linux prctl PR_SET_PDEATHSIG)."""
  ctypes.CDLL(None).prctl(1, signal.SIGTERM)


def start_process(command: List[str], log_path: str, pid_file: str, cwd: str, detach: bool,
                  env: Optional[Dict[str, str]] = None, cpus: Sequence[int] = ()) -> subprocess.Popen[bytes]:
  """Starts `command` with its output appended to `log_path` (after a header line) and records it in `pid_file`.

  Args:
    command: the argv.
    log_path: its log.
    pid_file: where its record ({'pid', 'command', 'started'}) is written (replaced atomically).
    cwd: its working directory.
    detach: True: in its own session, it outlives the kit; False: it gets SIGTERM when the kit dies.
    env: None or variables set for it when the kit's environment does not set them already (the user's win).
    cpus: the cores it is pinned to (sched_setaffinity, before it starts its threads); (): not pinned.

  Returns:
    its `subprocess.Popen`.
  """
  os.makedirs(os.path.dirname(log_path), exist_ok=True)
  with open(log_path, 'ab') as log:
    log.write(f'\n=== reproduce.py {datetime.datetime.now().isoformat(timespec="seconds")}: '
              f'{shlex.join(command)}\n'.encode())
    log.flush()
    environment = dict(os.environ, PYTHONUNBUFFERED='1')
    for name, value in (env or {}).items():
      environment.setdefault(name, value)
    process = subprocess.Popen(
        command,
        cwd=cwd,
        stdout=log,
        stderr=subprocess.STDOUT,
        env=environment,
        stdin=subprocess.DEVNULL,
        start_new_session=detach,
        # noqa reason: signal settings of the child, before exec; no lock is taken.
        preexec_fn=None if detach else _die_with_parent)  # noqa: PLW1509
  if cpus:
    try:
      os.sched_setaffinity(process.pid, cpus)
    except OSError:
      pass  # it already exited: its exit status is handled by the caller
  tmp = pid_file + '.tmp'
  with open(tmp, 'w', encoding='utf-8') as f:
    json.dump({'pid': process.pid, 'command': command, 'started': time.time()}, f)
  os.replace(tmp, pid_file)
  return process


def _signal_and_wait(pid: int, sig: int, wait_s: float) -> None:
  """`sig` to `pid`, then SIGKILL if it has not exited within `wait_s` seconds. Through a pidfd (Linux): the signals
  reach that process even if it exits and its pid is reused meanwhile, and its exit is seen even while it waits,
  a zombie, for its parent (an earlier kit) to reap it."""
  try:
    handle = os.pidfd_open(pid)
  except ProcessLookupError:
    return
  except (AttributeError, OSError):  # no pidfd (not Linux 5.3+): the stop request alone, no SIGKILL by pid
    try:
      os.kill(pid, sig)
    except ProcessLookupError:
      pass
    return
  try:
    signal.pidfd_send_signal(handle, sig)
    exited, _, _ = select.select([handle], [], [], wait_s)
    if not exited:
      signal.pidfd_send_signal(handle, signal.SIGKILL)
  except ProcessLookupError:  # it has exited and been reaped
    pass
  finally:
    os.close(handle)


def ignores(pid: int, sig: int) -> bool:
  """Whether process `pid` ignores signal `sig` (Linux: the SigIgn mask of /proc/<pid>/status); False if unknown."""
  try:
    with open(f'/proc/{pid}/status', encoding='ascii') as f:
      for line in f:
        if line.startswith('SigIgn:'):
          return bool(int(line.split()[1], 16) >> (int(sig) - 1) & 1)
  except (OSError, ValueError):
    pass
  return False


def stop(pid: int, sig: int = signal.SIGINT, wait_s: float = 60.0,
         process: Optional[subprocess.Popen[bytes]] = None) -> None:
  """Sends `sig` to `pid` (a stop request: the run writes its checkpoint), then SIGKILL if it has not exited after
  `wait_s` seconds. `process`: its Popen when this process started it (then it is also reaped).

  A process that ignores SIGINT gets SIGTERM instead (the same stop, exit status 143): a kit started in the background
  of a non-interactive shell (`cmd &` in a script, `nohup ... &`) passes SIGINT ignored on to the programs it starts,
  and the programs keep an inherited ignored signal ignored."""
  if sig == signal.SIGINT and ignores(pid, signal.SIGINT):
    sig = signal.SIGTERM
  if process is None:
    _signal_and_wait(pid, sig, wait_s)
    return
  if process.poll() is not None:
    return
  process.send_signal(sig)
  try:
    process.wait(timeout=wait_s)
  except subprocess.TimeoutExpired:
    process.kill()
    process.wait()


def log_tail(path: str, lines: int = 15) -> str:
  """The last `lines` lines of a log ('' when there is none)."""
  try:
    with open(path, 'rb') as f:
      data = f.read()
  except OSError:
    return ''
  return '\n'.join(data.decode(errors='replace').rstrip().splitlines()[-lines:])
