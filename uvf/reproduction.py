"""HIRO's Table 1 protocol and the aggregation of many seeds' evaluations (the library of `scripts/reproduce.py`).

The protocol (HIRO, Nachum et al., NeurIPS 2018, Table 1 and Appendices B-C; `docs/reproduction.md`): per task,
10 seeds train for 10M environment steps; a policy checkpoint every 50,000 steps is evaluated on 50 deterministic
500-step episodes at the task's target; success = the distance to the target at the last step is below 5 (3-D for
AntFall). Table 1 reports, per task, the success rate of the **best policy seen within 10M steps**, mean +- standard
error over the seeds; the paper's Figure 4 shows the mean learning curves.

This module reads what the kit's runs write and computes both views; it imports no TensorFlow (only gin, to read
the configuration's protocol), nothing from `launcher` or `scripts/`:

* `PAPER_TABLE1`, `protocol_from_gin`: the task's paper result and the configuration's evaluation modes and goals.
* `num_episodes_for_steps`, `run_length`: `--steps N` <-> `train_uvf.num_episodes_train`.
* `load_results`, `seed_curves`: one seed's `<eval_dir>/results.json` (`uvf.eval`) as curves per mode.
* `mean_standard_error`, `best_within`, `across_seeds`, `table1`, `figure4`, `aggregate`: the statistics.
* `write_outputs`, `draw_png`: the aggregate as CSV, JSON and a PNG per task.
* `best_policy`, `export_checkpoint`: the task's best policy over its seeds, copied out to be published.
* `read_progress`: where a run directory stands (steps, speed) from its checkpoints and log.

Units: steps are environment steps (the global step of a policy checkpoint); success rates are fractions in [0, 1];
distances are maze units.
"""

import csv
import dataclasses
import functools
import glob
import io
import json
import math
import os
import re
import shutil
import time

import gin
import numpy as np

# The paper's protocol.
PAPER_STEPS = 10_000_000  # the Table 1 budget: best policy seen within this many environment steps
PAPER_SEEDS = 10
PAPER_EVAL_EVERY = 50_000  # environment steps between evaluated policy checkpoints
PAPER_EVAL_EPISODES = 50  # episodes per evaluation
SUCCESS_DISTANCE = 5.0  # success: final distance to the target below this (uvf.eval.SUCCESS_DISTANCE)
# train_uvf stops at num_episodes_train x max_steps_per_episode + this (uvf.train.EXTRA_STEPS, the original's +100).
EXTRA_STEPS = 100
RESULTS_FILE = 'results.json'  # written by uvf.eval.evaluate into its eval_dir


@dataclasses.dataclass(frozen=True)
class PaperResult:
  """One task's HIRO row of Table 1: success of the best policy within `steps`, mean +- s.e. over `seeds`."""
  task: str  # create_maze_env.env_name
  target: tuple  # the evaluation target (x, y) or (x, y, z)
  success: float
  standard_error: float
  steps: int = PAPER_STEPS
  seeds: int = PAPER_SEEDS


PAPER_TABLE1 = {
    'AntMaze': PaperResult('AntMaze', (0.0, 16.0), 0.99, 0.01),
    'AntPush': PaperResult('AntPush', (0.0, 19.0), 0.92, 0.04),
    'AntFall': PaperResult('AntFall', (0.0, 27.0, 4.5), 0.66, 0.07),
}


# ----------------------------------------------------------------------------------------------------------------------
# The protocol of a configuration.


@dataclasses.dataclass(frozen=True)
class Protocol:
  """What a configuration trains and evaluates, as the kit needs it.

  Attributes:
    task: `create_maze_env.env_name` (AntMaze, AntPush, ...).
    modes: `evaluate.eval_modes`, in order.
    goals: {mode: the target of its ConstantSampler} (None for a mode whose sampler is not constant).
    primary_mode: the mode of the headline numbers: the one at the paper's target, else the one chosen.
    max_steps_per_episode: T of training (`train_uvf.max_steps_per_episode`, 500).
    eval_episodes: `evaluate.num_episodes_eval` of the configuration.
    paper: the task's `PaperResult`, or None (no Table 1 entry).
  """
  task: str
  modes: tuple
  goals: dict
  primary_mode: str
  max_steps_per_episode: int
  eval_episodes: int
  paper: PaperResult = None

  def to_json(self):
    out = dataclasses.asdict(self)
    out['modes'] = list(self.modes)
    return out

  @classmethod
  def from_json(cls, data):
    data = dict(data)
    paper = data.pop('paper', None)
    if paper:
      paper = PaperResult(**dict(paper, target=tuple(paper['target'])))
    return cls(paper=paper, **dict(data, modes=tuple(data['modes'])))


def _resolve(value):
  """A queried gin value with its %MACRO references (also in lists / tuples / dicts) replaced by their values."""
  if isinstance(value, gin.config.ConfigurableReference) and value.selector == 'gin.macro':
    return _resolve(gin.query_parameter('%' + '/'.join(value.scopes)))
  if isinstance(value, (list, tuple)):
    return type(value)(_resolve(v) for v in value)
  if isinstance(value, dict):
    return {k: _resolve(v) for k, v in value.items()}
  return value


def _query(name, default=None):
  try:
    return _resolve(gin.query_parameter(name))
  except ValueError:
    return default


def same_point(a, b, tolerance=1e-6):
  """Whether the points (sequences of numbers) `a` and `b` agree to `tolerance` in every coordinate; False if `a`
  is None or their lengths differ."""
  return a is not None and len(a) == len(b) and all(abs(float(x) - float(y)) < tolerance for x, y in zip(a, b))


