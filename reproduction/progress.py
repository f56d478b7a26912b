"""Where a seed's training stands: its progress file (`rundir.progress`, written by the training loop) and, for runs
of older code that have none, its checkpoints (`rundir.checkpoints`, by their files' names and times; no checkpoint
is read). Steps are environment steps (global steps); times are seconds since the epoch; rates steps per second.
"""

import os
import time
from typing import Dict, List, Optional, Sequence, Tuple, TypedDict

from rundir import checkpoints
from rundir import progress as progress_file

CHECKPOINT_PREFIX = checkpoints.CHECKPOINT_NAME + '-'  # a checkpoint of step n: <directory>/model.ckpt-<n>
POLICY_DIR = 'policy'  # a run's policy checkpoints, in its run directory (`train_uvf.save_policy_every_n_steps`)
FRESH_S = 600.0  # a progress record (or a checkpoint) older than this says nothing about the current speed


def checkpoint_steps(directory: str) -> Dict[int, float]:
  """{step: mtime of its index file} of the complete checkpoints `<directory>/model.ckpt-<step>` (index and every
  data shard present), by step: a run's full checkpoints (its directory) or its policy checkpoints
  (`<train_dir>/policy`)."""
  found: Dict[int, float] = {}
  for step, prefix in checkpoints.list_checkpoints(directory, complete_only=True):
    try:
      found[step] = os.path.getmtime(prefix + '.index')
    except OSError:  # deleted meanwhile (the trainer keeps its newest full checkpoints only)
      pass
  return found


def policy_steps(train_dir: str) -> Dict[int, float]:
  """{step: mtime} of the complete policy checkpoints `<train_dir>/policy/model.ckpt-<step>`."""
  return checkpoint_steps(os.path.join(train_dir, POLICY_DIR))


def full_checkpoint_step(train_dir: str) -> Optional[int]:
  """The step of the newest full checkpoint, the resume point: the one the `checkpoint` index file of `train_dir`
  names as `model_checkpoint_path` (read as text: no TensorFlow); None without one."""
  try:
    with open(os.path.join(train_dir, checkpoints.INDEX_FILE), encoding='utf-8') as f:
      lines = f.read().splitlines()
  except OSError:
    return None
  for line in lines:
    key, _, value = line.partition(':')
    if key.strip() == 'model_checkpoint_path':
      return checkpoints.step_of(value.strip().strip('"'))
  return None


def _checkpoint_rate(points: Sequence[Tuple[int, float]], now: float, fresh_s: float) -> Optional[float]:
  """Steps per second between the last two (step, time) checkpoint points, if the newest is recent; else None."""
  if len(points) < 2:
    return None
  (s0, t0), (s1, t1) = points[-2:]
  if t1 > t0 and s1 > s0 and now - t1 < max(fresh_s, 3 * (t1 - t0)):
    return (s1 - s0) / (t1 - t0)
  return None


class Progress(TypedDict):
  """Where a training run stands (`read_progress`)."""
  steps: int
  full_checkpoint: Optional[int]
  policy_steps: List[int]
  rate: Optional[float]
  updated: Optional[float]
  state: Optional[str]


def read_progress(train_dir: str, now: Optional[float] = None, fresh_s: float = FRESH_S) -> Progress:
  """Where a training run stands, from its files.

  The progress file (`rundir.progress.read_progress`) gives the step and speed of a run of this code; a run
  directory without one (a run of older code) is read from its checkpoints alone.

  Args:
    train_dir: the run directory.
    now: the time (time.time()).
    fresh_s: a progress record older than this says nothing about the current speed.

  Returns:
    dict: 'steps' (the furthest of the progress file, the full checkpoint and the policy checkpoints),
    'full_checkpoint' (the resume point, or None), 'policy_steps' (list), 'rate' (steps/s or None: the progress
    file's if fresh and running, else from the last two checkpoints' times, full or policy, if the newest is recent),
    'updated' (time of the newest sign of life, or None), 'state' (the progress file's, or None without one).
  """
  now = time.time() if now is None else now
  policies = policy_steps(train_dir)
  full = full_checkpoint_step(train_dir)
  steps = max([0, full or 0] + list(policies))
  # Checkpoints give (step, time) points: the full ones (2 kept, every save_interval_secs) and the policy ones.
  points = sorted(set(policies.items()) | set(checkpoint_steps(train_dir).items()), key=lambda p: (p[1], p[0]))
  rate: Optional[float] = None
  updated = points[-1][1] if points else None
  record = progress_file.read_progress(train_dir)
  state: Optional[str] = None
  if record is not None:
    state = record.get('state', 'running')
    written = float(record.get('time') or 0.0)
    steps = max(steps, int(record['step']))
    updated = max(updated or 0.0, written)
    if record.get('rate') and state == 'running' and now - written < fresh_s:
      rate = float(record['rate'])
  if rate is None:
    rate = _checkpoint_rate(points, now, fresh_s)
  return {
      'steps': steps,
      'full_checkpoint': full,
      'policy_steps': list(policies),
      'rate': rate,
      'updated': updated,
      'state': state
  }
