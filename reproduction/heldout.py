"""The held-out view beside Table 1: numbers that selection cannot inflate.

"Best within the budget" (Table 1) is the maximum over ~60 noisy evaluations of 50 episodes on the selection start
states (evaluate.seed 0), an optimistic statistic. Each seed's best policy (selected exactly as in Table 1) and its
final policy (at the budget) are evaluated again on HELDOUT_EPISODES episodes whose start states come from
HELDOUT_SEED, never used for selection. Steps are environment steps; success rates fractions in [0, 1].
"""

from typing import Any, Dict, Mapping, Optional, Sequence, Tuple

from reproduction import results
from reproduction import statistics

HELDOUT_SEED = 1000  # evaluate.seed of the held-out evaluations
HELDOUT_EPISODES = 100
HELDOUT_DIR = 'heldout'  # the held-out evaluations' eval_dir, in each seed's run directory
SUCCESS_THRESHOLD = 0.5  # a seed learns the task when its best policy's held-out success reaches this


def heldout_steps(points: Sequence[results.Point], budget: int) -> Tuple[Optional[int], Optional[int]]:
  """The policies of one seed (its selection curve of the headline mode) that the held-out view evaluates again:
  (best step, final step). best: `results.best_within(points, budget)`'s step; final: the last evaluated step <=
  budget, once the seed has been evaluated at a step >= budget (else None: the final policy does not exist yet)."""
  best = results.best_within(points, budget)
  steps = [p.step for p in points]
  final = max((s for s in steps if s <= budget), default=None) if steps and max(steps) >= budget else None
  return (best.step if best else None), final


def heldout_view(curves: Mapping[int, Sequence[results.Point]], heldout: Mapping[int, Sequence[results.Point]],
                 budget: int, threshold: float = SUCCESS_THRESHOLD) -> Dict[str, Any]:
  """The views beside Table 1, for the headline mode.

  Args:
    curves: {seed: [Point, ...]}, the selection evaluations (as `results.table1`).
    heldout: {seed: [Point, ...]}, the held-out evaluations of that seed's policies.
    budget: environment steps.
    threshold: success rate a seed's held-out best must reach to count as learning the task.

  Returns:
    dict: 'per_seed' {seed: {'best_step', 'best_selection' (its Table 1 value), 'best_heldout', 'final_step',
    'final_heldout'}} (None where not evaluated yet); 'selection' (the Table 1 values), 'best' and 'final' (the
    held-out values) as `statistics.seed_statistics` over the seeds that have them; 'reaching' {'threshold',
    'count', 'seeds', 'fraction'}: seeds whose held-out best >= threshold, of those with a held-out best.
  """
  per_seed: Dict[int, Dict[str, Any]] = {}
  for seed in sorted(curves):
    best_step, final_step = heldout_steps(curves[seed], budget)
    again: Dict[Optional[int], float] = {p.step: p.success for p in heldout.get(seed, [])}
    selected = results.best_within(curves[seed], budget)
    per_seed[seed] = {
        'best_step': best_step,
        'best_selection': selected.success if selected else None,
        'best_heldout': again.get(best_step),
        'final_step': final_step,
        'final_heldout': again.get(final_step)
    }
  values = {
      key: [v[key] for v in per_seed.values() if v[key] is not None]
      for key in ('best_selection', 'best_heldout', 'final_heldout')
  }
  return {
      'per_seed': per_seed,
      'selection': statistics.seed_statistics(values['best_selection']),
      'best': statistics.seed_statistics(values['best_heldout']),
      'final': statistics.seed_statistics(values['final_heldout']),
      'reaching': statistics.seeds_reaching(values['best_heldout'], threshold)
  }
