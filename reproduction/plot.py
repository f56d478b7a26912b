"""The PNG of an aggregate (`summary.aggregate`'s result), drawn through `figures.curves`: per eval mode, the success
rate of each seed and their mean +- s.e. against environment steps, with the paper's Table 1 value and the held-out
policies in the headline mode; then the headline mode's mean final distance (maze units) against the success
distance. The title states the task, the seeds, the budget and the paper's value."""

from typing import Any, Dict, List, Mapping

from figures import curves
from reproduction import summary
from uvf import protocol as uvf_protocol


def _seed_colours(result: Mapping[str, Any]) -> Dict[Any, str]:
  """{seed: colour} of the seeds with evaluations (the headline mode's), in seed order."""
  evaluated = [seed for seed, points in sorted(result['modes'][result['primary_mode']]['per_seed'].items()) if points]
  return {seed: curves.PALETTE[k % len(curves.PALETTE)] for k, seed in enumerate(evaluated)}


def _curve_series(result: Mapping[str, Any], mode: str, key: str, colours: Mapping[Any, str]) -> List[curves.Series]:
  """The seeds' thin lines and the mean's thick one with its +- s.e. band; key: 'success' or 'distance'."""
  entry = result['modes'][mode]
  series: List[curves.Series] = []
  for seed, points in sorted(entry['per_seed'].items()):
    if points:
      series.append(
          curves.Series([p['step'] for p in points], [p[key] for p in points], f'seed {seed}',
                        color=colours.get(seed, 'tab:gray'), marker='o', markersize=2.5, alpha=0.85))
  rows = entry['curve']
  mean = [row[f'{key}_mean'] for row in rows]
  se = [row[f'{key}_se'] or 0.0 for row in rows]
  seeds = max([row['seeds'] for row in rows] + [0])
  label = f'mean over {seeds} seeds ± s.e.' if seeds > 1 else 'mean (1 seed)'
  series.append(
      curves.Series([row['step'] for row in rows], mean, label, color=curves.MEAN, linewidth=2.5,
                    band=([m - s for m, s in zip(mean, se)], [m + s for m, s in zip(mean, se)]), zorder=3))
  return series


def _heldout_series(result: Mapping[str, Any], colours: Mapping[Any, str]) -> List[curves.Series]:
  """Each seed's best and final policies evaluated again (diamonds and squares in the seed's colour)."""
  view = result.get('heldout')
  series: List[curves.Series] = []
  if not view:
    return series
  for key, marker, text in (('best', 'D', 'best'), ('final', 's', 'final')):
    chosen = [(seed, c) for seed, c in sorted(view['per_seed'].items()) if c[f'{key}_heldout'] is not None]
    if chosen:
      series.append(
          curves.Series([c[f'{key}_step'] for _, c in chosen], [c[f'{key}_heldout'] for _, c in chosen],
                        f'a seed\'s {text} policy, held out ({view["episodes"]} episodes)',
                        colors=[colours.get(seed, curves.MEAN) for seed, _ in chosen], marker=marker, markersize=7,
                        linewidth=0, edgecolor='black', zorder=4))
  return series


def _title(result: Mapping[str, Any], name: str) -> str:
  """'AntPush (ant_push): 5 seeds (3 evaluated), 3M steps; paper 0.92 +- 0.04 at 10M (Table 1)'."""
  seeds = len(result['seeds'])
  evaluated = sum(1 for points in result['modes'][result['primary_mode']]['per_seed'].values() if points)
  title = (f'{result["protocol"]["task"]} ({name}): {seeds} seed{"s" if seeds != 1 else ""}'
           f'{f" ({evaluated} evaluated)" if evaluated < seeds else ""}, {summary.steps_label(result["budget"])} steps')
  paper = result['paper']
  if paper:
    title += (f'; paper {paper["success"]:.2f} ± {paper["standard_error"]:.2f} at '
              f'{summary.steps_label(paper["steps"])} (Table 1)')
  return title


def draw_png(result: Mapping[str, Any], path: str, name: str, width: int = 1000,
             panel_height: int = 260) -> Dict[str, Any]:
  """The curves of `aggregate`'s result as a PNG (`figures.curves`): one panel per eval mode, the headline mode first,
  with the success rate of each seed (thin, the spread), the mean over seeds (thick) with its +- s.e. band and, in
  the headline mode, the paper's Table 1 value (dashed red) and the held-out policies; then the headline mode's mean
  final distance, with the success distance. Under the title, the Table 1 line and the held-out views.

  Args:
    result: `summary.aggregate`'s result.
    path: the PNG to write (replaced atomically).
    name: the configuration's name (in the title).
    width: pixels.
    panel_height: pixels of each panel's plotting area.

  Returns:
    `figures.curves.draw`'s description of the chart.
  """
  primary = result['primary_mode']
  modes = [primary] + [m for m in result['modes'] if m != primary]
  colours = _seed_colours(result)
  panels: List[curves.Panel] = []
  for mode in modes:
    goal = result['modes'][mode]['goal']
    series = _curve_series(result, mode, 'success', colours)
    hlines: List[curves.HLine] = []
    if mode == primary:
      series += _heldout_series(result, colours)
      paper = result['paper']
      if paper:
        hlines.append(
            curves.HLine(
                paper['success'], f'paper: {paper["success"]:.2f} ± {paper["standard_error"]:.2f} '
                f'(best within {summary.steps_label(paper["steps"])})', curves.PAPER))
    headline = ', the headline mode' if mode == primary and len(modes) > 1 else ''
    panels.append(
        curves.Panel(f'success rate, {mode} (goal {goal}){headline}', 'success rate', series, hlines,
                     ylim=(-0.03, 1.03)))
  distances = [
      p['distance'] for pts in result['modes'][primary]['per_seed'].values() for p in pts if p['distance'] is not None
  ]
  high = max(distances + [2 * uvf_protocol.SUCCESS_DISTANCE]) * 1.05
  panels.append(
      curves.Panel(f'mean final distance, {primary} (goal {result["modes"][primary]["goal"]})',
                   'final distance (maze units)', _curve_series(result, primary, 'distance', colours), [
                       curves.HLine(uvf_protocol.SUCCESS_DISTANCE,
                                    f'success: distance < {uvf_protocol.SUCCESS_DISTANCE:g}', curves.THRESHOLD)
                   ], ylim=(0.0, high)))
  x_max = max([result['budget']] +
              [p['step'] for e in result['modes'].values() for pts in e['per_seed'].values() for p in pts])
  notes = summary.summary_lines(result)[:1] + [line.strip() for line in summary.heldout_lines(result)]
  return curves.draw(path, panels, _title(result, name), 'environment steps', notes=notes, xlim=(0, x_max * 1.01),
                     width=width, panel_height=panel_height)
