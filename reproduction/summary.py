"""Everything the kit reports about many seeds (`aggregate`, JSON-ready), and its human-readable lines."""

import dataclasses
from typing import Any, Dict, List, Mapping, Optional, Sequence, TYPE_CHECKING

from reproduction import heldout
from reproduction import results

if TYPE_CHECKING:
  from reproduction import protocol as protocols


def aggregate(seed_rows: Mapping[int, Sequence[results.Row]], protocol: 'protocols.Protocol', budget: int,
              heldout_rows: Optional[Mapping[int, Sequence[results.Row]]] = None) -> Dict[str, Any]:
  """Everything the kit reports, JSON-ready.

  Args:
    seed_rows: {seed (int): results.json rows of that seed}.
    protocol: `protocol.Protocol`.
    budget: the Table 1 budget, environment steps.
    heldout_rows: None or {seed: the rows of its held-out evaluations} (`heldout.HELDOUT_DIR`'s results.json).

  Returns:
    dict: 'protocol', 'budget', 'seeds' (sorted), and per mode ('modes': {mode: {'goal', 'per_seed' {seed: [Point as
    dict]}, 'curve' (`results.across_seeds`), 'table1', 'figure4'}}), 'primary_mode', 'paper', and 'heldout'
    (`heldout.heldout_view` of the primary mode, with 'eval_seed', 'episodes' and 'points' {seed: [Point as dict]}).
  """
  modes: Dict[str, Dict[str, Any]] = {}
  curves_of: Dict[str, Dict[int, List[results.Point]]] = {}
  for mode in protocol.modes:
    curves = curves_of[mode] = {seed: results.seed_curves(rows, [mode])[mode] for seed, rows in seed_rows.items()}
    curve = results.across_seeds(curves, budget)
    modes[mode] = {
        'goal': protocol.goals.get(mode),
        'per_seed': {
            seed: [dataclasses.asdict(p) for p in points] for seed, points in curves.items()
        },
        'curve': curve,
        'table1': results.table1(curves, budget),
        'figure4': results.figure4(curve),
    }
  paper = dataclasses.asdict(protocol.paper) if protocol.paper else None
  primary = protocol.primary_mode
  again = {seed: results.seed_curves(rows, [primary])[primary] for seed, rows in (heldout_rows or {}).items()}
  view = dict(heldout.heldout_view(curves_of[primary], again, budget), eval_seed=heldout.HELDOUT_SEED,
              episodes=heldout.HELDOUT_EPISODES, points={
                  seed: [dataclasses.asdict(p) for p in points] for seed, points in sorted(again.items())
              })
  return {
      'protocol': protocol.to_json(),
      'budget': int(budget),
      'seeds': sorted(seed_rows),
      'primary_mode': primary,
      'paper': paper,
      'modes': modes,
      'heldout': view
  }


def steps_label(steps: float) -> str:
  """'3M', '400k', '50k', '700' (environment steps)."""
  if steps >= 1e6:
    return f'{steps / 1e6:.3g}M'
  if steps >= 1e3:
    return f'{steps / 1e3:.3g}k'
  return f'{steps:.0f}'


def format_mean_se(mean: Optional[float], se: Optional[float], digits: int = 2) -> str:
  """'0.93 +- 0.02', '0.93 (1 seed)' or 'n/a'."""
  if mean is None:
    return 'n/a'
  if se is None:
    return f'{mean:.{digits}f} (1 seed)'
  return f'{mean:.{digits}f} +- {se:.{digits}f}'


def format_statistics(stats: Optional[Mapping[str, Any]], digits: int = 2, markdown: bool = False) -> str:
  """'0.80 +- 0.10 (IQM 0.83, 95% CI 0.52-1.00)' of a `statistics.seed_statistics` dict (markdown: '0.80 ± 0.10 (IQM
  0.83 [0.52, 1.00])'), '0.80' for one seed, or 'n/a'."""
  if not stats or stats['mean'] is None:
    return 'n/a'
  if stats['seeds'] < 2:
    return f'{stats["mean"]:.{digits}f}'
  low, high = f'{stats["iqm_low"]:.{digits}f}', f'{stats["iqm_high"]:.{digits}f}'
  if markdown:
    return f'{stats["mean"]:.{digits}f} ± {stats["se"]:.{digits}f} (IQM {stats["iqm"]:.{digits}f} [{low}, {high}])'
  return f'{format_mean_se(stats["mean"], stats["se"], digits)} (IQM {stats["iqm"]:.{digits}f}, 95% CI {low}-{high})'


def summary_lines(result: Mapping[str, Any]) -> List[str]:
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


def heldout_lines(result: Mapping[str, Any]) -> List[str]:
  """The views beside Table 1 (`heldout.heldout_view`), one line each; [] for a result without them."""
  view = result.get('heldout')
  if not view:
    return []
  budget = steps_label(result['budget'])
  reach = view['reaching']
  fraction = (f'{reach["count"]} of {reach["seeds"]} seeds' if reach['seeds'] else 'n/a')

  def seeds(stats: Mapping[str, Any]) -> str:
    return f' over {stats["seeds"]} seed{"s" if stats["seeds"] != 1 else ""}' if stats['seeds'] else ''

  return [
      f'  Table 1 view (best within {budget}, as selected): {format_statistics(view["selection"])}'
      f'{seeds(view["selection"])}',
      f'  held-out ({view["episodes"]} episodes, evaluation seed {view["eval_seed"]}): best policy '
      f'{format_statistics(view["best"])}{seeds(view["best"])}; final policy ({budget}) '
      f'{format_statistics(view["final"])}{seeds(view["final"])}',
      f'  seeds whose best policy reaches {reach["threshold"]:g} held-out: {fraction}'
  ]
