"""The progress file: `<run_dir>/progress.json`, the machine-readable state of a training run.

A training run rewrites it (atomically: a temporary file renamed over it) each time it logs progress, so that tools
(the reproduction kit's `--status`) read numbers, not log text. Fields (all optional but `step` and `time`):

  step         the global step (HIRO: environment steps) reached
  total_steps  the step at which training stops
  rate         steps per second over the last logging interval
  eta_s        seconds left at that rate
  time         when the record was written (seconds since the epoch)
  pid          the training process
  state        'running', 'stopped' (a stop request; a checkpoint was written) or 'finished'

Writing is best effort: a full disk or a read-only directory never stops training over its progress file.
"""

import json
import os
from pathlib import Path
import time
from typing import Any, Dict, Optional

from rundir import storage

PROGRESS_FILE = 'progress.json'


def write_progress(run_dir: storage.PathLike, step: int, **fields: Any) -> bool:
  """Replaces `<run_dir>/progress.json` with {'step': step, 'time': now, 'pid': this process, **fields}.

  Returns:
    whether the file was written.
  """
  record = {'step': int(step), 'time': time.time(), 'pid': os.getpid(), **fields}
  path = Path(run_dir) / PROGRESS_FILE
  temp = path.with_name(f'.{PROGRESS_FILE}.{os.getpid()}.tmp')
  try:
    temp.write_text(json.dumps(record) + '\n')
    os.replace(temp, path)
    return True
  except OSError:
    try:
      temp.unlink()
    except OSError:
      pass
    return False


def read_progress(run_dir: storage.PathLike) -> Optional[Dict[str, Any]]:
  """The last record of `<run_dir>/progress.json`, or None when there is none (or it cannot be read)."""
  try:
    record = json.loads((Path(run_dir) / PROGRESS_FILE).read_text())
  except (OSError, ValueError):
    return None
  return record if isinstance(record, dict) and 'step' in record else None