def protocol_from_gin(primary_mode=None):
  """The `Protocol` of the parsed (not necessarily finalised) gin configuration.

  Args:
    primary_mode: None (the mode at the paper's target; for a task without one, the last eval mode, as AntMaze's
      paper goal (0, 16) is its last) or an eval mode.

  Raises:
    ValueError: not a HIRO configuration, an unknown `primary_mode`, or a Table 1 task whose eval modes miss the
      paper's target; the message names the fix.
  """
  task = _query('create_maze_env.env_name')
  modes = _query('evaluate.eval_modes')
  steps = _query('train_uvf.max_steps_per_episode')
  if not task or not modes or not steps:
    raise ValueError('not a HIRO task configuration: it binds no create_maze_env.env_name, evaluate.eval_modes or '
                     'train_uvf.max_steps_per_episode (use a top-level HIRO config such as configs/ant_maze.gin).')
  modes = tuple(modes)
  samplers = _query('meta/Context.samplers', {}) or {}
  goals = {}
  for mode in modes:
    refs = samplers.get(mode) or [None]
    ref = refs[0]
    goal = None
    if isinstance(ref, gin.config.ConfigurableReference) and ref.selector == 'ConstantSampler':
      goal = _query(f'{ref.scoped_selector}.value')
    goals[mode] = [float(v) for v in goal] if goal is not None else None
  paper = PAPER_TABLE1.get(task)
  if primary_mode is not None:
    if primary_mode not in modes:
      raise ValueError(f'--mode {primary_mode}: the configuration evaluates the modes {list(modes)} '
                       '(evaluate.eval_modes); choose one of them.')
  elif paper is not None:
    matching = [m for m in modes if same_point(goals[m], paper.target)]
    if not matching:
      raise ValueError(f'{task}: none of the eval modes {list(modes)} (goals {goals}) is the paper\'s target '
                       f'{list(paper.target)}; add the mode to EVAL_MODES or choose one with --mode.')
    primary_mode = matching[0]
  else:
    primary_mode = modes[-1]
  episodes = int(_query('evaluate.num_episodes_eval', PAPER_EVAL_EPISODES))
  return Protocol(task=task, modes=modes, goals=goals, primary_mode=primary_mode, max_steps_per_episode=int(steps),
                  eval_episodes=episodes, paper=paper)


