"""An aggregate's views as Markdown tables, for a results page: ours in every view (Table 1 as selected, the held-out
best and final policies, the seeds that learn the task, the Figure 4 peak) and one row per seed.

Both take `summary.aggregate`'s result, or the same read back from `summary.json` (seed keys then are strings).
Success rates are fractions in [0, 1]; steps are environment steps.
"""

from typing import Any, List, Mapping

from reproduction import statistics
from reproduction import summary

VIEWS_HEADER = ('| source | statistic | seeds | success |', '|---|---|---|---|')
SOURCE = 'ours'  # the first column of the views' rows (a results page adds the paper's and other projects' rows)
SEEDS_HEADER = ('| seed | best within {budget}, as selected (step) | best policy, held out | final policy ({budget}), '
                'held out |', '|---|---|---|---|')


def _seeds(count: int, of: int) -> str:
  return f'{count} of {of}' if count != of else f'{count}'


def _reaching(reach: Mapping[str, Any]) -> str:
  """'2 of 3' of a `statistics.seeds_reaching` dict, 'n/a' without seeds."""
  return f'{reach["count"]} of {reach["seeds"]}' if reach['seeds'] else 'n/a'


def views_table(result: Mapping[str, Any]) -> List[str]:
  """Markdown lines: header, then ours in every view of the headline mode, with the number of seeds behind each.

  Rows: the Table 1 view (each seed's best policy within the budget as selected on the evaluation episodes, mean ±
  s.e., the IQM and its 95% stratified-bootstrap interval); the best and the final policy evaluated again on the
  held-out episodes; the seeds whose best reaches the threshold, as selected and held out; the peak of the mean
  curve."""
  mode = result['primary_mode']
  entry, view = result['modes'][mode], result['heldout']
  budget, seeds = summary.steps_label(result['budget']), len(result['seeds'])
  t1, f4 = entry['table1'], entry['figure4']
  episodes = result['protocol']['eval_episodes']
  incomplete = f', {t1["complete"]} complete' if t1['complete'] < t1['seeds'] else ''
  reach = view['reaching']
  selected = statistics.seeds_reaching(
      [v['best_selection'] for v in view['per_seed'].values() if v['best_selection'] is not None], reach['threshold'])
  peak = (f'{f4["peak_success_mean"]:.2f} at {summary.steps_label(f4["peak_step"])}'
          if f4['peak_step'] is not None else 'n/a')
  rows = [
      (f'best policy within {budget}, as selected ({episodes} episodes; Table 1 view)',
       _seeds(t1['seeds'], seeds) + incomplete, summary.format_statistics(view['selection'], markdown=True)),
      (f'best policy, held out ({view["episodes"]} episodes, evaluation seed {view["eval_seed"]})',
       _seeds(view['best']['seeds'], seeds), summary.format_statistics(view['best'], markdown=True)),
      (f'final policy ({budget}), held out', _seeds(view['final']['seeds'],
                                                    seeds), summary.format_statistics(view['final'], markdown=True)),
      (f'seeds whose best as selected reaches {reach["threshold"]:g}', _seeds(selected['seeds'],
                                                                              seeds), _reaching(selected)),
      (f'seeds whose held-out best reaches {reach["threshold"]:g}', _seeds(reach['seeds'], seeds), _reaching(reach)),
      ('peak of the mean curve (Figure 4 view)', _seeds(t1['seeds'], seeds), peak),
  ]
  return list(VIEWS_HEADER) + [f'| {SOURCE} | {a} | {b} | {c} |' for a, b, c in rows]


def seeds_table(result: Mapping[str, Any]) -> List[str]:
  """Markdown lines: header, then one row per seed: its best policy within the budget as selected (success and
  step; for a seed still training, how far it has been evaluated), and the held-out success of that policy and of
  its final one ('-': not evaluated)."""
  budget = summary.steps_label(result['budget'])
  per_seed = result['heldout']['per_seed']
  table1 = {str(seed): best for seed, best in result['modes'][result['primary_mode']]['table1']['per_seed'].items()}
  lines = [line.format(budget=budget) for line in SEEDS_HEADER]
  for seed in sorted(per_seed, key=int):
    seed_view = per_seed[seed]
    if seed_view['best_step'] is None:
      lines.append(f'| {seed} | not evaluated yet | - | - |')
      continue
    held = ['-' if seed_view[k] is None else f'{seed_view[k]:.2f}' for k in ('best_heldout', 'final_heldout')]
    last = table1[str(seed)]['last_step']
    so_far = f'; evaluated to {summary.steps_label(last)} so far' if last < result['budget'] else ''
    lines.append(f'| {seed} | {seed_view["best_selection"]:.2f} ({summary.steps_label(seed_view["best_step"])}'
                 f'{so_far}) | {held[0]} | {held[1]} |')
  return lines


def markdown(result: Mapping[str, Any]) -> str:
  """The text of `table.md`: `views_table`, a blank line, `seeds_table`."""
  return '\n'.join(views_table(result) + [''] + seeds_table(result)) + '\n'
