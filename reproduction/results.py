"""Seeds' evaluations: one seed's `<eval_dir>/results.json` (written by `uvf.eval`) as curves per mode, and the views
of many seeds' curves: Table 1 (best policy within a budget, mean +- s.e.), Figure 4 (the mean curve), and the best
policy over all seeds (the checkpoint to publish).

A results row is a dict with 'step' (global step of the policy checkpoint, environment steps), 'mode', 'goal',
'success_rate' (fraction in [0, 1]), 'mean_final_distance' (maze units), 'num_episodes' and 'checkpoint'.
"""

import dataclasses
import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple

from reproduction import statistics
from uvf import protocol as uvf_protocol

Row = Dict[str, Any]  # a results.json row (module docstring)


@dataclasses.dataclass(frozen=True)
class Point:
  """One evaluation of one policy checkpoint in one mode."""
  step: int  # global step of the policy checkpoint
  success: float  # success rate over the episodes, [0, 1]
  distance: float  # mean final distance to the target
  episodes: int


def load_results(eval_dir: str) -> List[Row]:
  """The rows of `<eval_dir>/results.json`, [] when there is none yet.

  Raises:
    ValueError: the file exists but is not a list of rows.
  """
  path = os.path.join(eval_dir, uvf_protocol.RESULTS_JSON)
  if not os.path.exists(path):
    return []
  with open(path, encoding='utf-8') as f:
    try:
      rows = json.load(f)
    except ValueError as e:
      raise ValueError(f'{path} cannot be read ({e}).') from None
  if not isinstance(rows, list):
    raise ValueError(f'{path} is not a list of result rows.')
  return rows


def seed_curves(rows: Iterable[Row], modes: Optional[Sequence[str]] = None) -> Dict[str, List[Point]]:
  """{mode: [Point, ...] by step} from result rows; a step evaluated twice keeps its last row.

  Args:
    rows: results.json rows.
    modes: None (every mode in the rows) or the modes to keep (each present, possibly empty).
  """
  by_mode: Dict[str, Dict[int, Point]] = {mode: {} for mode in (modes or ())}
  for row in rows:
    mode = row['mode']
    if modes is not None and mode not in by_mode:
      continue
    by_mode.setdefault(mode, {})[int(row['step'])] = Point(int(row['step']), float(row['success_rate']),
                                                           float(row['mean_final_distance']),
                                                           int(row.get('num_episodes', 0)))
  return {mode: [points[s] for s in sorted(points)] for mode, points in by_mode.items()}


def evaluated_steps(rows: Iterable[Row], modes: Iterable[str]) -> Set[int]:
  """The steps that have a row for every mode of `modes`."""
  found: Dict[int, Set[str]] = {}
  for row in rows:
    found.setdefault(int(row['step']), set()).add(row['mode'])
  return {step for step, done in found.items() if set(modes) <= done}


def best_within(points: Iterable[Point], budget: float) -> Optional[Point]:
  """The best evaluation at a step <= budget: the Point with the highest success rate (the earliest of equal
  ones), or None if there is none."""
  best = None
  for point in points:
    if point.step <= budget and (best is None or point.success > best.success):
      best = point
  return best


def across_seeds(curves: Mapping[int, Sequence[Point]], budget: Optional[int] = None) -> List[Dict[str, Any]]:
  """The mean curve over seeds (the Figure 4 view).

  Args:
    curves: {seed: [Point, ...]} of one mode.
    budget: None or the last step to include.

  Returns:
    [dict(step, seeds (n), success_mean, success_se, distance_mean, distance_se)] by step; at each step, the seeds
    that have an evaluation there (seeds progress at different speeds; `seeds` says how many).
  """
  by_step: Dict[int, List[Point]] = {}
  for points in curves.values():
    for point in points:
      if budget is None or point.step <= budget:
        by_step.setdefault(point.step, []).append(point)
  out = []
  for step in sorted(by_step):
    points = by_step[step]
    success_mean, success_se, n = statistics.mean_standard_error([p.success for p in points])
    distance_mean, distance_se, _ = statistics.mean_standard_error([p.distance for p in points])
    out.append({
        'step': step,
        'seeds': n,
        'success_mean': success_mean,
        'success_se': success_se,
        'distance_mean': distance_mean,
        'distance_se': distance_se
    })
  return out


def table1(curves: Mapping[int, Sequence[Point]], budget: int) -> Dict[str, Any]:
  """The Table 1 view of one mode: each seed's best success within `budget` steps, then mean +- s.e. over seeds.

  Args:
    curves: {seed: [Point, ...]}.
    budget: environment steps.

  Returns:
    dict: 'budget'; 'per_seed' {seed: {'success', 'step', 'last_step'} or None (no evaluation yet)}; 'seeds' (n with
    an evaluation); 'complete' (seeds evaluated at a step >= budget, so that their best is final);
    'success_mean', 'success_se'.
  """
  per_seed: Dict[int, Optional[Dict[str, Any]]] = {}
  bests: List[float] = []
  complete = 0
  for seed in sorted(curves):
    best = best_within(curves[seed], budget)
    last = max((p.step for p in curves[seed]), default=None)
    per_seed[seed] = None if best is None else {'success': best.success, 'step': best.step, 'last_step': last}
    if best is not None:
      bests.append(best.success)
      complete += int(last is not None and last >= budget)  # (a seed with a best has a last step)
  mean, se, n = statistics.mean_standard_error(bests)
  return {
      'budget': int(budget),
      'per_seed': per_seed,
      'seeds': n,
      'complete': complete,
      'success_mean': mean,
      'success_se': se
  }


def figure4(curve: Sequence[Dict[str, Any]]) -> Dict[str, Any]:
  """The Figure 4 view of one mode from `across_seeds`' rows: the peak of the mean curve and its last point."""
  if not curve:
    return {'peak_success_mean': None, 'peak_step': None, 'last_step': None, 'last_success_mean': None}
  peak = max(curve, key=lambda row: (row['success_mean'], -row['step']))
  return {
      'peak_success_mean': peak['success_mean'],
      'peak_step': peak['step'],
      'last_step': curve[-1]['step'],
      'last_success_mean': curve[-1]['success_mean']
  }


def best_policy(seed_rows: Mapping[int, Sequence[Row]], mode: str, budget: int) -> Optional[Tuple[int, Row]]:
  """The best policy of a task over all its seeds (the checkpoint to publish): among the rows of `mode` at a step
  <= `budget` (a step evaluated twice: its last row), the highest success rate, then the lowest mean final distance,
  then the earliest step and lowest seed.

  Args:
    seed_rows: {seed (int): results.json rows of that seed}.
    mode: the eval mode (the headline one).
    budget: the last step that counts, environment steps.

  Returns:
    (seed, row) or None when no row of `mode` is within the budget.
  """
  best, best_key = None, None
  for seed in sorted(seed_rows):
    last = {int(row['step']): row for row in seed_rows[seed] if row['mode'] == mode}  # a step's last row counts
    for step, row in last.items():
      if step > budget:
        continue
      key = (-float(row['success_rate']), float(row['mean_final_distance']), step, seed)
      if best_key is None or key < best_key:
        best, best_key = (seed, row), key
  return best