def num_episodes_for_steps(steps, max_steps_per_episode):
  """`train_uvf.num_episodes_train` for a run of at least `steps` environment steps: ceil(steps / T).

  The run then stops at `run_length(...)` = num_episodes x T + 100 steps (3,000,000 steps, T = 500: 6000 episodes,
  3,000,100 steps).
  """
  if steps < 1 or max_steps_per_episode < 1:
    raise ValueError(f'steps ({steps}) and max_steps_per_episode ({max_steps_per_episode}) must be positive.')
  return -(-int(steps) // int(max_steps_per_episode))


def run_length(num_episodes, max_steps_per_episode):
  """The global step at which train_uvf stops: num_episodes x T + 100."""
  return int(num_episodes) * int(max_steps_per_episode) + EXTRA_STEPS


# ----------------------------------------------------------------------------------------------------------------------
# One seed's evaluations.


@dataclasses.dataclass(frozen=True)
class Point:
  """One evaluation of one policy checkpoint in one mode."""
  step: int  # global step of the policy checkpoint
  success: float  # success rate over the episodes, [0, 1]
  distance: float  # mean final distance to the target
  episodes: int


def load_results(eval_dir):
  """The rows of `<eval_dir>/results.json` (uvf.eval), [] when there is none yet.

  Raises:
    ValueError: the file exists but is not a list of rows.
  """
  path = os.path.join(eval_dir, RESULTS_FILE)
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


def seed_curves(rows, modes=None):
  """{mode: [Point, ...] by step} from result rows; a step evaluated twice keeps its last row.

  Args:
    rows: dicts with 'step', 'mode', 'success_rate', 'mean_final_distance', 'num_episodes' (results.json rows).
    modes: None (every mode in the rows) or the modes to keep (each present, possibly empty).
  """
  by_mode = {mode: {} for mode in (modes or ())}
  for row in rows:
    mode = row['mode']
    if modes is not None and mode not in by_mode:
      continue
    by_mode.setdefault(mode, {})[int(row['step'])] = Point(
        int(row['step']), float(row['success_rate']), float(row['mean_final_distance']),
        int(row.get('num_episodes', 0)))
  return {mode: [points[s] for s in sorted(points)] for mode, points in by_mode.items()}


def evaluated_steps(rows, modes):
  """The steps that have a row for every mode of `modes`."""
  found = {}
  for row in rows:
    found.setdefault(int(row['step']), set()).add(row['mode'])
  return {step for step, done in found.items() if set(modes) <= done}


# ----------------------------------------------------------------------------------------------------------------------
# Statistics.


def mean_standard_error(values):
  """(mean, standard error, n) of `values`: s.e. = s / sqrt(n) with s the sample standard deviation (ddof = 1),
  the paper's "mean +- standard error over seeds"; None for the s.e. when n < 2 and for the mean when n = 0."""
  values = np.asarray(list(values), np.float64)
  n = int(values.size)
  if n == 0:
    return None, None, 0
  mean = float(np.mean(values))
  if n < 2:
    return mean, None, n
  return mean, float(np.std(values, ddof=1) / math.sqrt(n)), n


def best_within(points, budget):
  """The best evaluation at a step <= budget: the Point with the highest success rate (the earliest of equal
  ones), or None if there is none."""
  best = None
  for point in points:
    if point.step <= budget and (best is None or point.success > best.success):
      best = point
  return best


def across_seeds(curves, budget=None):
  """The mean curve over seeds (the Figure 4 view).

  Args:
    curves: {seed: [Point, ...]} of one mode.
    budget: None or the last step to include.

  Returns:
    [dict(step, seeds (n), success_mean, success_se, distance_mean, distance_se)] by step; at each step, the seeds
    that have an evaluation there (seeds progress at different speeds; `seeds` says how many).
  """
  by_step = {}
  for seed, points in curves.items():
    for point in points:
      if budget is None or point.step <= budget:
        by_step.setdefault(point.step, []).append(point)
  out = []
  for step in sorted(by_step):
    points = by_step[step]
    success_mean, success_se, n = mean_standard_error([p.success for p in points])
    distance_mean, distance_se, _ = mean_standard_error([p.distance for p in points])
    out.append({'step': step, 'seeds': n, 'success_mean': success_mean, 'success_se': success_se,
                'distance_mean': distance_mean, 'distance_se': distance_se})
  return out


def table1(curves, budget):
  """The Table 1 view of one mode: each seed's best success within `budget` steps, then mean +- s.e. over seeds.

  Args:
    curves: {seed: [Point, ...]}.
    budget: environment steps.

  Returns:
    dict: 'budget'; 'per_seed' {seed: {'success', 'step', 'last_step'} or None (no evaluation yet)}; 'seeds' (n with
    an evaluation); 'complete' (seeds evaluated at a step >= budget, so that their best is final);
    'success_mean', 'success_se'.
  """
  per_seed, bests, complete = {}, [], 0
  for seed in sorted(curves):
    best = best_within(curves[seed], budget)
    last = max((p.step for p in curves[seed]), default=None)
    per_seed[seed] = None if best is None else {'success': best.success, 'step': best.step, 'last_step': last}
    if best is not None:
      bests.append(best.success)
      complete += int(last >= budget)
  mean, se, n = mean_standard_error(bests)
  return {'budget': int(budget), 'per_seed': per_seed, 'seeds': n, 'complete': complete, 'success_mean': mean,
          'success_se': se}


def figure4(curve):
  """The Figure 4 view of one mode from `across_seeds`' rows: the peak of the mean curve and its last point."""
  if not curve:
    return {'peak_success_mean': None, 'peak_step': None, 'last_step': None, 'last_success_mean': None}
  peak = max(curve, key=lambda row: (row['success_mean'], -row['step']))
  return {'peak_success_mean': peak['success_mean'], 'peak_step': peak['step'], 'last_step': curve[-1]['step'],
          'last_success_mean': curve[-1]['success_mean']}


# The held-out view: numbers that selection cannot inflate. "Best within the budget" (Table 1) is the maximum over
# ~60 noisy evaluations of 50 episodes on the selection start states (evaluate.seed 0), an optimistic statistic. Each
# seed's best policy (selected exactly as in Table 1) and its final policy (at the budget) are evaluated again on
# HELDOUT_EPISODES episodes whose start states come from HELDOUT_SEED, never used for selection.
HELDOUT_SEED = 1000  # evaluate.seed of the held-out evaluations
HELDOUT_EPISODES = 100
HELDOUT_DIR = 'heldout'  # the held-out evaluations' eval_dir, in each seed's run directory
SUCCESS_THRESHOLD = 0.5  # a seed learns the task when its best policy's held-out success reaches this
BOOTSTRAP_REPS = 2_000  # stratified-bootstrap resamples of the seeds for the IQM's 95% interval (rliable's examples'
# number; with 5 seeds there are only 126 distinct resamples)


def heldout_steps(points, budget):
  """The policies of one seed (its selection curve of the headline mode) that the held-out view evaluates again:
  (best step, final step). best: `best_within(points, budget)`'s step; final: the last evaluated step <= budget, once
  the seed has been evaluated at a step >= budget (else None: the final policy does not exist yet)."""
  best = best_within(points, budget)
  steps = [p.step for p in points]
  final = max((s for s in steps if s <= budget), default=None) if steps and max(steps) >= budget else None
  return (best.step if best else None), final


def iqm_interval(values, reps=BOOTSTRAP_REPS, seed=0):
  """rliable's interquartile mean (the 25% trimmed mean) of `values`, one score per seed, and its 95% stratified
  bootstrap interval (percentile method, `reps` resamples of the seeds; Agarwal et al. 2021): (iqm, low, high), or
  None without values. Reproducible: NumPy's global generator, which rliable draws from, is seeded with `seed` for
  the call and restored after it."""
  values = tuple(float(v) for v in values)
  return _iqm_interval(values, int(reps), int(seed)) if values else None


@functools.lru_cache(maxsize=256)
def _iqm_interval(values, reps, seed):
  values = np.asarray(values, np.float64)
  from rliable import library, metrics  # pylint: disable=g-import-not-at-top  (pandas, arch: only when needed)
  state = np.random.get_state()
  np.random.seed(seed)
  try:
    point, interval = library.get_interval_estimates(
        {'seeds': values.reshape(-1, 1)}, lambda scores: np.array([metrics.aggregate_iqm(scores)]), reps=reps)
  finally:
    np.random.set_state(state)
  return float(point['seeds'][0]), float(interval['seeds'][0, 0]), float(interval['seeds'][1, 0])


def seed_statistics(values):
  """{'seeds', 'mean', 'se', 'iqm', 'iqm_low', 'iqm_high'} of one score per seed (`mean_standard_error`,
  `iqm_interval`; None where undefined)."""
  mean, se, n = mean_standard_error(values)
  iqm = iqm_interval(values) if n else None
  return {'seeds': n, 'mean': mean, 'se': se, 'iqm': iqm and iqm[0], 'iqm_low': iqm and iqm[1],
          'iqm_high': iqm and iqm[2]}


def heldout_view(curves, heldout, budget, threshold=SUCCESS_THRESHOLD):
  """The views beside Table 1, for the headline mode.

  Args:
    curves: {seed: [Point, ...]}, the selection evaluations (as `table1`).
    heldout: {seed: [Point, ...]}, the held-out evaluations of that seed's policies.
    budget: environment steps.
    threshold: success rate a seed's held-out best must reach to count as learning the task.

  Returns:
    dict: 'per_seed' {seed: {'best_step', 'best_selection' (its Table 1 value), 'best_heldout', 'final_step',
    'final_heldout'}} (None where not evaluated yet); 'selection' (the Table 1 values), 'best' and 'final' (the
    held-out values) as `seed_statistics` over the seeds that have them; 'reaching' {'threshold', 'count', 'seeds',
    'fraction'}: seeds whose held-out best >= threshold, of those with a held-out best.
  """
  per_seed = {}
  for seed in sorted(curves):
    best_step, final_step = heldout_steps(curves[seed], budget)
    again = {p.step: p.success for p in heldout.get(seed, [])}
    selected = best_within(curves[seed], budget)
    per_seed[seed] = {'best_step': best_step, 'best_selection': selected.success if selected else None,
                      'best_heldout': again.get(best_step), 'final_step': final_step,
                      'final_heldout': again.get(final_step)}
  values = {key: [v[key] for v in per_seed.values() if v[key] is not None]
            for key in ('best_selection', 'best_heldout', 'final_heldout')}
  reaching = sum(value >= threshold for value in values['best_heldout'])
  n = len(values['best_heldout'])
  return {'per_seed': per_seed, 'selection': seed_statistics(values['best_selection']),
          'best': seed_statistics(values['best_heldout']), 'final': seed_statistics(values['final_heldout']),
          'reaching': {'threshold': threshold, 'count': reaching, 'seeds': n, 'fraction': reaching / n if n else None}}


def aggregate(seed_rows, protocol, budget, heldout_rows=None):
  """Everything the kit reports, JSON-ready.

  Args:
    seed_rows: {seed (int): results.json rows of that seed}.
    protocol: `Protocol`.
    budget: the Table 1 budget, environment steps.
    heldout_rows: None or {seed: the rows of its held-out evaluations} (`HELDOUT_DIR`'s results.json).

  Returns:
    dict: 'protocol', 'budget', 'seeds' (sorted), and per mode ('modes': {mode: {'goal', 'per_seed' {seed: [Point as
    dict]}, 'curve' (across_seeds), 'table1', 'figure4'}}), 'primary_mode', 'paper', and 'heldout' (`heldout_view`
    of the primary mode, with 'eval_seed', 'episodes' and 'points' {seed: [Point as dict]}).
  """
  modes, curves_of = {}, {}
  for mode in protocol.modes:
    curves = curves_of[mode] = {seed: seed_curves(rows, [mode])[mode] for seed, rows in seed_rows.items()}
    curve = across_seeds(curves, budget)
    modes[mode] = {
        'goal': protocol.goals.get(mode),
        'per_seed': {seed: [dataclasses.asdict(p) for p in points] for seed, points in curves.items()},
        'curve': curve,
        'table1': table1(curves, budget),
        'figure4': figure4(curve),
    }
  paper = dataclasses.asdict(protocol.paper) if protocol.paper else None
  primary = protocol.primary_mode
  again = {seed: seed_curves(rows, [primary])[primary] for seed, rows in (heldout_rows or {}).items()}
  heldout = dict(heldout_view(curves_of[primary], again, budget), eval_seed=HELDOUT_SEED, episodes=HELDOUT_EPISODES,
                 points={seed: [dataclasses.asdict(p) for p in points] for seed, points in sorted(again.items())})
  return {'protocol': protocol.to_json(), 'budget': int(budget), 'seeds': sorted(seed_rows),
          'primary_mode': primary, 'paper': paper, 'modes': modes, 'heldout': heldout}


def best_policy(seed_rows, mode, budget):
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


EXPORT_INFO = 'best_policy.json'


def export_checkpoint(prefix, out_dir, info):
  """Copies the checkpoint `prefix` (its `.index` and every data shard) into `out_dir` with a TensorFlow `checkpoint`
  state file naming it and `info` as `best_policy.json`, replacing an earlier export there.

  The new export is written beside `out_dir` and swapped in, so that a fault leaves the old export or the new one.
  `out_dir` must not exist, be empty or hold an earlier export (a `best_policy.json`): nothing else is overwritten.

  Returns:
    The exported prefix, `<out_dir>/<basename of prefix>`.

  Raises:
    ValueError: `out_dir` holds something else, or the checkpoint is not complete.
  """
  out_dir = os.path.abspath(out_dir)
  if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or (
      os.listdir(out_dir) and not os.path.exists(os.path.join(out_dir, EXPORT_INFO)))):
    raise ValueError(f'{out_dir} exists and is not an earlier export (no {EXPORT_INFO} in it); choose a new or '
                     'empty directory.')
  name = os.path.basename(prefix)
  shards = complete_shards(prefix)
  if shards is None:
    raise ValueError(f'{prefix} is not a complete checkpoint (its .index and data shards).')
  parent = os.path.dirname(out_dir)
  os.makedirs(parent, exist_ok=True)
  tmp = f'{out_dir}.tmp-{os.getpid()}'
  shutil.rmtree(tmp, ignore_errors=True)
  os.makedirs(tmp)
  for path in [prefix + '.index'] + shards:
    shutil.copyfile(path, os.path.join(tmp, os.path.basename(path)))
  with open(os.path.join(tmp, 'checkpoint'), 'w', encoding='utf-8') as f:
    f.write(f'model_checkpoint_path: "{name}"\nall_model_checkpoint_paths: "{name}"\n')
  with open(os.path.join(tmp, EXPORT_INFO), 'w', encoding='utf-8') as f:
    json.dump(info, f, indent=1)
    f.write('\n')
  old = f'{out_dir}.old-{os.getpid()}'
  if os.path.exists(out_dir):
    os.replace(out_dir, old)
  os.replace(tmp, out_dir)
  shutil.rmtree(old, ignore_errors=True)
  return os.path.join(out_dir, name)


