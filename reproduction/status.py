"""Where a reproduction stands: the per-seed table of --status (and of the running kit, every --report_every
seconds), and the aggregate rewritten when the seeds' results change."""

import os
import time
from typing import Any, Dict, List, Optional, Set, TYPE_CHECKING

from reproduction import heldout
from reproduction import outputs
from reproduction import processes
from reproduction import progress
from reproduction import results
from reproduction import seeds
from reproduction import summary
from rundir import formatting
from uvf import protocol as uvf_protocol

if TYPE_CHECKING:
  from reproduction import plan as plans

AGGREGATE_DIR = 'aggregate'


def _state(spec: seeds.SeedSpec, record: progress.Progress, train: Optional[Dict[str, Any]],
           evaluation: Optional[Dict[str, Any]], done: Set[int], imported: bool) -> str:
  """The state column of one seed: what runs (`train`, `evaluation`: the holders of its directories' locks, or None)
  or where it stopped (`record`: `progress.read_progress`; `done`: its evaluated steps; `imported`: whether its
  evaluations come from --results_from)."""
  complete = (record['full_checkpoint'] or 0) >= spec.run_length
  if train is not None:
    kit = processes.started_by_kit(spec.pid_file('train'), train)
    state = f'training ({processes.describe(train)}{"" if kit else ", not the kit"})'
  elif complete and not set(record['policy_steps']) - done:
    state = 'done'
  elif complete:
    state = 'evaluating' if evaluation is not None else 'trained, evaluation stopped'
  elif record['steps']:
    state = f'stopped (resumes at {record["full_checkpoint"] or 0})'
  elif imported:
    state = 'run elsewhere (--results_from)'
  else:
    state = 'not started'
  if evaluation is not None and train is not None:
    state = state[:-1] + ' + eval)'
  return state


def _seed_line(plan: 'plans.Plan', spec: seeds.SeedSpec, rows: List[results.Row], heldout_rows: List[results.Row],
               now: float) -> str:
  primary = plan.protocol.primary_mode
  record = progress.read_progress(spec.train_dir, now)
  imported = bool(rows) and 'imported_from' in rows[0]
  curve = results.seed_curves(rows, [primary])[primary]
  done = results.evaluated_steps(rows, plan.protocol.modes)
  train = processes.holder(spec.train_dir)
  state = _state(spec, record, train, processes.holder(spec.eval_dir), done, imported)
  rate = record['rate'] if train is not None else None
  steps, eta = str(record['steps']), None
  if rate:  # running: extrapolated from the newest progress record or checkpoint
    estimate = min(spec.run_length, int(record['steps'] + rate * max(0.0, now - (record['updated'] or now))))
    steps, eta = f'~{estimate}', (spec.run_length - estimate) / rate
  latest = f'{curve[-1].success:.2f} @ {summary.steps_label(curve[-1].step)}' if curve else ''
  best_point = results.best_within(curve, plan.budget)
  best = f'{best_point.success:.2f} @ {summary.steps_label(best_point.step)}' if best_point else ''
  again: Dict[Optional[int], float] = {p.step: p.success for p in results.seed_curves(heldout_rows, [primary])[primary]}
  held = ' / '.join(
      '-' if again.get(step) is None else f'{again[step]:.2f}' for step in heldout.heldout_steps(curve, plan.budget))
  evaluated = f'{len(done & set(record["policy_steps"]))}/{len(record["policy_steps"])}'
  if imported and not record['policy_steps']:  # the seed's run directory is elsewhere: what was evaluated there
    steps, evaluated = str(max(done, default=0)), f'{len(done)}/{len(done)}'
  eta_text = formatting.format_duration(eta, show_seconds=False) if eta is not None else ''
  return (f'{spec.seed:>4}  {state:<30} {steps:>10} {spec.run_length:>10} {(f"{rate:.0f}" if rate else ""):>8} '
          f'{eta_text:>7}  {evaluated:>9}  {latest:>20}  {best:>22}  {held if curve else "":>22}')


def status_table(plan: 'plans.Plan', now: Optional[float] = None) -> str:
  """The per-seed table of --status: state, steps (of the run length), speed, ETA, policies evaluated, the latest
  and best success of the headline mode, and the held-out best / final policies."""
  now = time.time() if now is None else now
  primary = plan.protocol.primary_mode
  lines = [
      f'{"seed":>4}  {"state":<30} {"steps":>10} {"of":>10} {"steps/s":>8} {"ETA":>7}  {"evaluated":>9}  '
      f'{"latest " + primary:>20}  {"best within " + summary.steps_label(plan.budget):>22}  '
      f'{"held out: best / final":>22}'
  ]
  all_rows, all_heldout = plan.seed_rows(), plan.heldout_rows()
  for spec in plan.specs:
    lines.append(_seed_line(plan, spec, all_rows[spec.seed], all_heldout[spec.seed], now))
  return '\n'.join(lines)


def refresh(plan: 'plans.Plan', write: bool = True) -> List[str]:
  """Aggregates the seeds' evaluations; writes <root>/aggregate/ when `write`. Returns the summary lines."""
  result = summary.aggregate(plan.seed_rows(), plan.protocol, plan.budget, plan.heldout_rows())
  if write:
    outputs.write_outputs(result, os.path.join(plan.root, AGGREGATE_DIR), plan.name)
  return summary.summary_lines(result)


class Refresher(object):
  """Rewrites the aggregate when a seed's results change; prints the status table every `report_every` s."""

  def __init__(self, plan: 'plans.Plan', report_every: float) -> None:
    self.plan, self.report_every = plan, report_every
    self.signature: Optional[List[Optional[float]]] = None
    self.last_report = time.time()

  def __call__(self, force: bool = False) -> None:
    signature: List[Optional[float]] = []
    for spec in self.plan.specs:
      for directory in (spec.eval_dir, spec.heldout_dir):
        path = os.path.join(directory, uvf_protocol.RESULTS_JSON)
        signature.append(os.path.getmtime(path) if os.path.exists(path) else None)
    if force or signature != self.signature:
      self.signature = signature
      try:
        lines = refresh(self.plan)
      except (OSError, ValueError) as e:  # a results file being replaced: next time
        seeds.say(f'aggregate not updated this time ({e}).')
      else:
        if any(s is not None for s in signature):
          seeds.say('aggregate: ' + lines[0])
    if self.report_every and time.time() - self.last_report >= self.report_every:
      self.last_report = time.time()
      print(status_table(self.plan), flush=True)
