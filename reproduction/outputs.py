"""The aggregate as files: per_seed.csv, curves.csv, table1.csv, heldout.csv, table.md, summary.json and the PNG,
each replaced atomically (a reader sees the old file or the new one)."""

import csv
import io
import json
import os
from typing import Any, Dict, Iterable, List, Mapping, Sequence

from reproduction import plot
from reproduction import report

# The columns of per_seed.csv (write_outputs; read back by --results_from, `plan.load_per_seed_csv`).
PER_SEED_FIELDS = ('seed', 'mode', 'goal', 'step', 'success_rate', 'mean_final_distance', 'num_episodes')
# The held-out views' columns in table1.csv (the primary mode's row).
HELDOUT_COLUMNS = ('selection_iqm', 'selection_iqm_low', 'selection_iqm_high', 'heldout_eval_seed', 'heldout_episodes',
                   'heldout_best_seeds', 'heldout_best_mean', 'heldout_best_se', 'heldout_best_iqm',
                   'heldout_best_iqm_low', 'heldout_best_iqm_high', 'heldout_final_seeds', 'heldout_final_mean',
                   'heldout_final_se', 'heldout_final_iqm', 'heldout_final_iqm_low', 'heldout_final_iqm_high',
                   'threshold', 'seeds_reaching_threshold', 'fraction_reaching_threshold', 'heldout_per_seed')
# The columns of heldout.csv: one held-out evaluation each; `role` says which policy of the seed it is (best, final,
# best+final, or '' for an earlier best).
HELDOUT_FIELDS = ('seed', 'mode', 'goal', 'step', 'role', 'success_rate', 'mean_final_distance', 'num_episodes',
                  'eval_seed')


def _atomic_write(path: str, text: str) -> None:
  tmp = path + '.tmp'
  with open(tmp, 'w', encoding='utf-8', newline='') as f:
    f.write(text)
  os.replace(tmp, path)