def format_mean_se(mean, se, digits=2):
  """'0.93 +- 0.02', '0.93 (1 seed)' or 'n/a'."""
  if mean is None:
    return 'n/a'
  if se is None:
    return f'{mean:.{digits}f} (1 seed)'
  return f'{mean:.{digits}f} +- {se:.{digits}f}'


def summary_lines(result):
  """Human-readable Table 1 and Figure 4 lines of `aggregate`'s result, primary mode first."""
  budget = result['budget']
  lines = []
  order = [result['primary_mode']] + [m for m in result['modes'] if m != result['primary_mode']]
  for mode in order:
    entry = result['modes'][mode]
    t1, f4 = entry['table1'], entry['figure4']
    goal = entry['goal']
    best = format_mean_se(t1['success_mean'], t1['success_se'])
    line = (f'{mode} {goal}: best success within {budget:,} steps {best}'
            f' over {t1["seeds"]} seed{"s" if t1["seeds"] != 1 else ""} ({t1["complete"]} complete)')
    if f4['peak_step'] is not None:
      line += f'; mean curve peak {f4["peak_success_mean"]:.2f} at {f4["peak_step"]:,}'
    if mode == result['primary_mode'] and result['paper']:
      paper = result['paper']
      line += (f'; paper Table 1 {paper["success"]:.2f} +- {paper["standard_error"]:.2f} (best within '
               f'{paper["steps"]:,}, {paper["seeds"]} seeds)')
    lines.append(line)
  lines.extend(heldout_lines(result))
  return lines


