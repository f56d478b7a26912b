"""Stop signals while a program runs: SIGINT / SIGTERM / SIGHUP ask it to stop at its next safe point and write its
checkpoint; a second one stops it at once (`StopSignals`).

The exit status of a stopped run is `rundir.errors.signal_exit_code` (128 + the signal number: 130, 143, 129), as a
shell reports a process killed by that signal, so that a scheduler sees an unfinished run.
"""

import os
import signal
import types
from typing import Any, Callable, Dict, Literal, Optional


class StopSignals:
  """SIGINT / SIGTERM / SIGHUP (Ctrl-C; `timeout`, schedulers, `docker stop`; a closed terminal) while a program runs.

  The first asks the program to stop at its next safe point and write its checkpoint (`System.stop`; HIRO: the next
  episode end, IMPALA: after the current learner step) and says so on stderr; the program then returns as usual. A
  second signal, or the first for a program without a stop entry, raises KeyboardInterrupt at once (the program's
  last checkpoint stays the one to resume from). A signal ignored by the parent (SIGINT of a background job) stays
  ignored. `received` is the name of the first signal, None if none came.
  """
  SIGNALS = ('SIGINT', 'SIGTERM', 'SIGHUP')

  def __init__(self, program: str, request_stop: Optional[Callable[[str], bool]]) -> None:
    self._program = program
    self._request_stop = request_stop
    self._count = 0
    self.received: Optional[str] = None
    self.signum: Optional[int] = None
    self._previous: Dict[int, Any] = {}  # signal number -> its handler before `__enter__`

  def __enter__(self) -> 'StopSignals':
    for name in self.SIGNALS:
      signum = getattr(signal, name)
      previous = signal.getsignal(signum)
      if previous == signal.SIG_IGN:
        continue
      self._previous[signum] = previous
      signal.signal(signum, self._handle)
    return self

  def __exit__(self, *exc: object) -> Literal[False]:
    for signum, previous in self._previous.items():
      signal.signal(signum, previous)
    return False

  def _handle(self, signum: int, frame: Optional[types.FrameType]) -> None:
    del frame
    name = signal.Signals(signum).name
    self._count += 1
    if self._count == 1:
      self.received, self.signum = name, signum
    if self._count == 1 and self._request_stop is not None and self._request_stop(name):
      # os.write: a print here could interrupt a print of the main thread (reentrant call). A closed terminal
      # (SIGHUP) makes it fail: the stop goes on.
      try:
        os.write(
            2, f'run_{self._program}: {name} received: stopping at the next safe point and writing a '
            f'checkpoint (send {name} again to stop at once, without one).\n'.encode())
      except OSError:
        pass
      return
    raise KeyboardInterrupt(name)