def _csv_text(fields: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
  out = io.StringIO()
  writer = csv.DictWriter(out, fieldnames=fields, lineterminator='\n')
  writer.writeheader()
  for row in rows:
    writer.writerow({k: ('' if v is None else v) for k, v in row.items()})
  return out.getvalue()


def _heldout_columns(view: Mapping[str, Any]) -> Dict[str, Any]:
  columns = {
      'selection_iqm': view['selection']['iqm'],
      'selection_iqm_low': view['selection']['iqm_low'],
      'selection_iqm_high': view['selection']['iqm_high'],
      'heldout_eval_seed': view['eval_seed'],
      'heldout_episodes': view['episodes'],
      'threshold': view['reaching']['threshold'],
      'seeds_reaching_threshold': view['reaching']['count'],
      'fraction_reaching_threshold': view['reaching']['fraction'],
      'heldout_per_seed': json.dumps({
          str(s): v for s, v in view['per_seed'].items()
      })
  }
  for key in ('best', 'final'):
    stats = view[key]
    columns.update({
        f'heldout_{key}_seeds': stats['seeds'],
        f'heldout_{key}_mean': stats['mean'],
        f'heldout_{key}_se': stats['se'],
        f'heldout_{key}_iqm': stats['iqm'],
        f'heldout_{key}_iqm_low': stats['iqm_low'],
        f'heldout_{key}_iqm_high': stats['iqm_high']
    })
  return columns


def _heldout_rows(result: Mapping[str, Any]) -> List[Dict[str, Any]]:
  view = result.get('heldout')
  if not view:
    return []
  mode = result['primary_mode']
  goal = json.dumps(result['modes'][mode]['goal'])
  rows: List[Dict[str, Any]] = []
  for seed, points in sorted(view['points'].items()):
    chosen = view['per_seed'].get(seed, {})
    for p in points:
      role = '+'.join(r for r in ('best', 'final') if chosen.get(f'{r}_step') == p['step'])
      rows.append({
          'seed': seed,
          'mode': mode,
          'goal': goal,
          'step': p['step'],
          'role': role,
          'success_rate': p['success'],
          'mean_final_distance': p['distance'],
          'num_episodes': p['episodes'],
          'eval_seed': view['eval_seed']
      })
  return rows


def write_outputs(result: Mapping[str, Any], out_dir: str, name: str) -> Dict[str, str]:
  """Writes `summary.aggregate`'s result to `out_dir` (regenerated each time from the seeds' results):

  * `per_seed.csv`: seed, mode, goal, step, success_rate, mean_final_distance, num_episodes;
  * `curves.csv`: mode, goal, step, seeds, success_mean, success_se, final_distance_mean, final_distance_se;
  * `table1.csv`: mode, goal, budget, seeds, complete, best_success_mean, best_success_se, best per seed (JSON),
    peak of the mean curve and its step, the paper's value and s.e. (primary mode), and for the primary mode the views
    beside it (`HELDOUT_COLUMNS`: IQM and 95% interval of the Table 1 values; the held-out best and final policies'
    mean, s.e., IQM and interval; the seeds reaching `heldout.SUCCESS_THRESHOLD`);
  * `heldout.csv`: the held-out evaluations (`HELDOUT_FIELDS`; read back by `--results_from` beside per_seed.csv);
  * `table.md`: ours in every view and one row per seed, as Markdown tables (`report`), for a results page;
  * `summary.json`: the whole result;
  * `<name>.png`: `plot.draw_png`.

  Returns:
    the paths written.
  """
  os.makedirs(out_dir, exist_ok=True)
  per_seed: List[Dict[str, Any]] = []
  curves: List[Dict[str, Any]] = []
  table: List[Dict[str, Any]] = []
  paper = result['paper']
  for mode, entry in result['modes'].items():
    goal = json.dumps(entry['goal'])
    for seed, points in sorted(entry['per_seed'].items()):
      for p in points:
        per_seed.append({
            'seed': seed,
            'mode': mode,
            'goal': goal,
            'step': p['step'],
            'success_rate': p['success'],
            'mean_final_distance': p['distance'],
            'num_episodes': p['episodes']
        })
    for row in entry['curve']:
      curves.append({
          'mode': mode,
          'goal': goal,
          'step': row['step'],
          'seeds': row['seeds'],
          'success_mean': row['success_mean'],
          'success_se': row['success_se'],
          'final_distance_mean': row['distance_mean'],
          'final_distance_se': row['distance_se']
      })
    t1, f4 = entry['table1'], entry['figure4']
    primary = mode == result['primary_mode']
    table.append({
        'mode': mode,
        'goal': goal,
        'primary': int(primary),
        'budget': t1['budget'],
        'seeds': t1['seeds'],
        'complete': t1['complete'],
        'best_success_mean': t1['success_mean'],
        'best_success_se': t1['success_se'],
        'best_per_seed': json.dumps({
            str(s): v for s, v in t1['per_seed'].items()
        }),
        'mean_curve_peak': f4['peak_success_mean'],
        'mean_curve_peak_step': f4['peak_step'],
        'paper_success': paper['success'] if primary and paper else None,
        'paper_se': paper['standard_error'] if primary and paper else None
    })
    if primary and result.get('heldout'):
      table[-1].update(_heldout_columns(result['heldout']))
  paths: Dict[str, str] = {}
  for file, fields, rows in (('per_seed.csv', list(PER_SEED_FIELDS), per_seed), ('curves.csv', [
      'mode', 'goal', 'step', 'seeds', 'success_mean', 'success_se', 'final_distance_mean', 'final_distance_se'
  ], curves), ('table1.csv', [
      'mode', 'goal', 'primary', 'budget', 'seeds', 'complete', 'best_success_mean', 'best_success_se', 'best_per_seed',
      'mean_curve_peak', 'mean_curve_peak_step', 'paper_success', 'paper_se'
  ] + list(HELDOUT_COLUMNS), table), ('heldout.csv', list(HELDOUT_FIELDS), _heldout_rows(result))):
    paths[file] = os.path.join(out_dir, file)
    _atomic_write(paths[file], _csv_text(fields, rows))
  paths['table.md'] = os.path.join(out_dir, 'table.md')
  _atomic_write(paths['table.md'], report.markdown(result))
  paths['summary.json'] = os.path.join(out_dir, 'summary.json')
  _atomic_write(paths['summary.json'], json.dumps(result, indent=1) + '\n')
  paths['png'] = os.path.join(out_dir, f'{name}.png')
  plot.draw_png(result, paths['png'], name)
  return paths