def format_statistics(stats, digits=2):
  """'0.80 +- 0.10 (IQM 0.83, 95% CI 0.52-1.00)' of a `seed_statistics` dict, '0.80' for one seed, or 'n/a'."""
  if not stats or stats['mean'] is None:
    return 'n/a'
  if stats['seeds'] < 2:
    return f'{stats["mean"]:.{digits}f}'
  return (f'{format_mean_se(stats["mean"], stats["se"], digits)} (IQM {stats["iqm"]:.{digits}f}, 95% CI '
          f'{stats["iqm_low"]:.{digits}f}-{stats["iqm_high"]:.{digits}f})')


def heldout_lines(result):
  """The views beside Table 1 (`heldout_view`), one line each; [] for a result without them."""
  view = result.get('heldout')
  if not view:
    return []
  budget = steps_label(result['budget'])
  reach = view['reaching']
  fraction = (f'{reach["count"]} of {reach["seeds"]} seeds' if reach['seeds'] else 'n/a')

  def seeds(stats):
    return f' over {stats["seeds"]} seed{"s" if stats["seeds"] != 1 else ""}' if stats['seeds'] else ''

  return [f'  Table 1 view (best within {budget}, as selected): {format_statistics(view["selection"])}'
          f'{seeds(view["selection"])}',
          f'  held-out ({view["episodes"]} episodes, evaluation seed {view["eval_seed"]}): best policy '
          f'{format_statistics(view["best"])}{seeds(view["best"])}; final policy ({budget}) '
          f'{format_statistics(view["final"])}{seeds(view["final"])}',
          f'  seeds whose best policy reaches {reach["threshold"]:g} held-out: {fraction}']


# ----------------------------------------------------------------------------------------------------------------------
# Outputs.


def _atomic_write(path, text):
  tmp = path + '.tmp'
  with open(tmp, 'w', encoding='utf-8', newline='') as f:
    f.write(text)
  os.replace(tmp, path)


def _csv_text(fields, rows):
  out = io.StringIO()
  writer = csv.DictWriter(out, fieldnames=fields, lineterminator='\n')
  writer.writeheader()
  for row in rows:
    writer.writerow({k: ('' if v is None else v) for k, v in row.items()})
  return out.getvalue()


# The columns of per_seed.csv (write_outputs; read back by scripts/reproduce.py --results_from).
PER_SEED_FIELDS = ('seed', 'mode', 'goal', 'step', 'success_rate', 'mean_final_distance', 'num_episodes')


# The held-out views' columns in table1.csv (the primary mode's row).
HELDOUT_COLUMNS = (
    'selection_iqm', 'selection_iqm_low', 'selection_iqm_high', 'heldout_eval_seed', 'heldout_episodes',
    'heldout_best_seeds', 'heldout_best_mean', 'heldout_best_se', 'heldout_best_iqm', 'heldout_best_iqm_low',
    'heldout_best_iqm_high', 'heldout_final_seeds', 'heldout_final_mean', 'heldout_final_se', 'heldout_final_iqm',
    'heldout_final_iqm_low', 'heldout_final_iqm_high', 'threshold', 'seeds_reaching_threshold',
    'fraction_reaching_threshold', 'heldout_per_seed')
# The columns of heldout.csv: one held-out evaluation each; `role` says which policy of the seed it is (best, final,
# best+final, or '' for an earlier best).
HELDOUT_FIELDS = ('seed', 'mode', 'goal', 'step', 'role', 'success_rate', 'mean_final_distance', 'num_episodes',
                  'eval_seed')


def _heldout_columns(view):
  columns = {'selection_iqm': view['selection']['iqm'], 'selection_iqm_low': view['selection']['iqm_low'],
             'selection_iqm_high': view['selection']['iqm_high'], 'heldout_eval_seed': view['eval_seed'],
             'heldout_episodes': view['episodes'], 'threshold': view['reaching']['threshold'],
             'seeds_reaching_threshold': view['reaching']['count'],
             'fraction_reaching_threshold': view['reaching']['fraction'],
             'heldout_per_seed': json.dumps({str(s): v for s, v in view['per_seed'].items()})}
  for key in ('best', 'final'):
    stats = view[key]
    columns.update({f'heldout_{key}_seeds': stats['seeds'], f'heldout_{key}_mean': stats['mean'],
                    f'heldout_{key}_se': stats['se'], f'heldout_{key}_iqm': stats['iqm'],
                    f'heldout_{key}_iqm_low': stats['iqm_low'], f'heldout_{key}_iqm_high': stats['iqm_high']})
  return columns


def _heldout_rows(result):
  view = result.get('heldout')
  if not view:
    return []
  mode = result['primary_mode']
  goal = json.dumps(result['modes'][mode]['goal'])
  rows = []
  for seed, points in sorted(view['points'].items()):
    chosen = view['per_seed'].get(seed, {})
    for p in points:
      role = '+'.join(r for r in ('best', 'final') if chosen.get(f'{r}_step') == p['step'])
      rows.append({'seed': seed, 'mode': mode, 'goal': goal, 'step': p['step'], 'role': role,
                   'success_rate': p['success'], 'mean_final_distance': p['distance'], 'num_episodes': p['episodes'],
                   'eval_seed': view['eval_seed']})
  return rows


def write_outputs(result, out_dir, name):
  """Writes `aggregate`'s result to `out_dir` (regenerated each time from the seeds' results):

  * `per_seed.csv`: seed, mode, goal, step, success_rate, mean_final_distance, num_episodes;
  * `curves.csv`: mode, goal, step, seeds, success_mean, success_se, final_distance_mean, final_distance_se;
  * `table1.csv`: mode, goal, budget, seeds, complete, best_success_mean, best_success_se, best per seed (JSON),
    peak of the mean curve and its step, the paper's value and s.e. (primary mode), and for the primary mode the views
    beside it (`HELDOUT_COLUMNS`: IQM and 95% interval of the Table 1 values; the held-out best and final policies'
    mean, s.e., IQM and interval; the seeds reaching `SUCCESS_THRESHOLD`);
  * `heldout.csv`: the held-out evaluations (`HELDOUT_FIELDS`; read back by `--results_from` beside per_seed.csv);
  * `summary.json`: the whole result;
  * `<name>.png`: `draw_png`.

  Returns:
    the paths written.
  """
  os.makedirs(out_dir, exist_ok=True)
  per_seed, curves, table = [], [], []
  paper = result['paper']
  for mode, entry in result['modes'].items():
    goal = json.dumps(entry['goal'])
    for seed, points in sorted(entry['per_seed'].items()):
      for p in points:
        per_seed.append({'seed': seed, 'mode': mode, 'goal': goal, 'step': p['step'], 'success_rate': p['success'],
                         'mean_final_distance': p['distance'], 'num_episodes': p['episodes']})
    for row in entry['curve']:
      curves.append({'mode': mode, 'goal': goal, 'step': row['step'], 'seeds': row['seeds'],
                     'success_mean': row['success_mean'], 'success_se': row['success_se'],
                     'final_distance_mean': row['distance_mean'], 'final_distance_se': row['distance_se']})
    t1, f4 = entry['table1'], entry['figure4']
    primary = mode == result['primary_mode']
    table.append({'mode': mode, 'goal': goal, 'primary': int(primary), 'budget': t1['budget'], 'seeds': t1['seeds'],
                  'complete': t1['complete'], 'best_success_mean': t1['success_mean'],
                  'best_success_se': t1['success_se'],
                  'best_per_seed': json.dumps({str(s): v for s, v in t1['per_seed'].items()}),
                  'mean_curve_peak': f4['peak_success_mean'], 'mean_curve_peak_step': f4['peak_step'],
                  'paper_success': paper['success'] if primary and paper else None,
                  'paper_se': paper['standard_error'] if primary and paper else None})
    if primary and result.get('heldout'):
      table[-1].update(_heldout_columns(result['heldout']))
  paths = {}
  for file, fields, rows in (
      ('per_seed.csv', list(PER_SEED_FIELDS),
       per_seed),
      ('curves.csv', ['mode', 'goal', 'step', 'seeds', 'success_mean', 'success_se', 'final_distance_mean',
                      'final_distance_se'], curves),
      ('table1.csv', ['mode', 'goal', 'primary', 'budget', 'seeds', 'complete', 'best_success_mean',
                      'best_success_se', 'best_per_seed', 'mean_curve_peak', 'mean_curve_peak_step', 'paper_success',
                      'paper_se'] + list(HELDOUT_COLUMNS), table),
      ('heldout.csv', list(HELDOUT_FIELDS), _heldout_rows(result))):
    paths[file] = os.path.join(out_dir, file)
    _atomic_write(paths[file], _csv_text(fields, rows))
  paths['summary.json'] = os.path.join(out_dir, 'summary.json')
  _atomic_write(paths['summary.json'], json.dumps(result, indent=1) + '\n')
  paths['png'] = os.path.join(out_dir, f'{name}.png')
  draw_png(result, paths['png'], name)
  return paths


# Seeds' colours (the spread), the mean, its band, the paper's line.
_SEED_COLOURS = [(150, 150, 150), (170, 140, 110), (120, 160, 120), (160, 120, 160), (110, 150, 170),
                 (180, 150, 90), (140, 140, 180), (170, 120, 120), (120, 170, 160), (150, 160, 100)]
_MEAN, _BAND, _PAPER, _THRESHOLD = (20, 60, 200), (190, 205, 245), (210, 30, 30), (30, 150, 60)


class _Panel(object):
  """One x-y panel of the PNG: data coordinates to pixels, axes, ticks, lines."""

  def __init__(self, draw, font, box, x_max, y_range, title):
    self.d, self.font = draw, font
    self.x0, self.y1, self.x1, self.y0 = box  # left, top, right, bottom (pixels)
    self.x_max = max(float(x_max), 1.0)
    self.y_low, self.y_high = y_range
    draw.rectangle([self.x0, self.y1, self.x1, self.y0], outline='black')
    draw.text((self.x0, self.y1 - 16), title, fill='black', font=font)
    for i in range(6):
      s, v = self.x_max * i / 5, self.y_low + (self.y_high - self.y_low) * i / 5
      draw.line([self.sx(s), self.y0, self.sx(s), self.y0 + 4], fill='black')
      draw.text((self.sx(s) - 14, self.y0 + 6), steps_label(s), fill='black', font=font)
      draw.line([self.x0 - 4, self.sy(v), self.x0, self.sy(v)], fill='black')
      draw.text((self.x0 - 40, self.sy(v) - 6), f'{v:.3g}', fill='black', font=font)

  def sx(self, step):
    return self.x0 + (self.x1 - self.x0) * step / self.x_max

  def sy(self, value):
    value = min(max(value, self.y_low), self.y_high)
    return self.y0 - (self.y0 - self.y1) * (value - self.y_low) / (self.y_high - self.y_low)

  def line(self, steps, values, colour, width=1, dots=False):
    xy = [(self.sx(s), self.sy(v)) for s, v in zip(steps, values) if v is not None]
    if len(xy) > 1:
      self.d.line(xy, fill=colour, width=width)
    if dots or len(xy) == 1:
      for x, y in xy:
        self.d.ellipse([x - 2, y - 2, x + 2, y + 2], fill=colour)

  def marker(self, step, value, colour, shape, size=5):
    x, y = self.sx(step), self.sy(value)
    if shape == 'diamond':
      self.d.polygon([(x, y - size), (x + size, y), (x, y + size), (x - size, y)], fill=colour, outline='black')
    else:
      self.d.rectangle([x - size + 1, y - size + 1, x + size - 1, y + size - 1], fill=colour, outline='black')

  def band(self, steps, low, high, colour):
    upper = [(self.sx(s), self.sy(v)) for s, v in zip(steps, high)]
    lower = [(self.sx(s), self.sy(v)) for s, v in zip(steps, low)]
    if len(upper) > 1:
      self.d.polygon(upper + lower[::-1], fill=colour)

  def hline(self, value, colour, label):
    y = self.sy(value)
    for x in range(int(self.x0), int(self.x1), 12):
      self.d.line([x, y, min(x + 6, self.x1), y], fill=colour, width=2)
    self.d.text((self.x1 - 7 * len(label) - 4, y - 14), label, fill=colour, font=self.font)


def steps_label(steps):
  if steps >= 1e6:
    return f'{steps / 1e6:.3g}M'
  if steps >= 1e3:
    return f'{steps / 1e3:.3g}k'
  return f'{steps:.0f}'


def draw_png(result, path, name, width=1000, panel_height=260):
  """The curves of `aggregate`'s result as a PNG (Pillow): one panel per eval mode with the success rate of each
  seed (thin, the spread), the mean over seeds (thick) with its +- s.e. band and, for the paper's mode, the paper's
  Table 1 value (dashed red); then the primary mode's mean final distance, with the success distance 5."""
  from PIL import Image, ImageDraw, ImageFont  # pylint: disable=g-import-not-at-top
  modes = [result['primary_mode']] + [m for m in result['modes'] if m != result['primary_mode']]
  panels = len(modes) + 1
  extra = heldout_lines(result)
  left, right, top, gap = 70, 20, 60 + 16 * len(extra), 70
  height = top + panels * (panel_height + gap)
  image = Image.new('RGB', (width, height), 'white')
  d = ImageDraw.Draw(image)
  font = ImageFont.load_default()
  budget = result['budget']
  x_max = max([budget] + [p['step'] for e in result['modes'].values() for pts in e['per_seed'].values()
                          for p in pts])
  lines = summary_lines(result)
  d.text((10, 8), f'{name}: {result["protocol"]["task"]}, {len(result["seeds"])} seeds, Table 1 budget '
         f'{budget:,} steps', fill='black', font=font)
  d.text((10, 24), lines[0], fill='black', font=font)
  for k, line in enumerate(extra):
    d.text((10, 40 + 16 * k), line.strip(), fill='black', font=font)
  d.text((10, 40 + 16 * len(extra)), 'thin: each seed; thick: mean over seeds, band +- s.e.' + (
      '; black-edged diamond: a seed\'s best policy held out, square: its final policy held out' if extra else ''),
         fill='black', font=font)

  def draw_mode(index, mode, key, y_range, title):
    entry = result['modes'][mode]
    box_top = top + index * (panel_height + gap) + 20
    panel = _Panel(d, font, (left, box_top, width - right, box_top + panel_height), x_max, y_range, title)
    curve = entry['curve']
    steps = [row['step'] for row in curve]
    mean = [row[f'{key}_mean'] for row in curve]
    se = [row[f'{key}_se'] or 0.0 for row in curve]
    panel.band(steps, [m - s for m, s in zip(mean, se)], [m + s for m, s in zip(mean, se)], _BAND)
    for k, (seed, points) in enumerate(sorted(entry['per_seed'].items())):
      field = 'success' if key == 'success' else 'distance'
      panel.line([p['step'] for p in points], [p[field] for p in points], _SEED_COLOURS[k % len(_SEED_COLOURS)],
                 dots=True)
    panel.line(steps, mean, _MEAN, width=3)
    return panel

  for index, mode in enumerate(modes):
    goal = result['modes'][mode]['goal']
    panel = draw_mode(index, mode, 'success', (0.0, 1.0), f'success rate, {mode} (goal {goal})')
    if mode == result['primary_mode'] and result.get('heldout'):
      seeds = sorted(result['modes'][mode]['per_seed'])
      for seed, chosen in result['heldout']['per_seed'].items():
        colour = _SEED_COLOURS[seeds.index(seed) % len(_SEED_COLOURS)] if seed in seeds else _MEAN
        for key, shape in (('best', 'diamond'), ('final', 'square')):
          if chosen[f'{key}_heldout'] is not None:
            panel.marker(chosen[f'{key}_step'], chosen[f'{key}_heldout'], colour, shape)
    if mode == result['primary_mode'] and result['paper']:
      paper = result['paper']
      label = (f'paper Table 1: {paper["success"]:.2f} +- {paper["standard_error"]:.2f} (best within '
               f'{steps_label(paper["steps"])})')
      panel.hline(paper['success'], _PAPER, label)
  mode = result['primary_mode']
  distances = [p['distance'] for pts in result['modes'][mode]['per_seed'].values() for p in pts]
  high = max(distances + [2 * SUCCESS_DISTANCE]) * 1.05
  panel = draw_mode(len(modes), mode, 'distance', (0.0, high), f'mean final distance, {mode}')
  panel.hline(SUCCESS_DISTANCE, _THRESHOLD, f'success: distance < {SUCCESS_DISTANCE:g}')
  d.text((width // 2 - 60, height - 18), 'environment steps', fill='black', font=font)
  tmp = path + '.tmp.png'
  image.save(tmp)
  os.replace(tmp, path)


# ----------------------------------------------------------------------------------------------------------------------
# Where a run stands.

_PROGRESS = re.compile(r'global step (\d+) / (\d+): .*\((\d+(?:\.\d+)?) steps/sec\)')
_CHECKPOINT_STATE = re.compile(r'^model_checkpoint_path: "(?:.*/)?model\.ckpt-(\d+)"', re.M)


def checkpoint_steps(directory):
  """{step: mtime} of the complete checkpoints `<directory>/model.ckpt-<step>` (index and every data shard present):
  a run's full checkpoints (its directory) or its policy checkpoints (`<train_dir>/policy`)."""
  found = {}
  for index in glob.glob(os.path.join(glob.escape(directory), 'model.ckpt-*.index')):
    match = re.search(r'model\.ckpt-(\d+)\.index$', index)
    if match and complete_shards(index[:-len('.index')]):
      found[int(match.group(1))] = os.path.getmtime(index)
  return dict(sorted(found.items()))


def complete_shards(prefix):
  """The data shards `<prefix>.data-*-of-N` of a checkpoint whose index and N shards are all present, sorted; None
  when it is not complete (being written, or broken)."""
  shards = sorted(glob.glob(glob.escape(prefix) + '.data-*-of-*'))
  total = re.search(r'-of-(\d+)$', shards[0]) if shards else None
  if not os.path.exists(prefix + '.index') or not total or len(shards) != int(total.group(1)):
    return None
  return shards


def policy_steps(train_dir, policy_dir='policy'):
  """{step: mtime} of the complete policy checkpoints `<train_dir>/policy/model.ckpt-<step>`."""
  return checkpoint_steps(os.path.join(train_dir, policy_dir))


def full_checkpoint_step(train_dir):
  """The step of the newest full checkpoint (`<train_dir>/checkpoint`, the resume point), or None."""
  path = os.path.join(train_dir, 'checkpoint')
  if not os.path.exists(path):
    return None
  with open(path, encoding='utf-8') as f:
    match = _CHECKPOINT_STATE.search(f.read())
  return int(match.group(1)) if match else None


def last_progress_line(log_path, tail_bytes=65536):
  """(step, total, steps/s, mtime of the log) from the last `global step X / Y: ... (R steps/sec)` line of a
  training log, or None."""
  if not log_path or not os.path.exists(log_path):
    return None
  with open(log_path, 'rb') as f:
    f.seek(0, os.SEEK_END)
    f.seek(max(0, f.tell() - tail_bytes))
    text = f.read().decode('utf-8', errors='replace')
  matches = _PROGRESS.findall(text)
  if not matches:
    return None
  step, total, rate = matches[-1]
  return int(step), int(total), float(rate), os.path.getmtime(log_path)


def read_progress(train_dir, log_path=None, now=None, fresh_s=600.0):
  """Where a training run stands, from its files.

  Args:
    train_dir: the run directory.
    log_path: its training log (progress lines), if any.
    now: the time (time.time()).
    fresh_s: a log line older than this says nothing about the current speed.

  Returns:
    dict: 'steps' (the furthest of the log, the full checkpoint and the policy checkpoints), 'full_checkpoint'
    (the resume point, or None), 'policy_steps' (list), 'rate' (steps/s or None: the log's last line if fresh, else
    from the last two checkpoints' times, full or policy, if the newest is recent), 'updated' (time of the newest
    sign of life).
  """
  now = time.time() if now is None else now
  policies = policy_steps(train_dir)
  full = full_checkpoint_step(train_dir)
  progress = last_progress_line(log_path)
  steps = max([0, full or 0] + list(policies))
  # Checkpoints give (step, time) points: the full ones (2 kept, every save_interval_secs) and the policy ones.
  points = sorted(set(policies.items()) | set(checkpoint_steps(train_dir).items()), key=lambda p: (p[1], p[0]))
  rate, updated = None, (points[-1][1] if points else None)
  if progress is not None:
    steps = max(steps, progress[0])
    updated = max(updated or 0, progress[3])
    if now - progress[3] < fresh_s:
      rate = progress[2]
  if rate is None and len(points) >= 2:
    (s0, t0), (s1, t1) = points[-2:]
    if t1 > t0 and s1 > s0 and now - t1 < max(fresh_s, 3 * (t1 - t0)):
      rate = (s1 - s0) / (t1 - t0)
  return {'steps': steps, 'full_checkpoint': full, 'policy_steps': list(policies), 'rate': rate, 'updated': updated}


def format_duration(seconds):
  """'3h07m', '12m', '45s'."""
  if seconds is None:
    return ''
  seconds = int(max(seconds, 0))
  if seconds >= 3600:
    return f'{seconds // 3600}h{seconds % 3600 // 60:02d}m'
  if seconds >= 60:
    return f'{seconds // 60}m'
  return f'{seconds}s'
